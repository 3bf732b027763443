"""Commitment planning for GPU fleets: how many GPUs to commit, on which term, and what the
plan would have cost over a stored price path (docs/economics.md §1.6).

Pure: hourly usage and prices come in, money goes out; no database, no HTTP, no clock.

The committed level (the newsvendor critical fractile, Arrow, Harris & Marschak 1951,
"Optimal Inventory Policy", Econometrica 19(3); for reserved cloud instances the same
marginal rule is Wang, Liang & Li 2013, "To Reserve or Not to Reserve: Optimal Online
Multi-Instance Acquisition in IaaS Clouds", ICAC '13, §3):

    the k-th committed GPU costs p_c · T over the window and saves p_u for every hour it is
    used, so it pays iff its utilization U(k) = Σ_h clamp(u_h − (k−1), 0, 1) / T ≥ p_c / p_u.

U(k) never increases with k, so the committed count is the largest k with U(k) ≥ p_c / p_u:
for whole-GPU usage, the number of GPUs in use at least a share p_c / p_u of the hours (the
(1 − p_c / p_u) quantile of the hourly usage). p_u is what an uncommitted GPU-hour costs:
on-demand, or with an interruptible share F, (1 − F) · p_od + F · p_spot · (1 + overhead),
the overhead being the spot engine's (Daly's expected wall time over the work, minus one).
The break-even utilization of a commitment is p_c / p_od: the share of its hours it must be
busy to beat on-demand.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from itertools import accumulate

from tracker.core.errors import InvalidInput

HORIZONS = (12, 36)
TERM_MONTHS = {"reserved-1y": 12, "reserved-3y": 36}


def _d(hours: float) -> Decimal:
    """GPU-hours (physics) as Decimal through their shortest repr, to 6 places."""
    return Decimal(repr(round(hours, 6)))


class SortedUsage:
    """One window's hourly usage, sorted once, with prefix sums: U(k) and the split at a
    committed level in O(log T) each."""

    __slots__ = ("hours", "prefix", "values")

    def __init__(self, usage: Sequence[float]) -> None:
        self.values = sorted(usage)
        self.hours = len(self.values)
        self.prefix = list(accumulate(self.values, initial=0.0))

    @property
    def total(self) -> float:
        return self.prefix[-1]

    def below(self, level: float) -> tuple[int, float]:
        """(count, sum) of the hours with usage < level."""
        i = bisect_left(self.values, level)
        return i, self.prefix[i]

    def covered(self, commit: float) -> float:
        """Σ_h min(u_h, commit): the GPU-hours a committed level serves."""
        n, s = self.below(commit)
        return s + commit * (self.hours - n)

    def utilization(self, k: int) -> float:
        """U(k) = (covered(k) − covered(k−1)) / T."""
        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}")
        if not self.hours:
            return 0.0
        return (self.covered(k) - self.covered(k - 1)) / self.hours


def marginal_utilization(usage: Sequence[float], k: int) -> float:
    """U(k): the share of the window's hours the k-th committed GPU is busy (k ≥ 1)."""
    return SortedUsage(usage).utilization(k)


def commit_level(usage: Sequence[float] | SortedUsage, ratio: float) -> int:
    """The largest k with U(k) ≥ ratio (0 when even one GPU would not pay).

    `ratio` is committed price / uncommitted price per GPU-hour; a ratio of 1 or more never
    commits. Binary search over k: U is non-increasing."""
    if not math.isfinite(ratio) or ratio < 0:
        raise InvalidInput(f"price ratio must be a finite number ≥ 0, got {ratio!r}")
    table = usage if isinstance(usage, SortedUsage) else SortedUsage(usage)
    if not table.hours or ratio >= 1:
        return 0
    peak = table.values[-1]
    if peak <= 0:
        return 0
    lo, hi = 0, math.ceil(peak)  # U(lo) ≥ ratio holds for lo = 0 by convention
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if table.utilization(mid) >= ratio:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True, slots=True)
class LinePrices:
    """Prices per GPU-hour for one GPU class in one region at one provider."""

    on_demand: Decimal
    committed: dict[str, Decimal]  # category (reserved-1y / reserved-3y) -> hourly equivalent
    spot: Decimal | None = None
    spot_overhead: float = 0.0  # expected wall time / work − 1, from the spot engine

    def uncommitted(self, interruptible_share: float) -> Decimal:
        """What an uncommitted GPU-hour costs with a share F on spot (its overhead paid)."""
        if self.spot is None or interruptible_share <= 0:
            return self.on_demand
        share = Decimal(repr(interruptible_share))
        return (1 - share) * self.on_demand + share * self.spot_cost()

    def spot_cost(self) -> Decimal:
        """A useful spot GPU-hour: the price times (1 + overhead)."""
        if self.spot is None:
            raise InvalidInput("no spot price")
        return self.spot * (1 + Decimal(repr(round(self.spot_overhead, 6))))


