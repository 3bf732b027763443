"""`budgets status`: each `[[budgets]]` entry's spend to date from the imported FOCUS usage,
its forecast end-of-period spend (P50/P90) and whether it will end under, at risk or over.

Spend to date is the sum of `EffectiveCost` of the imported usage lines in the budget's scope
(provider, GPU class, region, FOCUS tag) and currency charged in the period up to the instant
`as_of` (a line whose charge period straddles it, by the share elapsed), and runs to where
the imported usage stops (`spent_until`, at most `as_of`). The forecast covers the rest of the
period from there: the usage run-rate (GPU-hours a day over the last `RUN_RATE_DAYS` days up to
`spent_until`, or the period so far) times the price paid per GPU-hour so far; up to the end
of as_of's own day at that price, and each later day moved by the market forecast of that
GPU class's cheapest on-demand price (tracker/economics/forecast.py, issue 27): the forecast's
P50 (P90) on the day over the last observed price. Without enough price history the price is
held flat (a warning says so) and P90 equals P50.

Status: `over` when the spend to date or the forecast P50 is above the amount, `at-risk` when
only the forecast P90 is, `under` otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.config.schema import Config
    from tracker.market.focus import UsageLine
    from tracker.store.db import Database

RUN_RATE_DAYS = 7
HISTORY_DAYS = 180  # the forecast engine's default fit window
STATUS_COLUMNS = ["name", "period", "period_start", "period_end", "amount", "spent",
                  "forecast_p50", "forecast_p90", "remaining_p50", "status", "currency"]


@dataclass(frozen=True)
class Budget:
    name: str
    amount: Decimal
    currency: str
    period: str  # month | quarter
    provider: str = ""
    gpus: tuple[str, ...] = ()  # canonical ids the scope's GPU class covers (empty: any)
    gpu_label: str = ""
    region: str = ""
    tag: str = ""
    alert_spent_share: float = 0.9

    def scope(self) -> dict[str, str]:
        return {k: v for k, v in (("provider", self.provider), ("gpu", self.gpu_label),
                                  ("region", self.region), ("tag", self.tag)) if v}

    def covers(self, line: UsageLine) -> bool:
        if self.provider and line.provider != self.provider:
            return False
        if self.gpus and line.gpu_id not in self.gpus:
            return False
        if self.region and line.region != self.region:
            return False
        if self.tag:
            key, _, value = self.tag.partition("=")
            tags = dict(line.tags)
            if key not in tags or ("=" in self.tag and tags[key] != value):
                return False
        return line.billing_currency == self.currency


def _gpu_scope(name: str) -> tuple[str, ...]:
    """Every canonical id a budget's `gpu` names: a family (h100) covers its parts."""
    from tracker.core.gpus import gpu_table, resolve_gpu

    key = name.strip().lower()
    family = [g.id for g in gpu_table().values() if g.family == key]
    if family:
        return tuple(sorted(family))
    return (resolve_gpu(name).gpu.id,)


def budgets_from_config(config: Config) -> list[Budget]:
    """The configured `[[budgets]]`, their GPU classes resolved; InvalidInput names a bad one."""
    budgets: list[Budget] = []
    seen: set[str] = set()
    for entry in config.budgets:  # each checked by the schema (name, amount, period, ...)
        name = entry.name.strip()
        if name in seen:
            raise InvalidInput(f"[[budgets]] {name!r}: two budgets have this name")
        seen.add(name)
        try:
            gpus = _gpu_scope(entry.gpu) if entry.gpu else ()
        except (InvalidInput, NotFound) as exc:
            # a value of the configuration file, not a typed one: a configuration error (exit 1)
            raise InvalidInput(f"[[budgets]] {name!r}: {exc}") from None
        budgets.append(Budget(
            name=name, amount=entry.amount, currency=entry.currency, period=entry.period,
            provider=entry.provider.lower(), gpus=gpus, gpu_label=entry.gpu,
            region=entry.region, tag=entry.tag, alert_spent_share=entry.alert_spent_share))
    return budgets


def period_bounds(period: str, as_of: datetime) -> tuple[datetime, datetime]:
    """[start, end) of the calendar month or quarter (UTC) holding `as_of`."""
    day = as_of.astimezone(UTC).date()
    if period == "quarter":
        first_month = (day.month - 1) // 3 * 3 + 1
        start, months = date(day.year, first_month, 1), 3
    elif period == "month":
        start, months = date(day.year, day.month, 1), 1
    else:
        raise InvalidInput(f"budget period must be month or quarter, got {period!r}")
    year, month = divmod(start.month - 1 + months, 12)
    end = date(start.year + year, month + 1, 1)
    return (datetime.combine(start, datetime.min.time(), tzinfo=UTC),
            datetime.combine(end, datetime.min.time(), tzinfo=UTC))


