"""The run lock (file lock on SQLite, advisory lock on PostgreSQL) and the job history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.scheduling.conftest import EXPECTED_OFFERS, rows, scalar, source_environ
from tracker.config.schema import load_config
from tracker.store.db import open_database
from tracker.store.jobs import JobOutcome, job_runs, latest_runs, run_job
from tracker.store.locks import advisory_key, hold_locks, lock_path, run_lock


def test_one_holder_per_key(db):
    first = run_lock(db, "refresh:skypilot")
    second = run_lock(db, "refresh:skypilot")
    other = run_lock(db, "refresh:vastai")
    assert first.acquire(0) is True
    try:
        assert second.acquire(0) is False  # another connection / file descriptor
        assert other.acquire(0) is True  # keys are independent
        other.release()
    finally:
        first.release()
    assert second.acquire(0) is True
    second.release()


def test_sqlite_lock_file_sits_beside_the_database(tmp_path):
    db = open_database(f"sqlite:///{tmp_path / 'prices.db'}")
    try:
        with hold_locks(db, ["refresh:skypilot"]) as got:
            assert got.held == ["refresh:skypilot"]
            assert lock_path(db.sqlite_path, "refresh:skypilot") == \
                tmp_path / "prices.db.refresh-skypilot.lock"
            assert (tmp_path / "prices.db.refresh-skypilot.lock").exists()
    finally:
        db.close()


def test_advisory_keys_differ_by_schema_and_name():
    assert advisory_key("public", "report") == advisory_key("public", "report")
    assert advisory_key("public", "report") != advisory_key("other", "report")
    assert advisory_key("public", "report") != advisory_key("public", "refresh:aws")
    assert -(2**63) <= advisory_key("public", "report") < 2**63


def test_postgres_run_holds_its_locks_on_one_named_session(pg_url):
    import os

    db = open_database(pg_url)
    mine = f"gpu-tracker run lock % pid {os.getpid()}"
    sessions = ("SELECT a.pid, count(l.*) FROM pg_stat_activity a LEFT JOIN pg_locks l "
                "ON l.pid = a.pid AND l.locktype = 'advisory' AND l.granted "
                "WHERE a.application_name LIKE :name GROUP BY a.pid")
    try:
        with hold_locks(db, ["refresh:a", "refresh:b", "report"]) as got:
            assert got.held == ["refresh:a", "refresh:b", "report"]
            [(_backend, locks)] = rows(db, sessions, name=mine)  # one session, three locks
            assert locks == 3
            # A second run (own session) sees the key busy.
            with hold_locks(db, ["report"]) as other:
                assert other.held == [] and other.busy == ["report"]
        with hold_locks(db, ["refresh:a", "refresh:b", "report"]) as again:
            assert again.held == ["refresh:a", "refresh:b", "report"]  # all released
    finally:
        db.close()


def test_partial_and_all_or_nothing(db):
    with hold_locks(db, ["refresh:b"]):
        with hold_locks(db, ["refresh:c", "refresh:a", "refresh:b"], partial=True) as got:
            assert got.held == ["refresh:a", "refresh:c"]
            assert got.busy == ["refresh:b"]
        with hold_locks(db, ["refresh:a", "refresh:b"]) as got:
            assert got.held == [] and got.busy == ["refresh:b"]
        # all-or-nothing gave refresh:a back
        with hold_locks(db, ["refresh:a"]) as got:
            assert got.held == ["refresh:a"]


def test_run_job_records_ok_skipped_and_failed(db):
    result = run_job(db, "report", lambda got: JobOutcome(summary={"week": "2026-W48"}),
                     trigger="manual", locks=["report"], host="host-a")
    assert result.status == "ok"
    with hold_locks(db, ["report"]):
        skipped = run_job(db, "report", lambda got: pytest.fail("must not run"),
                          trigger="cron", locks=["report"], host="host-b")
    assert skipped.skipped and skipped.busy == ["report"]
    assert skipped.note == "another run holds the lock"

    def boom(_got):
        raise RuntimeError("smtp server said no")

    with pytest.raises(RuntimeError):
        run_job(db, "report", boom, trigger="scheduler", locks=["report"])
    history = job_runs(db, job="report")
    assert [(r.status, r.trigger) for r in history] == [
        ("failed", "scheduler"), ("skipped", "cron"), ("ok", "manual")]
    ok = history[-1]
    assert ok.host == "host-a" and ok.summary["week"] == "2026-W48"
    assert ok.summary["locks"] == ["report"] and ok.finished_at >= ok.started_at
    assert history[0].error == "RuntimeError: smtp server said no"
    assert history[1].summary == {"busy": ["report"], "held_by": {}, "reason": "locked"}
    assert latest_runs(db)["report"].status == "failed"  # skips say nothing about the job


def test_skip_note_names_the_holder(db):
    seen = {}

    def inner(_got):
        nested = run_job(db, "refresh", lambda got: JobOutcome(), trigger="cron",
                         locks=["refresh:skypilot"])
        seen["note"] = nested.note
        return JobOutcome()

    run_job(db, "refresh", inner, trigger="manual", locks=["refresh:skypilot"],
            host="host-a")
    assert seen["note"].startswith("refresh (manual) running on host-a pid ")


def test_a_run_holding_the_lock_marks_a_dead_runs_row_abandoned(db):
    # What a kill -9 leaves: a `running` row whose owner no longer holds its lock.
    from tracker.store.jobs import _insert

    dead = _insert(db, job="refresh", trigger="cron", host="host-a",
                   started_at=datetime.now(UTC) - timedelta(minutes=5), finished_at=None,
                   status="running", summary={"locks": ["refresh:skypilot"], "pid": 4242},
                   error=None)
    unrelated = _insert(db, job="refresh:spot", trigger="cron", host="host-a",
                        started_at=datetime.now(UTC), finished_at=None, status="running",
                        summary={"locks": ["refresh:vastai"], "pid": 4243}, error=None)
    run_job(db, "refresh", lambda got: JobOutcome(), trigger="manual",
            locks=["refresh:skypilot"])
    status = dict(rows(db, "SELECT id, status FROM job_run"))
    assert status[dead] == "abandoned"
    assert status[unrelated] == "running"  # its lock was not ours to judge
    error = scalar(db, "SELECT error FROM job_run WHERE id = :i", i=dead)
    assert "pid 4242" in error and "killed or crashed" in error


def test_a_scheduled_slot_runs_once_across_schedulers(db):
    slot = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    calls = []

    def work(_got):
        calls.append(1)
        return JobOutcome()

    first = run_job(db, "report", work, trigger="scheduler", locks=["report"], slot=slot,
                    host="host-a")
    second = run_job(db, "report", work, trigger="scheduler", locks=["report"], slot=slot,
                     host="host-b")
    assert calls == [1]
    assert first.status == "ok" and second.skipped
    assert second.note.endswith(f"was already done on host-a (run {first.run_id})")
    # A manual run is not a scheduled slot: it always runs.
    run_job(db, "report", work, trigger="manual", locks=["report"])
    assert calls == [1, 1]


def test_refresh_job_records_the_run(db, catalog):
    from tracker.collect.refresh import refresh_job

    environ = source_environ(catalog)
    config = load_config(environ=environ)
    run = refresh_job(db, config, trigger="cron", environ=environ)
    assert run.exit_code == 0 and not run.busy
    [summary] = run.summaries
    assert (summary.source, summary.status, summary.offers_seen, summary.rejected) == \
        ("skypilot", "ok", EXPECTED_OFFERS, 1)
    [job] = job_runs(db)
    assert (job.job, job.trigger, job.status) == ("refresh", "cron", "ok")
    assert job.summary["sources"][0]["offers_seen"] == EXPECTED_OFFERS
    assert json.loads(json.dumps(job.summary))["locks"] == ["refresh:skypilot"]
    assert scalar(db, "SELECT trigger FROM ingest_run") == "cron"
