"""Serving sweep: `compare -w inference` with a service level over 5,000 offers, 20 providers.

    python bench/serve_sweep.py [--offers 5000] [--model llama-3.1-70b] [--keep]

Builds a SQLite store (one ingest per provider, through `tracker.store.ingest.ingest_records`) of
offers shaped like the real catalogs: every GPU class of the GPU table that has compute and
bandwidth specs, instances of 1, 2, 4 and 8 GPUs, on-demand everywhere, spot or bids where
the provider kind has them, several regions. Then, in this one process, times
`gpu-tracker compare -w inference --max-tpot-ms 50 ...` (every GPU, count, TP plan and
concurrency searched) against the baseline `gpu-tracker prices --cheapest` on the same store,
both through the CLI. Goal (issue 12): compare under 2 s. Also run `bench/size_sweep.py`
(goal: still at or above 20,000 queries/s).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_SECONDS = 2.0
WHEN = datetime(2026, 11, 30, tzinfo=UTC)
KINDS = {  # provider kind -> (categories, regions per provider)
    "hyperscaler": (("on-demand", "spot"), 4),
    "neocloud": (("on-demand",), 2),
    "marketplace": (("on-demand", "bid"), 1),
}
PROVIDERS = [(f"hyper{i}", "hyperscaler") for i in range(4)] + \
    [(f"neo{i}", "neocloud") for i in range(12)] + [(f"market{i}", "marketplace")
                                                   for i in range(4)]


def gpu_classes() -> list[tuple[str, str, float]]:
    """(id, display name, memory GB) of every GPU with compute and bandwidth specs."""
    data = json.loads((ROOT / "data" / "gpus.json").read_text(encoding="utf-8"))
    out = []
    for gpu in data["gpus"]:
        specs = gpu.get("specs") or {}
        if specs.get("bf16_tflops") and specs.get("memory_bandwidth_gbps"):
            out.append((gpu["id"], gpu["name"], float(gpu["memory_gb"])))
    return out


def build_store(url: str, offers: int, seed: int = 12) -> int:
    from scrapers.base import PriceObservation
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    rng = random.Random(seed)
    gpus = gpu_classes()
    db = open_database(url)
    per_provider: dict[str, list] = {name: [] for name, _ in PROVIDERS}
    made = 0
    while made < offers:
        provider, kind = PROVIDERS[made % len(PROVIDERS)]
        categories, regions = KINDS[kind]
        gpu_id, name, memory = gpus[rng.randrange(len(gpus))]
        count = rng.choice((1, 1, 2, 4, 8, 8))
        category = rng.choice(categories)
        region = f"region-{rng.randrange(regions)}"
        base = Decimal(str(round(0.3 + memory / 40 * rng.uniform(0.6, 1.6), 4)))
        if category != "on-demand":
            base = (base * Decimal("0.45")).quantize(Decimal("0.0001"))
        per_provider[provider].append(PriceObservation(
            provider=provider, region=region, instance_type=f"{gpu_id}-x{count}-{made}",
            gpu_name=name, gpu_memory_gb=memory, gpu_count=count, category=category,
            price_per_hour=base * count, currency="USD", observed_at=WHEN))
        made += 1
    for provider, records in per_provider.items():
        summary = ingest_records(db, provider, records, started_at=WHEN)
        assert summary.status == "ok", summary.error
    db.close()
    return made


def timed(argv: list[str]) -> tuple[float, str]:
    from click.testing import CliRunner

    from tracker.cli.main import cli

    start = time.perf_counter()
    result = CliRunner().invoke(cli, argv, catch_exceptions=False)
    elapsed = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {result.output}")
    return elapsed, result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=5000)
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--keep", action="store_true", help="Keep the store and print its path.")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="serve-sweep-"))
    url = f"sqlite:///{folder / 'store.db'}"
    start = time.perf_counter()
    made = build_store(url, args.offers)
    print(f"store: {made:,} offers, {len(PROVIDERS)} providers, {len(gpu_classes())} GPU "
          f"classes, built in {time.perf_counter() - start:.1f} s")
    as_of = ["--as-of", "2026-11-30"]
    baseline, _ = timed(["--db", url, "prices", "--cheapest", *as_of, "--format", "json"])
    compare = ["--db", url, "compare", "-w", "inference", "--model", args.model,
               "--prompt-tokens", "1000", "--output-tokens", "1000", "--max-tpot-ms", "50",
               "--output-tokens-per-day", "50M", *as_of, "--format", "json"]
    elapsed, out = timed(compare)
    rows = json.loads(out)
    print(f"baseline `prices --cheapest`: {baseline:.3f} s")
    print(f"`compare -w inference --max-tpot-ms 50` ({args.model}, 1000/1000, 50M tokens/day):"
          f" {elapsed:.3f} s, {len(rows):,} ranked deployments, "
          f"{elapsed / baseline:.1f}x the baseline")
    if rows:
        best = rows[0]
        print(f"cheapest: {best['count']}x {best['gpu']} at {best['provider']} "
              f"TP{best['tensor_parallel']} x{best['replicas']}, "
              f"{best['cost_per_million_output_tokens']} USD/M output tokens "
              f"({best['cost_per_million_output_tokens_at_load']} at the load)")
    print(f"goal under {GOAL_SECONDS:g} s: {'OK' if elapsed < GOAL_SECONDS else 'ABOVE GOAL'}")
    if args.keep:
        print(f"store kept: {url}")
    else:
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
    return 0 if elapsed < GOAL_SECONDS else 1


if __name__ == "__main__":
    raise SystemExit(main())