# --------------------------------------------------------------------------------------------
# Pure parts: spend, run-rate, the forecast sum

DAY = timedelta(days=1)


def _days(span: timedelta) -> float:
    return span / DAY


def spend_and_rate(lines: Sequence[UsageLine], start: datetime, as_of: datetime
                   ) -> tuple[Decimal, dict[str, float], dict[str, Decimal], float, datetime]:
    """(spend to date, GPU-hours a day per GPU, spend per GPU, run-rate days, spent until) of
    the lines charged from `start` up to the instant `as_of`.

    A line whose charge period straddles `as_of` counts for the share of it that has elapsed
    (a day's line at noon is half spent), so nothing later than `as_of` is spend. `spent until`
    is where the imported usage stops (at most `as_of`): the forecast takes over from there,
    so a day not yet exported is forecast rather than dropped. The run-rate is over the last
    `RUN_RATE_DAYS` days up to it."""
    spent = Decimal(0)
    cost_by_gpu: dict[str, Decimal] = defaultdict(Decimal)
    hours_by_gpu: dict[str, float] = defaultdict(float)
    elapsed: list[tuple[UsageLine, datetime, float]] = []
    for line in lines:
        if not start <= line.charge_period_start < as_of:
            continue
        length = line.charge_period_end - line.charge_period_start
        end = min(line.charge_period_end, as_of)
        share = 1.0 if length <= timedelta(0) else min(1.0, (end - line.charge_period_start)
                                                       / length)
        spent += line.effective_cost * Decimal(repr(share))
        gpu_hours = line.usage_hours * line.gpu_count * share
        cost_by_gpu[line.gpu_id] += line.effective_cost * Decimal(repr(share))
        hours_by_gpu[line.gpu_id] += gpu_hours
        elapsed.append((line, max(end, line.charge_period_start), gpu_hours))
    if not elapsed:
        return spent, {}, {}, 0.0, as_of
    until = max(end for _line, end, _hours in elapsed)
    window_start = max(start, until - RUN_RATE_DAYS * DAY)
    days = _days(until - window_start)
    rate: dict[str, float] = defaultdict(float)
    for line, end, gpu_hours in elapsed:
        span = end - line.charge_period_start
        inside = end - max(line.charge_period_start, window_start)
        if inside <= timedelta(0) or days <= 0:
            continue
        share = 1.0 if span <= timedelta(0) else inside / span
        rate[line.gpu_id] += gpu_hours * share / days
    paid = {g: cost_by_gpu[g] / Decimal(repr(hours_by_gpu[g]))
            for g in hours_by_gpu if hours_by_gpu[g] > 0}
    return spent, dict(rate), paid, days, until


def remaining_cost(rate: Mapping[str, float], paid: Mapping[str, Decimal],
                   multipliers: Mapping[str, Sequence[tuple[float, float]]], days: int,
                   known_days: float = 0.0) -> tuple[Decimal, Decimal]:
    """(P50, P90) of the rest of the period's cost: per GPU, GPU-hours a day × paid per
    GPU-hour × the day's price multiplier (P50, P90) over `days` forecast days, after
    `known_days` (up to the end of as_of's own day) at the price of today; a GPU without
    multipliers is held flat."""
    p50 = p90 = Decimal(0)
    for gpu, per_day in rate.items():
        if gpu not in paid:
            continue
        daily = Decimal(repr(round(per_day, 6))) * paid[gpu]
        known = daily * Decimal(repr(round(known_days, 6)))
        p50 += known
        p90 += known
        path = list(multipliers.get(gpu, ()))
        for i in range(days):
            m50, m90 = path[i] if i < len(path) else (1.0, 1.0)
            p50 += daily * Decimal(repr(round(m50, 6)))
            p90 += daily * Decimal(repr(round(m90, 6)))
    return p50, p90


def _whole(days: float) -> float | int:
    """A count of days for the document: whole days as an int, else 4 decimals."""
    return int(days) if days == int(days) else round(days, 4)


def status_of(amount: Decimal, spent: Decimal, p50: Decimal, p90: Decimal) -> str:
    if spent > amount or p50 > amount:
        return "over"
    if p90 > amount:
        return "at-risk"
    return "under"


# --------------------------------------------------------------------------------------------
# Store-backed

