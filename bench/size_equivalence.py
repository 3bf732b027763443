"""Sizing equivalence check: every figure the sweep's queries print, dumped to JSON and compared.

    python bench/size_equivalence.py --save /tmp/sizing-baseline.json   # on the reference code
    python bench/size_equivalence.py --check /tmp/sizing-baseline.json  # after a change

Runs bench/size_sweep.py's queries (fixed and searched plans, 20,000 of each by default) plus a
set of searched queries that reach the paths the sweep does not (a given GPU count, eager
attention with selective recompute, fixed sharding or micro-batch, offload, fp8, a given global
batch), and records each result's `to_json()` (memory by part, the plan and layout, step-derived
time, MFU, runners-up, warnings) or the error it raised. `--check` reports every difference; a
float may differ by at most 1e-9 relative (summation order), anything else must be identical.
Not part of the test suite (it takes a minute or two).

`--installed` runs the package as pip installed it instead of this tree's sources, and with
`--require-compiled` fails unless its sizing modules are compiled: .ci/run saves the sources'
answers and checks the compiled build's against them (setup.py).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

# Before any import of the package: this tree's sources first, unless `--installed`.
if "--installed" not in sys.argv:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from size_sweep import GPUS, build_queries, engine_build

from tracker.core.errors import TrackerError
from tracker.sizing import SizingRequest, compiled, size_workload

RELATIVE_TOLERANCE = 1e-9


def extra_queries() -> list[dict]:
    """Searched queries off the sweep's path: counts, eager attention, fixed choices, offload."""
    models = ("llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "mixtral-8x7b", "qwen2.5-72b")
    variants: list[dict[str, Any]] = [
        {}, {"count": 8}, {"count": 64}, {"count": 3}, {"attention": "eager"},
        {"sharding": "zero1"}, {"micro_batch": 2}, {"recompute": "selective"},
        {"offload": "optimizer"}, {"offload": "all"}, {"precision": "fp8"},
        {"global_batch_tokens": 2**18}, {"gpus_per_node": 4, "count": 16},
        {"tensor_parallel": 2}, {"pipeline_parallel": 2}, {"virtual_stages": 2},
        {"cluster_gbps": 400.0}, {"tokens": None},
    ]
    out = []
    for model, workload, seq, gpu, extra in itertools.product(
            models, ("pretrain", "full-finetune", "lora", "qlora"), (2048, 8192),
            ("h100-sxm", "a100-40gb", "l4", "mi300x", "gaudi3"), variants):
        query = dict(model=model, workload=workload, gpu=gpu, seq_len=seq, tokens=1e9)
        query.update(extra)
        out.append(query)
    return out


def all_queries(n: int) -> list[dict]:
    return build_queries(n, False) + build_queries(n, True) + extra_queries()


def dump(queries: list[dict]) -> list[Any]:
    out: list[Any] = []
    for fields in queries:
        try:
            out.append(size_workload(SizingRequest(**fields)).to_json())
        except TrackerError as exc:
            out.append({"error": type(exc).__name__, "message": str(exc)})
    return out


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    if isinstance(old, float) and isinstance(new, float):
        if old == new or (math.isnan(old) and math.isnan(new)):
            return []
        scale = max(abs(old), abs(new))
        if abs(old - new) <= RELATIVE_TOLERANCE * scale:
            return []
        return [f"{where}: {old!r} -> {new!r}"]
    if type(old) is not type(new):
        return [f"{where}: {old!r} -> {new!r}"]
    if isinstance(old, dict):
        if list(old) != list(new):
            return [f"{where}: keys {list(old)} -> {list(new)}"]
        return [d for key in old for d in differences(old[key], new[key], f"{where}.{key}")]
    if isinstance(old, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items -> {len(new)}"]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in differences(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {old!r} -> {new!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=20_000,
                        help="sweep queries of each kind (fixed, searched)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--check", type=Path)
    parser.add_argument("--installed", action="store_true",
                        help="run the installed package, not this tree's sources")
    parser.add_argument("--require-compiled", action="store_true",
                        help="fail unless the sizing modules run compiled (with --installed)")
    args = parser.parse_args()
    print(engine_build())
    if args.require_compiled and not compiled():
        print("the sizing modules are not compiled (see setup.py)")
        return 1
    queries = all_queries(args.queries)
    results = dump(queries)
    if args.save:
        args.save.write_text(json.dumps({"queries": queries, "results": results}))
        print(f"saved {len(results):,} results to {args.save} ({len(GPUS)} GPUs in the sweep)")
        return 0
    saved = json.loads(args.check.read_text())
    if saved["queries"] != json.loads(json.dumps(queries)):
        print("the query list differs from the saved one; regenerate the baseline")
        return 2
    # Round-trip the new results through JSON so both sides have the same types.
    fresh = json.loads(json.dumps(results))
    found = []
    for i, (old, new) in enumerate(zip(saved["results"], fresh, strict=True)):
        for d in differences(old, new, f"#{i}"):
            found.append(f"{d}   query {queries[i]}")
    for line in found[:40]:
        print(line)
    print(f"{len(fresh):,} results compared: {len(found)} differences")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
