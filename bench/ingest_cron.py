"""A cron-started refresh: one cold refresh per new interpreter, against raw executemany.

bench/ingest.py runs 100 refreshes in one process and freezes its pre-generated input out
of the garbage collector. A cron refresh is a new process with nothing cached: this runs
each refresh in its own interpreter, against a copy of one database that already holds 10
cron-run refreshes of bench/ingest.py's data (10,000 offers), and in that same process inserts the
same 10,000 rows with raw `sqlite3.executemany` into a new file (one transaction), with
the garbage collector off as ingest turns it off for its own write (so that raw is not
charged for collecting what the project allocated). Each child prints both CPU times; the
ratio of the medians is printed at the end.

    python bench/ingest_cron.py [--runs 9] [--offers 10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One child: the project's refresh first (the process as cron starts it), then raw's rows.
CHILD = r"""
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/bench")
import ingest as bench
from tracker.store import ingest
from tracker.store.db import open_database
t, observations = bench.make_refreshes(int(sys.argv[3]), 12)[10]
db = open_database(f"sqlite:///{sys.argv[2]}")
clock = time.process_time()
summary = ingest.ingest_records(db, "bench", observations, started_at=t)
project = time.process_time() - clock
db.close()
assert summary.status == "ok", summary.error
import gc
gc.disable()  # raw gets the collector pause that ingest gives itself: the same work, no GC
_wall, raw_cpu = bench.run_raw([(t, observations)], Path(sys.argv[2]).with_name("raw.db"))
print(project, raw_cpu)
"""


def prepare(directory: Path, offers: int) -> Path:
    """A database holding refreshes 0-9 of bench/ingest.py's data, built once, each run as
    cron runs it (no state kept in memory: what each run keeps for the next is stored,
    tracker/store/ingest/kept_state.py)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    import ingest as bench

    from tracker.store import ingest
    from tracker.store.db import open_database

    path = directory / "seed.db"
    db = open_database(f"sqlite:///{path}")
    for t, observations in bench.make_refreshes(offers, 12)[:10]:
        ingest.forget_offer_states()
        ingest.ingest_records(db, "bench", observations, started_at=t)
    db.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--offers", type=int, default=10_000)
    args = parser.parse_args()
    project, raw = [], []
    with tempfile.TemporaryDirectory() as tmp:
        seed = prepare(Path(tmp), args.offers)
        for _ in range(args.runs):
            run = Path(tmp) / "run"
            shutil.rmtree(run, ignore_errors=True)
            run.mkdir()
            shutil.copy(seed, run / "project.db")
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(ROOT), str(run / "project.db"),
                 str(args.offers)], capture_output=True, text=True, check=True,
                env={**os.environ, "PYTHONHASHSEED": "0"})
            project_cpu, raw_cpu = map(float, out.stdout.split())
            project.append(project_cpu)
            raw.append(raw_cpu)
    p, r = statistics.median(project), statistics.median(raw)
    print(f"one cold refresh of {args.offers:,} offers (5% changing) per new process, "
          f"{args.runs} runs")
    print(f"project ingest  CPU median {p * 1000:7.1f} ms  "
          f"({', '.join(f'{v * 1000:.0f}' for v in project)})")
    print(f"raw executemany CPU median {r * 1000:7.1f} ms  "
          f"({', '.join(f'{v * 1000:.0f}' for v in raw)})")
    print(f"throughput ratio (project / raw, by CPU medians): {r / p:.2f}")


if __name__ == "__main__":
    main()