def price_multipliers(db: Database, budget: Budget, gpus: Sequence[str], as_of: datetime,
                      days: int) -> tuple[dict[str, list[tuple[float, float]]], list[str]]:
    """Per GPU, the forecast P50 and P90 over the last observed price for each remaining day,
    from the daily cheapest whole-GPU on-demand price in the budget's scope."""
    from tracker.economics.forecast import forecast_series
    from tracker.market.commitments import day_prices
    from tracker.store.queries import history

    out: dict[str, list[tuple[float, float]]] = {}
    warnings: list[str] = []
    if days <= 0 or not gpus:
        return out, warnings
    first = as_of.date() - timedelta(days=HISTORY_DAYS)
    spans = [s for s in history(db, list(gpus), category="on-demand",
                                provider=budget.provider or None,
                                region=budget.region or None,
                                since=datetime.combine(first, datetime.min.time(), tzinfo=UTC),
                                until=as_of)
             if s.currency == budget.currency]
    day_list = [first + timedelta(days=i) for i in range(HISTORY_DAYS + 1)]
    for gpu in gpus:
        mine = [s for s in spans if s.gpu == gpu]
        series = [(p.day, p.on_demand) for p in day_prices(mine, day_list, None)
                  if p.on_demand is not None]
        try:
            forecast = forecast_series(series, horizon_days=days,
                                       first_day=as_of.date() + timedelta(days=1))
        except InvalidInput as exc:
            warnings.append(f"{gpu}: no price forecast ({exc}); the price is held flat")
            continue
        last = float(forecast.last_value)
        out[gpu] = [(float(p.p50) / last, float(p.p90) / last) for p in forecast.points]
    return out, warnings


def budget_status(db: Database, budget: Budget, as_of: datetime,
                  lines: Sequence[UsageLine] | None = None) -> dict[str, Any]:
    """One budget's status document at `as_of`."""
    from tracker.core.money import round_money
    from tracker.market.focus import usage_lines

    start, end = period_bounds(budget.period, as_of)
    if lines is None:
        lines = usage_lines(db, since=start, until=end)
    mine = [line for line in lines if budget.covers(line)]
    spent, rate, paid, rate_days, until = spend_and_rate(mine, start, as_of)
    # The forecast covers [until, end): the rest of as_of's own day (and any days the import
    # has not reached yet) at today's price, then each later day at the price forecast.
    tomorrow = datetime.combine(as_of.astimezone(UTC).date() + DAY, datetime.min.time(),
                                tzinfo=UTC)
    known_days = _days(min(tomorrow, end) - until)
    forecast_days = max(0, (end - tomorrow).days)
    multipliers, warnings = price_multipliers(db, budget, sorted(rate), as_of, forecast_days)
    rest50, rest90 = remaining_cost(rate, paid, multipliers, forecast_days, known_days)
    p50, p90 = spent + rest50, spent + max(rest50, rest90)
    if not mine:
        warnings.append("no imported usage in scope this period")
    return {
        "name": budget.name, "period": budget.period, "period_start": start,
        "period_end": end, "as_of": as_of, "scope": budget.scope(), "amount": budget.amount,
        "currency": budget.currency, "spent": round_money(spent),
        "spent_share": round(float(spent / budget.amount), 4),
        "usage_lines": len(mine), "spent_until": until, "run_rate_days": _whole(rate_days),
        "run_rate_gpu_hours_per_day": {g: round(v, 3) for g, v in sorted(rate.items())},
        "paid_per_gpu_hour": {g: v.quantize(Decimal("0.0001")) for g, v in sorted(paid.items())},
        "remaining_days": _whole(known_days + forecast_days),
        "forecast_p50": round_money(p50), "forecast_p90": round_money(p90),
        "remaining_p50": round_money(budget.amount - p50),
        "price_forecast": "issue-27 forecast engine (P50/P90 over the last price)"
        if multipliers else "flat",
        "status": status_of(budget.amount, spent, p50, p90),
        "warnings": warnings,
    }


def budgets_status(db: Database, config: Config, as_of: datetime,
                   names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every configured budget's status (or the named ones)."""
    budgets = budgets_from_config(config)
    if names:
        known = {b.name for b in budgets}
        missing = [n for n in names if n not in known]
        if missing:
            raise InvalidInput(f"no budget named {missing[0]!r} (configured: "
                               f"{', '.join(sorted(known)) or 'none'})")
        budgets = [b for b in budgets if b.name in names]
    return [budget_status(db, b, as_of) for b in budgets]


__all__ = ["STATUS_COLUMNS", "Budget", "budget_status", "budgets_from_config",
           "budgets_status", "period_bounds", "remaining_cost", "spend_and_rate", "status_of"]