@dataclass(frozen=True, slots=True)
class LinePlan:
    commit_gpus: int
    term: str | None  # reserved-1y / reserved-3y, None when nothing is committed
    committed_price: Decimal | None
    committed_gpu_hours: float  # hours the committed GPUs are busy
    on_demand_gpu_hours: float
    spot_gpu_hours: float
    total_gpu_hours: float
    window_hours: int
    cost: Decimal  # over the window, unrounded
    all_on_demand_cost: Decimal
    all_spot_cost: Decimal | None
    break_even_utilization: float | None  # p_c / p_od of the chosen term
    committed_utilization: float | None  # busy share of the committed GPU-hours
    warnings: tuple[str, ...] = field(default=())


def _split(usage: Sequence[float], commit: int) -> tuple[float, float]:
    covered = overflow = 0.0
    for u in usage:
        if u > commit:
            covered += commit
            overflow += u - commit
        else:
            covered += u
    return covered, overflow


def plan_line(usage: Sequence[float], prices: LinePrices, *, horizon_months: int,
              interruptible_share: float = 0.0) -> LinePlan:
    """The cheapest commitment for one line's hourly usage (GPUs in use each hour)."""
    if horizon_months not in HORIZONS:
        raise InvalidInput(f"horizon must be 12 or 36 months, got {horizon_months}")
    if not 0 <= interruptible_share <= 1:
        raise InvalidInput(f"interruptible share must be in [0, 1], got {interruptible_share}")
    if usage and (min(usage) < 0 or not math.isfinite(sum(usage))):
        raise InvalidInput("usage must be finite and not negative")
    table = SortedUsage(usage)
    hours = table.hours
    total = table.total
    warnings: list[str] = []
    share = interruptible_share
    if share > 0 and prices.spot is None:
        warnings.append("no spot price: the interruptible share stays on-demand")
        share = 0.0
    uncommitted = prices.uncommitted(share)
    all_od = _d(total) * prices.on_demand
    all_spot = _d(total) * prices.spot_cost() if prices.spot is not None else None
    Option = tuple[Decimal, int, str | None, Decimal | None, float, float]
    options: list[Option] = []
    covered, overflow = 0.0, total
    base_cost = _d(overflow) * uncommitted
    options.append((base_cost, 0, None, None, covered, overflow))
    for term, price in sorted(prices.committed.items()):
        if TERM_MONTHS.get(term, 0) > horizon_months:
            continue  # a 3-year term outlives a 12-month horizon
        ratio = float(price / uncommitted) if uncommitted > 0 else math.inf
        k = commit_level(table, ratio)
        if k == 0:
            continue
        covered_k = table.covered(k)
        overflow_k = total - covered_k
        cost = Decimal(k * hours) * price + _d(overflow_k) * uncommitted
        options.append((cost, k, term, price, covered_k, overflow_k))
    best: Option = min(options, key=lambda o: (o[0], -o[1]))
    cost, k, chosen, chosen_price, covered, overflow = best
    spot_hours = overflow * share
    return LinePlan(
        commit_gpus=k, term=chosen, committed_price=chosen_price, committed_gpu_hours=covered,
        on_demand_gpu_hours=overflow - spot_hours, spot_gpu_hours=spot_hours,
        total_gpu_hours=total, window_hours=hours, cost=cost, all_on_demand_cost=all_od,
        all_spot_cost=all_spot,
        break_even_utilization=float(chosen_price / prices.on_demand)
        if chosen_price is not None and prices.on_demand > 0 else None,
        committed_utilization=covered / (k * hours) if k and hours else None,
        warnings=tuple(warnings))


def monthly(cost: Decimal, window_hours: int, hours_per_month: Decimal) -> Decimal:
    """A window's cost scaled to one month of `hours_per_month` hours."""
    if window_hours <= 0:
        raise InvalidInput("the usage window is empty")
    return cost * hours_per_month / Decimal(window_hours)


