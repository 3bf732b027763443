"""Size once, price many (issue #26): each question against the per-offer path, same process.

    python bench/price_many.py [--offers 50000] [--reuse PATH] [--repeat 1] [--postgres URL]

Builds with tools/synthetic_market.py a store shaped like the real market (50,000 offers, 40
providers, two daily refreshes: the history does not enter these questions), or reuses one.
Then, in this process, through the command line (click's runner), asks each question twice,
alternating: as shipped (each offer shape sized once, priced once per provider and category:
tracker.answers.candidates) and with the named baseline patched in, the per-offer path main
had before (tests/economics/per_offer_reference.py: every offer at every count, in its own
loop). The two JSON answers must be identical. Then the shipped `compare` split into its
parts: reading the prices (the store's `price_rows`), sizing and pricing (`priced_options`),
the rest (ranking, the document, printing).

| question | goal (issue #26) |
|---|---|
| `compare` (8B full fine-tune on 2B tokens, every fitting GPU and count) | < 1 s |
| `compare -w inference` (70B, TPOT <= 50 ms, 50M output tokens a day) | < 2 s |
| `cost --gpu h100-sxm --count 8` (the same fine-tune, the cheapest stored offer) | - |
| `spot --gpu h100-sxm --count 16` | - |
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

END = date(2026, 11, 30)
AS_OF = ["--as-of", END.isoformat()]
FINETUNE = ["--model", "llama-3.1-8b", "--workload", "full-finetune", "--sharding", "zero3",
            "--tokens", "2e9"]
QUESTIONS = {
    "compare": ["compare", *FINETUNE],
    "compare -w inference": [
        "compare", "-w", "inference", "--model", "llama-3.1-70b", "--prompt-tokens", "1000",
        "--output-tokens", "1000", "--max-tpot-ms", "50", "--output-tokens-per-day", "50M"],
    "cost --count 8": ["cost", *FINETUNE, "--gpu", "h100-sxm", "--count", "8"],
    "spot --gpu --count 16": ["spot", "--gpu", "h100-sxm", "--count", "16", "--work-hours",
                              "100", "--checkpoint-minutes", "5", "--restart-minutes", "10"],
}
GOALS = {"compare": 1.0, "compare -w inference": 2.0}


@contextmanager
def per_offer_path():
    """The baseline: main's per-offer functions patched in where the answers call them."""
    from tests.economics import per_offer_reference as reference
    from tracker.answers import candidates, pricing

    def training(*args: Any, larger_instances: bool = False, **kwargs: Any) -> Any:
        return reference.per_offer_priced_options(*args, **kwargs)

    saved = (pricing.priced_options, candidates.priced_options, candidates.serving_options)
    pricing.priced_options = candidates.priced_options = training
    candidates.serving_options = reference.per_offer_serving_options
    try:
        yield
    finally:
        pricing.priced_options, candidates.priced_options, candidates.serving_options = saved


def ask(url: str, argv: list[str]) -> tuple[float, str]:
    from click.testing import CliRunner

    from tracker.cli.main import cli

    clock = time.perf_counter()
    result = CliRunner().invoke(cli, ["--db", url, *argv, *AS_OF, "--format", "json"])
    elapsed = time.perf_counter() - clock
    if result.exit_code != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.exit_code}): {result.output}")
    return elapsed, result.stdout


def parts(url: str) -> tuple[float, float, float]:
    """(read s, size-and-price s, offers) of the shipped `compare` question's two parts."""
    from tracker.answers.candidates import priced_options
    from tracker.answers.pricing import _priced
    from tracker.core.serialization import parse_instant
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.db import open_database

    settings = EconomicsSettings()
    db = open_database(url, upgrade=False)
    clock = time.perf_counter()
    rows = [r for r in _priced(db, "USD", as_of=parse_instant(END.isoformat(), end_of_day=True))
            if r.category != "quote"]
    read = time.perf_counter() - clock
    clock = time.perf_counter()
    priced_options(rows, {"model": "llama-3.1-8b", "workload": "full-finetune",
                          "sharding": "zero3", "tokens": 2e9},
                   billing=settings.billing, max_gpus=64, absent=[])
    sized = time.perf_counter() - clock
    db.close()
    return read, sized, len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=50_000)
    parser.add_argument("--reuse", metavar="PATH", help="SQLite file to reuse (built if missing)")
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    from tools.synthetic_market import build_market_store

    if args.postgres:
        url = args.postgres
    else:
        path = Path(args.reuse) if args.reuse else \
            Path(tempfile.mkdtemp(prefix="price-many-")) / "market.db"
        url = f"sqlite:///{path}"
    if args.postgres or not path.exists():
        built = build_market_store(url, offers=args.offers, days=2, seed=0, end=END)
        print(f"built {built.offers:,} offers of {built.providers} providers in "
              f"{built.build_s:.1f} s", flush=True)
    ask(url, ["prices", "--cheapest"])  # imports and the first connection, for both paths
    lines = []
    for name, argv in QUESTIONS.items():
        new = old = float("inf")
        answers = set()
        for round_ in range(args.repeat):
            # Alternate which path goes first: the machine is shared and noisy.
            order = (False, True) if round_ % 2 == 0 else (True, False)
            for baseline in order:
                if baseline:
                    with per_offer_path():
                        seconds, out = ask(url, argv)
                    old = min(old, seconds)
                else:
                    seconds, out = ask(url, argv)
                    new = min(new, seconds)
                answers.add(out)
        rows = json.loads(out)
        count = len(rows) if isinstance(rows, list) else 1
        same = "identical" if len(answers) == 1 else "DIFFERENT"
        goal = f"< {GOALS[name]:g} s: {'met' if new < GOALS[name] else 'NOT met'}" \
            if name in GOALS else "-"
        lines.append(f"| `{name}` | {new:.2f} s | per-offer path {old:.2f} s | "
                     f"{old / new:.0f}x faster | {count:,} rows, {same} | {goal} |")
        print(lines[-1], flush=True)
    read, sized, offers = parts(url)
    print(f"\nshipped `compare` in parts, {offers:,} offers: prices read {read:.2f} s, "
          f"sized and priced {sized:.2f} s")
    print("\n| question | shipped | baseline (same process, same store) | ratio | answers "
          "| goal |")
    print("|---|---|---|---|---|---|")
    print("\n".join(lines))
    return 0 if all("identical" in line for line in lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())
