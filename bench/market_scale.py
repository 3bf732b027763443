"""The whole market at once (issue #26): the questions of a full store, each against a baseline.

    python bench/market_scale.py [--postgres URL] [--offers 50000] [--days 365]
                                 [--reuse PATH] [--repeat 2] [--only alerts,asof,...]
                                 [--installed]

Builds with tools/synthetic_market.py a store shaped like the real market (50,000 offers, 40
providers, every GPU class, a year of daily refreshes with 5% of prices changing a day; into
a temporary SQLite file, PATH with --reuse (built there if it does not exist, reused if it
does), or the PostgreSQL database URL, which must be empty, or hold such a store with
--reuse). Then, in this process, through the command line (click's runner, as a user runs
it), times each question of the issue against the baseline `prices --cheapest` (the current
cheapest offer per class: one read of every current price) on the same store, alternating
the two `--repeat` times and keeping each one's fastest run:

| question | goal |
|---|---|
| `compare` (8B full fine-tune on 2B tokens: every fitting GPU and count) | < 1 s |
| `compare -w inference` (70B, TPOT <= 50 ms, 50M output tokens a day) | < 2 s |
| `prices --cheapest --as-of` a date 6 months back | < 0.3 s |
| `index` for 10 classes over the year | < 2 s |
| `alerts check` with 50 rules | < 2 s |
| weekly report, in a child process (its own baseline there) | < 15 s, < 1.5 GB peak RSS |
| one cold cron refresh of the largest source (~10,000 offers) vs raw executemany | >= 0.5x |

The refresh is timed twice: with the source listing its offers in the order of its last
listing (as an API answering in a stable order does: the goal's case), and in a new order
at every refresh (a marketplace sorted by price), which compares through a dict instead of
one string comparison (tracker/store/ingest/kept_state.py).

`--only` times just the questions named (compare, inference, asof, index, alerts, and
`report` for the weekly report), without the refreshes: for comparing two trees on one
stored market.

`--installed` times the package as pip installed it (`pip install .` compiles the sizing
modules with mypyc, setup.py) instead of this tree's sources.

The refreshes add eight snapshots of that source, an hour apart, to the store (the next run
with --reuse starts from them).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# This tree's sources first; with --installed, the package as pip installed it (`pip install .`
# compiles the sizing modules, setup.py), this tree only for tools/.
INSTALLED = "--installed" in sys.argv
if INSTALLED:
    sys.path.append(str(ROOT))
else:
    sys.path.insert(0, str(ROOT))

INDEX_GPUS = ["h100-sxm", "h200", "b200", "gb200", "a100-80gb", "a100-40gb", "l40s", "l4",
              "mi300x", "rtx-4090"]
GOALS = {"compare": 1.0, "compare -w inference": 2.0, "prices --cheapest --as-of": 0.3,
         "index": 2.0, "alerts check": 2.0, "report": 15.0}
# --only's names of the questions.
SHORT = {"compare": "compare", "inference": "compare -w inference",
         "asof": "prices --cheapest --as-of", "index": "index", "alerts": "alerts check"}
RSS_GOAL_MB = 1536
REFRESH_GOAL = 0.5


def alert_rules(gpus: list[str]) -> list[dict[str, Any]]:
    """50 rules of every condition that reads prices: levels, new lows, index moves,
    workloads, stale sources."""
    rules: list[dict[str, Any]] = []
    for i in range(15):
        gpu = gpus[i % len(gpus)]
        rules.append({"name": f"{gpu} below {i}", "gpu": gpu, "below": 0.5 + i / 5})
    for i in range(10):
        gpu = gpus[i % len(gpus)]
        rules.append({"name": f"{gpu} spot above {i}", "gpu": gpu, "category": "spot",
                      "above": 3 + i})
    for i in range(10):
        gpu = gpus[i % len(gpus)]
        rules.append({"name": f"{gpu} new low", "gpu": gpu, "new_low": True,
                      "lookback_days": 90})
    for i in range(8):
        gpu = gpus[i % len(gpus)]
        rules.append({"name": f"{gpu} index move", "gpu": gpu, "index_move_pct": 5})
    from tracker.config.sections import DEFAULT_WORKLOADS

    for i, workload in enumerate(DEFAULT_WORKLOADS[:2]):
        rules.append({"name": f"workload {i}", "workload": workload["name"]})
        rules.append({"name": f"workload {i} cost", "workload": workload["name"],
                      "cost_below": 100})
    for source in ("aws", "gcp", "azure"):
        rules.append({"name": f"{source} stale", "source_stale": source})
    return rules[:50]


def write_config(path: Path, out_dir: Path) -> None:
    from tracker.config.toml_text import to_toml

    rules = alert_rules(INDEX_GPUS)
    assert len(rules) == 50
    path.write_text(to_toml({"refresh": {"stale_after_hours": 48.0},
                           "report": {"out_dir": str(out_dir)},
                           "alerts": {"rules": rules}}), encoding="utf-8")


def cli(url: str, config: Path, argv: list[str]) -> tuple[float, str]:
    from click.testing import CliRunner

    from tracker.cli.main import cli as group

    clock = time.perf_counter()
    result = CliRunner().invoke(group, ["--db", url, "--config", str(config), *argv],
                                catch_exceptions=False)
    elapsed = time.perf_counter() - clock
    if result.exit_code not in (0, 1):  # alerts check exits 1 while a firing is undelivered
        raise SystemExit(f"{' '.join(argv)} failed ({result.exit_code}): {result.output}")
    return elapsed, result.stdout


def last_refresh(url: str) -> datetime:
    from tracker.store.db import open_database
    from tracker.store.queries import latest_observation

    db = open_database(url, upgrade=False, create=False)
    try:
        latest = latest_observation(db)
    finally:
        db.close()
    if latest is None:
        raise SystemExit("the store holds no prices")
    return latest


def questions(last: date) -> dict[str, list[str]]:
    as_of = ["--as-of", last.isoformat()]
    return {
        "compare": ["compare", "--model", "llama-3.1-8b", "--workload", "full-finetune",
                    "--sharding", "zero3", "--tokens", "2e9", *as_of, "--format", "json"],
        "compare -w inference": [
            "compare", "-w", "inference", "--model", "llama-3.1-70b", "--prompt-tokens",
            "1000", "--output-tokens", "1000", "--max-tpot-ms", "50",
            "--output-tokens-per-day", "50M", *as_of, "--format", "json"],
        "prices --cheapest --as-of": ["prices", "--cheapest", "--as-of",
                                      (last - timedelta(days=182)).isoformat(),
                                      "--format", "json"],
        "index": ["index", *[a for g in INDEX_GPUS for a in ("--gpu", g)], "--since",
                  (last - timedelta(days=364)).isoformat(), "--until", last.isoformat(),
                  "--format", "json"],
        "alerts check": ["alerts", "check", "--format", "json"],
    }


def measure(url: str, config: Path, repeat: int,
            only: list[str] | None = None) -> dict[str, tuple[float, float, int]]:
    """question -> (fastest seconds, fastest baseline seconds of its rounds, output rows);
    with `only`, just those questions."""
    last = last_refresh(url).date()
    baseline_argv = ["prices", "--cheapest", "--as-of", last.isoformat(), "--format", "json"]
    cli(url, config, baseline_argv)  # imports and the first connection, for both sides
    results = {}
    for name, argv in questions(last).items():
        if only is not None and name not in only:
            continue
        best = base = float("inf")
        rows = 0
        for _ in range(repeat):
            base = min(base, cli(url, config, baseline_argv)[0])
            elapsed, out = cli(url, config, argv)
            best = min(best, elapsed)
            data = json.loads(out) if out.strip() else []
            rows = len(data) if isinstance(data, list) else len(data.get("points", data))
            if elapsed > 30:  # one slow run says enough
                break
        results[name] = (best, base, rows)
        print(f"  {name}: {best:.3f} s ({rows:,} rows), baseline {base:.3f} s", flush=True)
    return results


def report_child(url: str, out_dir: str) -> None:
    """In a fresh process: the baseline read, then the report build; JSON on stdout."""
    import reports
    from tracker.config.schema import Config
    from tracker.store.db import open_database
    from tracker.store.queries import cheapest_per_gpu

    config = Config.from_data({"report": {"out_dir": out_dir},
                               "refresh": {"stale_after_hours": 48.0}})
    db = open_database(url, upgrade=False)
    latest = last_refresh(url)
    monday = datetime.combine(latest.date() - timedelta(days=latest.weekday()),
                              datetime.min.time(), tzinfo=UTC)
    week_end = monday if latest - monday >= timedelta(days=1) else monday - timedelta(days=7)
    iso = (week_end - timedelta(days=1)).isocalendar()
    clock = time.perf_counter()
    cheapest_per_gpu(db, as_of=latest)
    baseline = time.perf_counter() - clock
    clock = time.perf_counter()
    built = reports.build_and_archive(db, config, week=f"{iso.year}-W{iso.week:02d}",
                                      as_of=week_end + timedelta(days=1))
    elapsed = time.perf_counter() - clock
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # The report's forked children (reports.background), all reaped by now: the largest's
    # peak, which counts the parent's pages it shares as well as its own.
    child_rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"build_s": elapsed, "baseline_s": baseline, "peak_rss_mb": rss_mb,
                      "child_peak_rss_mb": child_rss_mb,
                      "week": f"{iso.year}-W{iso.week:02d}",
                      "prices": built.document["prices"]["count"]}))
    db.close()


def measure_report(url: str, out_dir: Path) -> dict[str, Any]:
    env = dict(os.environ)
    if INSTALLED:
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = str(ROOT)
    child = subprocess.run([sys.executable, __file__, "--report-child", url, str(out_dir),
                            *(["--installed"] if INSTALLED else [])],
                           capture_output=True, text=True, env=env)
    if child.returncode != 0:
        raise SystemExit(f"report build failed:\n{child.stderr}")
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return result


def measure_refresh(url: str, refreshes: int = 4) -> dict[str, tuple[str, int, float, float]]:
    """For each way of listing, (source, offers, ingest CPU s, raw CPU s) summed over
    `refreshes` cold refreshes of the largest source, each an hour after the one before with
    5% of its prices changed, alternating with the raw path: the same observations with
    executemany into a plain table of the same database kind. The ways of listing:

    - "same order": the source lists its offers in the order of its last listing (by
      offer id, the order in which the store's source first listed them), as a source whose
      API answers in a stable order does;
    - "new order": in a new order at every refresh, as a marketplace sorted by price does.
    """
    import random
    from decimal import Decimal

    from scrapers.base import PriceObservation
    from tracker.store import ingest
    from tracker.store.db import open_database
    from tracker.store.queries import price_rows

    db = open_database(url)
    rows_by_source: dict[str, list[Any]] = {}
    for row in price_rows(db):
        rows_by_source.setdefault(row.source, []).append(row)
    source = max(rows_by_source, key=lambda s: (len(rows_by_source[s]), s))
    rows = sorted(rows_by_source[source], key=lambda r: r.offer_id)
    rng = random.Random(26)
    prices = [r.price_per_hour for r in rows]
    when = last_refresh(url)
    raw = RawTable(url)
    results = {}
    for listing in ("same order", "new order"):
        ingest_cpu = raw_cpu = 0.0
        for _ in range(refreshes):
            # Hours apart, not days: the store ends yesterday, and no refresh may be in the
            # future (the next run with --reuse asks as of the newest instant).
            when += timedelta(hours=1)
            for i in rng.sample(range(len(rows)), len(rows) // 20):
                prices[i] = (prices[i] * Decimal(rng.choice(("0.97", "1.03")))).quantize(
                    Decimal("0.0001"))
            order = list(range(len(rows)))
            if listing == "new order":
                rng.shuffle(order)
            batch = [PriceObservation(
                provider=rows[i].provider, instance_type=rows[i].instance_type,
                gpu_name=rows[i].gpu_raw, gpu_count=int(rows[i].gpu_count),
                category=rows[i].category, price_per_hour=prices[i],
                currency=rows[i].currency, observed_at=when, region=rows[i].region,
                zone=rows[i].zone, variant=rows[i].variant, gpu_memory_gb=None)
                for i in order]
            ingest.forget_offer_states()
            clock = time.process_time()
            summary = ingest.ingest_records(db, source, batch, started_at=when,
                                            trigger="schedule")
            ingest_cpu += time.process_time() - clock
            if summary.status != "ok" or summary.rejected:
                raise SystemExit(f"refresh failed: {summary.error or summary.rejected}")
            raw_cpu += raw.insert(batch)
        results[listing] = (source, len(rows), ingest_cpu, raw_cpu)
    raw.close()
    db.close()
    return results


class RawTable:
    """The baseline of a refresh: its observations as plain rows, one executemany in one
    transaction (bench/ingest.py's raw path; on PostgreSQL a temporary table there)."""

    def __init__(self, url: str) -> None:
        self.folder = None
        if url.startswith("sqlite"):
            import sqlite3

            self.folder = tempfile.TemporaryDirectory(prefix="market-raw-")
            self.conn: Any = sqlite3.connect(Path(self.folder.name) / "raw.db")
            self.mark = "?"
        else:
            import psycopg

            self.conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
            self.mark = "%s"
        self.conn.execute(
            "CREATE TEMP TABLE observation (provider TEXT, region TEXT, zone TEXT, "
            "instance_type TEXT, variant TEXT, category TEXT, gpu TEXT, gpu_count REAL, "
            "price TEXT, currency TEXT, observed_at TEXT)" if self.folder is None else
            "CREATE TABLE observation (provider TEXT, region TEXT, zone TEXT, "
            "instance_type TEXT, variant TEXT, category TEXT, gpu TEXT, gpu_count REAL, "
            "price TEXT, currency TEXT, observed_at TEXT)")
        self.conn.commit()

    def insert(self, batch: list[Any]) -> float:
        clock = time.process_time()
        rows = [(o.provider, o.region, o.zone, o.instance_type, o.variant, o.category,
                 o.gpu_name, o.gpu_count, str(o.price_per_hour), o.currency,
                 o.observed_at.isoformat()) for o in batch]
        cursor = self.conn.cursor()
        cursor.executemany(f"INSERT INTO observation VALUES ({', '.join([self.mark] * 11)})",
                           rows)
        self.conn.commit()
        return time.process_time() - clock

    def close(self) -> None:
        self.conn.close()
        if self.folder is not None:
            self.folder.cleanup()


def build(url: str, offers: int, days: int, seed: int) -> None:
    from tools.synthetic_market import build_market_store

    end = datetime.now(UTC).date()  # the last refresh yesterday: "now" questions see it fresh
    summary = build_market_store(url, offers=offers, days=days, seed=seed, end=end)
    print(f"built {summary.offers:,} offers of {summary.providers} providers, {days} daily "
          f"refreshes ({summary.first_refresh:%Y-%m-%d} to {summary.last_refresh:%Y-%m-%d}), "
          f"{summary.spans:,} price spans in {summary.build_s:.1f} s; largest source "
          f"{summary.largest_source()} ({summary.sources[summary.largest_source()]:,} offers)",
          flush=True)


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", metavar="URL", help="build in this PostgreSQL database")
    parser.add_argument("--offers", type=int, default=50_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reuse", metavar="PATH",
                        help="SQLite file to reuse (built there first if missing); with "
                             "--postgres: reuse the store the database holds")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip", action="append", default=[],
                        choices=["questions", "report", "refresh"])
    parser.add_argument("--only", metavar="NAMES",
                        help=f"comma-separated questions to time ({', '.join(SHORT)}, "
                             "report); skips the refreshes, and the report unless named")
    parser.add_argument("--report-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--installed", action="store_true",
                        help="time the installed package, not this tree's sources")
    args = parser.parse_args()
    from tracker.cli.main import tune_gc

    tune_gc()  # as the `gpu-tracker` command runs (the report's child process too)
    if args.report_child:
        report_child(*args.report_child)
        return 0
    from size_sweep import engine_build

    print(engine_build())
    only = None
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in SHORT and n != "report"]
        if unknown:
            parser.error(f"--only: unknown question(s) {', '.join(unknown)}; "
                         f"known: {', '.join(SHORT)}, report")
        only = [SHORT[n] for n in names if n != "report"]
        args.skip += ["refresh"] + ([] if "report" in names else ["report"])
        if not only:
            args.skip.append("questions")
    work = Path(tempfile.mkdtemp(prefix="market-scale-"))
    if args.postgres:
        url = args.postgres
        if not args.reuse:
            build(url, args.offers, args.days, args.seed)
    else:
        path = Path(args.reuse) if args.reuse else work / "market.db"
        url = f"sqlite:///{path}"
        if not path.exists():
            build(url, args.offers, args.days, args.seed)
    config = work / "config.toml"
    write_config(config, work / "reports")
    print(f"store {url.split('@')[-1]}; last refresh {last_refresh(url):%Y-%m-%d %H:%M} UTC")
    lines = []
    if "questions" not in args.skip:
        for name, (seconds, base, _rows) in measure(url, config, args.repeat,
                                                           only).items():
            lines.append(f"| `{name}` | {seconds:.3f} s | `prices --cheapest` {base:.3f} s | "
                         f"{seconds / base:.1f}x | < {GOALS[name]:g} s: "
                         f"{_verdict(seconds < GOALS[name])} |")
    if "report" not in args.skip:
        report = measure_report(url, work / "reports")
        # Memory: the process and its largest child added up, an upper bound (the child's
        # RSS also counts the pages it shares with the parent).
        rss = report["peak_rss_mb"] + report["child_peak_rss_mb"]
        ok = report["build_s"] < GOALS["report"] and rss < RSS_GOAL_MB
        lines.append(f"| weekly report {report['week']} ({report['prices']:,} offers) | "
                     f"{report['build_s']:.2f} s, {report['peak_rss_mb']:.0f} MB + "
                     f"{report['child_peak_rss_mb']:.0f} MB in its largest child | "
                     f"current cheapest read {report['baseline_s']:.3f} s | "
                     f"{report['build_s'] / report['baseline_s']:.1f}x | < 15 s, < 1.5 GB: "
                     f"{_verdict(ok)} |")
    if "refresh" not in args.skip:
        refreshes = 4
        for listing, (source, offers, ingest_cpu, raw_cpu) in measure_refresh(
                url, refreshes).items():
            ratio = raw_cpu / ingest_cpu
            goal = (f">= 0.5x: {_verdict(ratio >= REFRESH_GOAL)}" if listing == "same order"
                    else "(no goal: a source listing in a new order every time)")
            lines.append(f"| cold refresh of `{source}` ({offers:,} offers, {listing}), "
                         f"x{refreshes} | {ingest_cpu * 1000 / refreshes:.0f} ms CPU each | "
                         f"raw executemany {raw_cpu * 1000 / refreshes:.0f} ms | "
                         f"{ratio:.2f}x | {goal} |")
    print("| question | time | baseline (same process, same store) | ratio | goal |")
    print("|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
