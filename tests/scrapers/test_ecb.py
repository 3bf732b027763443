"""ECB reference-rate source against the recorded daily file (tests/fixtures/ecb), and its
ingest into `exchange_rate` where the conversions read it."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from scrapers.base import ExchangeRateFact
from scrapers.ecb import HIST_90D_URL, EcbSource, parse_ecb_xml
from scrapers.http import HttpClient
from tracker.core.errors import SourceError
from tracker.core.http_settings import HttpSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ecb"
FETCHED_AT = datetime(2022, 7, 8, 16, 30, tzinfo=UTC)


def fetch(body: bytes) -> list:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=body)

    client = HttpClient(HttpSettings(backoff=0), transport=httpx.MockTransport(handler),
                        sleep=lambda _s: None)
    with client:
        records = list(EcbSource.from_config({}, {}).fetch(client, FETCHED_AT))
    assert str(seen[0].url) == HIST_90D_URL
    return records


def test_recorded_daily_file_parses_to_exact_rates():
    records = fetch((FIXTURES / "eurofxref-daily.xml").read_bytes())
    assert len(records) == 31
    assert all(isinstance(r, ExchangeRateFact) for r in records)
    by_currency = {r.currency: r for r in records}
    assert by_currency["USD"] == ExchangeRateFact("USD", date(2022, 7, 8), Decimal("1.0163"))
    assert by_currency["JPY"].rate == Decimal("138.05")
    assert by_currency["GBP"].rate == Decimal("0.84585")
    assert by_currency["IDR"].rate == Decimal("15210.73")


def test_bad_rates_are_rejected_and_non_xml_fails():
    body = (b"<Envelope><Cube><Cube time='2022-07-08'><Cube currency='USD' rate='x'/>"
            b"<Cube currency='GBP' rate='0.8'/></Cube></Cube></Envelope>")
    records = list(parse_ecb_xml(body))
    assert [type(r).__name__ for r in records] == ["Rejected", "ExchangeRateFact"]
    with pytest.raises(SourceError):
        list(parse_ecb_xml(b"<html>maintenance</html>"))
    with pytest.raises(SourceError):
        list(parse_ecb_xml(b"not xml"))


def test_ingested_rates_override_the_snapshot(sqlite_url):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records
    from tracker.store.rates import rate_table

    db = open_database(sqlite_url)
    records = list(parse_ecb_xml((FIXTURES / "eurofxref-daily.xml").read_bytes()))
    # A made-up later day, so the stored rate is distinguishable from the snapshot.
    records.append(ExchangeRateFact("USD", date(2040, 1, 2), Decimal("1.5")))
    summary = ingest_records(db, "ecb", records, started_at=FETCHED_AT)
    assert summary.status == "ok" and summary.interruption_facts == 32
    again = ingest_records(db, "ecb", records, started_at=FETCHED_AT)
    assert again.status == "ok"
    table = rate_table(db)
    assert table.euro_rate("USD", date(2022, 7, 8)) == (Decimal("1.0163"), date(2022, 7, 8))
    assert table.euro_rate("USD", date(2040, 1, 5)) == (Decimal("1.5"), date(2040, 1, 2))
    db.close()


def test_refresh_of_the_ecb_source_over_loopback(sqlite_url):
    """`refresh --source ecb` end to end: a real HTTP server serving the recorded file."""
    from tests.loopback import LoopbackServer, Reply
    from tracker.collect.refresh import refresh_sources
    from tracker.config.schema import load_config
    from tracker.store.db import open_database
    from tracker.store.rates import rate_table

    db = open_database(sqlite_url)
    with LoopbackServer() as server:
        server.route("/eurofxref.xml", Reply((FIXTURES / "eurofxref-daily.xml").read_bytes(),
                                             content_type="application/xml"))
        environ = {"GPU_TRACKER_SOURCE_ECB_URL": f"{server.url}/eurofxref.xml"}
        (summary,) = refresh_sources(db, load_config(None, environ=environ), ["ecb"],
                                     environ=environ)
    assert summary.status == "ok", summary.error
    assert rate_table(db).euro_rate("GBP", date(2022, 7, 9)) == (Decimal("0.84585"),
                                                                 date(2022, 7, 8))
    db.close()
