"""The garbage collector's thresholds of the `gpu-tracker` command (tracker.cli.main.GC_THRESHOLDS)
against CPython's default (700, 10, 10), on a large store.

    python bench/gc_threshold.py --db URL [--rounds 3] [--week 2026-W48]

URL is a store such as bench/market_scale.py builds (`--reuse PATH` keeps one: 50,000 offers
and a year of history). Each question runs in a fresh process, as a user runs the command,
default and tuned alternating `--rounds` times in one sitting; prints the median CPU seconds
of each (the child's user + system time: steadier than wall time on a shared machine), their
ratio, and the peak RSS. The questions: `compare` (an 8B full fine-tune on 2B tokens, every
fitting GPU and count) and the weekly report of `--week`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sys
sys.path.insert(0, {root!r})
from tracker.cli.main import cli, tune_gc
if sys.argv[1] == "tuned":
    tune_gc()
cli(sys.argv[2:], prog_name="gpu-tracker")
"""


def run(mode: str, argv: list[str]) -> tuple[float, int]:
    """(CPU seconds, peak RSS MB) of one fresh process answering `argv` (its own rusage)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT)), mode, *argv],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    errors = child.stderr.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{mode} {' '.join(argv)} failed: {errors.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, metavar="URL")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--week", default="2026-W48")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="gc-threshold-"))
    questions = {
        "compare": ["--db", args.db, "compare", "--model", "llama-3.1-8b", "--workload",
                    "full-finetune", "--tokens", "2e9", "--format", "json"],
        "report weekly": ["--db", args.db, "report", "weekly", "--week", args.week,
                          "--out", str(out)],
    }
    print("| question | default (700, 10, 10) CPU | tuned CPU | ratio | peak RSS default / "
          "tuned |")
    print("|---|---|---|---|---|")
    for name, argv in questions.items():
        cpu: dict[str, list[float]] = {"default": [], "tuned": []}
        rss: dict[str, int] = {}
        for _ in range(args.rounds):
            for mode in ("default", "tuned"):
                seconds, peak = run(mode, argv)
                cpu[mode].append(seconds)
                rss[mode] = peak
        old, new = statistics.median(cpu["default"]), statistics.median(cpu["tuned"])
        print(f"| {name} | {old:.2f} s | {new:.2f} s | {new / old:.2f}x | "
              f"{rss['default']} / {rss['tuned']} MB |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
