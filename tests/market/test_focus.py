"""FOCUS: the export's header and values against the FOCUS 1.2 column list, and the invoice
check on a small hand-made FOCUS usage file (tests/fixtures/focus/README.md)."""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import at, obs
from tracker.cli.main import cli
from tracker.market.focus import (
    EXPORT_COLUMNS,
    UsageFileError,
    export_rows,
    import_usage,
    invoice_check,
    spec,
    spec_columns,
    write_export,
)

USAGE = Path(__file__).resolve().parents[1] / "fixtures" / "focus" / "usage-handmade.csv"


@pytest.fixture
def db(any_db_url):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    database = open_database(any_db_url)
    records = []
    for day in ("2026-10-25", "2026-11-01", "2026-11-02"):
        when = at(day)
        records += [
            obs("98.32", when, provider="aws", instance_type="p5.48xlarge"),
            obs("23.92", when, provider="lambda", instance_type="gpu_8x_h100"),
            obs("2.39", when, provider="runpod", instance_type="1x H100", gpu_count=1,
                region="global"),
            obs("1.10", when, provider="aws", category="spot"),
        ]
    assert ingest_records(database, "test", records, started_at=at("2026-11-02")).status == "ok"
    yield database
    database.close()


def test_bundled_column_list_is_focus_1_2():
    columns = spec_columns()
    assert spec()["version"] == "1.2" and len(columns) == 57
    for name in ("ProviderName", "ServiceName", "ServiceCategory", "RegionId", "SkuId",
                 "SkuPriceId", "PricingCategory", "PricingUnit", "ListUnitPrice",
                 "BillingCurrency", "PricingCurrency", "EffectiveCost", "ChargePeriodStart"):
        assert name in columns
    assert spec()["allowed_values"]["PricingCategory"] == ["Standard", "Dynamic", "Committed",
                                                           "Other"]


def test_export_header_uses_focus_names_and_x_prefixed_custom_columns(db, tmp_path):
    records = export_rows(db, at("2026-11-02", 12))
    out = tmp_path / "prices.csv"
    assert write_export(records, out) == "csv"
    with out.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames
        rows = list(reader)
    assert header == list(EXPORT_COLUMNS)
    focus = set(spec_columns())
    for column in header:
        assert column in focus or column.startswith("x_"), column
    allowed = spec()["allowed_values"]
    assert {r["PricingCategory"] for r in rows} <= set(allowed["PricingCategory"])
    assert {r["ServiceCategory"] for r in rows} <= set(allowed["ServiceCategory"])
    p5 = next(r for r in rows if r["SkuId"] == "aws/p5.48xlarge"
              and r["PricingCategory"] == "Standard")
    assert p5["ProviderName"] == "aws" and p5["RegionId"] == "us-east-1"
    assert p5["PricingUnit"] == "Hours" and p5["ListUnitPrice"] == "98.32"
    assert p5["PricingCurrency"] == p5["BillingCurrency"] == "USD"
    assert p5["x_GpuModel"] == "h100-sxm" and p5["x_GpuCount"] == "8"
    assert p5["x_PricePerGpuHour"] == "12.29" and p5["x_GpuMemoryGB"] == "80"
    assert p5["x_SkuPriceEffectiveStart"] == "2026-10-25T00:00:00Z"
    assert p5["SkuPriceId"] == "aws/us-east-1/-/p5.48xlarge/-/on-demand"
    spot = next(r for r in rows if r["SkuId"] == "aws/p5.48xlarge"
                and r["PricingCategory"] == "Dynamic")
    assert spot["ListUnitPrice"] == "1.1"


def test_export_in_another_currency_keeps_the_pricing_currency(db):
    from tracker.store.rates import rate_table

    (p5,) = [r for r in export_rows(db, at("2026-11-02", 12), "EUR")
             if r["SkuPriceId"] == "aws/us-east-1/-/p5.48xlarge/-/on-demand"]
    rate, day = rate_table(None).rate("USD", "EUR", at("2026-11-02").date())
    assert p5["BillingCurrency"] == "EUR" and p5["PricingCurrency"] == "USD"
    assert p5["PricingCurrencyListUnitPrice"] == "98.32"
    assert Decimal(p5["ListUnitPrice"]) == (Decimal("98.32") * rate).quantize(
        Decimal("1e-8")).normalize()
    assert p5["x_ExchangeRateDate"] == day.isoformat() == "2026-10-30"