def scheduled_usage(window_hours: int, gpus: int, *, run_hours: float | None = None,
                    runs_per_month: float = 0.0, online_hours_per_month: float | None = None,
                    hours_per_month: float = 730.0) -> list[float]:
    """Hourly GPUs in use over a window for a workload run on a schedule.

    A job (`run_hours` given) starts every `hours_per_month / runs_per_month` hours from the
    window's first hour and holds `gpus` for `run_hours`; a run that crosses the window's end
    continues at its start (the window is one period of a repeating schedule), so the window
    holds run_hours × gpus for each run that starts in it. A service holds `gpus`
    for the first `online_hours_per_month / hours_per_month` of every day (all day at a full
    month's hours). Fractions of an hour count as fractions of GPU-hours."""
    if window_hours <= 0 or gpus < 0:
        raise InvalidInput("a schedule needs a window of hours and a GPU count ≥ 0")
    out = [0.0] * window_hours

    def hold(start: float, length: float) -> None:
        t, end = start, start + length
        while t < end - 1e-12:
            hour = math.floor(t + 1e-12)
            step = min(end, hour + 1) - t
            out[hour % window_hours] += gpus * step
            t += step

    if run_hours is not None:
        if runs_per_month <= 0 or run_hours <= 0:
            raise InvalidInput("a job's schedule needs runs per month and run hours above 0")
        period = hours_per_month / runs_per_month
        # A run longer than a period overlaps the next one: both hold their GPUs.
        for i in range(math.ceil(window_hours / period - 1e-9)):
            hold(i * period, run_hours)
        return out
    share = min(1.0, (online_hours_per_month or 0.0) / hours_per_month)
    if share <= 0:
        raise InvalidInput("a service's schedule needs hours online per month above 0")
    for day in range(math.ceil(window_hours / 24)):
        hold(day * 24.0, min(24.0 * share, window_hours - day * 24.0))
    return out


# --------------------------------------------------------------------------------------------
# Back-test: the plan replayed over a day-by-day price path


@dataclass(frozen=True, slots=True)
class DayPrices:
    """Per GPU-hour prices in effect at a day's start (None: nothing stored that day)."""

    day: date
    on_demand: Decimal | None
    spot: Decimal | None
    committed: Decimal | None


@dataclass(frozen=True, slots=True)
class DayCost:
    day: date
    gpu_hours: float
    plan: Decimal
    all_on_demand: Decimal
    all_spot: Decimal | None
    prices: DayPrices


@dataclass(frozen=True, slots=True)
class Backtest:
    days: tuple[DayCost, ...]
    plan_cost: Decimal
    all_on_demand_cost: Decimal
    all_spot_cost: Decimal | None
    committed_price: Decimal | None  # locked on the first priced day (the purchase)
    unpriced_days: tuple[date, ...]


def backtest_line(daily_usage: Sequence[tuple[date, Sequence[float]]], commit_gpus: int,
                  prices: Sequence[DayPrices], *, interruptible_share: float,
                  spot_overhead: float) -> Backtest:
    """The plan's cost day by day at the stored prices of each day, against all on-demand
    and all spot at the same prices. The committed price is the one of the first day
    priced (what the reservation was bought at) and holds for the whole replay; a day
    without an on-demand price (or, with commitments, without the committed one) is left
    out of all three sums alike and listed."""
    by_day = {p.day: p for p in prices}
    overhead = 1 + Decimal(repr(round(spot_overhead, 6)))
    share = Decimal(repr(interruptible_share))
    locked: Decimal | None = None
    days: list[DayCost] = []
    unpriced: list[date] = []
    plan_sum = od_sum = Decimal(0)
    spot_sum: Decimal | None = Decimal(0)
    for day, hourly in daily_usage:
        p = by_day.get(day)
        if commit_gpus and locked is None and p is not None and p.committed is not None:
            locked = p.committed
        if p is None or p.on_demand is None or (commit_gpus and locked is None):
            unpriced.append(day)
            continue
        covered, overflow = _split(hourly, commit_gpus)
        total = covered + overflow
        use_share = share if p.spot is not None else Decimal(0)
        spot_hours = _d(overflow) * use_share
        od_hours = _d(overflow) - spot_hours
        plan = od_hours * p.on_demand
        if p.spot is not None:
            plan += spot_hours * p.spot * overhead
        if commit_gpus:
            assert locked is not None
            plan += Decimal(commit_gpus * len(hourly)) * locked
        all_od = _d(total) * p.on_demand
        all_spot = _d(total) * p.spot * overhead if p.spot is not None else None
        days.append(DayCost(day, total, plan, all_od, all_spot, p))
        plan_sum += plan
        od_sum += all_od
        spot_sum = spot_sum + all_spot if spot_sum is not None and all_spot is not None \
            else None
    return Backtest(tuple(days), plan_sum, od_sum, spot_sum, locked, tuple(unpriced))


__all__ = ["HORIZONS", "TERM_MONTHS", "Backtest", "DayCost", "DayPrices", "LinePlan",
           "LinePrices", "SortedUsage", "backtest_line", "commit_level", "marginal_utilization",
           "monthly", "plan_line"]
