"""The one freshness rule (tracker/freshness.py) as `sources`, `status` and the report's data
quality apply it: by the last successful run, not by the dates of the prices."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracker.freshness import source_freshness

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
    # Bundled prices carry their snapshot dates (months old); loaded an hour ago, the
    # source is fresh for `sources` and must not be "stale" in the report either.
    from reports.sections.data_quality import RunHistory, data_quality
    from tracker.report_settings import ReportOptions

    loaded = NOW - timedelta(hours=1)
    run = SimpleNamespace(source="bundled", status="ok", started_at=loaded, rejected=0,
                          error=None)
    history = RunHistory(week_runs=[run], last_ok={"bundled": loaded}, rejected=[],
                         job_rows=[])
    prices = pd.DataFrame({"source": ["bundled"], "currency": ["USD"],
                           "last_seen": [datetime(2025, 6, 1, tzinfo=UTC)]})
    quality = data_quality(history, NOW, prices, ReportOptions(stale_after_hours=48))
    fresh = source_freshness(last_run_at=loaded, last_status="ok", last_success_at=loaded,
                             now=NOW, stale_after_hours=48)
    assert fresh.fresh and quality["stale"] == []
    assert quality["sources"][0]["stale"] is False

    old = NOW - timedelta(hours=72)
    history = RunHistory(week_runs=[], last_ok={"bundled": old}, rejected=[], job_rows=[])
    assert data_quality(history, NOW, prices, ReportOptions(stale_after_hours=48))["stale"] \
        == ["bundled"]
