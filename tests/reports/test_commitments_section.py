"""The report's commitments and budgets sections are the `plan commitments` and `budgets
status` documents for the report's instant (one application function each)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from click.testing import CliRunner

from reports.build import build_report
from tracker.cli.main import cli
from tracker.config.schema import load_config
from tracker.market.focus import import_usage
from tracker.store.db import open_database

from ..helpers import at, store_p5_prices

BUDGET = '[[budgets]]\nname = "h100"\namount = "5000"\ngpu = "h100"\nperiod = "month"\n'


def seed(url: str) -> None:
    db = open_database(url)
    store_p5_prices(db)
    rows = ["ProviderName,RegionId,x_InstanceType,x_GpuModel,x_GpuCount,ConsumedQuantity,"
            "ConsumedUnit,EffectiveCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd"]
    for d in range(4):
        start = at("2026-10-01") + timedelta(days=d)
        rows.append(f"AWS,us-east-1,p5.48xlarge,H100,8,24,Hours,1321.00,USD,"
                    f"{start.isoformat()},{(start + timedelta(days=1)).isoformat()}")
    import_usage(db, "\n".join(rows) + "\n", at("2026-10-05"))
    db.close()


def cli_json(url: str, config: str, *args: str):
    result = CliRunner().invoke(cli, ["--db", url, "--config", config, *args, "--format",
                                      "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_report_sections_are_the_command_documents(sqlite_url, tmp_path):
    seed(sqlite_url)
    config = tmp_path / "config.toml"
    config.write_text(f'[report]\nout_dir = "{tmp_path / "out"}"\n' + BUDGET, "utf-8")
    db = open_database(sqlite_url)
    doc = build_report(db, load_config(str(config), environ={}), "2026-W41",
                       now=datetime(2026, 10, 20, tzinfo=UTC))
    db.close()
    from tracker.core.serialization import dumps

    doc = json.loads(dumps(doc))
    as_of = doc["period"]["as_of"]
    plan = doc["commitments"]["plan"]
    cli_plan = cli_json(sqlite_url, str(config), "plan", "commitments", "--as-of", as_of)
    assert plan["lines"] == cli_plan["lines"]
    assert plan["totals"] == cli_plan["totals"]
    assert plan["lines"][0]["commit_gpus"] == 8
    assert {k: v for k, v in cli_plan["backtest"].items() if k != "days"} == plan["backtest"]
    budgets = doc["budgets"]["budgets"]
    assert budgets == cli_json(sqlite_url, str(config), "budgets", "status", "--as-of", as_of)
    assert Decimal(budgets[0]["spent"]) == Decimal("5284") and budgets[0]["status"] == "over"
