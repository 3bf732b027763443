"""Checkpoint intervals and spot economics against Young 1974, Daly 2006 and LLNL/scr."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import spot
from tracker.economics.spot import SpotInputs, plan_spot

MIN = 1 / 60  # hours per minute


def test_young_reference_case():
    # docs/economics.md §2 case 1: δ = 5 min, M = 24 h → τ = 120 min exactly.
    assert spot.young_interval(5.0, 1440.0) == pytest.approx(120.0, rel=1e-12)
    assert spot.young_interval(5 * MIN, 24.0) * 60 == pytest.approx(120.0, rel=1e-12)


def test_daly_reference_case_matches_the_paper():
    # Case 2: Daly 2006 Fig. 3 (M = 24 h, δ = 5 min) prints 117 min; the formula gives 116.690.
    tau = spot.daly_interval(5.0, 1440.0)
    assert tau == pytest.approx(116.690, abs=5e-4)
    assert abs(tau - 117) <= 0.5


def test_daly_large_checkpoint_branch():
    # Case 5: δ ≥ 2M → τ = M.
    assert spot.daly_interval(60.0, 20.0) == 20.0
    assert spot.daly_interval(40.0, 20.0) == 20.0


def test_scr_overhead_percent():
    # Case 6: LLNL/scr prints δ·100/τ: Young 4.1667 %, Daly 4.2849 %.
    young = spot.checkpoint_overhead_percent(5.0, spot.young_interval(5.0, 1440.0))
    daly = spot.checkpoint_overhead_percent(5.0, spot.daly_interval(5.0, 1440.0))
    assert young == pytest.approx(4.1667, abs=1e-4)
    assert daly == pytest.approx(4.2849, abs=1e-4)


def test_expected_time_limit_without_interruptions():
    # Case 9: M → ∞ (1e12), τ = 120, δ = 5 → T_w/Ts = 1 + 5/120.
    ratio = spot.expected_wall_hours(1.0, 120.0, 5.0, 0.0, 1e12)
    assert ratio == pytest.approx(1 + 5 / 120, abs=1e-6)


def test_daly_fig3_job_expected_time():
    # Daly's Fig. 3 job: Ts = 500 h, M = 24 h, R = 10 min, δ = 5 min at τ_opt.
    tau = spot.daly_interval(5 * MIN, 24.0)
    wall = spot.expected_wall_hours(500.0, tau, 5 * MIN, 10 * MIN, 24.0)
    # M e^(R/M) (e^((τ+δ)/M) − 1) Ts/τ worked by hand:
    expected = 24 * math.exp((10 / 60) / 24) * math.expm1((tau + 5 / 60) / 24) * 500 / tau
    assert wall == pytest.approx(expected, rel=1e-12)
    assert 540 < wall < 560  # ~9% over the 500 h of work


def test_zero_checkpoint_cost_is_the_continuous_limit():
    assert spot.daly_interval(0.0, 10.0) == 0.0
    assert spot.expected_wall_hours(100.0, 0.0, 0.0, 0.5, 10.0) == pytest.approx(
        100 * math.exp(0.05))


@settings(max_examples=200, deadline=None)
@given(
    work=st.floats(1, 10_000), delta_min=st.floats(0.1, 60), restart_min=st.floats(0, 60),
    m_low=st.floats(1, 1000), factor=st.floats(1.01, 100),
)
def test_expected_time_rises_as_mtti_falls(work, delta_min, restart_min, m_low, factor):
    m_high = m_low * factor
    delta, restart = delta_min * MIN, restart_min * MIN

    def at(m: float) -> float:
        return spot.expected_wall_hours(work, spot.daly_interval(delta, m), delta, restart, m)

    assert at(m_low) >= at(m_high) * (1 - 1e-12)
    assert at(m_high) >= work


@settings(max_examples=100, deadline=None)
@given(work=st.floats(1, 10_000), tau=st.floats(0.1, 100), delta=st.floats(0.001, 5))
def test_expected_time_tends_to_checkpoint_overhead_as_mtti_grows(work, tau, delta):
    limit = work * (1 + delta / tau)
    far = spot.expected_wall_hours(work, tau, delta, 0.5, 1e13)
    near = spot.expected_wall_hours(work, tau, delta, 0.5, 1e6)
    assert far == pytest.approx(limit, rel=1e-6)
    assert abs(near - limit) >= abs(far - limit)


def test_job_mtti_divides_by_nodes():
    assert spot.job_mtti(240.0, 8) == 30.0
    with pytest.raises(InvalidInput):
        spot.job_mtti(240.0, 0)


def test_notice_window_variant():
    # An emergency checkpoint inside the notice: T_w = Ts (1 + δ/τ) / (1 − R/M).
    assert spot.expected_wall_hours_notice(100.0, 2.0, 0.1, 0.5, 10.0) == pytest.approx(
        100 * 1.05 / 0.95)
    with pytest.raises(InvalidInput, match="not expected to finish"):
        spot.expected_wall_hours_notice(100.0, 2.0, 0.1, 10.0, 10.0)


def test_band_conversion():
    # '5-10%' at its midpoint is 7.5% per 720 h month.
    share = spot.band_probability(5, 10, "mid")
    assert share == pytest.approx(0.075)
    assert spot.mtti_from_probability(share, "probability", 720) == pytest.approx(
        720 / -math.log(1 - 0.075))
    assert spot.mtti_from_probability(share, "rate", 720) == pytest.approx(720 / 0.075)
    # The open top band (max 100 in the AWS file) uses the configured stand-in.
    assert spot.band_probability(20, 100, "mid", open_top_pct=30) == pytest.approx(0.30)
    assert spot.band_probability(20, None, "upper", open_top_pct=40) == pytest.approx(0.40)
    with pytest.raises(InvalidInput, match="not a usable rate"):
        spot.band_probability(0, 5, "lower")
    with pytest.raises(InvalidInput, match="band point"):
        spot.band_probability(5, 10, "median")


def _inputs(**overrides) -> SpotInputs:
    base = dict(work_hours=100.0, mtti_node_hours=24.0, checkpoint_hours=5 * MIN,
                restart_hours=10 * MIN, nodes=1, spot_price_per_node_hour=Decimal("17.63"),
                on_demand_price_per_node_hour=Decimal("55.04"))
    base.update(overrides)
    return SpotInputs(**base)


def test_plan_costs_follow_the_definitions():
    plan = plan_spot(_inputs())
    assert plan.checkpoint_interval_hours == pytest.approx(spot.daly_interval(5 * MIN, 24.0))
    assert plan.young_interval_hours == pytest.approx(math.sqrt(2 * 5 * MIN * 24))
    assert plan.expected_interruptions == pytest.approx(plan.expected_wall_hours / 24.0)
    assert plan.overhead_fraction == pytest.approx(plan.expected_wall_hours / 100 - 1)
    assert plan.spot_cost == pytest.approx(
        Decimal("17.63") * Decimal(repr(plan.expected_wall_hours)), rel=Decimal("1e-20"))
    assert plan.on_demand_cost == Decimal("5504.00")  # 55.04 × 100 h, no checkpoints
    assert plan.savings_fraction == 1 - plan.spot_cost / plan.on_demand_cost
    assert 0.6 < plan.savings_fraction < 0.7


def test_unbilled_wait_is_taken_off_the_bill():
    billed = plan_spot(_inputs())
    waiting = plan_spot(_inputs(unbilled_wait_hours=5 * MIN))
    assert waiting.expected_wall_hours == billed.expected_wall_hours
    assert waiting.billed_spot_hours == pytest.approx(
        billed.expected_wall_hours - billed.expected_interruptions * 5 * MIN)
    assert waiting.spot_cost < billed.spot_cost


def test_nodes_shorten_the_job_mtti_and_multiply_cost():
    one = plan_spot(_inputs())
    eight = plan_spot(_inputs(nodes=8))
    assert eight.mtti_job_hours == 3.0
    assert eight.expected_wall_hours > one.expected_wall_hours
    assert eight.on_demand_cost == 8 * one.on_demand_cost


def test_notice_window_used_when_the_emergency_checkpoint_fits():
    aws = plan_spot(_inputs(notice_window_hours=120 / 3600, emergency_checkpoint_hours=1 * MIN))
    assert aws.notice_window_used
    assert aws.expected_wall_hours == pytest.approx(spot.expected_wall_hours_notice(
        100.0, aws.checkpoint_interval_hours, 5 * MIN, 10 * MIN, 24.0))
    gcp = plan_spot(_inputs(notice_window_hours=30 / 3600, emergency_checkpoint_hours=1 * MIN))
    assert not gcp.notice_window_used
    assert any("does not fit" in w for w in gcp.warnings)


def test_deadline_met_or_topped_up_with_on_demand():
    relaxed = plan_spot(_inputs(deadline_hours=200.0))
    assert relaxed.meets_deadline is True and relaxed.on_demand_hours_for_deadline == 0.0
    tight = plan_spot(_inputs(deadline_hours=102.0))
    assert tight.meets_deadline is False and tight.deadline_reachable is True
    od = tight.on_demand_hours_for_deadline
    spot_part = 102.0 - od
    # Work done in the deadline: spot hours at Ts/T_w per hour plus on-demand hours.
    assert spot_part * 100 / tight.expected_wall_hours + od == pytest.approx(100.0)
    assert tight.spot_cost < tight.mixed_cost < tight.on_demand_cost
    impossible = plan_spot(_inputs(deadline_hours=90.0))
    assert impossible.deadline_reachable is False and impossible.meets_deadline is False


def test_forced_restarts_for_a_maximum_runtime():
    plan = plan_spot(_inputs(max_runtime_hours=24.0, mtti_node_hours=1e9))
    # ~104 h of wall time → 4 forced stops, each a checkpoint and a restart.
    assert plan.forced_restarts == 4
    free = plan_spot(_inputs(mtti_node_hours=1e9))
    assert plan.expected_wall_hours == pytest.approx(
        free.expected_wall_hours + 4 * (5 + 10) * MIN)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"checkpoint_hours": 200.0}, "longer than the work"),
    ({"work_hours": -1.0}, "work hours must be more than 0"),
    ({"restart_hours": -0.1}, "restart time must be 0 or more"),
    ({"mtti_node_hours": 0.0}, "MTTI must be more than 0"),
    ({"unbilled_wait_hours": 1.0}, "cannot exceed the restart time"),
    ({"deadline_hours": 0.0}, "deadline must be more than 0"),
])
def test_bad_inputs_are_one_line(overrides, message):
    with pytest.raises(InvalidInput, match=message) as info:
        plan_spot(_inputs(**overrides))
    assert "\n" not in str(info.value)


def test_hopeless_mtti_is_reported_not_overflowing():
    plan = plan_spot(_inputs(mtti_node_hours=0.0001, restart_hours=1.0, checkpoint_hours=1.0))
    assert plan.viable is False and "not viable" in plan.not_viable_reason
    assert plan.spot_cost is None and math.isinf(plan.expected_wall_hours)
