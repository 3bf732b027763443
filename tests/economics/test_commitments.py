"""The commitment engine (tracker/economics/commitments.py): the committed level on usage with
a known answer, its monotonicity in the price ratio, the plan's split, the back-test sums."""

from __future__ import annotations

import math
from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics.commitments import (
    DayPrices,
    LinePrices,
    SortedUsage,
    backtest_line,
    commit_level,
    marginal_utilization,
    plan_line,
    scheduled_usage,
)

D = Decimal


def base_and_bursts(hours: int = 1000) -> list[float]:
    """4 GPUs always; 6 more in 30% of the hours; 10 more again in 10% of the hours."""
    usage = []
    for h in range(hours):
        u = 4.0
        if h % 10 < 3:
            u += 6
        if h % 10 == 0:
            u += 10
        usage.append(u)
    return usage


@pytest.mark.parametrize(("ratio", "expected"), [
    (0.95, 4),   # only the base is used more than 95% of the hours
    (0.60, 4),   # GPUs 5..10 are used 30% of the hours: not enough
    (0.30, 10),  # ... exactly enough at a ratio of 0.30
    (0.25, 10),
    (0.10, 20),  # GPUs 11..20 are used 10% of the hours
    (0.05, 20),
])
def test_commit_level_is_the_usage_percentile_the_ratio_sets(ratio, expected):
    usage = base_and_bursts()
    assert commit_level(usage, ratio) == expected
    # The answer is the (1 - ratio) quantile: the largest k used in at least `ratio` of hours.
    share = sum(1 for u in usage if u >= expected) / len(usage) if expected else 1.0
    assert share >= ratio
    above = sum(1 for u in usage if u >= expected + 1) / len(usage)
    assert above < ratio


def test_a_commitment_no_cheaper_than_the_alternative_never_pays():
    assert commit_level(base_and_bursts(), 1.0) == 0
    assert commit_level(base_and_bursts(), 1.2) == 0


def test_marginal_utilization_of_fractional_usage():
    # 1.5 GPUs all the time: the 2nd GPU is busy half of each hour.
    assert marginal_utilization([1.5] * 10, 1) == 1.0
    assert marginal_utilization([1.5] * 10, 2) == 0.5
    assert marginal_utilization([1.5] * 10, 3) == 0.0
    assert commit_level([1.5] * 10, 0.5) == 2
    assert commit_level([1.5] * 10, 0.51) == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 40, allow_nan=False), min_size=1, max_size=200),
       st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_commit_level_is_monotone_in_the_price_ratio(usage, r1, r2):
    low, high = sorted((r1, r2))
    assert commit_level(usage, low) >= commit_level(usage, high)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 40, allow_nan=False), min_size=1, max_size=200),
       st.integers(0, 45))
def test_sorted_usage_covered_equals_the_direct_sum(usage, commit):
    table = SortedUsage(usage)
    assert math.isclose(table.covered(commit), sum(min(u, commit) for u in usage),
                        rel_tol=1e-9, abs_tol=1e-9)


def test_plan_line_picks_the_cheaper_term_and_splits_the_rest():
    usage = base_and_bursts(1000)
    prices = LinePrices(on_demand=D("10"), committed={"reserved-1y": D("6"),
                                                       "reserved-3y": D("4")})
    one_year = plan_line(usage, prices, horizon_months=12)
    assert (one_year.term, one_year.commit_gpus) == ("reserved-1y", 4)  # ratio 0.6
    three_year = plan_line(usage, prices, horizon_months=36)
    assert (three_year.term, three_year.commit_gpus) == ("reserved-3y", 4)  # ratio 0.4
    assert three_year.cost < one_year.cost
    # A 1-year term cheaper than the 3-year one wins on a 36-month horizon too.
    dear_3y = plan_line(usage, LinePrices(D("10"), {"reserved-1y": D("4"),
                                                    "reserved-3y": D("6")}), horizon_months=36)
    assert (dear_3y.term, dear_3y.committed_price) == ("reserved-1y", D("4"))
    total = sum(usage)
    assert one_year.on_demand_gpu_hours + one_year.committed_gpu_hours == pytest.approx(total)
    # cost = 4 GPUs x 1000 h x 6 + the rest on-demand at 10
    assert one_year.cost == D(4 * 1000 * 6) + D(repr(total - 4000)) * 10
    assert one_year.break_even_utilization == pytest.approx(0.6)
    assert one_year.all_on_demand_cost == D(repr(total)) * 10


def test_interruptible_share_prices_spot_with_its_overhead():
    usage = [2.0] * 100
    prices = LinePrices(on_demand=D("10"), committed={}, spot=D("4"), spot_overhead=0.25)
    plan = plan_line(usage, prices, horizon_months=12, interruptible_share=0.5)
    assert plan.commit_gpus == 0
    assert plan.spot_gpu_hours == pytest.approx(100.0)
    assert plan.on_demand_gpu_hours == pytest.approx(100.0)
    assert plan.cost == D("100") * D("10") + D("100") * D("4") * D("1.25")
    assert plan.all_spot_cost == D("200") * D("5")


