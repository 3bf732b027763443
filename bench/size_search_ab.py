"""The sizing sweep's queries against an earlier revision, alternated in one sitting.

    python bench/size_search_ab.py [--baseline REV] [--queries 30000] [--rounds 3] [--fixed]

Extracts REV's tree (git archive; default 4cd463b, main before the links were memoised with
their JSON and step_parts lost its calls) into a temporary folder and times
bench/size_sweep.py's searched-plan queries (`--fixed`: its fixed-plan ones;
`SizingRequest(...)` then `size_workload`, memos cold as in the sweep) in a fresh Python
process per run, old and new alternating `rounds` times, each importing its own tree. Prints
CPU seconds per run (time.process_time: the machine is shared, so wall time moves with its
load; wall time beside it) and new / old queries per CPU second
(medians). The two trees' answers are compared by bench/size_equivalence.py, not here.

`--instructions`: instead, each tree once under valgrind's callgrind, with the queries and
with none (start-up, subtracted): instructions per query, which the machine's load does not
move (when it moves CPU seconds by more than the change, as at a load average of 10+ on two
cores). A proxy for time, not time: it does not see cache misses.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "4cd463b"

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


def instructions(tree: Path, queries: int, searched: bool) -> int:
    """Instructions the child executes (callgrind's "I refs")."""
    child = CHILD.format(tree=str(tree), queries=queries, searched=searched)
    err = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", child], check=True, capture_output=True,
                         text=True).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", err)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{err[-2000:]}")
    return int(found.group(1).replace(",", ""))


def count_instructions(trees: dict[str, Path], queries: int, searched: bool,
                       baseline: str) -> None:
    per_query = {}
    for label, tree in trees.items():
        total = instructions(tree, queries, searched) - instructions(tree, 0, searched)
        per_query[label] = total / queries
        name = baseline if label == "old" else "this tree"
        print(f"{label} ({name}): {queries:,} {'searched' if searched else 'fixed'}-plan "
              f"queries, {total / 1e6:,.0f}M instructions ({per_query[label]:,.0f} per query)")
    print(f"instructions per query new / old: {per_query['new'] / per_query['old']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--queries", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixed", action="store_true", help="the fixed-plan queries instead")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind (callgrind) instead of timing")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline],
                             check=True, capture_output=True).stdout
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    kind = "fixed-plan" if args.fixed else "searched-plan"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        trees = {"old": Path(tmp), "new": ROOT}
        if args.instructions:
            count_instructions(trees, args.queries, not args.fixed, args.baseline)
            return 0
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
