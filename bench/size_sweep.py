"""Sizing sweep benchmark: every preset × workload × context × GPU, 100,000 queries.

    python bench/size_sweep.py [--queries 100000]

Prints queries per second against the 20,000/s goal (README, Development: benchmarks), so
the weekly report and a sweep over all offers never wait on sizing. Each query is built and
sized from scratch
(`SizingRequest(...)` then `size_workload`), with `tokens` set so the time model runs too;
the engine's own memo of the GPU-independent part is warm after the first pass over a model
and workload, as it is in `compare`.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.sizing import SizingRequest, model_presets, size_workload

GOAL = 20_000
GPUS = ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "b200", "a100-40gb", "a100-80gb",
        "a100-80gb-pcie", "l40s", "l4", "rtx-4090", "rtx-6000-ada", "rtx-a6000", "mi300x",
        "gaudi3")
WORKLOADS = ("inference", "pretrain", "full-finetune", "lora", "qlora")


def contexts(n: int) -> list[int]:
    """n context lengths spread geometrically from 256 to 131,072 tokens."""
    return [int(256 * (512 ** (i / (n - 1)))) for i in range(n)]


def build_queries(total: int) -> list[SizingRequest]:
    presets = model_presets()
    per_context = len(presets) * len(WORKLOADS) * len(GPUS)
    ctx = contexts(max(2, -(-total // per_context)))
    queries = []
    for model, workload, context, gpu in itertools.product(presets, WORKLOADS, ctx, GPUS):
        length = min(context, model.max_context or context)
        training = workload != "inference"
        queries.append(SizingRequest(
            model=model.id, workload=workload, gpu=gpu, context=None if training else length,
            seq_len=length if training else None, concurrency=1 if training else 8,
            recompute="full" if training else "none",
            sharding="zero3" if workload in ("pretrain", "full-finetune") else "none",
            tokens=1e9 if training else 1e7,
        ))
        if len(queries) == total:
            break
    return queries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    args = parser.parse_args()
    queries = build_queries(args.queries)
    fields = [{f: getattr(q, f) for f in ("model", "workload", "gpu", "context", "seq_len",
                                           "concurrency", "recompute", "sharding", "tokens")}
              for q in queries]
    fitting = 0
    start = time.perf_counter()
    for f in fields:
        result = size_workload(SizingRequest(**f))
        fitting += result.gpus_needed is not None
    elapsed = time.perf_counter() - start
    rate = len(fields) / elapsed
    print(f"{len(fields):,} sizing queries ({len(model_presets())} presets × {len(WORKLOADS)} "
          f"workloads × contexts × {len(GPUS)} GPUs) in {elapsed:.2f} s")
    print(f"{rate:,.0f} queries/s (goal {GOAL:,}/s): {'OK' if rate >= GOAL else 'BELOW GOAL'}")
    print(f"{fitting:,} queries have a fitting plan")
    return 0 if rate >= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
