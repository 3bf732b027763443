"""`gpu-tracker refresh`: fetch prices from sources into the database."""

from __future__ import annotations

import sys

import click

from tracker.commands import AppContext, pass_app
from tracker.output import emit, format_option

SUMMARY_COLUMNS = ["source", "status", "offers_seen", "prices_changed", "new_offers",
                   "offers_closed", "rejected", "duration_s", "error"]


@click.command()
@click.option("--source", "sources", multiple=True, metavar="NAME",
              help="Source to refresh (repeatable). Default: [refresh] sources of the config.")
@format_option
@pass_app
def refresh(app: AppContext, sources: tuple[str, ...], fmt: str) -> None:
    """Fetch prices from sources, each in its own transaction.

    Exit status: 0 when all sources succeed, 3 when some fail, 1 when all fail.
    """
    from tracker.refresh import exit_code, refresh_sources

    names = list(sources) or None
    interactive = sys.stderr.isatty() and not app.quiet
    if interactive:
        from rich.console import Console

        console = Console(stderr=True)
        with console.status("refreshing prices…"):
            summaries = refresh_sources(
                app.db, app.config, names, trigger="manual",
                on_done=lambda s: console.log(_line(s)))
    else:
        summaries = refresh_sources(app.db, app.config, names, trigger="manual",
                                    on_done=None if app.quiet else lambda s: app.note(_line(s)))
    rows = [s.to_json() | {"duration_s": round(s.duration_s, 3)} for s in summaries]
    emit(rows, fmt, SUMMARY_COLUMNS if fmt != "json" else None)
    code = exit_code(summaries)
    if code:
        failed = ", ".join(s.source for s in summaries if s.status == "failed")
        click.echo(f"Error: refresh failed for {failed}", err=True)
        sys.exit(code)


def _line(summary) -> str:
    if summary.status != "ok":
        return f"{summary.source}: {summary.status}: {summary.error}"
    return (f"{summary.source}: {summary.offers_seen} offers, {summary.prices_changed} "
            f"prices changed, {summary.new_offers} new, {summary.rejected} rejected "
            f"({summary.duration_s:.1f}s)")