def test_spot_share_lowers_the_committed_level():
    usage = base_and_bursts()
    committed = {"reserved-1y": D("6")}
    no_spot = plan_line(usage, LinePrices(D("10"), committed), horizon_months=12)
    with_spot = plan_line(usage, LinePrices(D("10"), committed, spot=D("3"), spot_overhead=0.1),
                          horizon_months=12, interruptible_share=0.9)
    assert with_spot.commit_gpus <= no_spot.commit_gpus
    assert with_spot.commit_gpus == 0  # uncommitted GPU-hour: 0.1*10 + 0.9*3.3 = 3.97 < 6


@pytest.mark.parametrize("bad", [
    {"horizon_months": 24}, {"horizon_months": 12, "interruptible_share": 1.5}])
def test_plan_line_refuses_bad_input(bad):
    with pytest.raises(InvalidInput):
        plan_line([1.0], LinePrices(D("1"), {}), **bad)


def test_plan_line_refuses_negative_usage():
    with pytest.raises(InvalidInput, match="negative"):
        plan_line([1.0, -1.0], LinePrices(D("1"), {}), horizon_months=12)


def test_backtest_is_the_hand_sum_of_its_days():
    start = date(2026, 10, 1)
    daily = [(start + timedelta(days=i), [3.0] * 12 + [1.0] * 12) for i in range(3)]
    prices = [DayPrices(start, D("10"), D("4"), D("6")),
              DayPrices(start + timedelta(days=1), D("8"), None, D("5")),  # committed locked at 6
              DayPrices(start + timedelta(days=2), D("9"), D("3.5"), D("6"))]
    result = backtest_line(daily, 2, prices, interruptible_share=0.5, spot_overhead=0.2)
    # each day: 2 committed x 24 h; overflow 1 GPU x 12 h, half on spot (when priced)
    day1 = D(48) * 6 + D(6) * 10 + D(6) * 4 * D("1.2")
    day2 = D(48) * 6 + D(12) * 8
    day3 = D(48) * 6 + D(6) * 9 + D(6) * D("3.5") * D("1.2")
    assert result.plan_cost == day1 + day2 + day3
    assert result.committed_price == D("6")
    assert result.all_on_demand_cost == D(48) * (10 + 8 + 9)
    assert result.all_spot_cost is None  # day 2 had no spot price
    assert [d.plan for d in result.days] == [day1, day2, day3]


def test_backtest_leaves_unpriced_days_out_of_every_sum():
    start = date(2026, 10, 1)
    daily = [(start + timedelta(days=i), [1.0] * 24) for i in range(2)]
    prices = [DayPrices(start + timedelta(days=1), D("2"), None, None)]
    result = backtest_line(daily, 0, prices, interruptible_share=0, spot_overhead=0)
    assert result.unpriced_days == (start,)
    assert result.plan_cost == result.all_on_demand_cost == D(48)


# --------------------------------------------------------------------------------------------
# A workload's schedule as hourly usage

def test_a_weekly_job_holds_its_gpus_for_each_run_and_wraps_at_the_window_end():
    # every 168 h (730 / (730/168) runs), 8 GPUs for 10.5 h, over 28 days: four runs
    usage = scheduled_usage(672, 8, run_hours=10.5, runs_per_month=730 / 168)
    assert sum(usage) == pytest.approx(4 * 8 * 10.5)
    assert usage[:11] == [8.0] * 10 + [4.0] and usage[168] == 8.0 and usage[11] == 0.0
    # a run that crosses the end continues at the start: 7 runs of 100 h every 100 h in 672 h
    wrapped = scheduled_usage(672, 1, run_hours=100, runs_per_month=7.3)
    assert sum(wrapped) == pytest.approx(7 * 100) and wrapped[27] == 2.0 and wrapped[28] == 1.0


def test_a_service_holds_its_gpus_for_its_share_of_each_day():
    usage = scheduled_usage(48, 4, online_hours_per_month=365)
    assert usage == ([4.0] * 12 + [0.0] * 12) * 2
    assert scheduled_usage(24, 2, online_hours_per_month=900) == [2.0] * 24


@given(st.integers(1, 30), st.integers(1, 16), st.floats(1, 730))
@settings(max_examples=50, deadline=None)
def test_a_service_uses_gpus_times_its_online_share(days, gpus, online):
    usage = scheduled_usage(days * 24, gpus, online_hours_per_month=online)
    assert sum(usage) == pytest.approx(gpus * days * 24 * online / 730, rel=1e-9)
    assert max(usage) <= gpus


@pytest.mark.parametrize("kwargs", [
    {"run_hours": 5.0}, {"run_hours": 0.0, "runs_per_month": 4.0},
    {"online_hours_per_month": 0.0}, {},
])
def test_a_schedule_without_runs_or_hours_is_refused(kwargs):
    with pytest.raises(InvalidInput, match="schedule needs"):
        scheduled_usage(24, 1, **kwargs)
