"""Cost per run, per success, billing granularity, runs per day, time to result."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import cost
from tracker.economics.cost import BillingRule


def test_cost_per_run_reference_case():
    # docs/economics.md §2 case 18: 1×H100 6 h at $4/GPU-h vs 8×H100 45 min at $32/node-h.
    single = cost.run_cost(Decimal(4), 1, 6)
    cluster = cost.run_cost(Decimal(4), 8, 0.75)
    assert single.cost == Decimal(24)
    assert cluster.cost == Decimal(24)
    assert cost.node_run_cost(Decimal(32), 1, 0.75) == Decimal(24)
    assert single.gpu_hours == cluster.gpu_hours == 6.0
    assert cost.runs_per_day(0.75) == 32


def test_cost_per_success_reference_case():
    # Case 19: $24 per run; p = 0.5 with f = 1.0 / 0.25; p = 0.8 with f = 0.5.
    assert cost.cost_per_success(Decimal(24), Decimal("0.5"), Decimal("1.0")) == Decimal(48)
    assert cost.cost_per_success(Decimal(24), Decimal("0.5"), Decimal("0.25")) == Decimal(30)
    assert cost.cost_per_success(Decimal(24), Decimal("0.8"), Decimal("0.5")) == Decimal(27)
    assert cost.expected_attempts(Decimal("0.8")) == Decimal("1.25")


def test_float_noise_does_not_bill_an_extra_second():
    assert cost.run_cost(Decimal(4), 8, 6 / 8 + 1e-16).cost == Decimal(24)
    assert BillingRule().billed_seconds(0.7500000000000001) == Decimal(2700)


def test_billing_granularity_and_minimum():
    per_hour = BillingRule(3600)
    assert per_hour.billed_hours(1.01) == Decimal(2)
    per_minute = BillingRule(60)
    assert per_minute.billed_seconds(61 / 3600) == Decimal(120)
    aws = BillingRule(1, 60)
    assert aws.billed_seconds(10 / 3600) == Decimal(60)
    assert aws.billed_seconds(61.5 / 3600) == Decimal(62)
    assert cost.run_cost(Decimal("3.6"), 1, 10 / 3600, aws).cost == Decimal("0.06")
    with pytest.raises(InvalidInput):
        BillingRule(0)


@given(hours=st.floats(0.001, 1000), granularity=st.sampled_from([1, 60, 3600]))
def test_billed_time_never_less_than_wall_time(hours, granularity):
    billed = BillingRule(granularity).billed_seconds(hours)
    assert billed >= Decimal(repr(hours)) * 3600 - Decimal("0.000001")
    assert billed - Decimal(repr(hours)) * 3600 < granularity


def test_time_to_result_and_cluster_premium():
    assert cost.time_to_result_hours(10, 3, 6.0) == 24.0  # ceil(10/3) = 4 waves
    assert cost.time_to_result_hours(8, 8, 0.75) == 0.75
    assert cost.cluster_premium(Decimal(24), Decimal("0.8")) == Decimal(6)
    assert cost.runs_per_day(0.75, Decimal("0.5")) == 16


def test_bad_inputs():
    with pytest.raises(InvalidInput, match=r"success rate must be in \(0, 1\]"):
        cost.cost_per_success(Decimal(24), Decimal("1.5"))
    with pytest.raises(InvalidInput, match="success rate"):
        cost.cost_per_success(Decimal(24), Decimal(0))
    with pytest.raises(InvalidInput, match="wall hours must be 0 or more"):
        cost.run_cost(Decimal(4), 1, -1)
    with pytest.raises(InvalidInput, match="GPU count must be more than 0"):
        cost.run_cost(Decimal(4), 0, 1)
    with pytest.raises(InvalidInput, match="experiments"):
        cost.time_to_result_hours(0, 1, 1.0)


@dataclass
class Row:
    gpu_count: float
    name: str


def test_tiling_offer_picks_the_first_offer_that_tiles():
    rows = [Row(8, "8x cheapest"), Row(1, "1x"), Row(2, "2x")]
    assert cost.tiling_offer(rows, 16) == (rows[0], 2)
    assert cost.tiling_offer(rows, 4) == (rows[1], 4)
    assert cost.tiling_offer([Row(8, "big")], 4) is None
    assert cost.tiling_offer([Row(0.5, "half")], 1) == (Row(0.5, "half"), 2)
