"""Sizing sweep benchmark: every preset × workload × context × GPU class, fixed and searched plans.

    python bench/size_sweep.py [--queries 100000] [--no-compare] [--installed]

Prints queries per second for the same sweep twice, against the 20,000/s goal (issues 4, 11):
with a fixed plan (`plan="smallest"`, micro-batch, recompute and sharding given, the baseline)
and with the planner's search on (training queries leave micro-batch, recompute and ZeRO stage
to the fastest-plan search over TP × PP × DP). Each query is built and sized from scratch
(`SizingRequest(...)` then `size_workload`), with `tokens` set so the time model runs too;
the engine's memo of the GPU-independent part is warm after the first pass over a model and
workload, as it is in `compare`. First it times `compare` over the bundled price store (goal
< 1 s), with the memos cold.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

# Before any import of the package: this tree's sources first, unless `--installed`.
if "--installed" not in sys.argv:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracker.core.gpus import gpu_table, missing_figures
from tracker.sizing import SizingRequest, compiled, model_presets, size_workload

GOAL = 20_000
# Every GPU class with the figures sizing needs (data/gpus.json: all of them), not a chosen few:
# the sweep crosses consumer cards, NVL72 parts and AMD alike.
GPUS = tuple(g.id for g in gpu_table().values() if not missing_figures(g))
WORKLOADS = ("inference", "pretrain", "full-finetune", "lora", "qlora")


def contexts(n: int) -> list[int]:
    """n context lengths spread geometrically from 256 to 131,072 tokens."""
    return [int(256 * (512 ** (i / (n - 1)))) for i in range(n)]


def engine_build() -> str:
    """Which sizing engine this process runs, and from where (the tree or an install)."""
    build = "compiled (mypyc)" if compiled() else "pure Python"
    return f"sizing engine: {build}, from {Path(sys.modules['tracker'].__file__ or '').parent}"


def build_queries(total: int, searched: bool) -> list[dict]:
    presets = model_presets()
    per_context = len(presets) * len(WORKLOADS) * len(GPUS)
    ctx = contexts(max(2, -(-total // per_context)))
    queries = []
    for model, workload, context, gpu in itertools.product(presets, WORKLOADS, ctx, GPUS):
        length = min(context, model.max_context or context)
        training = workload != "inference"
        query = dict(model=model.id, workload=workload, gpu=gpu,
                     context=None if training else length, seq_len=length if training else None,
                     concurrency=1 if training else 8, tokens=1e9 if training else 1e7)
        if not searched:
            query.update(plan="smallest", micro_batch=1,
                         recompute="full" if training else "none",
                         sharding="zero3" if workload in ("pretrain", "full-finetune")
                         else "none")
        queries.append(query)
        if len(queries) == total:
            break
    return queries


def sweep(fields: list[dict]) -> tuple[float, float, int]:
    fitting = 0
    start = time.perf_counter()
    for f in fields:
        result = size_workload(SizingRequest(**f))
        fitting += result.gpus_needed is not None
    elapsed = time.perf_counter() - start
    return elapsed, len(fields) / elapsed, fitting


def time_compare() -> float:
    """Seconds for `compare` (8B full fine-tune, 2e9 tokens) over the bundled prices."""
    import tempfile

    from tracker.answers import pricing
    from tracker.collect.refresh import refresh_sources
    from tracker.economics import defaults as econ_defaults
    from tracker.store.db import open_database

    with tempfile.TemporaryDirectory() as tmp:
        db = open_database(f"sqlite:///{tmp}/bench.db")
        config = _config()
        refresh_sources(db, config, ["bundled"], environ={})
        settings = econ_defaults.EconomicsSettings(config.economics_values())
        workload = {"model": "llama-3.1-8b", "workload": "full-finetune", "tokens": 2e9}
        start = time.perf_counter()
        rows, _skipped = pricing.compare_runs(db, workload=workload, billing=settings.billing,
                                              max_gpus=64, as_of=None, currency="USD")
        elapsed = time.perf_counter() - start
        db.close()
    print(f"compare over the bundled store (cold): {len(rows)} options in {elapsed:.3f} s "
          f"(goal < 1 s): {'OK' if elapsed < 1 else 'ABOVE GOAL'}")
    return elapsed


def _config():
    from tracker.config.schema import load_config

    # The config layer carries the [economics] defaults itself (tracker.config.schema).
    return load_config(environ={})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--no-compare", action="store_true")
    parser.add_argument("--installed", action="store_true",
                        help="time the installed package, not this tree's sources")
    args = parser.parse_args()
    print(engine_build())
    ok = True
    if not args.no_compare:
        ok = time_compare() < 1  # first, with the engine's memos cold
    rates = {}
    for label, searched in (("fixed plan (baseline)", False), ("searched plan", True)):
        fields = build_queries(args.queries, searched)
        elapsed, rate, fitting = sweep(fields)
        rates[searched] = rate
        print(f"{label}: {len(fields):,} sizing queries ({len(model_presets())} presets × "
              f"{len(WORKLOADS)} workloads × contexts × {len(GPUS)} GPUs) in {elapsed:.2f} s, "
              f"{rate:,.0f} queries/s (goal {GOAL:,}/s): "
              f"{'OK' if rate >= GOAL else 'BELOW GOAL'}; {fitting:,} have a fitting plan")
        # The mixture-of-experts presets' share of the same queries, timed apart (their
        # memos are as warm as in the sweep above).
        moe = {m.id for m in model_presets() if m.is_moe}
        moe_fields = [f for f in fields if f["model"] in moe]
        if moe_fields:
            m_elapsed, m_rate, m_fitting = sweep(moe_fields)
            print(f"  MoE presets only ({len(moe)} of {len(model_presets())}): "
                  f"{len(moe_fields):,} queries in {m_elapsed:.2f} s, {m_rate:,.0f} queries/s; "
                  f"{m_fitting:,} have a fitting plan")
    print(f"searched / fixed: {rates[True] / rates[False]:.2f}x")
    ok = ok and min(rates.values()) >= GOAL
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
