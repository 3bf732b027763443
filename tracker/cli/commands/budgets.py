"""`gpu-tracker budgets status`: spend to date, forecast and status of each `[[budgets]]`
entry (the click layer; tracker.market.budgets answers)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import as_of_option
from tracker.cli.commands.printing import emit, format_option


@click.group()
def budgets() -> None:
    """Budgets from `[[budgets]]` against the imported FOCUS usage."""


@budgets.command("status")
@click.option("--budget", "names", multiple=True,
              help="Only this budget (repeatable). Default: every configured one.")
@as_of_option("Spend to this instant and forecast the rest of its period: the spend")
@format_option
@pass_app
def status(app: AppContext, names: tuple[str, ...], as_of: datetime | None, fmt: str) -> None:
    """Each budget's spend to date (imported FOCUS usage in its scope), forecast end-of-period
    spend (P50/P90: usage run-rate x the price forecast) and status: under, at-risk, over."""
    from tracker.market.budgets import STATUS_COLUMNS, budgets_status

    rows = budgets_status(app.db, app.config, as_of or datetime.now(UTC), list(names) or None)
    if not rows:
        app.note("no budgets: add [[budgets]] entries to the configuration")
    for row in rows:
        for warning in row["warnings"]:
            app.note(f"warning: {row['name']}: {warning}")
    table = None
    if fmt == "table":
        from tracker.cli.commands.printing import render_table, rows_for_people

        table = render_table(rows_for_people(rows, money=(
            "amount", "spent", "forecast_p50", "forecast_p90", "remaining_p50")),
            STATUS_COLUMNS) if rows else None
    emit(rows, fmt, STATUS_COLUMNS if fmt != "json" else None, table_text=table)
