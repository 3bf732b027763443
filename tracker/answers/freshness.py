"""The one freshness rule, shared by `sources`, `status` and the report's data quality.

A source is fresh at an instant while its newest confirmation up to that instant is at most
`[refresh] stale_after_hours` old. The confirmation is the newest sighting of the prices the
source has valid then (a price's `last_seen`, capped at the instant), or, for a source with
no prices (the ECB rates), its last successful run up to the instant. The same rule, at the
question's as-of, answers `sources`, `status`, `alerts`, the price index (a price not seen
within the window at a sampling instant drops out), `index --job` and the report: a run made
after the as-of never makes the week's prices fresh, and a snapshot loaded today is as old as
its dates say. Pure: the clock is passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tracker.config.schema import Config

State = Literal["fresh", "stale", "failing", "skipped", "never"]


@dataclass(frozen=True, slots=True)
class Freshness:
    state: State  # never ran, latest run failed or skipped, no success in the window, or fresh
    stale: bool  # no successful run within the window (never succeeded included)
    age_hours: float | None  # since the last success; None when there was none

    @property
    def fresh(self) -> bool:
        return not self.stale


def stale_after_hours(config: Config) -> float:
    """The threshold from the configuration (`[refresh] stale_after_hours`)."""
    return config.refresh.stale_after_hours


def source_freshness(*, last_run_at: datetime | None, last_status: str | None,
                     last_success_at: datetime | None, now: datetime,
                     stale_after_hours: float,
                     newest_price_at: datetime | None = None) -> Freshness:
    """`newest_price_at`: the newest sighting of the source's prices valid at `now` (None:
    it has none, and its last success decides)."""
    confirmed = newest_price_at if newest_price_at is not None else last_success_at
    if confirmed is not None:
        # A run that started before an as-of and finished after it confirms nothing later
        # than the as-of.
        confirmed = min(confirmed, now)
    age = (now - confirmed).total_seconds() / 3600 if confirmed else None
    stale = age is None or age > stale_after_hours
    state: State
    if last_run_at is None:
        state = "never"
    elif last_status == "failed":
        state = "failing"
    elif last_status == "skipped":
        state = "skipped"  # e.g. its key is not set: say so rather than "fresh"/"stale"
    elif stale:
        state = "stale"
    else:
        state = "fresh"
    return Freshness(state=state, stale=stale, age_hours=age)


def source_states(statuses: Iterable[Any], *, now: datetime,
                  stale_after_hours: float) -> list[dict]:
    """Per source: state `fresh`, `stale` (no success within the threshold), `failing`
    (the latest run failed), `skipped` (the latest run was skipped, e.g. its key is missing)
    or `never` (never ran), as `status` and the alerts show it. Pure: the clock is passed in."""
    rows = []
    for status in statuses:
        success = status.last_success_at
        fresh = source_freshness(last_run_at=status.last_run_at, last_status=status.last_status,
                                 last_success_at=success, now=now,
                                 stale_after_hours=stale_after_hours,
                                 newest_price_at=getattr(status, "newest_price_at", None))
        age = fresh.age_hours
        rows.append({
            "source": status.source, "state": fresh.state, "stale": fresh.stale,
            "failing": fresh.state == "failing",
            "last_success_at": success,
            "newest_price_at": getattr(status, "newest_price_at", None),
            "age_hours": round(age, 2) if age is not None else None,
            "offers": status.offers, "rejected_last_run": status.rejected_last_run,
            "last_run_at": status.last_run_at, "last_status": status.last_status,
            "last_error": status.last_error if status.last_status != "ok" else None,
        })
    return rows
