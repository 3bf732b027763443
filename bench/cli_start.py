"""Cold start of `gpu-tracker breakeven ... --format json` against `python -c "import click"`.

Each command runs as a fresh process RUNS times (after one warm-up for the file cache);
the ratio of the medians is printed. Goal: at most 4x, i.e. the economics commands import
nothing heavy (pandas, SQLAlchemy, numpy, the scrapers) when prices are given.

By default the subprocesses get a bytecode cache in a temporary PYTHONPYCACHEPREFIX (as an
installed package has), even when PYTHONDONTWRITEBYTECODE is set in the environment;
`--no-bytecode-cache` measures with the environment as it is (every module compiled on
every start when bytecode writing is off).

    python bench/cli_start.py [--runs 20] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BREAKEVEN = [
    "breakeven", "--capex", "300000", "--power-kw", "10.2", "--cloud-price-per-hour", "55.04",
    "--utilization", "0.7", "--horizon-months", "36", "--format", "json",
]
GOAL = 4.0


def timed(argv: list[str], runs: int, env: dict[str, str]) -> list[float]:
    # Warm-up: the file cache, and the bytecode cache when there is one.
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, env=env)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="keep the environment's bytecode settings as they are")
    args = parser.parse_args()
    python = sys.executable
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="gt-bench-pycache-") as cache:
        if not args.no_bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = cache
        baseline = timed([python, "-c", "import click"], args.runs, env)
        command = timed([python, "-m", "tracker", *BREAKEVEN], args.runs, env)
    mode = "environment as is" if args.no_bytecode_cache else "bytecode cached"
    print(f"({mode}; {python})")
    base_median = statistics.median(baseline)
    command_median = statistics.median(command)
    ratio = command_median / base_median
    print(f"python -c 'import click'        median {base_median * 1000:7.1f} ms "
          f"(min {min(baseline) * 1000:.1f}, {args.runs} runs)")
    print(f"gpu-tracker breakeven --json    median {command_median * 1000:7.1f} ms "
          f"(min {min(command) * 1000:.1f}, {args.runs} runs)")
    verdict = "ok" if ratio <= GOAL else "over the goal"
    print(f"ratio of medians {ratio:.2f}x (goal <= {GOAL:g}x): {verdict}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
