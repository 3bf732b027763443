"""Weekly report at scale: a year of hourly refreshes of 2,000 offers, then one report build.

Goal (README, Development: benchmarks): the build takes under 10 s and under 1.5 GB of peak
RSS on this machine.

The offer universe is generated deterministically: 12 providers (hyperscalers with regions,
zones and spot; neoclouds with on-demand only; two marketplaces with on-demand and bids),
12 GPU classes, 1-8 GPUs per instance. Change rates per hourly refresh are what the sources
show: hyperscaler on-demand about twice a year, neocloud on-demand monthly, cloud spot about
daily (AWS/GCP/Azure spot prices move on that scale), marketplace asks every ~12 h and
bids every ~3 h. Each offer's price is a mean-reverting random walk, 4 decimals, Decimal.

Two ways to fill the database (a SQLite file):
- `--fill ingest`: the product's path, `tracker.store.ingest.ingest_records`, one call per source
  per day (24 hourly snapshots each; 8,760 snapshots x 2,000 offers = 17.5M observations).
  Slow: several minutes, mostly building PriceObservation objects and ingesting.
- `--fill direct` (default): the same history written as the spans ingest would produce
  (one row per unchanged price run, last_seen on the last hourly refresh, valid_to at the
  next change), plus one ingest_run row per source per day, with sqlite3 executemany.

The report is then built in a fresh child process (so the fill does not count towards its
peak RSS): `reports.build_and_archive` for the last complete week, with the default
workloads. Prints spans, build time and the child's peak RSS.

    python bench/report_scale.py [--offers 2000] [--days 365] [--fill direct|ingest]
                                 [--db PATH] [--keep] [--without-ranges]

`--without-ranges` builds without the featured classes' forecasts and the spot simulations
(the baseline those additions are measured against, on the same database).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

END = datetime(2026, 11, 30, tzinfo=UTC)  # Monday 00:00: week 2026-W48 just finished
HOUR = timedelta(hours=1)

# provider -> (source, kind, regions, categories)
PROVIDERS = {
    "aws": ("aws", "hyperscaler", ["us-east-1", "us-west-2", "eu-west-1", "ap-northeast-1"],
            ["on-demand", "spot"]),
    "gcp": ("gcp", "hyperscaler", ["us-central1", "europe-west4", "asia-east1"],
            ["on-demand", "spot"]),
    "azure": ("azure", "hyperscaler", ["eastus", "westeurope", "japaneast"],
              ["on-demand", "spot"]),
    "oci": ("skypilot", "neocloud", ["us-ashburn-1", "eu-frankfurt-1"], ["on-demand"]),
    "lambda": ("lambda", "neocloud", ["us-east-1", "us-west-1"], ["on-demand"]),
    "coreweave": ("skypilot", "neocloud", ["US-EAST-04", "US-WEST-01"], ["on-demand"]),
    "nebius": ("skypilot", "neocloud", ["eu-north1"], ["on-demand"]),
    "crusoe": ("skypilot", "neocloud", ["us-east1"], ["on-demand"]),
    "fluidstack": ("skypilot", "neocloud", [""], ["on-demand"]),
    "datacrunch": ("skypilot", "neocloud", ["FIN-01"], ["on-demand"]),
    "runpod": ("runpod", "marketplace", [""], ["on-demand", "spot"]),
    "vastai": ("vastai", "marketplace", [""], ["on-demand", "bid"]),
}
# canonical GPU id, raw name, memory GB, typical on-demand $/GPU-h
GPUS = [
    ("h100-sxm", "H100 SXM", 80, 2.9), ("h200", "H200", 141, 3.6), ("b200", "B200", 180, 5.5),
    ("a100-80gb", "A100 80GB", 80, 1.8), ("a100-40gb", "A100 40GB", 40, 1.3),
    ("l40s", "L40S", 48, 1.1), ("l4", "L4", 24, 0.6), ("a10g", "A10G", 24, 0.9),
    ("t4", "T4", 16, 0.35), ("rtx-4090", "RTX 4090", 24, 0.45),
    ("mi300x", "MI300X", 192, 2.6), ("v100-16gb", "V100 16GB", 16, 0.7),
]
# (kind, category) -> (probability of a change per hourly refresh, step size, price factor)
DYNAMICS = {
    ("hyperscaler", "on-demand"): (1 / 4000, 0.05, 1.6),
    ("neocloud", "on-demand"): (1 / 720, 0.04, 1.0),
    ("hyperscaler", "spot"): (1 / 24, 0.03, 0.55),
    ("marketplace", "on-demand"): (1 / 12, 0.04, 0.8),
    ("marketplace", "spot"): (1 / 6, 0.06, 0.5),
    ("marketplace", "bid"): (1 / 3, 0.08, 0.4),
}


@dataclass(frozen=True)
class OfferSpec:
    source: str
    provider: str
    region: str
    zone: str
    instance_type: str
    category: str
    gpu: str
    gpu_raw: str
    memory_gb: int
    gpu_count: int
    change_p: float
    step: float
    base: float  # $ per GPU-hour


def offer_universe(n: int, seed: int = 48) -> list[OfferSpec]:
    rng = random.Random(seed)
    offers: list[OfferSpec] = []
    seen: set[tuple] = set()
    names = sorted(PROVIDERS)
    while len(offers) < n:
        provider = names[rng.randrange(len(names))]
        source, kind, regions, categories = PROVIDERS[provider]
        gpu, raw, memory, price = GPUS[rng.randrange(len(GPUS))]
        count = rng.choice((1, 1, 2, 4, 8, 8))
        region = rng.choice(regions)
        category = rng.choice(categories)
        zone = f"{region}{rng.choice('abc')}" if provider == "aws" and category == "spot" else ""
        variant = rng.randrange(4)
        instance = f"{provider}-{gpu}-x{count}-v{variant}"
        key = (source, provider, region, zone, instance, category)
        if key in seen:
            continue
        seen.add(key)
        p, step, factor = DYNAMICS[(kind, category)]
        base = price * factor * rng.uniform(0.8, 1.3)
        offers.append(OfferSpec(source, provider, region, zone, instance, category, gpu, raw,
                                memory, count, p, step, base))
    return offers


def price_history(spec: OfferSpec, hours: int, rng: random.Random) -> list[tuple[int, Decimal]]:
    """(first hour, price per instance-hour) for each run of an unchanged price."""
    import numpy as np

    gen = np.random.default_rng(rng.randrange(1 << 32))
    changes = np.nonzero(gen.random(hours) < spec.change_p)[0]
    level = spec.base
    runs: list[tuple[int, float]] = [(0, level)]
    for change_hour in changes:
        if change_hour == 0:
            continue
        # Mean-reverting walk: drift back towards the base, plus a random step.
        level = level + 0.3 * (spec.base - level) + level * spec.step * gen.normal()
        level = max(level, spec.base * 0.3)
        runs.append((int(change_hour), level))
    result: list[tuple[int, Decimal]] = []
    for hour, per_gpu in runs:
        price = Decimal(f"{per_gpu * spec.gpu_count:.4f}")
        if result and result[-1][1] == price:
            continue
        result.append((hour, price))
    return result


def _stamp(moment: datetime) -> str:
    # UTCDateTime's storage format on SQLite (naive UTC).
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def fill_direct(db_path: Path, offers: list[OfferSpec], days: int) -> int:
    from tracker.store.db import open_database

    open_database(f"sqlite:///{db_path}").close()  # schema, GPU table
    hours = days * 24
    start = END - timedelta(hours=hours)
    rng = random.Random(7)
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    with con:
        con.executemany("INSERT OR IGNORE INTO provider (id, display_name) VALUES (?, ?)",
                        [(p, p.title()) for p in PROVIDERS])
        spans_total = 0
        span_id = 0
        offer_rows, span_rows, latest = [], [], []
        for offer_id, spec in enumerate(offers, start=1):
            runs = price_history(spec, hours, rng)
            offer_rows.append((
                offer_id, spec.source, spec.provider, spec.region, spec.zone,
                spec.instance_type, "", spec.category, spec.gpu, spec.gpu_raw,
                float(spec.gpu_count), 0, float(spec.memory_gb), "{}", _stamp(start)))
            for i, (hour, price) in enumerate(runs):
                span_id += 1
                next_hour = runs[i + 1][0] if i + 1 < len(runs) else None
                last = (next_hour - 1) if next_hour is not None else hours - 1
                span_rows.append((
                    span_id, offer_id, format(price, "f"), "USD",
                    _stamp(start + hour * HOUR), _stamp(start + last * HOUR),
                    _stamp(start + next_hour * HOUR) if next_hour is not None else None))
            latest.append((span_id, offer_id))
            spans_total += len(runs)
        con.executemany(
            "INSERT INTO offer (id, source, provider, region, zone, instance_type, variant, "
            "category, gpu_id, gpu_raw, gpu_count, fractional, gpu_memory_gb, attributes, "
            "first_seen) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", offer_rows)
        con.executemany(
            "INSERT INTO price_span (id, offer_id, price_per_hour, currency, first_seen, "
            "last_seen, valid_to) VALUES (?,?,?,?,?,?,?)", span_rows)
        con.executemany("UPDATE offer SET latest_span_id = ? WHERE id = ?", latest)
        runs_rows = []
        for day in range(days):
            moment = start + timedelta(days=day)
            for source in sorted({s.source for s in offers}):
                n = sum(1 for s in offers if s.source == source)
                runs_rows.append((source, "schedule", "bench", _stamp(moment),
                                  _stamp(moment + timedelta(minutes=1)), "ok", n * 24))
        con.executemany(
            "INSERT INTO ingest_run (source, trigger, host, started_at, finished_at, status, "
            "offers_seen, prices_changed, new_offers, offers_closed, rejected) "
            "VALUES (?,?,?,?,?,?,?,0,0,0,0)", runs_rows)
    con.close()
    return spans_total


def fill_ingest(db_path: Path, offers: list[OfferSpec], days: int) -> int:
    from scrapers.base import PriceObservation
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    db = open_database(f"sqlite:///{db_path}")
    hours = days * 24
    start = END - timedelta(hours=hours)
    rng = random.Random(7)
    histories = [price_history(spec, hours, rng) for spec in offers]
    by_source: dict[str, list[int]] = {}
    for i, spec in enumerate(offers):
        by_source.setdefault(spec.source, []).append(i)
    cursor = [0] * len(offers)
    observations = 0
    clock = time.perf_counter()
    for day in range(days):
        for source, members in sorted(by_source.items()):
            records = []
            for hour in range(day * 24, day * 24 + 24):
                when = start + hour * HOUR
                for i in members:
                    runs = histories[i]
                    while cursor[i] + 1 < len(runs) and runs[cursor[i] + 1][0] <= hour:
                        cursor[i] += 1
                    spec = offers[i]
                    records.append(PriceObservation(
                        provider=spec.provider, instance_type=spec.instance_type,
                        gpu_name=spec.gpu_raw, gpu_count=spec.gpu_count,
                        category=spec.category, price_per_hour=runs[cursor[i]][1],
                        currency="USD", observed_at=when, region=spec.region,
                        zone=spec.zone, gpu_memory_gb=spec.memory_gb))
            # Cursors advanced through the day; rewind for the next source's members only.
            summary = ingest_records(db, source, records, started_at=start + day * 24 * HOUR,
                                     trigger="schedule")
            if summary.status != "ok":
                raise SystemExit(f"ingest failed: {summary.error}")
            observations += len(records)
        if day % 30 == 29:
            rate = observations / (time.perf_counter() - clock)
            print(f"  day {day + 1}/{days}: {observations:,} observations, {rate:,.0f}/s",
                  file=sys.stderr)
    db.close()
    con = sqlite3.connect(db_path)
    spans = con.execute("SELECT count(*) FROM price_span").fetchone()[0]
    con.close()
    return spans


def build_child(db_path: str, out_dir: str) -> None:
    """Runs in a fresh process: build the report, print timing and peak RSS as JSON."""
    import reports
    from tracker.config.schema import Config
    from tracker.store.db import open_database

    if os.environ.get("REPORT_SCALE_WITHOUT_RANGES"):
        import reports.sections.market as market_section
        import tracker.answers.recommend_training as training

        def no_forecast(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
            return {"available": False, "note": "left out (--without-ranges)"}

        market_section._forecast = no_forecast
        training._spot_range = no_forecast

    config = Config.from_data({"report": {"out_dir": out_dir},
                               "refresh": {"stale_after_hours": 48.0}})
    db = open_database(f"sqlite:///{db_path}", upgrade=False)
    clock = time.perf_counter()
    built = reports.build_and_archive(db, config, week="2026-W48",
                                      as_of=END + timedelta(days=1))
    elapsed = time.perf_counter() - clock
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    doc = built.document
    print(json.dumps({
        "build_s": round(elapsed, 3), "peak_rss_mb": round(rss_kb / 1024, 1),
        "html_bytes": built.path_html.stat().st_size,
        "json_bytes": built.path_json.stat().st_size,
        "prices": doc["prices"]["count"], "charts": len(doc["trends"]["charts"]),
        "movers_changed": doc["movers"]["changed"], "headline": built.headline,
    }))
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--offers", type=int, default=2000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--fill", choices=("direct", "ingest"), default="direct")
    parser.add_argument("--db", help="SQLite file to fill (default: a temporary file)")
    parser.add_argument("--reuse", action="store_true", help="build from an existing --db")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--without-ranges", action="store_true",
                        help="build without forecasts and spot simulations (the baseline)")
    parser.add_argument("--build-child", nargs=2, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_child:
        build_child(*args.build_child)
        return

    workdir = Path(tempfile.mkdtemp(prefix="report-scale-"))
    db_path = Path(args.db) if args.db else workdir / "tracker.db"
    if not args.reuse:
        if db_path.exists():
            raise SystemExit(f"{db_path} exists; pass --reuse to build from it")
        offers = offer_universe(args.offers)
        clock = time.perf_counter()
        fill = fill_direct if args.fill == "direct" else fill_ingest
        spans = fill(db_path, offers, args.days)
        fill_s = time.perf_counter() - clock
        print(f"filled {db_path} ({args.fill}): {len(offers):,} offers, {args.days} days of "
              f"hourly refreshes = {len(offers) * args.days * 24:,} observations -> "
              f"{spans:,} price spans in {fill_s:.1f} s; "
              f"{db_path.stat().st_size / 1e6:.0f} MB")
    child = subprocess.run(
        [sys.executable, __file__, "--build-child", str(db_path), str(workdir / "out")],
        capture_output=True, text=True, env={
            **os.environ, "PYTHONPATH": str(ROOT),
            **({"REPORT_SCALE_WITHOUT_RANGES": "1"} if args.without_ranges else {})})
    if child.returncode != 0:
        raise SystemExit(f"report build failed:\n{child.stderr}")
    result = json.loads(child.stdout.strip().splitlines()[-1])
    goal = result["build_s"] < 10 and result["peak_rss_mb"] < 1536
    print(f"report 2026-W48: build {result['build_s']:.2f} s, peak RSS "
          f"{result['peak_rss_mb']:.0f} MB (goal < 10 s, < 1.5 GB: "
          f"{'met' if goal else 'NOT met'}); {result['prices']:,} offers priced, "
          f"{result['charts']} charts, {result['movers_changed']:,} offers changed price; "
          f"HTML {result['html_bytes'] / 1e3:.0f} kB, JSON {result['json_bytes'] / 1e6:.1f} MB")
    print(f"headline: {result['headline']}")
    if not args.keep and not args.db:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
    elif args.keep:
        print(f"kept {workdir}")


if __name__ == "__main__":
    main()
