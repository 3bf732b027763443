"""Ingest throughput and database size: the project's ingest path vs raw sqlite3.executemany.

10,000 offers x 100 refreshes (1,000,000 observations), 5% of prices changing per refresh,
into a fresh SQLite file through `tracker.store.ingest.ingest_records` (validation, GPU
canonicalization, span history, one transaction per refresh); then the same observations as
plain rows with `sqlite3.executemany` in one transaction. Both start from the same list of
`PriceObservation` objects (generating them is not timed); the raw path's time includes
turning them into tuples. Goal: throughput >= 0.5x raw, database size <= 0.2x raw.

    python bench/ingest.py [--offers 10000] [--refreshes 100] [--cold]

`--cold` makes ingest forget, before every refresh, its kept offer states and which sources
it has run (`tracker.store.ingest.forget_offer_states`), as a cron-started `gpu-tracker refresh`
(a new process each time) starts: it compares its listing with what the last run kept in the
store (`source_state`, tracker/store/ingest/kept_state.py), reads back only the offers that
may change, and as in a process's first run of a source keeps nothing in memory.

The ratios are of wall time; the CPU-time ratio printed after them is steadier on a shared
machine (other processes' load stretches wall time, not this one's CPU time) but leaves out
the time either path waits for the disk.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scrapers.base import PriceObservation
from tracker.store import ingest
from tracker.store.db import open_database

GPUS = [("H100", 80), ("A100", 40), ("A100", 80), ("L40S", 48), ("L4", 24), ("H200", 141),
        ("RTX 4090", 24), ("MI300X", 192)]
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1"]


def make_refreshes(offers: int, refreshes: int, seed: int = 7):
    rng = random.Random(seed)
    shapes = []
    for i in range(offers):
        gpu, memory = GPUS[i % len(GPUS)]
        count = (1, 2, 4, 8)[i % 4]
        shapes.append((f"provider{i % 10}", REGIONS[i % len(REGIONS)], f"type-{i}", gpu,
                       memory, count, "spot" if i % 3 == 0 else "on-demand"))
    prices = [Decimal(rng.randint(50, 3000)) / 100 * shape[5] for shape in shapes]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    batches = []
    for r in range(refreshes):
        t = start + timedelta(hours=r)
        if r:
            for i in rng.sample(range(offers), offers // 20):
                prices[i] = (prices[i] * Decimal(rng.choice(("0.97", "1.03")))).quantize(
                    Decimal("0.0001"))
        batches.append((t, [PriceObservation(
            provider=p, instance_type=it, gpu_name=g, gpu_count=c, category=cat,
            price_per_hour=prices[i], currency="USD", observed_at=t, region=reg,
            gpu_memory_gb=mem) for i, (p, reg, it, g, mem, c, cat) in enumerate(shapes)]))
    return batches


def db_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")
               if not p.name.endswith(".lock"))


def run_project(batches, path: Path, cold: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ingesting every refresh."""
    db = open_database(f"sqlite:///{path}")
    elapsed = cpu = 0.0
    for t, observations in batches:
        if cold:
            ingest.forget_offer_states()
        clock, cpu_clock = time.perf_counter(), time.process_time()
        summary = ingest.ingest_records(db, "bench", observations, started_at=t)
        elapsed += time.perf_counter() - clock
        cpu += time.process_time() - cpu_clock
        if summary.status != "ok":
            raise SystemExit(f"ingest failed: {summary.error}")
    db.close()
    return elapsed, cpu


def run_raw(batches, path: Path) -> tuple[float, float]:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE observation (provider TEXT, region TEXT, zone TEXT, instance_type TEXT, "
        "variant TEXT, category TEXT, gpu TEXT, gpu_count REAL, price TEXT, currency TEXT, "
        "observed_at TEXT)")
    clock, cpu_clock = time.perf_counter(), time.process_time()
    # Both paths start from the same observation objects, so turning them into plain rows
    # (price as exact text, time as ISO text) is part of the raw path's work too.
    rows = [(o.provider, o.region, o.zone, o.instance_type, o.variant, o.category, o.gpu_name,
             o.gpu_count, str(o.price_per_hour), o.currency, o.observed_at.isoformat())
            for _t, observations in batches for o in observations]
    with conn:
        conn.executemany("INSERT INTO observation VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    elapsed, cpu = time.perf_counter() - clock, time.process_time() - cpu_clock
    conn.close()
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=10_000)
    parser.add_argument("--refreshes", type=int, default=100)
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args()
    batches = make_refreshes(args.offers, args.refreshes)
    # A real refresh never holds a million observations at once; keep the pre-generated input
    # out of the garbage collector's scans so that neither path pays for the harness.
    gc.collect()
    gc.freeze()
    total = args.offers * args.refreshes
    with tempfile.TemporaryDirectory() as tmp:
        project_db, raw_db = Path(tmp) / "project.db", Path(tmp) / "raw.db"
        project_s, project_cpu = run_project(batches, project_db, args.cold)
        raw_s, raw_cpu = run_raw(batches, raw_db)
        project_size, raw_size = db_size(project_db), db_size(raw_db)
    project_rate, raw_rate = total / project_s, total / raw_s
    print(f"observations: {total:,} ({args.offers:,} offers x {args.refreshes} refreshes, "
          f"5% changing){' [cold state each refresh]' if args.cold else ''}")
    print(f"project ingest : {project_rate:12,.0f} obs/s  ({project_s:.2f} s)  "
          f"db {project_size / 1e6:8.1f} MB")
    print(f"raw executemany: {raw_rate:12,.0f} obs/s  ({raw_s:.2f} s)  "
          f"db {raw_size / 1e6:8.1f} MB")
    print(f"throughput ratio (project / raw): {project_rate / raw_rate:.2f}  (goal >= 0.5)")
    print(f"size ratio (project / raw):       {project_size / raw_size:.3f}  (goal <= 0.2)")
    print(f"by CPU time: project {project_cpu:.2f} s, raw {raw_cpu:.2f} s, "
          f"ratio {raw_cpu / project_cpu:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
