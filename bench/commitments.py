"""Benchmark: `plan commitments` over a year of hourly usage for 20 GPU classes x 10 regions,
planned and back-tested against a year of stored price history.

    python bench/commitments.py [--gpus 20] [--regions 10] [--days 365] [--keep]

1. Builds a SQLite store (in a temp dir, not timed) with, per GPU class and region, one
   8-GPU offer in each of on-demand, spot, reserved-1y and reserved-3y, repriced every week
   for a year (52 snapshots of 800 offers: 41,600 price spans).
2. Builds the usage (not timed): per line, a base of 4-12 GPUs all the time plus bursts of
   4-24 GPUs in business hours on weekdays, 8,760 hourly values per line (1.75M in all).
3. Times `tracker.market.commitments.commitment_plan` (36-month horizon, 30% interruptible
   on spot at the spot engine's overhead): the price query, the plan per line and the
   day-by-day back-test over the year of spans, with the whole document built. Goal: < 3 s.
4. The baseline, timed in the same process on the same store: reading the same spans alone
   (`tracker.store.queries.history` over the year), the floor any back-test pays. Printed: both
   times (best of --repeat) and their ratio.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GPUS = ["h100-sxm", "h100-pcie", "h100-nvl", "h200", "b200", "a100-80gb", "a100-40gb",
        "a100-80gb-pcie", "l40s", "l40", "l4", "a10g", "a10", "a40", "a30", "t4", "v100-32gb",
        "rtx-6000-ada", "rtx-a6000", "mi300x"]
START = datetime(2025, 11, 24, tzinfo=UTC)  # a Monday


def build_store(url: str, gpus: list[str], regions: int, days: int) -> None:
    from scrapers.base import PriceObservation
    from tracker.core.gpus import gpu_table
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    db = open_database(url)
    table = gpu_table()
    rng = random.Random(7)
    base = {(g, r): Decimal(rng.randint(100, 900)) / 100 for g in gpus for r in range(regions)}
    for week in range(days // 7 + 1):
        when = START + timedelta(days=7 * week)
        records = []
        for (gpu, region), price in base.items():
            drift = Decimal(1) - Decimal(week) / 400  # a slowly falling market
            per_gpu = {"on-demand": price * drift, "spot": price * drift * Decimal("0.35"),
                       "reserved-1y": price * Decimal("0.62"),
                       "reserved-3y": price * Decimal("0.45")}
            for category, value in per_gpu.items():
                records.append(PriceObservation(
                    provider="bench", instance_type=f"{gpu}-x8", gpu_name=table[gpu].name,
                    gpu_count=8, category=category,
                    price_per_hour=(value * 8).quantize(Decimal("0.0001")), currency="USD",
                    observed_at=when, region=f"region-{region}",
                    gpu_memory_gb=table[gpu].memory_gb))
        summary = ingest_records(db, "bench", records, started_at=when)
        assert summary.status == "ok", summary.error
    db.close()


def build_usage(gpus: list[str], regions: int, days: int):
    from tracker.market.commitments import Usage

    rng = random.Random(11)
    series = {}
    for gpu in gpus:
        for region in range(regions):
            floor, burst = rng.randint(4, 12), rng.randint(4, 24)
            values = []
            for hour in range(days * 24):
                when = START + timedelta(hours=hour)
                busy = when.weekday() < 5 and 8 <= when.hour < 19
                values.append(float(floor + (burst if busy and rng.random() < 0.8 else 0)))
            series[(gpu, f"region-{region}", "bench")] = values
    return Usage(START, series, "bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=20)
    parser.add_argument("--regions", type=int, default=10)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    from tracker.market.commitments import commitment_plan
    from tracker.store.db import open_database
    from tracker.store.queries import history

    gpus = GPUS[: args.gpus]
    tmp = Path(tempfile.mkdtemp(prefix="gpu-tracker-commitments-"))
    url = f"sqlite:///{tmp / 'bench.db'}"
    t0 = time.perf_counter()
    build_store(url, gpus, args.regions, args.days)
    usage = build_usage(gpus, args.regions, args.days)
    print(f"setup: {len(usage.series)} lines x {usage.hours} hours, store built in "
          f"{time.perf_counter() - t0:.1f} s (not timed)")
    db = open_database(url)
    as_of = START + timedelta(days=args.days)
    plan_times, base_times, plan_cpu = [], [], []
    document = None
    for _ in range(args.repeat):
        t = time.perf_counter()
        history(db, gpus, since=START, until=as_of)
        base_times.append(time.perf_counter() - t)
        t, c = time.perf_counter(), time.process_time()
        document = commitment_plan(db, usage, horizon_months=36, as_of=as_of,
                                   interruptible_share=0.3, checkpoint_hours=5 / 60,
                                   restart_hours=10 / 60, mtti_for=lambda _p: 24.0)
        plan_times.append(time.perf_counter() - t)
        plan_cpu.append(time.process_time() - c)
    db.close()
    assert document is not None
    plan, base = min(plan_times), min(base_times)
    bt = document["backtest"]
    print(f"plan + back-test: {plan:.2f} s wall, {min(plan_cpu):.2f} s CPU (goal < 3 s: "
          f"{'met' if plan < 3 else 'NOT met'}); "
          f"{len(document['lines'])} lines, {len(bt['days'])} line-days back-tested")
    print(f"baseline (store.history of the same year alone): {base:.2f} s; "
          f"ratio {plan / base:.2f}x")
    print(f"monthly plan {document['totals']['plan']} vs all on-demand "
          f"{document['totals']['all_on_demand']} USD; back-test plan {bt['plan_cost']} vs "
          f"{bt['all_on_demand_cost']}")
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
