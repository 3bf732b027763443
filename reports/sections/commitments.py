"""Commitments and budgets: the commitment plan for the imported FOCUS usage (with its saving
and back-test) and each configured budget's spend to date, forecast and status.

Both come from the application functions the `plan commitments` and `budgets status`
commands call (tracker.market.commitments, tracker.market.budgets), as of the report's
instant. The back-test's day-by-day rows stay with the command (`plan commitments --days`);
the report keeps its totals.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput

if TYPE_CHECKING:
    from tracker.answers.report_settings import ReportOptions
    from tracker.config.schema import Config
    from tracker.store.db import Database


def commitments(db: Database, options: ReportOptions, *, as_of: datetime) -> dict[str, Any]:
    """The plan (12-month horizon, nothing on spot) for the usage imported up to `as_of`;
    `plan: None` with the reason when there is none."""
    from tracker.economics.defaults import EconomicsSettings
    from tracker.market.commitments import commitment_plan, usage_from_store

    usage = usage_from_store(db, until=as_of)
    if usage is None:
        return {"plan": None, "note": "no FOCUS usage imported"}
    hours = EconomicsSettings(options.economics or None).value("hours_per_month")
    try:
        document = commitment_plan(db, usage, horizon_months=12, as_of=as_of,
                                   currency=options.currency,
                                   hours_per_month=Decimal(hours))
    except InvalidInput as exc:
        return {"plan": None, "note": str(exc)}
    backtest = {k: v for k, v in document["backtest"].items() if k != "days"}
    return {"plan": {**document, "backtest": backtest}, "note": ""}


def budgets(db: Database, config: Config, *, as_of: datetime) -> dict[str, Any]:
    """Every configured budget's status as of `as_of` (`error` when the budgets are bad)."""
    from tracker.market.budgets import budgets_status

    try:
        return {"budgets": budgets_status(db, config, as_of), "error": ""}
    except InvalidInput as exc:
        return {"budgets": [], "error": str(exc)}
