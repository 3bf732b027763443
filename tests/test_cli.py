"""The CLI frame and the store commands, through click's CliRunner."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from decimal import Decimal

import pytest
from click.testing import CliRunner

from tracker.cli.commands import COMMANDS
from tracker.cli.main import cli


@pytest.fixture
def run(sqlite_url):
    runner = CliRunner()

    def invoke(*args: str, db: str | None = sqlite_url, env: dict | None = None):
        prefix = ["--db", db] if db else []
        return runner.invoke(cli, [*prefix, *args], env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def loaded(run):
    result = run("refresh", "--source", "bundled", "--format", "json")
    assert result.exit_code == 0, result.output
    return run


def test_every_command_has_help_and_is_importable():
    runner = CliRunner()
    for name in COMMANDS:
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert result.output.startswith("Usage: ")


def test_init_creates_database(run, tmp_path):
    result = run("init")
    assert result.exit_code == 0
    assert "schema revision" in result.stderr
    assert (tmp_path / "tracker.db").exists()


def test_refresh_bundled_summary_json_and_idempotence(run):
    first = json.loads(run("refresh", "--source", "bundled", "--format", "json").stdout)
    assert [s["source"] for s in first] == ["bundled"]
    assert first[0]["status"] == "ok"
    assert first[0]["new_offers"] >= 60
    second = json.loads(run("refresh", "--source", "bundled", "--format", "json").stdout)
    assert (second[0]["new_offers"], second[0]["prices_changed"]) == (0, 0)


def test_prices_json_contract(loaded):
    rows = json.loads(loaded("prices", "--gpu", "h100", "--format", "json").stdout)
    assert rows, "bundled data has H100 offers"
    required = {"provider", "region", "instance_type", "gpu", "gpu_count", "category",
                "price_per_hour", "price_per_gpu_hour", "currency", "observed_at"}
    for row in rows:
        assert required <= set(row)
        assert row["gpu"] == "h100-sxm"
        assert isinstance(row["price_per_hour"], str)  # exact decimal strings
        assert row["observed_at"].endswith("Z")
    per_gpu = [float(r["price_per_gpu_hour"]) for r in rows]
    assert per_gpu == sorted(per_gpu)


def test_prices_filters_and_formats(loaded):
    out = loaded("prices", "--provider", "aws", "--category", "spot", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and {r["provider"] for r in rows} == {"aws"}
    assert {r["category"] for r in rows} == {"spot"}
    table = loaded("prices", "--cheapest", "--max-price", "2.5").stdout
    assert "price_per_gpu_hour" in table.splitlines()[0]
    cheapest = json.loads(loaded("prices", "--cheapest", "--format", "json").stdout)
    keys = [(r["gpu"], r["category"]) for r in cheapest]
    assert len(keys) == len(set(keys))
    assert all(float(r["price_per_gpu_hour"]) <= 2.5 for r in json.loads(
        loaded("prices", "--max-price", "2.5", "--format", "json").stdout))


def test_prices_as_of_sees_the_past(loaded):
    old = json.loads(loaded("prices", "--provider", "aws", "--gpu", "h100", "--category",
                            "on-demand", "--as-of", "2025-06-01", "--format", "json").stdout)
    new = json.loads(loaded("prices", "--provider", "aws", "--gpu", "h100", "--category",
                            "on-demand", "--format", "json").stdout)
    price = {r["instance_type"]: r["price_per_hour"] for r in old}
    assert price["p5.48xlarge"] == "98.32"
    assert {r["instance_type"]: r["price_per_hour"] for r in new}["p5.48xlarge"] == "55.04"


def test_history_time_series(loaded):
    rows = json.loads(loaded("history", "--gpu", "h100", "--provider", "aws", "--category",
                             "on-demand", "--format", "json").stdout)
    p5 = [(r["price_per_hour"], r["valid_from"][:10]) for r in rows
          if r["instance_type"] == "p5.48xlarge"]
    assert p5 == [("98.32", "2025-05-26"), ("55.04", "2025-06-16")]


def test_sources_lists_every_registered_source(loaded):
    from scrapers import SOURCES

    rows = json.loads(loaded("sources", "--format", "json").stdout)
    assert [r["source"] for r in rows] == list(SOURCES)
    bundled = rows[0]
    # Fresh by the one rule: the newest sighting of its prices (their snapshot dates) is
    # within the window, not the run that loaded them (tracker/answers/freshness.py).
    assert bundled["last_status"] == "ok" and bundled["newest_price_at"]
    assert bundled["fresh"] == (bundled["age_hours"] <= 48)
    assert bundled["offers"] >= 60


def test_unknown_gpu_suggests_close_names(loaded):
    result = loaded("prices", "--gpu", "h10")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "Error: unknown GPU 'h10'; did you mean h100, a10, h100nvl, v710?"]  # v710 joined the table


def test_bad_as_of_is_a_usage_error(loaded):
    result = loaded("prices", "--as-of", "last tuesday")
    assert result.exit_code == 2
    assert "cannot parse 'last tuesday' as a date" in result.stderr


def test_unopenable_db_is_one_line(run, tmp_path):
    result = run("prices", db="bogus://nowhere")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot open database")


def test_db_from_environment(run, tmp_path):
    url = f"sqlite:///{tmp_path / 'env.db'}"
    result = run("init", db=None, env={"GPU_TRACKER_DB": url})
    assert result.exit_code == 0
    assert (tmp_path / "env.db").exists()


def test_unknown_source_fails_before_writing(run, tmp_path):
    result = run("refresh", "--source", "nosuch")
    assert result.exit_code == 1
    assert "unknown source 'nosuch'" in result.stderr


def test_debug_raises_the_error_with_its_traceback(sqlite_url):
    from tracker.core.errors import NotFound

    with pytest.raises(NotFound, match="unknown GPU 'zzz'"):
        CliRunner().invoke(cli, ["--db", sqlite_url, "--debug", "prices", "--gpu", "zzz"],
                           catch_exceptions=False)


def test_gpus_lists_the_canonical_table(run):
    rows = json.loads(run("gpus", "--format", "json", db=None).stdout)
    ids = {r["id"] for r in rows}
    assert {"h100-sxm", "h100-pcie", "h100-nvl", "h200", "b200", "a100-40gb", "a100-80gb",
            "l40s", "l4", "rtx-4090", "rtx-6000-ada", "rtx-a6000", "mi300x", "gaudi3"} <= ids


def test_python_dash_m_tracker_is_the_same_cli():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "tracker", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip().startswith("gpu-tracker, version")


def test_demo_loads_bundled_prices_runs_every_step_and_writes_the_report(sqlite_url, tmp_path):
    from tracker.cli.commands.demo import STEPS

    runner = CliRunner()
    args = ["--db", sqlite_url, "demo", "--report-dir", str(tmp_path / "reports")]
    first = runner.invoke(cli, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert "bundled prices: 429 observations, 102 new offers" in first.stderr
    for title, command in STEPS:
        assert f"== {title}" in first.stdout
        assert f"$ gpu-tracker {command}" in first.stdout
    # The commitment plan of data/usage-example.csv on the bundled Azure savings-plan rates:
    # 16 A100s busy 5/7 of the days, a 3-year break-even of 0.617.
    assert "$ gpu-tracker plan commitments --usage data/usage-example.csv" in first.stdout
    assert "a100-80gb-pcie  eastus2  azure         16  reserved-3y" in first.stdout
    # The example FOCUS export against the demo budget to the end of 22 November (a bare date
    # is the end of that day): 15 weekdays of 8 VMs and 7 weekend days of 4 at 24 x 7.346 a
    # VM-day spent; the forecast adds the 8 days from 23 November at the last 7 days' run-rate
    # (329.143 GPU-hours a day at 3.673): over the 34,000.
    assert "$ gpu-tracker import focus-usage data/focus-usage-example.csv" in first.stdout
    assert "$ gpu-tracker budgets status --as-of 2026-11-22" in first.stdout
    spent = (15 * 8 + 7 * 4) * 24 * Decimal("7.346")
    assert spent == Decimal("26092.992")
    forecast = spent + Decimal(8 * 48 * 24 / 7 * 2) * Decimal("3.673")  # 2 A100s a VM
    assert forecast.quantize(Decimal("0.01")) == Decimal("35764.53")
    assert re.search(r"A100s in eastus2 \(demo\)  month .* 34000\.00  26092\.99      35764\.53 "
                     r".* over ", first.stdout), first.stdout[-3000:]
    report_line = first.stdout.strip().splitlines()[-1]
    assert report_line.startswith("weekly report written to ")
    report = report_line.removeprefix("weekly report written to ")
    assert report.startswith(str(tmp_path / "reports")) and report.endswith(".html")
    with open(report, encoding="utf-8") as handle:
        assert "Executive summary" in handle.read()
    # ... and the report's budgets section shows the same budget at the end of week 48: the
    # whole export spent (+ 5 weekdays of 8 VMs and 2 weekend days of 4 after 22 November),
    # nothing to forecast.
    with open(report.removesuffix(".html") + ".json", encoding="utf-8") as handle:
        (budget,) = json.load(handle)["budgets"]["budgets"]
    assert (budget["name"], budget["status"]) == ("A100s in eastus2 (demo)", "over")
    assert Decimal(budget["spent"]) == round(spent + (5 * 8 + 2 * 4) * 24 * Decimal("7.346"), 2)
    # Idempotent: a second demo adds nothing and leaves the data queryable.
    second = runner.invoke(cli, args, catch_exceptions=False)
    assert "0 new offers, 0 price changes" in second.stderr
    assert re.search(r"already_imported +196", second.stdout)
    rows = json.loads(runner.invoke(cli, ["--db", sqlite_url, "prices", "--format",
                                          "json"]).stdout)
    assert len(rows) == 102


def test_the_command_runs_with_the_tuned_gc_thresholds(monkeypatch):
    """`gpu-tracker` (main) collects the youngest generation every 100,000 allocations, not
    700 (bench/gc_threshold.py: the weekly report on 50,000 offers ~0.85x CPU)."""
    import gc

    from tracker.cli import main as entry

    saved = gc.get_threshold()
    monkeypatch.setattr(sys, "argv", ["gpu-tracker", "--version"])
    try:
        with pytest.raises(SystemExit) as done:
            entry.main()
        assert done.value.code == 0
        assert gc.get_threshold() == entry.GC_THRESHOLDS == (100_000, 50, 100)
    finally:
        gc.set_threshold(*saved)
