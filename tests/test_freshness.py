"""The one freshness rule (tracker/answers/freshness.py) as `sources`, `status`, the alerts, the
index and the report's data quality apply it at the question's as-of: by the newest sighting of a
source's prices up to it (its last successful run when it has no prices)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.answers.freshness import source_freshness

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.mark.parametrize(("last_run", "status", "success", "state", "stale"), [
    (None, None, None, "never", True),
    (NOW - timedelta(hours=1), "failed", None, "failing", True),
    (NOW - timedelta(hours=1), "failed", NOW - timedelta(hours=2), "failing", False),
    (NOW - timedelta(hours=50), "ok", NOW - timedelta(hours=50), "stale", True),
    (NOW - timedelta(hours=48), "ok", NOW - timedelta(hours=48), "fresh", False),
    (NOW - timedelta(hours=1), "ok", NOW - timedelta(hours=1), "fresh", False),
])
def test_states(last_run, status, success, state, stale):
    result = source_freshness(last_run_at=last_run, last_status=status,
                              last_success_at=success, now=NOW, stale_after_hours=48)
    assert (result.state, result.stale, result.fresh) == (state, stale, not stale)


@given(hours=st.floats(min_value=0, max_value=1000), threshold=st.floats(0.1, 500))
def test_stale_exactly_when_the_last_success_is_older_than_the_threshold(hours, threshold):
    success = NOW - timedelta(hours=hours)
    result = source_freshness(last_run_at=success, last_status="ok", last_success_at=success,
                              now=NOW, stale_after_hours=threshold)
    assert result.stale == (result.age_hours > threshold)


def test_report_and_sources_agree_on_the_bundled_source():
    # Issue 29: bundled prices carry their snapshot dates; loaded an hour ago, they are as old
    # as those dates say -- stale for `sources` and for the report alike (the index and the
    # alerts already left them out). Dated an hour ago, fresh for both.
    from reports.sections.data_quality import RunHistory, data_quality
    from tracker.answers.report_settings import ReportOptions

    loaded = NOW - timedelta(hours=1)
    run = SimpleNamespace(source="bundled", status="ok", started_at=loaded, rejected=0,
                          error=None)
    history = RunHistory(week_runs=[run], last_ok={"bundled": loaded}, rejected=[],
                         job_rows=[])
    for dated, stale in ((datetime(2025, 6, 1, tzinfo=UTC), True), (loaded, False)):
        prices = pd.DataFrame({"source": ["bundled"], "currency": ["USD"],
                               "last_seen": [dated]})
        quality = data_quality(history, NOW, prices, ReportOptions(stale_after_hours=48))
        fresh = source_freshness(last_run_at=loaded, last_status="ok",
                                 last_success_at=loaded, now=NOW, stale_after_hours=48,
                                 newest_price_at=dated)
        assert fresh.stale is stale and quality["sources"][0]["stale"] is stale
        assert quality["stale"] == (["bundled"] if stale else [])
        assert quality["no_fresh_prices"] is stale

    old = NOW - timedelta(hours=72)
    history = RunHistory(week_runs=[], last_ok={"bundled": old}, rejected=[], job_rows=[])
    prices = pd.DataFrame({"source": ["bundled"], "currency": ["USD"], "last_seen": [old]})
    assert data_quality(history, NOW, prices, ReportOptions(stale_after_hours=48))["stale"] \
        == ["bundled"]


def test_a_run_after_the_as_of_does_not_make_the_week_fresh():
    # Issue 29 (W48): prices dated a week before the as-of, loaded by a run after it: the
    # report said "Stale: none" and "GPU prices held steady". At the as-of nothing ran.
    from reports.filters import headline_lead
    from reports.sections.data_quality import RunHistory, data_quality
    from tracker.answers.report_settings import ReportOptions

    history = RunHistory(week_runs=[], last_ok={}, rejected=[], job_rows=[])
    prices = pd.DataFrame({"source": ["bundled"], "currency": ["USD"],
                           "last_seen": [NOW - timedelta(days=7)]})
    quality = data_quality(history, NOW, prices, ReportOptions(stale_after_hours=48))
    assert quality["stale"] == ["bundled"] and quality["no_fresh_prices"] is True
    lead = headline_lead({"classes_down": 0, "classes_up": 0, "classes_flat": 3,
                          "classes_priced": 3, "as_of": NOW, "no_fresh_prices": True,
                          "newest_price_at": NOW - timedelta(days=7),
                          "stale_after_hours": 48.0})
    assert lead.startswith("No fresh prices this week") and "held steady" not in lead
    assert "2026-11-23 12:00 UTC" in lead


def test_the_job_index_leaves_out_stale_prices_as_the_price_index_does(sqlite_url):
    # Issue 29: `index` dropped prices not seen within the window while `index --job` kept
    # pricing from them. The seeded store's prices were last seen on 2026-11-01.
    from datetime import date

    from tests.economics.seed import seed_prices
    from tracker.market.index import job_index
    from tracker.store.db import open_database

    db = open_database(sqlite_url)
    try:
        seed_prices(db)
        workloads = [{"name": "ft", "kind": "finetune", "model": "llama-3.1-8b",
                      "tokens": 1e9}]
        days = [date(2026, 11, 2), date(2026, 11, 10)]
        kept = job_index(db, workloads, days)
        fresh_only = job_index(db, workloads, days, max_age_hours=48)
    finally:
        db.close()
    assert [p.cost is not None for p in kept] == [True, True]
    assert [p.cost is not None for p in fresh_only] == [True, False]
    assert fresh_only[0].cost == kept[0].cost


def test_sources_and_status_judge_a_snapshot_by_its_dates(sqlite_url):
    # Issue 29: loaded a minute ago, prices dated ten days back made `sources` say fresh
    # while `alerts` and `index` said stale. One rule now: stale for every command.
    import json

    from click.testing import CliRunner

    from tests.helpers import obs
    from tracker.cli.main import cli
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    now = datetime.now(UTC)
    db = open_database(sqlite_url)
    try:
        ingest_records(db, "bundled", [obs("55.04", now - timedelta(days=10)),
                                       obs("55.04", now - timedelta(days=9))],
                       started_at=now - timedelta(minutes=1))
    finally:
        db.close()

    def run(*args: str):
        return CliRunner().invoke(cli, ["--db", sqlite_url, *args], catch_exceptions=False)

    rows = {r["source"]: r for r in json.loads(run("sources", "--format", "json").stdout)}
    assert rows["bundled"]["last_status"] == "ok" and rows["bundled"]["fresh"] is False
    assert 9 * 24 - 1 < rows["bundled"]["age_hours"] < 9 * 24 + 1
    status = run("status", "--source", "bundled", "--format", "json")
    assert status.exit_code == 2
    assert json.loads(status.stdout)["sources"][0]["state"] == "stale"


def test_a_price_seen_again_after_the_as_of_counts_from_the_last_run_by_then():
    # Issue 29, one rule: a span last seen after the as-of was confirmed, as of then, only by
    # its source's last successful run started by then -- as `sources --as-of` judges it
    # (tracker.store.queries.sighting_at). The report took the as-of itself (age 0 h), so a
    # source whose last run was 60 h before the as-of looked fresh.
    from reports.sections.data_quality import RunHistory, data_quality
    from tracker.answers.report_settings import ReportOptions
    from tracker.store.queries import sighting_at

    last_run = NOW - timedelta(hours=60)
    run = SimpleNamespace(source="aws", status="ok", started_at=last_run, rejected=0,
                          error=None)
    history = RunHistory(week_runs=[run], last_ok={"aws": last_run}, rejected=[], job_rows=[])
    prices = pd.DataFrame({"source": ["aws"], "currency": ["USD"],
                           "last_seen": [NOW + timedelta(days=3)]})
    quality = data_quality(history, NOW, prices, ReportOptions(stale_after_hours=48))
    row = quality["sources"][0]
    assert row["newest_price_at"] == last_run == sighting_at(NOW + timedelta(days=3), NOW,
                                                             last_run)
    assert row["age_hours"] == 60.0 and row["stale"] is True
    assert quality["no_fresh_prices"] is True
