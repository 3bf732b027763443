"""`gpu-tracker refresh`: fetch prices from sources into the database."""

from __future__ import annotations

import sys

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.printing import emit, format_option

SUMMARY_COLUMNS = ["source", "status", "offers_seen", "prices_changed", "new_offers",
                   "offers_closed", "rejected", "duration_s", "error"]


@click.command()
@click.option("--source", "sources", multiple=True, metavar="NAME",
              help="Source to refresh (repeatable). Default: [refresh] sources of the config.")
@click.option("--wait", "wait", type=click.FloatRange(min=0), default=0, metavar="SECONDS",
              envvar="GPU_TRACKER_REFRESH_WAIT", show_envvar=True, show_default=True,
              help="Wait up to this long for another run of the same source to finish, "
                   "instead of skipping it.")
@click.option("--trigger", type=click.Choice(["manual", "cron"]),
              envvar="GPU_TRACKER_TRIGGER", show_envvar=True,
              help="Recorded in the job history. Default: manual at a terminal, else cron.")
@format_option
@pass_app
def refresh(app: AppContext, sources: tuple[str, ...], wait: float, trigger: str | None,
            fmt: str) -> None:
    """Fetch prices from sources, each in its own transaction.

    One run per source at a time, whoever starts it (cron, a timer, the scheduler, another
    host on the same PostgreSQL database): a source another run is refreshing is skipped
    with a note, which is normal (exit 0); `--wait` waits for it instead.

    Exit status: 0 when all sources succeed (or were skipped because another run had
    them), 3 when some fail, 1 when all fail, 130 when interrupted.

    The first Ctrl-C (or SIGTERM) starts no new source and gives running ones a bounded time
    to finish; a second one aborts them at once (they roll back). Either way the summary is
    printed and the job is recorded `interrupted` with what committed.
    """
    from tracker.collect.refresh import (
        INTERRUPTED_EXIT,
        StopControl,
        interrupt_signals,
        refresh_job,
    )

    names = list(sources) or None
    at_terminal = sys.stdin is not None and sys.stdin.isatty()
    trigger = trigger or ("manual" if at_terminal else "cron")
    db = app.db  # opened (and created) before any signal handler is in place
    control = StopControl()
    # One line per source as it finishes, on a terminal or not (-q silences them).
    with interrupt_signals(control, notify=app.note):
        run = refresh_job(db, app.config, names, trigger=trigger, wait=wait,
                          on_done=None if app.quiet else lambda s: app.note(_line(s)),
                          control=control)
    if run.skipped and control.interrupted:  # stopped while waiting for another run's lock
        click.echo(f"Error: refresh {control.reason} while waiting for another run; nothing "
                   "was refreshed", err=True)
        sys.exit(INTERRUPTED_EXIT)
    if run.skipped:
        app.note(f"refresh skipped: {run.job.note}" if run.job and run.job.note
                 else "refresh skipped: another run holds the lock")
        if fmt != "table":
            emit([], fmt, SUMMARY_COLUMNS if fmt != "json" else None)
        return
    for name in run.busy:
        app.note(f"{name}: skipped, another run is refreshing it")
    rows = [s.to_json() | {"duration_s": round(s.duration_s, 3)} for s in run.summaries]
    emit(rows, fmt, SUMMARY_COLUMNS if fmt != "json" else None)
    code = run.exit_code
    if run.interrupted:
        committed = [s.source for s in run.summaries if s.status == "ok"]
        click.echo(f"Error: refresh {control.reason}; committed: "
                   f"{', '.join(committed) or 'none'}", err=True)
        sys.exit(code)
    if code:
        failed = ", ".join(s.source for s in run.summaries if s.status == "failed")
        click.echo(f"Error: refresh failed for {failed}", err=True)
        sys.exit(code)


def _line(summary) -> str:
    if summary.status != "ok":
        return f"{summary.source}: {summary.status}: {summary.error}"
    return (f"{summary.source}: {summary.offers_seen} offers, {summary.prices_changed} "
            f"prices changed, {summary.new_offers} new, {summary.rejected} rejected"
            + (f" ({summary.unmapped} of an instance type mapped to no GPU)"
               if summary.unmapped else "")
            + f" ({summary.duration_s:.1f}s)")
