"""`status` (exit 0 fresh / 2 stale or failing), `schedule list` and `config show`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from tests.scheduling.conftest import EXPECTED_OFFERS, EXPECTED_REJECTED, source_environ
from tracker.answers.freshness import source_states as freshness
from tracker.cli.main import cli
from tracker.store.queries import SourceStatus


@pytest.fixture
def invoke(tmp_path, catalog, monkeypatch):
    for key, value in source_environ(catalog).items():
        monkeypatch.setenv(key, value)
    url = f"sqlite:///{tmp_path / 'tracker.db'}"

    def run(*args: str):
        return CliRunner().invoke(cli, ["--db", url, *args], catch_exceptions=False)

    return run


def test_status_exit_codes_and_json(invoke, catalog):
    missing = invoke("status")  # a read-only command never creates the database
    assert missing.exit_code == 1 and "run `gpu-tracker init`" in missing.stderr
    assert invoke("init").exit_code == 0
    never = invoke("status", "--format", "json")
    assert never.exit_code == 2
    report = json.loads(never.stdout)
    assert report["status"] == "stale"
    assert [(s["source"], s["state"]) for s in report["sources"]] == [("skypilot", "never")]

    refreshed = invoke("refresh", "--format", "json")
    assert refreshed.exit_code == 0, refreshed.stderr
    fresh = invoke("status", "--format", "json")
    assert fresh.exit_code == 0, fresh.stdout
    report = json.loads(fresh.stdout)
    assert report["status"] == "fresh" and report["stale_after_hours"] == 48.0
    assert report["failing_jobs"] == []
    [source] = report["sources"]
    assert source["source"] == "skypilot" and source["state"] == "fresh"
    assert source["offers"] == EXPECTED_OFFERS
    assert source["rejected_last_run"] == EXPECTED_REJECTED
    assert 0 <= source["age_hours"] < 0.1
    assert source["last_success_at"].endswith("Z") and source["last_status"] == "ok"

    stale = invoke("status", "--stale-after", "0", "--format", "json")
    assert stale.exit_code == 2
    assert json.loads(stale.stdout)["sources"][0]["state"] == "stale"

    catalog.status = 500
    failed = invoke("refresh")
    assert failed.exit_code == 1
    failing = invoke("status", "--format", "json")
    assert failing.exit_code == 2
    report = json.loads(failing.stdout)
    assert report["status"] == "failing"
    assert report["sources"][0]["state"] == "failing"
    assert "HTTP 500" in report["sources"][0]["last_error"]
    assert [(j["job"], j["status"]) for j in report["failing_jobs"]] == [("refresh", "failed")]
    table = invoke("status")
    assert table.exit_code == 2
    assert "failing: skypilot (threshold 48 h)" in table.stderr  # one group per state


def test_freshness_states():
    now = datetime(2026, 11, 29, 12, tzinfo=UTC)

    def status(**kw):
        base = {"source": "x", "last_run_at": now, "last_status": "ok", "last_error": None,
                "last_success_at": now - timedelta(hours=1), "offers": 3,
                "rejected_last_run": 0, "runs": 1}
        return SourceStatus(**(base | kw))

    states = [r["state"] for r in freshness([
        status(), status(last_success_at=now - timedelta(hours=49)),
        status(last_status="failed", last_error="boom"),
        status(last_run_at=None, last_status=None, last_success_at=None),
        status(last_status="skipped", last_success_at=None),
    ], now=now, stale_after_hours=48)]
    assert states == ["fresh", "stale", "failing", "never", "skipped"]


def test_schedule_list_shows_triggers_and_next_runs(invoke, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[schedule]\ntimezone = "Europe/Berlin"\nrefresh_cron = "30 */6 * * *"\n'
                      '[[schedule.groups]]\nname = "spot"\nsources = ["vastai"]\n'
                      'cron = "*/20 * * * *"\n')
    assert invoke("init").exit_code == 0
    result = invoke("--config", str(config), "schedule", "list", "--count", "2",
                    "--format", "json")
    assert result.exit_code == 0, result.stderr
    jobs = {j["job"]: j for j in json.loads(result.stdout)}
    assert list(jobs) == ["refresh", "refresh:spot", "report"]
    assert jobs["refresh"]["sources"] == ["skypilot"]
    assert jobs["refresh:spot"]["cron"] == "*/20 * * * *"
    assert jobs["report"]["cron"] == "0 7 * * mon"
    assert jobs["report"]["misfire_grace_seconds"] == 86400
    for job in jobs.values():
        first, second = (datetime.fromisoformat(t.replace("Z", "+00:00"))
                         for t in job["next_runs"])
        assert datetime.now(UTC) < first < second
    report = datetime.fromisoformat(jobs["report"]["next_runs"][0].replace("Z", "+00:00"))
    assert report.weekday() == 0 and report.minute == 0
    assert report.hour in (5, 6)  # 07:00 Berlin in UTC (summer / winter)


def test_config_show_masks_secrets(invoke, monkeypatch):
    monkeypatch.setenv("GPU_TRACKER_SMTP_PASSWORD", "hunter2")
    monkeypatch.setenv("GPU_TRACKER_RUNPOD_API_KEY", "rp-secret-value")
    monkeypatch.setenv("RUNPOD_API_KEY", "rp-secret-value")
    result = CliRunner().invoke(
        cli, ["--db", "postgresql://tracker:pg-pass@db.example/prices", "config", "show",
              "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "hunter2" not in result.stdout and "pg-pass" not in result.stdout
    assert "rp-secret-value" not in result.stdout
    data = json.loads(result.stdout)
    assert data["smtp"]["password"] == "***"
    assert data["database"]["url"] == "postgresql://tracker:***@db.example/prices"
    assert data["schedule"]["report_misfire_grace_seconds"] == 86400
    assert data["sources"]["skypilot"]["clouds"] == ["lambda"]  # resolved, env included
    assert data["refresh"]["stale_after_hours"] == 48.0
    table = CliRunner().invoke(cli, ["config", "show"], catch_exceptions=False)
    assert "[schedule]" in table.stdout and 'timezone = "UTC"' in table.stdout
    assert "hunter2" not in table.stdout
