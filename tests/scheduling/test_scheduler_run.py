"""A real APScheduler: a one-second refresh end to end, graceful stop, and a misfire."""

from __future__ import annotations

import signal
import subprocess
import threading
from datetime import UTC, datetime, timedelta

import pytest

from tests.loopback import free_port
from tests.scheduling.conftest import (
    EXPECTED_OFFERS,
    cli_env,
    scalar,
    source_environ,
    spawn,
    wait_for,
)
from tracker.cli.scheduler import JobRunner, JobSpec, build_scheduler, catch_up_time
from tracker.config.schema import load_config
from tracker.store.db import open_database
from tracker.store.jobs import job_runs

EVERY_SECOND = """
[refresh]
sources = ["skypilot"]

[schedule]
refresh_cron = "* * * * * *"
refresh_jitter_seconds = 0
report_enabled = false
"""


def test_scheduler_refreshes_every_second_and_stops_gracefully(tmp_path, catalog):
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    config = tmp_path / "config.toml"
    config.write_text(EVERY_SECOND)
    db = open_database(url)
    proc = spawn(["--config", str(config), "schedule", "run"], cli_env(url, catalog))
    try:
        wait_for(lambda: scalar(db, "SELECT count(*) FROM job_run WHERE status = 'ok' "
                                    "AND trigger = 'scheduler'") >= 2 or proc.poll() is not None,
                 what="two scheduled refreshes")
        assert proc.poll() is None, proc.communicate()

        # Hold the next fetch, stop the scheduler while that job is in flight: it finishes.
        catalog.gate = threading.Event()
        catalog.reset()
        assert catalog.holding.wait(30)
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # still finishing the job in flight
        catalog.gate.set()
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "job refresh: * * * * * * (UTC), sources skypilot" in err
    assert "stopping: waiting for 1 running job(s) to finish" in err
    assert err.rstrip().endswith("scheduler stopped")
    try:
        history = job_runs(db)
        assert {r.trigger for r in history} == {"scheduler"}
        assert {r.job for r in history} == {"refresh"}
        assert "running" not in {r.status for r in history}
        last = history[0]  # the run that was in flight at SIGTERM finished and was recorded
        assert last.status == "ok" and last.summary["sources"][0]["offers_seen"] == \
            EXPECTED_OFFERS
        ok_runs = scalar(db, "SELECT count(*) FROM ingest_run WHERE status = 'ok'")
        assert ok_runs == sum(1 for r in history if r.status == "ok") >= 3
        # Identical snapshots every second: still one span per offer, extended.
        assert scalar(db, "SELECT count(*) FROM offer") == EXPECTED_OFFERS
        assert scalar(db, "SELECT count(*) FROM price_span") == EXPECTED_OFFERS
        from tracker.store.queries import price_rows

        spans = [(r.observed_at, r.last_seen) for r in price_rows(db)]
        assert len(spans) == EXPECTED_OFFERS
        assert all(last > first for first, last in spans)
    finally:
        db.close()


def _run_scheduler_until(scheduler, done, timeout=30.0) -> None:
    thread = threading.Thread(target=scheduler.start, daemon=True)
    thread.start()
    try:
        wait_for(done, timeout=timeout, what="the scheduled job")
    finally:
        scheduler.shutdown(wait=True)
        thread.join(10)


def test_a_missed_run_within_the_grace_period_runs_once_on_start(tmp_path, catalog):
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    db = open_database(url)
    environ = source_environ(catalog)
    config = load_config(environ=environ)
    now = datetime.now(UTC)
    due = (now - timedelta(minutes=2)).replace(second=0, microsecond=0)
    daily = f"{due.minute} {due.hour} * * *"  # it was due two minutes ago; we were "down"
    spec = JobSpec(id="refresh:daily", kind="refresh", cron=daily, timezone="UTC",
                   sources=("skypilot",), misfire_grace_seconds=3600)
    late = JobSpec(id="refresh:late", kind="refresh", cron=daily, timezone="UTC",
                   sources=("skypilot",), misfire_grace_seconds=60)
    try:
        assert catch_up_time(db, spec, now) == due
        assert catch_up_time(db, late, now) is None  # beyond its 60 s grace: skipped

        runner = JobRunner(db, config, {}, environ=environ)
        scheduler, _ = build_scheduler(db, config, runner, specs=[spec])
        _run_scheduler_until(scheduler, lambda: job_runs(db, status="ok"))
        [run] = job_runs(db)
        assert (run.job, run.trigger, run.status) == ("refresh:daily", "scheduler", "ok")
        assert run.summary["slot"] == due.isoformat().replace("+00:00", "Z")
        assert catalog.requests == 1

        # Started again (the same day): the slot is done, so nothing is due until tomorrow.
        assert catch_up_time(db, spec, datetime.now(UTC)) is None
        scheduler, _ = build_scheduler(db, config, JobRunner(db, config, {}, environ=environ),
                                       specs=[spec])
        thread = threading.Thread(target=scheduler.start, kwargs={"paused": True},
                                  daemon=True)
        thread.start()
        wait_for(lambda: scheduler.running, what="the scheduler to start")
        next_run = scheduler.get_job("refresh:daily").next_run_time
        scheduler.shutdown(wait=True)
        thread.join(10)
        assert next_run.astimezone(UTC) == due + timedelta(days=1)
        assert len(job_runs(db)) == 1 and catalog.requests == 1
    finally:
        db.close()


