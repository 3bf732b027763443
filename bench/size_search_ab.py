"""The sizing sweep's queries against an earlier revision, alternated in one sitting.

    python bench/size_search_ab.py [--baseline REV] [--queries 30000] [--rounds 3] [--fixed]

Extracts REV's tree (git archive; default 520ba82, before the fixed path kept a job's
smallest plan) into a temporary folder and times bench/size_sweep.py's searched-plan queries
(`--fixed`: its fixed-plan ones; `SizingRequest(...)` then `size_workload`, memos cold as in
the sweep) in a fresh Python process per run, old and new alternating `rounds` times, each
importing its own tree. Prints CPU seconds per run (time.process_time: the machine is shared,
so wall time moves with its load; wall time beside it) and new / old queries per CPU second
(medians). The two trees' answers are compared by bench/size_equivalence.py, not here.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "520ba82"

# Run in the child with the tree to time first on sys.path.
CHILD = """
import sys, time, json
sys.path[:0] = [{tree!r}, {tree!r} + "/bench"]
from size_sweep import build_queries
import tracker
assert tracker.__file__.startswith({tree!r}), tracker.__file__
from tracker.sizing import SizingRequest, size_workload
fields = build_queries(100_000, {searched})[:{queries}]
cpu, wall = time.process_time(), time.perf_counter()
for f in fields:
    size_workload(SizingRequest(**f))
print(json.dumps([time.process_time() - cpu, time.perf_counter() - wall]))
"""


def timed(tree: Path, queries: int, searched: bool) -> tuple[float, float]:
    child = CHILD.format(tree=str(tree), queries=queries, searched=searched)
    out = subprocess.run([sys.executable, "-c", child], check=True, capture_output=True,
                         text=True).stdout
    cpu, wall = json.loads(out)
    return cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--queries", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixed", action="store_true", help="the fixed-plan queries instead")
    args = parser.parse_args()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline],
                             check=True, capture_output=True).stdout
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    kind = "fixed-plan" if args.fixed else "searched-plan"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        trees = {"old": Path(tmp), "new": ROOT}
        for i in range(args.rounds):
            # Alternate which goes first, so a drift in the machine's load favours neither.
            for label in (("old", "new") if i % 2 == 0 else ("new", "old")):
                c, w = timed(trees[label], args.queries, not args.fixed)
                cpu[label].append(c)
                name = args.baseline if label == "old" else "this tree"
                print(f"round {i + 1} {label} ({name}): {args.queries:,} {kind} "
                      f"queries, {c:.2f} s CPU ({args.queries / c:,.0f}/s), {w:.2f} s wall "
                      f"({args.queries / w:,.0f}/s)")
    old, new = statistics.median(cpu["old"]), statistics.median(cpu["new"])
    print(f"median CPU: old {args.queries / old:,.0f}/s, new {args.queries / new:,.0f}/s; "
          f"new / old {old / new:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