def test_parquet_needs_pyarrow_or_says_so(db, tmp_path):
    records = export_rows(db, at("2026-11-02", 12))
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        from tracker.core.errors import InvalidInput

        with pytest.raises(InvalidInput, match="pyarrow"):
            write_export(records, tmp_path / "out" / "p.parquet")
        assert not (tmp_path / "out").exists()  # nothing half-written
    else:
        import pyarrow.parquet as pq

        assert write_export(records, tmp_path / "p.parquet") == "parquet"
        table = pq.read_table(tmp_path / "p.parquet")
        assert table.column_names == list(EXPORT_COLUMNS)
        assert table.num_rows == len(records)
        assert sorted(table.column("SkuPriceId").to_pylist()) == sorted(
            r["SkuPriceId"] for r in records)


def test_invoice_check_on_the_handmade_file(db):
    summary = import_usage(db, USAGE.read_text(), at("2026-11-05"))
    assert (summary["gpu_lines"], summary["imported"], summary["skipped_non_gpu"]) == (2, 2, 1)
    again = import_usage(db, USAGE.read_text(), at("2026-11-05"))
    assert (again["imported"], again["already_imported"]) == (0, 2)
    aws, lam = invoice_check(db)
    # 983.20 USD for 10 h × 8 GPUs = 12.29 per GPU-hour, the p5 list price. The comparator
    # holds the line's 8 GPUs in one node: Lambda's 8x at 23.92/h = 2.99 per GPU-hour, saving
    # 983.20 − 2.99 × 80 = 744.00 -- not RunPod's 1-GPU pod at 2.39 (issue 29: eight pods
    # are not an 8-GPU NVLink node).
    assert aws["line"] == 2 and aws["gpu"] == "h100-sxm" and aws["gpu_hours"] == 80.0
    assert aws["paid_per_gpu_hour"] == Decimal("12.2900")
    assert aws["list_per_gpu_hour"] == Decimal("12.2900")
    assert aws["cheapest_per_gpu_hour"] == Decimal("2.9900")
    assert aws["cheapest_offer"] == "lambda us-east-1 gpu_8x_h100 on-demand (8 GPUs x 1)"
    assert aws["saving"] == Decimal("744.00") and aws["saving_pct"] == 75.7
    # Lambda, GPU named in x_GpuModel: 119.60 / 40 GPU-hours = 2.99, its own 8-GPU offer is
    # the cheapest of its shape: no saving.
    assert lam["paid_per_gpu_hour"] == Decimal("2.9900")
    assert lam["list_per_gpu_hour"] == Decimal("2.9900")
    assert lam["saving"] == Decimal("0.00")


def test_a_bad_gpu_line_refuses_the_whole_file(db, tmp_path):
    text = USAGE.read_text().replace(",119.60,119.60,119.60,", ",,119.60,119.60,")
    with pytest.raises(UsageFileError) as info:
        import_usage(db, text, at("2026-11-05"))
    assert [str(e) for e in info.value.errors] == ["line 4: EffectiveCost is not a number: ''"]
    assert invoice_check(db) == []


def test_cli_import_check_and_export(db, tmp_path):
    url = db.url
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", url, "import", "focus-usage", str(USAGE), "--format",
                              "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["imported"] == 2
    out = runner.invoke(cli, ["--db", url, "check", "invoices", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert [r["saving"] for r in json.loads(out.output)] == ["744", "0"]
    target = tmp_path / "focus.csv"
    out = runner.invoke(cli, ["--db", url, "export", "focus", "--as-of", "2026-11-02",
                              "--out", str(target)])
    assert out.exit_code == 0, out.output
    assert target.read_text().startswith("ProviderName,PublisherName,ServiceName")
