"""`gpu-tracker report`: build, send and list the weekly report."""

from __future__ import annotations

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.params import ISO_WEEK
from tracker.cli.commands.printing import emit, format_option

WEEK_HELP = ("ISO week, e.g. 2026-W48 (default: the newest finished week with prices; "
             "the running week is reported as of now).")


@click.group()
def report() -> None:
    """Build, list and send the weekly report (HTML, JSON, CSV, mail).

    \b
    Examples:
        gpu-tracker report weekly                       # last week, files under [report] out_dir
        gpu-tracker report weekly --week 2026-W48 --format json > week.json
        gpu-tracker report send --week 2026-W48 --to finance@example.com
        gpu-tracker report list
    """


@report.command()
@click.option("--week", type=ISO_WEEK, metavar="YYYY-Www", help=WEEK_HELP)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Output directory (default: [report] out_dir, else <user data dir>/reports).")
@click.option("--format", "fmt", type=click.Choice(["html", "json", "csv"]), default="html",
              show_default=True, envvar="GPU_TRACKER_REPORT_FORMAT", show_envvar=True,
              help="What goes to stdout: html prints the path of the HTML file; json and csv "
                   "print the document or the week's prices.")
@pass_app
def weekly(app: AppContext, week: str | None, out_dir: str | None, fmt: str) -> None:
    """Build the week's report: one JSON document rendered to HTML (charts inline) and CSV.

    All three files are written under DIR/<week>/ and recorded in the archive; a rebuild of
    the same week from the same data gives byte-identical files.
    """
    from reports import build_and_archive

    week = _checked_week(app, week)
    built = build_and_archive(app.db, app.config, week=week, out_dir=out_dir)
    app.note(f"week {built.week}, prices as of {built.as_of}: {built.headline}")
    app.note(f"wrote {built.path_html}, {built.path_json.name}, {built.path_csv.name}")
    if fmt == "json":
        click.echo(built.path_json.read_text("utf-8"), nl=False)
    elif fmt == "csv":
        click.echo(built.path_csv.read_text("utf-8"), nl=False)
    else:
        click.echo(str(built.path_html))


@report.command()
@click.option("--week", type=ISO_WEEK, metavar="YYYY-Www", help=WEEK_HELP)
@click.option("--to", "recipients", multiple=True, metavar="ADDRESS",
              help="Recipient (repeatable or comma-separated; default: [report] recipients).")
@click.option("--force", is_flag=True,
              help="Send again to recipients who already received this week's report.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Where the report files are archived (default: [report] out_dir).")
@pass_app
def send(app: AppContext, week: str | None, recipients: tuple[str, ...], force: bool,
         out_dir: str | None) -> None:
    """Mail the week's report over SMTP ([smtp] host, port, security, user; password best in
    GPU_TRACKER_SMTP_PASSWORD).

    Each delivery is recorded, so running this again for the same week sends nothing to the
    recipients who already have it, unless --force.
    """
    from reports import send_weekly

    week = _checked_week(app, week)
    result = send_weekly(app.db, app.config, week, recipients=list(recipients) or None,
                         force=force, out_dir=out_dir)
    if result.status == "skipped":
        app.note(f"week {result.week} was already sent to {', '.join(result.skipped)}; "
                 "nothing sent (use --force to send again)")
    else:
        extra = f" (already had it: {', '.join(result.skipped)})" if result.skipped else ""
        app.note(f"sent week {result.week} to {', '.join(result.recipients)}{extra}")
    if result.note:
        app.note(result.note)
    click.echo(result.status)


@report.command(name="list")
@format_option
@pass_app
def list_reports(app: AppContext, fmt: str) -> None:
    """Archived reports, newest week first: files, build time and deliveries."""
    from reports import list_archived

    rows = list_archived(app.db)
    columns = ["week", "built_at", "html", "sent_at", "sent_to"]
    emit(rows, fmt, None if fmt == "json" else columns)


def _checked_week(app: AppContext, week: str | None) -> str | None:
    """A `--week` with no prices in the store is a usage error before anything is written."""
    if week is None:
        return None
    from datetime import UTC, datetime

    from reports.build import check_week

    return check_week(app.db, week, datetime.now(UTC))
