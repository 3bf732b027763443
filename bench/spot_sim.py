"""10,000 replicas of a 2,000-GPU-hour spot run against one Daly evaluation, in one process.

The run: 8 x H100 on one node for 250 hours (2,000 GPU-hours), node MTTI 24 h, 5-minute
checkpoints, 10-minute restarts, at Daly's interval, priced at AWS p5.48xlarge spot
($17.63/h, data/prices/) with a 225-hour deadline. The baseline is `plan_spot` (Daly's
interval and expected wall time, one call); the figure is the simulation's wall time (the
median of --repeat runs, after one warm-up that imports numpy) and its ratio to the baseline.
Goal: the 10,000 replicas in under 0.5 s.

    python bench/spot_sim.py [--replicas 10000] [--repeat 5] [--choice]
"""

from __future__ import annotations

import argparse
import statistics
import time
from decimal import Decimal

GOAL_SECONDS = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--choice", action="store_true",
                        help="also time the --min-probability deadline choice")
    args = parser.parse_args()

    from tracker.economics.spot import SpotInputs, plan_spot
    from tracker.economics.spot_simulation import (
        SimulationInputs,
        choose_for_deadline,
        simulate,
    )

    spot_inputs = SpotInputs(work_hours=250.0, mtti_node_hours=24.0, checkpoint_hours=5 / 60,
                             restart_hours=10 / 60, spot_price_per_node_hour=Decimal("17.63"),
                             on_demand_price_per_node_hour=Decimal("55.04"),
                             deadline_hours=225.0 * 1.25)
    daly_times = []
    for _ in range(max(args.repeat, 1) * 20):
        start = time.perf_counter()
        plan = plan_spot(spot_inputs)
        daly_times.append(time.perf_counter() - start)
    daly = statistics.median(daly_times)

    inputs = SimulationInputs(
        work_hours=250.0, interval_hours=plan.checkpoint_interval_hours,
        checkpoint_hours=5 / 60, restart_hours=10 / 60, mtti_job_hours=plan.mtti_job_hours,
        replicas=args.replicas, seed=0, spot_price_per_node_hour=Decimal("17.63"),
        deadline_hours=spot_inputs.deadline_hours)
    simulate(inputs)  # warm-up: numpy's import and first allocations
    times = []
    result = None
    for _ in range(max(args.repeat, 1)):
        start = time.perf_counter()
        result = simulate(inputs, keep_completions=args.choice)
        if args.choice:
            choose_for_deadline(inputs, result, min_probability=0.95,
                                on_demand_hours=250.0,
                                on_demand_price_per_node_hour=Decimal("55.04"))
        times.append(time.perf_counter() - start)
    assert result is not None
    seconds = statistics.median(times)
    w = result.wall_hours
    print(f"{args.replicas:,} replicas, {result.segments} segments each: "
          f"{seconds:.3f} s (median of {len(times)}; min {min(times):.3f}, max "
          f"{max(times):.3f}){' with the deadline choice' if args.choice else ''}")
    print(f"one Daly evaluation (plan_spot): {daly * 1e6:.1f} us; ratio {seconds / daly:,.0f}x")
    print(f"wall hours P10/P50/P90 {w.p10:.1f}/{w.p50:.1f}/{w.p90:.1f}, mean {w.mean:.2f} "
          f"± {w.stderr:.3f} against Daly's {plan.expected_wall_hours:.2f} "
          f"({(w.mean / plan.expected_wall_hours - 1) * 100:+.3f}%)")
    print(f"goal < {GOAL_SECONDS} s: {'met' if seconds < GOAL_SECONDS else 'NOT met'}")


if __name__ == "__main__":
    main()
