"""The report's market section on the fixed week (tests/reports/conftest.py): the price index
of the featured classes, the exchange rate the EUR offer was converted at, and a report built
in euros."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from reports.build import build_report

WEEK = "2026-W48"
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def doc(report_db, report_config):
    return build_report(report_db, report_config, WEEK, now=NOW)


def test_index_of_the_featured_classes(doc):
    market = doc["market"]
    charts = {c["gpu"]: c for c in market["index"]["charts"]}
    assert list(charts) == ["h100-sxm", "a100-80gb", "l40s"]
    h100 = charts["h100-sxm"]["latest"]
    assert h100["date"] == "2026-11-29" and h100["category"] == "on-demand"  # W48 Sunday
    assert h100["currency"] == "USD" and h100["providers"] >= 3
    assert Decimal(h100["p10"]) <= Decimal(h100["median"]) <= Decimal(h100["p90"])
    assert Decimal(h100["cheapest"]) <= Decimal(h100["p10"])


def test_the_eur_offer_is_converted_at_a_stated_rate(doc):
    # ECB 2026-10-30: 1 EUR = 1.1172 USD (the latest rate in the bundled snapshot).
    assert doc["market"]["exchange_rates"] == [
        {"from": "EUR", "to": "USD", "rate": "1.1172", "rate_date": "2026-10-30"}]
    assert doc["market"]["invoices"] == {"lines": [], "saving_by_currency": {}}


def test_a_report_in_euros(report_db, report_config):
    report_config.report.currency = "EUR"
    doc = build_report(report_db, report_config, WEEK, now=NOW)
    assert doc["currency"] == "EUR"
    h100 = next(e for e in doc["key_figures"] if e["gpu"] == "h100-sxm")
    # lambda 2.29 USD / 1.1172 = 2.0497... EUR: converted, not left out.
    assert Decimal(h100["on_demand"]["now"]["price"]) == (
        Decimal("2.29") / Decimal("1.1172")).quantize(Decimal("1e-8"))
    assert doc["market"]["index"]["charts"][0]["latest"]["currency"] == "EUR"
    assert {r["from"] for r in doc["market"]["exchange_rates"]} == {"USD"}
    assert doc["trends"]["charts"]  # spans converted too


def test_cost_per_job_over_the_last_four_weeks(doc):
    jobs = doc["market"]["job_index"]
    assert jobs["days"] == ["2026-11-08", "2026-11-15", "2026-11-22", "2026-11-29"]
    by_name = {j["job"]: j for j in jobs["jobs"]}
    assert len(by_name) == 3 and jobs["error"] is None
    serve = next(j for j in jobs["jobs"] if j["basis"] == "million_tokens")
    train = next(j for j in jobs["jobs"] if j["basis"] == "run" and j["costs"][-1])
    assert len(serve["costs"]) == len(train["costs"]) == 4
    assert all(Decimal(c) > 0 for c in train["costs"] if c is not None)
