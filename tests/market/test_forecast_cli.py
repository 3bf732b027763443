"""`gpu-tracker forecast` and `breakeven --cloud-price-trend forecast` on a stored history."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from decimal import Decimal

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli
from tracker.market.forecasts import BACKTEST_JSON_KEYS, FORECAST_JSON_KEYS
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs

DAYS = 150
START = at("2026-06-01")
# Three providers, H100 per-GPU prices falling 30% a year with a weekly wobble.
PROVIDERS = (("lambda", "gpu_1x_h100_sxm5", Decimal("2.49")),
             ("runpod", "h100-sxm", Decimal("2.69")),
             ("vastai", "h100", Decimal("2.20")))


def _price(base: Decimal, day: int) -> Decimal:
    value = float(base) * (0.7 ** (day / 365)) * (1 + 0.01 * math.sin(day))
    return Decimal(repr(value)).quantize(Decimal("0.01"))


@pytest.fixture(scope="module")
def history_db(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('fc') / 'tracker.db'}"
    db = open_database(url)
    for day in range(DAYS):
        when = START + timedelta(days=day, hours=12)
        for provider, instance, base in PROVIDERS:
            ingest_records(db, provider, [obs(_price(base, day), when, provider=provider,
                                              instance_type=instance, gpu_count=1,
                                              region="us")], started_at=when)
    db.close()
    return url


def run(db: str, *args: str):
    return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)


def run_json(db: str, *args: str):
    result = run(db, *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


LAST = (START + timedelta(days=DAYS - 1)).date().isoformat()


def test_forecast_contract_and_a_falling_trend(history_db):
    data = run_json(history_db, "forecast", "--gpu", "h100-sxm", "--as-of", LAST,
                    "--horizon-days", "30")
    assert set(FORECAST_JSON_KEYS) <= set(data)
    assert set(BACKTEST_JSON_KEYS) <= set(data["backtest"])
    assert data["gpu"] == "h100-sxm" and data["category"] == "on-demand"
    assert data["currency"] == "USD"
    assert data["history_days"] == DAYS
    assert len(data["points"]) == 30
    assert data["points"][0]["date"] == (START + timedelta(days=DAYS)).date().isoformat()
    # The median of three providers falls 30% a year: the fit within 5 points of it.
    assert data["trend_pct_per_year"] == pytest.approx(-30.0, abs=5.0)
    for point in data["points"]:
        assert Decimal(point["p10"]) <= Decimal(point["p50"]) <= Decimal(point["p90"])
    first, last = data["points"][0], data["points"][-1]
    assert Decimal(last["p50"]) < Decimal(first["p50"])
    bt = data["backtest"]
    assert bt["horizons_days"] == [7, 30, 90]
    assert bt["median_abs_pct_error"][0] < 2.0  # a 1% wobble around a clean trend
    assert 0.5 <= bt["band_coverage"] <= 1.0


def test_forecast_table_and_csv(history_db):
    table = run(history_db, "forecast", "--gpu", "h100", "--as-of", LAST)
    assert table.exit_code == 0, table.output
    assert "fitted trend" in table.stdout and "back-test" in table.stdout
    assert "date" in table.stdout and "p50" in table.stdout
    csv_out = run(history_db, "forecast", "--gpu", "h100-sxm", "--as-of", LAST,
                  "--horizon-days", "5", "--format", "csv")
    lines = csv_out.stdout.strip().splitlines()
    assert lines[0] == "date,p10,p50,p90" and len(lines) == 6


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--gpu", "h100-sxm", "--horizon-days", "0"), 2, "--horizon-days"),
    (("--gpu", "h100-sxm", "--horizon-days", "3650"), 2, "at most 730"),
    (("--gpu", "a100-80gb",), 1,
     "a100-80gb on-demand index over the 365 days to 2026-10-28: 0 days of history; the "
     "forecast needs at least 28"),
    (("--gpu", "h100-sxm", "--history-days", "20"), 2, "--history-days"),
    ((), 2, "give --gpu X (the price index) or --job NAME"),
    (("--gpu", "h100-sxm", "--job", "x"), 2, "give --gpu X"),
    (("--job", "nope",), 1, "no configured workload named 'nope'"),
])
def test_bad_input_is_one_line(history_db, args, code, message):
    result = run(history_db, "forecast", *args, "--as-of", LAST)
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""


def test_too_little_history_says_how_much(history_db):
    early = (START + timedelta(days=12)).date().isoformat()
    result = run(history_db, "forecast", "--gpu", "h100-sxm", "--as-of", early)
    assert result.exit_code == 1
    assert ("13 days of history (2026-06-01 to 2026-06-13); the forecast needs at least 28"
            in result.stderr)


def test_breakeven_reads_the_forecast_trend(history_db):
    args = ("breakeven", "--gpu", "h100-sxm", "--count", "1", "--utilization", "0.7",
            "--as-of", LAST)
    flat = run_json(history_db, *args)
    moving = run_json(history_db, *args, "--cloud-price-trend", "forecast")
    forecast = run_json(history_db, "forecast", "--gpu", "h100-sxm", "--as-of", LAST)
    assert moving["cloud_price_trend_pct_per_year"] == pytest.approx(
        forecast["trend_pct_per_year"], abs=0.01)
    assert moving["cloud_price_trend_source"].startswith(
        "forecast: the h100-sxm on-demand index's fitted trend")
    assert Decimal(moving["npv"]) < Decimal(flat["npv"])


def test_job_forecast_of_a_configured_workload(history_db, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[[report.workloads]]\nname = "ft"\nkind = "finetune"\n'
                      'model = "llama-3.2-1b"\ntokens = 200000000\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["--db", history_db, "--config", str(config), "forecast",
                                      "--job", "ft", "--as-of", LAST, "--history-days", "40",
                                      "--horizon-days", "10", "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["job"] == "ft" and data["basis"] == "run"
    assert data["history_days"] == 40 and len(data["points"]) == 10
    # Two decimals: a cost per run, not a rate.
    assert all(len(p["p50"].split(".")[1]) == 2 for p in data["points"])
    assert Decimal(data["points"][0]["p10"]) <= Decimal(data["points"][0]["p90"])
