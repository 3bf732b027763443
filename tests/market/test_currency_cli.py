"""`--currency` on the money commands: each price converted at the ECB rate of its own day,
the rate and its date shown, JPY without decimals in tables, the stored price unchanged."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from click.testing import CliRunner

from tests.helpers import at, obs
from tracker.cli.main import cli

# ECB 2026-10-30 (Friday): 1 EUR = 1.1172 USD = 175.68 JPY (eurofxref-hist.csv).
USD_PER_EUR = Decimal("1.1172")


@pytest.fixture
def db_url(sqlite_url):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    db = open_database(sqlite_url)
    rows = [obs("23.92", at("2026-11-01"), provider="lambda", instance_type="gpu_8x_h100"),
            obs("23.92", at("2026-11-02"), provider="lambda", instance_type="gpu_8x_h100")]
    assert ingest_records(db, "test", rows, started_at=at("2026-11-02")).status == "ok"
    db.close()
    return sqlite_url


def run(db_url: str, *args: str):
    result = CliRunner().invoke(cli, ["--db", db_url, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_prices_in_euro_show_the_rate_and_its_day(db_url):
    (row,) = json.loads(run(db_url, "prices", "--currency", "EUR", "--as-of", "2026-11-02",
                            "--format", "json"))
    assert row["currency"] == "EUR"
    assert row["fx"] == {"from": "USD", "rate": str((1 / USD_PER_EUR).quantize(
        Decimal("0.000001"))), "rate_date": "2026-10-30", "quoted_price_per_hour": "23.92"}
    assert Decimal(row["price_per_hour"]) == (Decimal("23.92") / USD_PER_EUR).quantize(
        Decimal("1e-8"))
    # The stored price is unchanged.
    (plain,) = json.loads(run(db_url, "prices", "--as-of", "2026-11-02", "--format", "json"))
    assert (plain["price_per_hour"], plain["currency"]) == ("23.92", "USD")


def test_yen_tables_have_no_decimals(db_url):
    out = run(db_url, "prices", "--currency", "JPY", "--as-of", "2026-11-02")
    line = out.splitlines()[2]
    # 23.92 USD / 1.1172 * 175.68 = 3761.4 JPY per hour, 470.2 per GPU-hour.
    assert " 3761 " in line and " 470 " in line and "JPY" in line
    assert "USD 157.25 (2026-10-30)" in line


def test_cost_converts_the_offer(db_url):
    data = json.loads(run(db_url, "cost", "--hours", "10", "--gpu", "h100-sxm", "--count", "8",
                          "--currency", "EUR", "--as-of", "2026-11-02", "--format", "json"))
    assert data["currency"] == "EUR"
    assert data["offer"]["fx"]["rate_date"] == "2026-10-30"
    assert Decimal(data["cost"]) == (Decimal("239.2") / USD_PER_EUR).quantize(Decimal("0.01"))


def test_bad_currency_is_a_usage_error(db_url):
    result = CliRunner().invoke(cli, ["--db", db_url, "prices", "--currency", "EURO"])
    assert result.exit_code == 2 and "ISO 4217" in result.output


@pytest.mark.parametrize("value, currency, kwargs, expected", [
    ("470.2", "JPY", {"per": "GPU-h"}, "\u00a5470/GPU-h"),
    ("3761.44", "JPY", {}, "\u00a53,761"),
    ("0.455", "USD", {"per": "GPU-h"}, "$0.455/GPU-h"),
    ("1.2345", "KWD", {}, "1.235 KWD"),  # three minor digits (round half up, issue #15)
    ("2.5", "EUR", {}, "\u20ac2.50"),
])
def test_report_money_uses_each_currencys_minor_unit(value, currency, kwargs, expected):
    from reports.filters import money

    assert money(value, currency, **kwargs) == expected


def test_display_amount_for_tables():
    from tracker.core.money import display_amount, minor_units

    assert (minor_units("JPY"), minor_units("USD"), minor_units("BHD")) == (0, 2, 3)
    assert display_amount(Decimal("470.2"), "JPY", rate=True) == Decimal("470")
    assert display_amount(Decimal("2.99"), "USD", rate=True) == Decimal("2.9900")
