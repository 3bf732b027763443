"""The weekly report on a reused store against an earlier revision, alternated in one sitting.

    python bench/report_ab.py STORE [--baseline REV] [--rounds 3] [--week 2026-W48]

STORE is a SQLite file or a database URL holding a store, e.g. the one
`python bench/market_scale.py --reuse /tmp/market.db --skip questions --skip report
--skip refresh` builds (50,000 offers, a year of history), or its PostgreSQL database.
Extracts REV's tree (git archive) into a temporary folder and builds the report
(`reports.build_and_archive`, as `gpu-tracker report weekly` does, with the default
workloads) for the newest finished week of the store (or `--week`) in a fresh Python process
per run, old and new alternating `rounds` times, each importing its own tree. Prints each
run's CPU seconds (time.process_time, with the CPU of the report's forked children: the
machine is shared, so wall time moves with its load), wall seconds and peak RSS (the largest
forked child's beside it), then the medians and new / old, and whether the two trees
wrote the same JSON, CSV and HTML bytes.
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
BASELINE = "4cd463b"  # main before issue #26's report work on the 50,000-offer store

# Run in the child with the tree to time first on sys.path.
CHILD = """
import json, resource, sys, time
from datetime import UTC, datetime, timedelta
sys.path[:0] = [{tree!r}]
import reports
assert reports.__file__.startswith({tree!r}), reports.__file__
from tracker.config.schema import Config
from tracker.store.db import open_database
from tracker.store.queries import latest_observation

db = open_database({url!r}, upgrade=False)
week = {week!r}
latest = latest_observation(db)
if not week:
    monday = datetime.combine(latest.date() - timedelta(days=latest.weekday()),
                              datetime.min.time(), tzinfo=UTC)
    end = monday if latest - monday >= timedelta(days=1) else monday - timedelta(days=7)
    iso = (end - timedelta(days=1)).isocalendar()
    week = f"{{iso.year}}-W{{iso.week:02d}}"
config = Config.from_data({{"report": {{"out_dir": {out!r}}},
                           "refresh": {{"stale_after_hours": 48.0}}}})
def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
cpu, wall = time.process_time() + children_cpu(), time.perf_counter()
built = reports.build_and_archive(db, config, week=week, as_of=latest + timedelta(days=8))
# The CPU of the report's forked children (reports.background) counts too.
cpu = time.process_time() + children_cpu() - cpu
wall = time.perf_counter() - wall
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
db.close()
print(json.dumps({{"cpu": cpu, "wall": wall, "rss_mb": rss, "child_rss_mb": child_rss,
                  "week": built.week, "sha256": built.sha256}}))
"""


def timed(tree: Path, url: str, week: str | None, out: Path) -> dict:
    child = CHILD.format(tree=str(tree), url=url, week=week or "", out=str(out))
    run = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"the report build in {tree} failed:\n{run.stderr}")
    result: dict = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="SQLite file or database URL holding the store")
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--week", help="the week to report (default: the newest finished)")
    args = parser.parse_args()
    url = args.store if "://" in args.store else f"sqlite:///{Path(args.store).resolve()}"
    if "://" not in args.store and not Path(args.store).exists():
        raise SystemExit(f"{args.store} does not exist: build it with bench/market_scale.py "
                         "--reuse PATH --skip questions --skip report --skip refresh")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline],
                             check=True, capture_output=True).stdout
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "tree"
        old_tree.mkdir()
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(old_tree, filter="data")
        trees = {"old": old_tree, "new": ROOT}
        for i in range(args.rounds):
            # Alternate which goes first, so a drift in the machine's load favours neither.
            for label in (("old", "new") if i % 2 == 0 else ("new", "old")):
                run = timed(trees[label], url, args.week, Path(tmp) / f"out-{label}")
                runs[label].append(run)
                name = args.baseline if label == "old" else "this tree"
                print(f"round {i + 1} {label} ({name}): report {run['week']}, "
                      f"{run['cpu']:.2f} s CPU, {run['wall']:.2f} s wall, "
                      f"{run['rss_mb']:.0f} MB peak RSS"
                      + (f" (+ {run['child_rss_mb']:.0f} MB in its largest child)"
                         if run.get("child_rss_mb") else ""), flush=True)
    median = {label: {key: statistics.median(r[key] for r in runs[label])
                      for key in ("cpu", "wall", "rss_mb")} for label in runs}
    old, new = median["old"], median["new"]
    print(f"median: old {old['cpu']:.2f} s CPU, {old['wall']:.2f} s wall, "
          f"{old['rss_mb']:.0f} MB; new {new['cpu']:.2f} s CPU, {new['wall']:.2f} s wall, "
          f"{new['rss_mb']:.0f} MB; new / old CPU {new['cpu'] / old['cpu']:.2f}x, "
          f"wall {new['wall'] / old['wall']:.2f}x")
    hashes = {label: runs[label][-1]["sha256"] for label in runs}
    same = [kind for kind in sorted(hashes["new"]) if hashes["new"][kind] == hashes["old"][kind]]
    differ = [kind for kind in sorted(hashes["new"]) if kind not in same]
    print(f"same bytes: {', '.join(same) or 'none'}; different: {', '.join(differ) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