def test_the_weekly_report_job_builds_archives_and_mails_once(tmp_path, catalog):
    from aiosmtpd.controller import Controller

    import reports  # noqa: F401  (declares [report] and [smtp] before the config is read)
    from tracker.collect.refresh import refresh_job

    class Inbox:
        def __init__(self) -> None:
            self.envelopes: list = []

        async def handle_DATA(self, server, session, envelope):
            self.envelopes.append(envelope)
            return "250 OK"

    inbox = Inbox()
    port = free_port()
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    environ = source_environ(catalog) | {
        "GPU_TRACKER_REPORT_OUT_DIR": str(tmp_path / "reports"),
        "GPU_TRACKER_REPORT_RECIPIENTS": "team@example.com",
        "GPU_TRACKER_SMTP_HOST": "127.0.0.1", "GPU_TRACKER_SMTP_PORT": str(port),
        "GPU_TRACKER_SMTP_SECURITY": "none"}
    config = load_config(environ=environ)
    db = open_database(f"sqlite:///{tmp_path / 'tracker.db'}")
    # Monday 07:00 was always less than a week ago: with a week's grace it is due at start.
    weekly = JobSpec(id="report", kind="report", cron="0 7 * * mon", timezone="Europe/Berlin",
                     misfire_grace_seconds=7 * 86400)
    try:
        # Prices observed a week ago, so the finished week being mailed has some (a week
        # without prices is refused, not mailed empty).
        last_week = datetime.now(UTC) - timedelta(days=7)
        assert refresh_job(db, config, environ=environ, now=last_week).exit_code == 0
        scheduler, _ = build_scheduler(db, config, JobRunner(db, config, {}), specs=[weekly])
        _run_scheduler_until(scheduler, lambda: job_runs(db, job="report"))
        [run] = job_runs(db, job="report")
        assert (run.status, run.trigger, run.summary["locks"]) == \
            ("ok", "scheduler", ["report"]), run.error
        week = run.summary["report"]["week"]
        assert (tmp_path / "reports" / week / f"gpu-report-{week}.html").exists()
        assert run.summary["delivery"]["status"] == "sent"
        assert [e.rcpt_tos for e in inbox.envelopes] == [["team@example.com"]]
        assert f"GPU prices {week}" in inbox.envelopes[0].content.decode()
        assert scalar(db, "SELECT count(*) FROM report_archive WHERE week = :w", w=week) >= 1

        # Restarted within the grace period: the slot is done, nothing runs or mails again.
        assert catch_up_time(db, weekly, datetime.now(UTC)) is None
    finally:
        smtp.stop()
        db.close()


def test_two_schedulers_on_one_database_run_each_slot_once(db_url, catalog, tmp_path):
    # Two hosts' schedulers against one database: both fire every second, each slot is
    # refreshed by exactly one of them; the other skips (lock taken, or slot already done).
    config = tmp_path / "config.toml"
    # Up to a second of jitter: often one scheduler finds the slot already done, not locked.
    config.write_text(EVERY_SECOND.replace("refresh_jitter_seconds = 0",
                                           "refresh_jitter_seconds = 1"))
    env = cli_env(db_url, catalog)
    db = open_database(db_url)
    procs = [spawn(["--config", str(config), "schedule", "run"], env) for _ in range(2)]
    try:
        wait_for(lambda: (scalar(db, "SELECT count(*) FROM job_run WHERE status = 'skipped'")
                 >= 2 and scalar(db, "SELECT count(*) FROM job_run WHERE status = 'ok'") >= 3)
                 or any(p.poll() is not None for p in procs), what="a few contested slots")
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        results = [(p.wait(30), p.communicate()[1]) for p in procs]
        assert [code for code, _ in results] == [0, 0], results
        history = job_runs(db)
        ok = [r for r in history if r.status == "ok"]
        slots = [r.summary["slot"] for r in ok]
        assert len(slots) == len(set(slots)) >= 3  # no slot refreshed twice
        skipped = [r for r in history if r.status == "skipped"]
        assert {r.summary["reason"] for r in skipped} <= {"locked", "done"}
        assert {r.status for r in history} == {"ok", "skipped"}
        assert scalar(db, "SELECT count(*) FROM ingest_run") == len(ok)
        assert scalar(db, "SELECT count(*) FROM price_span") == EXPECTED_OFFERS
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        db.close()
