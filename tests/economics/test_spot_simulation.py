"""The Monte Carlo of a spot run against Daly (2006) and its own closed form."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import spot
from tracker.economics.spot_simulation import (
    SimulationInputs,
    choose_for_deadline,
    exact_expected_wall_hours,
    path_cost,
    segments_of,
    simulate,
)

MIN = 1 / 60


def inputs(work=250.0, mtti=24.0, delta=5 * MIN, restart=10 * MIN, replicas=10_000, seed=1,
           interval=None, **kw) -> SimulationInputs:
    tau = spot.daly_interval(delta, mtti) if interval is None else interval
    return SimulationInputs(work_hours=work, interval_hours=tau, checkpoint_hours=delta,
                            restart_hours=restart, mtti_job_hours=mtti, replicas=replicas,
                            seed=seed, **kw)


def test_same_seed_same_answer_and_another_seed_differs():
    a, b = simulate(inputs(seed=7)), simulate(inputs(seed=7))
    assert np.array_equal(a.wall, b.wall)
    assert a.wall_hours == b.wall_hours
    assert simulate(inputs(seed=8)).wall_hours != a.wall_hours


# (work h, MTTI h, checkpoint h, restart h): the demo's p5 run, a flaky band, slow checkpoints
GRID = [(250.0, 24.0, 5 * MIN, 10 * MIN), (200.0, 5.0, 0.25, 0.5), (50.0, 2.0, 0.1, 0.2),
        (2000.0, 60.0, 2 * MIN, 15 * MIN), (30.0, 1.5, 0.05, 0.3)]


@pytest.mark.parametrize(("work", "mtti", "delta", "restart"), GRID)
def test_mean_within_three_standard_errors_of_the_models_expectation(work, mtti, delta,
                                                                    restart):
    result = simulate(inputs(work, mtti, delta, restart))
    exact = exact_expected_wall_hours(work, spot.daly_interval(delta, mtti), delta, restart,
                                      mtti)
    assert abs(result.wall_hours.mean - exact) <= 3 * result.wall_hours.stderr
    # Daly's T_w counts Ts/τ fractional segments; the simulated run checkpoints a whole last
    # one. The two differ by less than one segment's expected time, well under 1%.
    daly = spot.expected_wall_hours(work, spot.daly_interval(delta, mtti), delta, restart, mtti)
    assert abs(exact - daly) / daly < 0.01
    assert abs(result.wall_hours.mean - daly) <= 3 * result.wall_hours.stderr + abs(exact - daly)


@pytest.mark.parametrize(("work", "mtti", "delta", "restart"), GRID)
def test_mean_within_three_standard_errors_of_daly_when_tau_divides_the_work(work, mtti, delta,
                                                                            restart):
    # With τ = Ts / n Daly's formula is the model's exact expectation.
    n = max(1, round(work / spot.daly_interval(delta, mtti)))
    tau = work / n
    result = simulate(inputs(work, mtti, delta, restart, interval=tau))
    daly = spot.expected_wall_hours(work, tau, delta, restart, mtti)
    assert exact_expected_wall_hours(work, tau, delta, restart, mtti) == pytest.approx(
        daly, rel=1e-9)
    assert abs(result.wall_hours.mean - daly) <= 3 * result.wall_hours.stderr


def test_notice_window_loses_no_work():
    i = inputs(200.0, 5.0, 0.25, 0.5, notice_window=True)
    result = simulate(i)
    exact = exact_expected_wall_hours(200.0, i.interval_hours, 0.25, 0.5, 5.0, True)
    assert abs(result.wall_hours.mean - exact) <= 3 * result.wall_hours.stderr
    assert result.wall_hours.mean < simulate(inputs(200.0, 5.0, 0.25, 0.5)).wall_hours.mean


def test_rare_interruptions_collapse_to_the_deterministic_run():
    i = inputs(work=300.0, mtti=1e12, interval=2.0)
    result = simulate(i)
    n, _ = segments_of(300.0, 2.0)
    deterministic = 300.0 + n * i.checkpoint_hours
    w = result.wall_hours
    assert (w.p10, w.p50, w.p90) == pytest.approx((deterministic,) * 3, rel=1e-12)
    assert w.stderr == pytest.approx(0.0, abs=1e-9)
    assert result.interruptions.mean == 0


def test_spread_shrinks_as_mtti_grows():
    spreads = []
    for mtti in (5.0, 50.0, 500.0, 5000.0):
        w = simulate(inputs(work=200.0, mtti=mtti, interval=2.0, replicas=4000)).wall_hours
        spreads.append((w.p90 - w.p10) / w.p50)
    assert spreads == sorted(spreads, reverse=True)
    assert spreads[-1] < 0.01 < spreads[0]


def test_cost_quantiles_are_the_billed_hours_times_the_flat_price():
    result = simulate(inputs(spot_price_per_node_hour=Decimal("17.63"), nodes=2,
                             unbilled_wait_hours=5 * MIN))
    assert result.cost is not None
    assert result.cost.p50 == (Decimal("17.63") * 2 * Decimal(repr(result.billed_hours.p50))
                               ).quantize(Decimal("0.01"))
    assert result.billed_hours.mean < result.wall_hours.mean  # the capacity waits are free


def test_price_path_integrates_the_steps():
    path = ((0.0, Decimal("10")), (5.0, Decimal("20")), (8.0, Decimal("4")))
    assert list(path_cost(path, np.array([0.0, 2.0, 5.0, 7.0, 10.0]))) == pytest.approx(
        [0.0, 20.0, 50.0, 90.0, 118.0])
    flat = simulate(inputs(spot_price_per_node_hour=Decimal("10")))
    falling = simulate(inputs(price_path=((0.0, Decimal("10")), (100.0, Decimal("5")))))
    assert falling.cost is not None and flat.cost is not None
    assert falling.cost.mean < flat.cost.mean


def test_deadline_probability_and_choice():
    i = inputs(spot_price_per_node_hour=Decimal("30"), deadline_hours=280.0)
    result = simulate(i, keep_completions=True)
    assert result.deadline_probability is not None
    assert 0.5 < result.deadline_probability < 1.0
    choice = choose_for_deadline(i, result, min_probability=0.99, on_demand_hours=250.0,
                                 on_demand_price_per_node_hour=Decimal("98"))
    assert choice.probability is not None and choice.probability >= 0.99
    assert choice.option in ("on-demand", "spot-then-on-demand")
    # A fallback that meets the deadline this often is cheaper than on-demand throughout.
    od = next(o for o in choice.options if o[0] == "on-demand")
    assert choice.expected_cost is not None and od[3] is not None
    assert choice.expected_cost <= od[3]
    # Asking less lets spot alone do it.
    easy = choose_for_deadline(i, result, min_probability=0.5, on_demand_hours=250.0,
                               on_demand_price_per_node_hour=Decimal("98"))
    assert easy.option == "spot"
    # On-demand itself cannot make it: nothing meets the deadline.
    tight = inputs(spot_price_per_node_hour=Decimal("30"), deadline_hours=240.0)
    none = choose_for_deadline(tight, simulate(tight, keep_completions=True),
                               min_probability=0.9, on_demand_hours=250.0,
                               on_demand_price_per_node_hour=Decimal("98"))
    assert none.option is None and "nothing meets the 240 h deadline" in none.reason


@pytest.mark.parametrize(("change", "message"), [
    ({"replicas": 0}, "--simulate takes 1 to"),
    ({"seed": -1}, "--seed must be 0 or more"),
    ({"work": 100.0, "mtti": 0.01, "delta": 0.5, "restart": 0.1, "interval": 10.0},
     "not expected to finish"),
])
def test_bad_input_is_one_line(change, message):
    kw = {"work": 100.0, "mtti": 24.0, **change}
    with pytest.raises(InvalidInput, match=message):
        simulate(inputs(**kw))


@settings(max_examples=20, deadline=None)
@given(work=st.floats(5.0, 500.0), mtti=st.floats(2.0, 500.0),
       delta_min=st.floats(0.5, 30.0), restart_min=st.floats(0.0, 60.0),
       seed=st.integers(0, 2**32 - 1))
def test_quantiles_ordered_and_deadline_probability_falls_as_it_tightens(
        work, mtti, delta_min, restart_min, seed):
    i = inputs(work, mtti, delta_min * MIN, restart_min * MIN, replicas=500, seed=seed)
    result = simulate(i)
    w = result.wall_hours
    assert w.p10 <= w.p50 <= w.p90
    assert w.p10 >= work  # never faster than the work itself
    probabilities = [float((result.wall <= d).mean())
                     for d in np.linspace(float(result.wall.max()), work, 8)]
    assert probabilities == sorted(probabilities, reverse=True)
    assert probabilities[0] == 1.0
    assert math.isfinite(w.stderr)
