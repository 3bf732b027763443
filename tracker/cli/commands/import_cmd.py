"""`gpu-tracker import quotes.csv`: your own prices, all rows checked before anything is stored."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.printing import emit, format_option
from tracker.core.secrets import scrub

COLUMNS = ["source", "status", "offers_seen", "prices_changed", "new_offers", "offers_closed",
           "rejected", "error"]


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE")
@format_option
@pass_app
def import_quotes(app: AppContext, file: str, fmt: str) -> None:
    """Import negotiated, reserved and on-prem prices from a quotes CSV (FILE, or - for stdin).

    Every row is validated first; if any row is bad, each bad line is printed as
    `line N: message` on stderr and nothing is imported (exit 1). Columns: provider,
    region, instance_type, gpu, gpu_count, category, price_per_hour, currency,
    valid_from, source_url, notes, capex, power_kw, lifetime_months (see
    data/quotes-example.csv).
    """
    from scrapers.quotes import read_quotes_text, validate_quotes
    from tracker.store.ingest import ingest_records

    if file == "-":
        text = sys.stdin.read()
        where = "<stdin>"
    else:
        text = read_quotes_text(file)
        where = file
    observations, errors = validate_quotes(text)
    if errors:
        for error in errors:
            click.echo(scrub(str(error)), err=True)
        noun = "problem" if len(errors) == 1 else "problems"
        lines = len({e.line for e in errors})
        click.echo(f"Error: {where}: {len(errors)} {noun} on {lines} line(s); nothing imported",
                   err=True)
        sys.exit(1)
    if not observations:
        app.note(f"{where}: no rows to import")
        return
    from tracker.collect.refresh import source_lock
    from tracker.core.errors import TrackerError
    from tracker.store.locks import hold_locks

    # The quotes source's run lock, as a refresh of `quotes` would take it.
    with hold_locks(app.db, [source_lock("quotes")], wait=30) as got:
        if not got.held:
            raise TrackerError("a refresh of the quotes source is running; try again later")
        summary = ingest_records(app.db, "quotes", observations,
                                 started_at=datetime.now(UTC), trigger="import")
    emit(summary.to_json(), fmt, COLUMNS if fmt == "csv" else None)
    if summary.status != "ok":
        click.echo(f"Error: import failed: {scrub(summary.error)}", err=True)
        sys.exit(1)


class ImportGroup(click.Group):
    """`import FILE` imports a quotes CSV as it always has; `import quotes FILE` says so
    explicitly; `import focus-usage FILE` reads a FOCUS cost and usage export."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["quotes", *args]
        return super().parse_args(ctx, args)


@click.group("import", cls=ImportGroup)
def import_group() -> None:
    """Import your own prices (a quotes CSV: `import FILE`) or a FOCUS usage export
    (`import focus-usage FILE`)."""


import_group.add_command(import_quotes, "quotes")


def _focus_usage() -> click.Command:
    from tracker.cli.commands.market import import_focus_usage

    return import_focus_usage


import_group.add_command(_focus_usage(), "focus-usage")
