"""Quotes CSV: validation with line numbers, snapshots over valid_from, the import command."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from scrapers.base import PriceObservation
from scrapers.http import HttpClient
from scrapers.quotes import (
    COLUMNS,
    QuoteError,
    QuotesInvalid,
    QuotesSource,
    import_quotes_csv,
    validate_quotes,
)
from tracker.cli.commands import AppContext
from tracker.cli.commands.import_cmd import import_quotes
from tracker.core.errors import MissingCredentials, SourceError
from tracker.core.gpus import canonical_gpu, gpu_table
from tracker.core.http_settings import HttpSettings

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "quotes-example.csv"
FIXTURES = REPO / "tests" / "fixtures" / "quotes"
HEADER = ",".join(COLUMNS)


def csv_text(*rows: str, header: str = HEADER) -> str:
    return "\n".join([header, *rows]) + "\n"


def test_example_file_is_valid_and_amortizes_capex() -> None:
    observations, errors = validate_quotes(EXAMPLE.read_text())
    assert errors == []
    dgx = [o for o in observations if o.instance_type == "DGX H100"]
    assert {o.price_per_hour for o in dgx} == {Decimal("7.705479")}  # 270000 / (48 × 730)
    first = dgx[0]
    assert first.observed_at == datetime(2024, 6, 1, tzinfo=UTC)
    assert first.category == "quote" and first.gpu_count == 8.0
    assert first.gpu_name == "h100-sxm" and canonical_gpu(first.gpu_name) == "h100-sxm"
    assert first.attributes["capex"] == Decimal("270000")
    assert first.attributes["power_kw"] == 10.2
    assert first.attributes["lifetime_months"] == 48
    assert "amortized capex" in first.attributes["price_basis"]
    assert first.source_url == "https://github.com/epoch-research/training-cost-trends"
    hgx = [o for o in observations if o.instance_type == "HGX H100 8-GPU server"]
    assert hgx[0].price_per_hour == Decimal("7.077626")  # 310000 / (60 × 730)


def test_example_rows_hold_until_replaced() -> None:
    observations, _ = validate_quotes(EXAMPLE.read_text())
    snapshot = {}
    for o in observations:
        snapshot.setdefault(o.observed_at.date().isoformat(), {})[o.instance_type] = \
            o.price_per_hour
    reserved = "gpu_8x_h100_sxm5 (1-year reservation)"
    assert sorted(snapshot) == ["2024-06-01", "2024-08-01", "2025-06-01", "2026-01-15"]
    assert set(snapshot["2024-06-01"]) == {"DGX H100"}
    assert set(snapshot["2024-08-01"]) == {"DGX H100", "HGX H100 8-GPU server"}
    assert snapshot["2025-06-01"][reserved] == Decimal("14.80")
    assert snapshot["2026-01-15"][reserved] == Decimal("13.60")  # the renewal replaces it
    assert snapshot["2026-01-15"]["DGX H100"] == Decimal("7.705479")  # still in force
    assert len(observations) == 1 + 2 + 3 + 3


def test_every_bad_row_is_reported_with_its_line() -> None:
    content = "\n".join([
        "# my quotes",
        HEADER,
        "lambda,us-east-1,gpu_8x_h100_sxm5,h100-sxm,8,reserved-1y,14.80,USD,2025-06-01,,,,,",
        "",
        "lambda,us-east-1,x,h100-sxm,8,reserved-2y,14.80,USD,2025-06-01,,,,,",
        "Lambda Labs,,x,H100,0,on-demand,-1,usd,2025-13-01,ftp://x,,,,",
        "onprem,,DGX,b200,8,quote,,USD,2025-06-01,,,,,",
        "aws,us-east-1,p5.48xlarge,h100-sxm,8,on-demand,\"1,234.5\",XYZ,2025-06-01T10:00,,,,,",
        "aws,us-east-1,p5.48xlarge,h100-sxm,8,on-demand,55.04,USD,2025-06-01,,,,",
        "onprem,,DGX B200,rtx-9999,8,quote,,USD,2025-06-01,,,500000,14.3,0",
        "lambda,us-east-1,gpu_8x_h100_sxm5,h100-sxm,8,reserved-1y,13.00,USD,2025-06-01,,,,,",
        "lambda,us-east-1,gpu_8x_h100_sxm5,a100-80gb,8,reserved-1y,13.00,USD,2025-07-01,,,,,",
    ]) + "\n"
    observations, errors = validate_quotes(content)
    assert observations == []
    lines = [(e.line, e.message) for e in errors]
    assert (5, "category 'reserved-2y' is not one of on-demand, spot, reserved-1y, "
               "reserved-3y, bid, quote") in lines
    line6 = [m for n, m in lines if n == 6]
    assert "provider 'Lambda Labs' must be a short id of letters, digits, '.', '_' or '-'" \
        in line6
    assert any(m.startswith("gpu 'H100' is ambiguous; use one of h100-nvl, h100-pcie, h100-sxm")
               for m in line6)
    assert "gpu_count must be a positive number, got '0'" in line6
    assert "price_per_hour '-1' is not a plain decimal number (like 2.49)" in line6
    assert "currency 'usd' is not an ISO 4217 code" not in line6  # lower case is accepted
    assert "valid_from '2025-13-01' is not a date (YYYY-MM-DD) or ISO 8601 time" in line6
    assert any("source_url 'ftp://x'" in m for m in line6)
    assert (7, "a quote row needs capex (the purchase price)") in lines
    line8 = [m for n, m in lines if n == 8]
    assert "price_per_hour '1,234.5' is not a plain decimal number (like 2.49)" in line8
    assert "currency 'XYZ' is not an ISO 4217 code" in line8
    assert "valid_from '2025-06-01T10:00' has a time but no timezone (add Z for UTC)" in line8
    assert (9, "has 13 cells, the header has 14 columns") in lines
    line10 = [m for n, m in lines if n == 10]
    assert any(m.startswith("unknown GPU 'rtx-9999'") for m in line10)
    assert "lifetime_months '0' must be a whole number of months > 0" in line10
    assert (11, "same provider, region, instance_type, category and valid_from as line 3") \
        in lines
    assert (12, "'gpu_8x_h100_sxm5' is 8 x h100-sxm on line 3; a different product needs its "
                "own instance_type") in lines
    assert {n for n, _ in lines} == {5, 6, 7, 8, 9, 10, 11, 12}  # line 3 is good


def test_header_problems() -> None:
    _, errors = validate_quotes("provider,instance_type,gpu,price\n")
    assert errors == [QuoteError(1, "unknown column(s) 'price'; known: " + ", ".join(COLUMNS))]
    _, errors = validate_quotes("\n\n# comment\nprovider,instance_type,gpu\n")
    assert errors == [QuoteError(4, "missing required column(s): gpu_count, category, "
                                    "price_per_hour, currency, valid_from")]
    _, errors = validate_quotes("")
    assert errors[0].line == 1 and "empty" in errors[0].message
    assert str(QuoteError(7, "boom")) == "line 7: boom"


def test_column_order_is_free_and_bom_is_ignored() -> None:
    content = ("\ufeffvalid_from,price_per_hour,currency,category,gpu_count,gpu,instance_type,"
               "provider\n2025-06-01T09:30:00+02:00,2.49,EUR,on-demand,1,A100 80GB,a100x1,"
               "example-cloud\n")
    (obs,), errors = validate_quotes(content)
    assert errors == []
    assert obs.observed_at == datetime(2025, 6, 1, 7, 30, tzinfo=UTC)
    assert (obs.currency, obs.price_per_hour, obs.gpu_name) == ("EUR", Decimal("2.49"),
                                                                 "a100-80gb")
    assert obs.attributes["gpu_as_written"] == "A100 80GB"
    assert obs.region == "" and obs.variant == "" and obs.zone == ""


def test_every_canonical_id_is_accepted_and_kept() -> None:
    rows = [f"p,,{gpu_id},{gpu_id},1,on-demand,1.00,USD,2025-06-01,,,,,"
            for gpu_id in gpu_table()]
    observations, errors = validate_quotes(csv_text(*rows))
    assert errors == []
    assert all(canonical_gpu(o.gpu_name, o.gpu_memory_gb) == o.gpu_name for o in observations)


def test_quote_with_price_given_keeps_it() -> None:
    row = ("onprem,fra-dc2,HGX B200,b200,8,quote,9.50,USD,2025-06-01,"
           "https://example.com/q.pdf,colo included,480000,14.3,")
    (obs,), errors = validate_quotes(csv_text(row))
    assert errors == []
    assert obs.price_per_hour == Decimal("9.50") and "price_basis" not in obs.attributes
    assert obs.attributes["notes"] == "colo included"
    row = "onprem,,HGX B200,b200,8,quote,,USD,2025-06-01,,,480000,,"
    _, errors = validate_quotes(csv_text(row))
    assert [e.message for e in errors] == [
        "price_per_hour is empty: give it, or lifetime_months to amortize capex over"]


def test_import_quotes_csv_raises_with_all_errors(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text(csv_text("a,,x,h100-sxm,8,spot,1,USD,2025-06-01,,,,,",
                             "b,,y,h100-sxm,8,spotty,1,USD,2025-06-01,,,,,",
                             "c,,z,h100-sxm,-8,spot,1,USD,2025-06-01,,,,,"))
    with pytest.raises(QuotesInvalid) as info:
        import_quotes_csv(path)
    assert [e.line for e in info.value.errors] == [3, 4]
    assert "2 problems, nothing imported" in str(info.value)
    good = tmp_path / "good.csv"
    good.write_text(csv_text("a,,x,h100-sxm,8,spot,1,USD,2025-06-01,,,,,"))
    (obs,) = import_quotes_csv(good)
    assert isinstance(obs, PriceObservation) and obs.price_per_hour == Decimal("1")


# -- the source ---------------------------------------------------------------------------------

def test_source_without_a_file_is_skipped() -> None:
    with pytest.raises(MissingCredentials, match="no quotes file configured"):
        QuotesSource.from_config({}, {})


def test_source_reads_a_path_or_url(tmp_path: Path) -> None:
    fetched_at = datetime(2026, 1, 1, tzinfo=UTC)
    source = QuotesSource.from_config({}, {"GPU_TRACKER_SOURCE_QUOTES_PATH": str(EXAMPLE)})
    client = HttpClient(HttpSettings(backoff=0), transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=EXAMPLE.read_bytes())))
    with client:
        local = list(source.fetch(client, fetched_at))
        remote_source = QuotesSource.from_config({"url": "https://intra.example/quotes.csv"}, {})
        remote = list(remote_source.fetch(client, fetched_at))
    assert len(local) == len(remote) == 9
    assert remote[0].source_url == "https://github.com/epoch-research/training-cost-trends"
    bad = tmp_path / "bad.csv"
    bad.write_text(csv_text("a,,x,h100-sxm,8,spotty,1,USD,2025-06-01,,,,,"))
    with client, pytest.raises(SourceError, match="line 2: category 'spotty'"):
        list(QuotesSource.from_config({"path": str(bad)}, {}).fetch(client, fetched_at))


# -- the import command -------------------------------------------------------------------------

def run_import(db_url: str, *args: str) -> object:
    runner = CliRunner()
    return runner.invoke(import_quotes, list(args), obj=AppContext(db_url=db_url))


def run_count(db_url: str) -> int:
    from tracker.store.db import open_database

    db = open_database(db_url)
    try:
        with db.engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM ingest_run")).scalar_one()
    finally:
        db.close()


def test_import_command_refuses_a_file_with_bad_rows(sqlite_url: str) -> None:
    path = FIXTURES / "bad-rows.csv"  # line 2 is good, lines 3 and 4 are not
    result = run_import(sqlite_url, str(path))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "line 3: price_per_hour 'abc' is not a plain decimal number (like 2.49)",
        "line 4: a quote row needs capex (the purchase price)",
        f"Error: {path}: 2 problems on 2 line(s); nothing imported",
    ]
    assert result.stdout == ""
    assert run_count(sqlite_url) == 0  # nothing at all was written


def test_import_command_imports_and_is_idempotent(sqlite_url: str) -> None:
    result = run_import(sqlite_url, str(EXAMPLE), "--format", "json")
    assert result.exit_code == 0, result.output
    import json

    summary = json.loads(result.stdout)
    assert summary["status"] == "ok" and summary["source"] == "quotes"
    assert summary["new_offers"] == 3 and summary["prices_changed"] == 1
    assert summary["rejected"] == 0
    again = json.loads(run_import(sqlite_url, str(EXAMPLE), "--format", "json").stdout)
    assert again["new_offers"] == 0 and again["prices_changed"] == 0

    from tracker.store.db import open_database
    from tracker.store.queries import history

    db = open_database(sqlite_url)
    try:
        points = [p for p in history(db, "h100-sxm", provider="lambda")]
    finally:
        db.close()
    assert [(p.price_per_hour, p.valid_from.date().isoformat(),
             p.valid_to.date().isoformat() if p.valid_to else None) for p in points] == [
        (Decimal("14.80"), "2025-06-01", "2026-01-15"), (Decimal("13.60"), "2026-01-15", None)]


def test_import_command_missing_file_is_one_line(sqlite_url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.cli.commands import COMMANDS
    from tracker.cli.main import cli

    monkeypatch.setitem(COMMANDS, "import",
                        ("import_cmd:import_quotes", "Import quotes."))
    missing = tmp_path / "nope.csv"
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "import", str(missing)])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: quotes file not found: {missing}"
