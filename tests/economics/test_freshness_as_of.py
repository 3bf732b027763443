"""Issue 29's leftover: `sources` and `status` answer `--as-of` with the one freshness rule
(tracker/answers/freshness.py), from the runs started and the prices valid by then.

The seeded store (tests/economics/seed.py) has `catalog` and `lambda` runs on 2026-10-01 and
2026-11-01; the default threshold is 48 h."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

from tracker.answers.freshness import source_freshness
from tracker.cli.main import cli


def _run(args: list[str]):
    return CliRunner().invoke(cli, args, env={"GPU_TRACKER_CURRENCY": ""})


def _sources(db: str, *extra: str) -> dict[str, dict]:
    result = _run(["--db", db, "sources", "--format", "json", *extra])
    assert result.exit_code == 0, result.output
    return {row["source"]: row for row in json.loads(result.stdout)}


def test_sources_as_of_a_day_after_a_run_is_fresh_from_that_run(priced_db) -> None:
    row = _sources(priced_db, "--as-of", "2026-10-02T00:00:00Z")["catalog"]
    assert row["last_run_at"] == "2026-10-01T00:00:00Z"  # not the later run of 2026-11-01
    assert row["fresh"] is True
    assert row["age_hours"] == 24.0
    assert row["offers"] == 4  # the offers with a price valid then


def test_sources_as_of_between_runs_is_stale_by_the_same_rule(priced_db) -> None:
    row = _sources(priced_db, "--as-of", "2026-10-20T00:00:00Z")["catalog"]
    assert row["last_run_at"] == "2026-10-01T00:00:00Z"
    assert (row["fresh"], row["age_hours"]) == (False, 19 * 24.0)


def test_status_as_of_judges_at_that_instant(priced_db) -> None:
    base = ["--db", priced_db, "status", "--source", "lambda", "--format", "json"]
    fresh = _run([*base, "--as-of", "2026-11-02T00:00:00Z"])
    assert fresh.exit_code == 0, fresh.output
    data = json.loads(fresh.stdout)
    assert data["status"] == "fresh" and data["checked_at"] == "2026-11-02T00:00:00Z"
    stale = _run([*base, "--as-of", "2026-10-20T00:00:00Z"])
    assert stale.exit_code == 2, stale.output
    rows = json.loads(stale.stdout)["sources"]
    assert [(r["source"], r["state"], r["last_run_at"]) for r in rows] == [
        ("lambda", "stale", "2026-10-01T00:00:00Z")]


def test_status_before_any_run_says_never(priced_db) -> None:
    # with its key set: a source whose key is not set is "skipped", run or not
    result = CliRunner().invoke(cli, ["--db", priced_db, "status", "--source", "lambda",
                                      "--as-of", "2026-09-01", "--format", "json"],
                                env={"GPU_TRACKER_CURRENCY": "",
                                     "GPU_TRACKER_LAMBDA_API_KEY": "test-key"})
    assert result.exit_code == 2
    assert json.loads(result.stdout)["sources"][0]["state"] == "never"


def test_a_success_finishing_after_the_instant_confirms_no_later_than_it() -> None:
    now = datetime(2026, 10, 2, tzinfo=UTC)
    judged = source_freshness(last_run_at=now - timedelta(hours=1), last_status="ok",
                              last_success_at=now + timedelta(hours=3), now=now,
                              stale_after_hours=48)
    assert judged.age_hours == 0.0 and judged.fresh
