"""Real processes (`python -m tracker`) racing, waiting and killed, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from tests.scheduling.conftest import (
    EXPECTED_OFFERS,
    EXPECTED_REJECTED,
    ROOT,
    cli_env,
    rows,
    scalar,
    spawn,
    wait_for,
)
from tracker.store.db import open_database
from tracker.store.locks import hold_locks


def assert_one_clean_history(db, ok_runs: int = 1) -> None:
    """Price history as `ok_runs` identical snapshots leave it: one span per offer."""
    assert scalar(db, "SELECT count(*) FROM offer") == EXPECTED_OFFERS
    assert scalar(db, "SELECT count(*) FROM price_span") == EXPECTED_OFFERS
    assert rows(db, "SELECT offer_id, count(*) FROM price_span WHERE valid_to IS NULL "
                    "GROUP BY offer_id HAVING count(*) > 1") == []
    assert rows(db, "SELECT source, provider, region, zone, instance_type, variant, category, "
                    "count(*) FROM offer GROUP BY source, provider, region, zone, "
                    "instance_type, variant, category HAVING count(*) > 1") == []
    statuses = [r[0] for r in rows(db, "SELECT status FROM ingest_run")]
    assert statuses == ["ok"] * ok_runs


def test_two_processes_at_once_one_refreshes_one_skips(db_url, catalog):
    catalog.gate = threading.Event()  # hold the first fetch so the two runs overlap
    env = cli_env(db_url, catalog)
    args = ["refresh", "--source", "skypilot", "--format", "json"]
    procs = [spawn(args, env), spawn(args, env)]
    # The loser exits at once; a second request would mean both got the lock.
    wait_for(lambda: any(p.poll() is not None for p in procs) or catalog.requests > 1,
             what="one process to skip")
    catalog.gate.set()
    results = [(p.wait(30), *p.communicate()) for p in procs]
    assert [code for code, _, _ in results] == [0, 0], results
    assert catalog.requests == 1
    outputs = sorted((json.loads(out) for _, out, _ in results), key=len)
    assert outputs[0] == []  # the skipper: valid JSON, no rows
    [summary] = outputs[1]
    assert (summary["status"], summary["offers_seen"], summary["rejected"]) == \
        ("ok", EXPECTED_OFFERS, EXPECTED_REJECTED)
    skip_note = next(err for _, out, err in results if json.loads(out) == [])
    # Who holds the lock is named once the holder has written its job row; just after it
    # took the lock, the note is generic.
    assert skip_note.startswith(("refresh skipped: refresh (cron) running on ",
                                 "refresh skipped: another run holds the lock"))
    assert len(skip_note.strip().splitlines()) == 1

    db = open_database(db_url)
    try:
        assert_one_clean_history(db)
        jobs = rows(db, "SELECT status, trigger FROM job_run ORDER BY status")
        assert jobs == [("ok", "cron"), ("skipped", "cron")]
    finally:
        db.close()


INSIDE_TRANSACTION = textwrap.dedent("""
    # Pause a real refresh inside its write transaction (spans written, run not yet
    # committed) and tell the test, which then kills this process with SIGKILL.
    import sys, time
    import tracker.store.ingest as ingest

    marker = sys.argv[1]
    original = ingest._store_facts
    def pause(*args, **kwargs):
        result = original(*args, **kwargs)
        open(marker, "w").close()
        time.sleep(600)
        return result
    ingest._store_facts = pause
    from tracker.cli.main import main
    sys.argv = ["gpu-tracker", *sys.argv[2:]]
    main()
""")


def test_kill_9_leaves_no_partial_rows_and_no_stale_lock(db_url, catalog, tmp_path):
    env = cli_env(db_url, catalog)
    db = open_database(db_url)
    # The kernel frees a file lock the instant the process dies: no waiting on SQLite.
    # PostgreSQL frees the advisory lock when the server notices the closed connection,
    # a moment later: there the next run may wait for it.
    wait = "0" if db.dialect == "sqlite" else "10"
    try:
        # 1. Killed in the middle of the fetch (the server holds the response).
        catalog.gate = threading.Event()
        victim = spawn(["refresh", "--source", "skypilot"], env)
        assert catalog.holding.wait(30)
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL
        victim.communicate()
        assert [r[0] for r in rows(db, "SELECT status FROM job_run")] == ["running"]
        for table in ("ingest_run", "offer", "price_span", "rejected_row"):
            assert scalar(db, f"SELECT count(*) FROM {table}") == 0, table
        catalog.gate.set()
        catalog.gate = None

        # 2. Killed inside the write transaction, offers and spans already inserted.
        marker = tmp_path / "in-transaction"
        script = tmp_path / "pause_in_transaction.py"
        script.write_text(INSIDE_TRANSACTION)
        victim = subprocess.Popen(
            [sys.executable, str(script), str(marker), "refresh", "--source", "skypilot",
             "--wait", wait], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: marker.exists() or victim.poll() is not None, what="the transaction")
        assert victim.poll() is None, victim.communicate()
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL
        victim.communicate()
        for table in ("ingest_run", "offer", "price_span", "rejected_row", "provider"):
            assert scalar(db, f"SELECT count(*) FROM {table}") == 0, table

        # 3. The next run takes the lock at once and stores one complete snapshot.
        survivor = spawn(["refresh", "--source", "skypilot", "--wait", wait,
                          "--format", "json"], env)
        out, err = survivor.communicate(timeout=60)
        assert survivor.returncode == 0, err
        assert json.loads(out)[0]["offers_seen"] == EXPECTED_OFFERS
        assert_one_clean_history(db)
        run_id = scalar(db, "SELECT id FROM ingest_run")
        assert {r[0] for r in rows(db, "SELECT run_id FROM price_span")} == {run_id}
        assert {r[0] for r in rows(db, "SELECT run_id FROM rejected_row")} == {run_id}
        history = rows(db, "SELECT status, error FROM job_run ORDER BY id")
        assert [h[0] for h in history] == ["abandoned", "abandoned", "ok"]
        assert all("killed or crashed" in h[1] for h in history[:2])
    finally:
        db.close()


def test_wait_seconds_waits_for_the_lock_instead_of_skipping(tmp_path, catalog):
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    env = cli_env(url, catalog)
    db = open_database(url)
    try:
        with hold_locks(db, ["refresh:skypilot"]) as got:
            assert got.held == ["refresh:skypilot"]
            skipper = spawn(["refresh", "--source", "skypilot"], env)
            _, err = skipper.communicate(timeout=60)
            assert skipper.returncode == 0
            assert err.strip() == "refresh skipped: another run holds the lock"
            waiter = spawn(["refresh", "--source", "skypilot", "--wait", "30",
                            "--format", "json"], env)
            with pytest.raises(subprocess.TimeoutExpired):
                waiter.wait(timeout=1.5)  # still waiting for our lock
            assert catalog.requests == 0
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 0, err
        assert json.loads(out)[0]["status"] == "ok"
        assert catalog.requests == 1
        assert [r[0] for r in rows(db, "SELECT status FROM job_run ORDER BY id")] == \
            ["skipped", "ok"]
    finally:
        db.close()
