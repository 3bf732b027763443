"""Issue 23: CLI money is drawn from the documents and formatted like the report's: one function
(`tracker.core.money.format_money`), the currency's minor units (JPY none, USD two), prices per
unit below one unit with three decimals."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from click.testing import CliRunner

from reports.filters import money as report_money
from tracker.cli.commands.printing import money_text
from tracker.cli.main import cli
from tracker.core.money import display_amount, format_money, round_money

BREAKEVEN = ["breakeven", "--gpu", "h100-sxm", "--count", "8", "--utilization", "0.6",
             "--as-of", "2026-10-30"]


def _amounts(table: str) -> str:
    """The table without its warning lines (an exchange rate keeps its published digits)."""
    return "\n".join(line for line in table.splitlines() if not line.startswith("warning:"))


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args, env={"GPU_TRACKER_CURRENCY": ""})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(("amount", "currency", "rate", "cli", "report"), [
    ("1234.565", "USD", False, "1,234.57 USD", "$1,234.57"),
    ("1234.5", "JPY", False, "1,235 JPY", "\u00a51,235"),
    ("0.3725", "USD", True, "0.373 USD", "$0.373/GPU-h"),
    ("0.07849", "EUR", True, "0.078 EUR", "\u20ac0.078/GPU-h"),
    ("2.9925", "USD", True, "2.99 USD", "$2.99/GPU-h"),
    ("469.6", "JPY", True, "470 JPY", "\u00a5470/GPU-h"),
    ("-12.5", "CHF", False, "-12.50 CHF", "\u221212.50 CHF"),
    ("0.1234", "KWD", True, "0.123 KWD", "0.123 KWD/GPU-h"),
])
def test_the_cli_and_the_report_round_money_alike(amount, currency, rate, cli, report) -> None:
    value = Decimal(amount)
    assert money_text(value, currency, rate=rate) == cli
    assert report_money(value, currency, per="GPU-h" if rate else None) == report
    assert format_money(value, currency, rate=rate) == cli
    shown = display_amount(value, currency, rate=rate)
    assert f"{shown:,f}" in cli


def test_breakeven_in_yen_has_no_decimals_and_converted_defaults() -> None:
    # The table printed "staff 1,000.00 JPY": the USD default relabelled, with decimals.
    table = _run([*BREAKEVEN, "--currency", "JPY", "--cloud-price-per-hour", "3000"])
    assert re.search(r"\d\.\d+ JPY", _amounts(table)) is None, table
    staff = re.search(r"staff ([\d,]+) JPY", table)
    assert staff is not None and int(staff.group(1).replace(",", "")) > 100_000


@pytest.mark.parametrize("currency", ["USD", "JPY", "EUR"])
def test_the_breakeven_table_shows_the_documents_figures(currency: str) -> None:
    args = [*BREAKEVEN, "--currency", currency, "--cloud-price-per-hour", "3000",
            "--price-currency", "JPY"]
    data = json.loads(_run([*args, "--format", "json"]))
    table = _run(args)
    for key in ("capex", "monthly_onprem_opex", "monthly_cloud_cost", "monthly_power",
                "monthly_colo", "monthly_staff", "npv"):
        assert format_money(Decimal(data[key]), currency) in table, key
    for key in ("cloud_price_per_hour", "owned_cost_per_gpu_hour"):
        assert format_money(Decimal(data[key]), currency, rate=True) in table, key


def test_the_cost_table_shows_the_documents_figures_in_yen() -> None:
    args = ["cost", "--hours", "10", "--count", "8", "--price-per-gpu-hour", "0.45",
            "--currency", "JPY", "--price-currency", "USD", "--as-of", "2026-10-30"]
    data = json.loads(_run([*args, "--format", "json"]))
    table = _run(args)
    assert f"cost per run  {format_money(Decimal(data['cost']), 'JPY')}" in table
    assert re.search(r"\d\.\d+ JPY", _amounts(table)) is None, table


def test_a_sub_dollar_price_per_gpu_hour_has_three_decimals_in_the_cost_table() -> None:
    table = _run(["cost", "--hours", "10", "--price-per-gpu-hour", "0.45"])
    assert "price         0.450 USD per GPU-hour" in table
    assert "cost per run  4.50 USD" in table


def test_a_quote_in_euros_takes_the_usd_defaults_converted(sqlite_url, tmp_path) -> None:
    # The DGX H100 example quote in EUR: capex is the quote's own, in EUR; power price, colo
    # and staff are the USD defaults, which were added to it as if they were euros.
    from datetime import date

    from tracker.store.rates import rate_table

    quote = ("provider,region,instance_type,gpu,gpu_count,category,price_per_hour,currency,"
             "valid_from,capex,power_kw,lifetime_months\n"
             "onprem,,DGX H100,h100-sxm,8,quote,,{currency},2024-06-03,270000,10.2,48\n")
    parts = {}
    for currency in ("USD", "EUR"):
        path = tmp_path / f"{currency}.csv"
        path.write_text(quote.format(currency=currency), "utf-8")
        db = f"sqlite:///{tmp_path / currency}.db"
        _run(["--db", db, "import", str(path)])
        rows = json.loads(_run(["--db", db, "prices", "--category", "quote", "--as-of",
                                "2024-06-10", "--owned-utilization", "0.5", "--format",
                                "json"]))
        parts[currency] = rows[0]["owned_cost"]["per_gpu_hour"]
    rate, _ = rate_table(None).rate("USD", "EUR", date(2024, 6, 3))
    assert Decimal(parts["EUR"]["capex"]) == Decimal(parts["USD"]["capex"])  # the quote's own
    for part in ("power", "colo", "staff"):
        assert Decimal(parts["EUR"][part]) == pytest.approx(
            Decimal(parts["USD"][part]) * rate, abs=Decimal("0.000002")), part


def test_the_compare_table_rounds_the_documents_rows_by_minor_units(priced_db) -> None:
    args = ["--db", priced_db, "compare", "--model", "llama-3.1-8b", "-w", "full-finetune",
            "--tokens", "1e9", "--gpu", "h100-sxm", "--as-of", "2026-11-09", "--currency",
            "JPY"]
    rows = json.loads(_run([*args, "--format", "json"]))
    table = _run(args).splitlines()
    assert len(table) == len(rows) + 2
    header = table[0].split()
    for row, line in zip(rows, table[2:], strict=True):
        cells = dict(zip(header, line.split(), strict=False))
        assert cells["cost"] == f"{round_money(Decimal(row['cost']), Decimal(1)):f}"
        assert "." not in cells["price_per_gpu_hour"]
    assert any(Decimal(r["cost"]) != Decimal(r["cost"]).quantize(Decimal(1)) for r in rows)
