"""reports.background: work computed in a forked child gives the inline answer, falls back to
running inline when the child cannot answer, and is not forked where forking is unsafe.

The report built with children equals, byte for byte, the report built without them (the
golden files pin the latter's bytes)."""

from __future__ import annotations

import os
import threading
from decimal import Decimal

import pytest

import reports.background as background
from reports import build_and_archive
from tests.reports.conftest import NOW, WEEK

PARENT = os.getpid()


def _answer(x: int, *, scale: Decimal) -> dict[str, object]:
    return {"pid_is_parent": os.getpid() == PARENT, "value": scale * x, "list": [x] * 3}


def _raises(message: str) -> None:
    raise ValueError(message)


def _dies_in_child() -> str:
    if os.getpid() != PARENT:
        os._exit(9)  # as a child killed or out of memory would end
    return "answered by the parent"


def _unpicklable() -> object:
    return threading.Lock()


def _never_asked() -> None:
    import time

    time.sleep(60)


def _assert_ran_inline(work) -> None:
    """No child was forked: the work runs in this process when its answer is asked for."""
    assert not isinstance(work, background._ForkedWork)
    assert work()["pid_is_parent"] is True


@pytest.fixture
def can_fork(monkeypatch):
    """The test process may run helper threads (loopback servers of other tests), or have one
    CPU: fork regardless, as the single-threaded `gpu-tracker report` command does on two."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})


def test_forked_answer_equals_inline(report_db, can_fork):
    work = background.in_parallel(report_db, _answer, 7, scale=Decimal("1.25"))
    assert isinstance(work, background._ForkedWork)
    answer = work()
    assert answer == {"pid_is_parent": False, "value": Decimal("8.75"), "list": [7, 7, 7]}
    with pytest.raises(RuntimeError, match="already taken"):
        work()


def test_failing_child_reruns_inline_and_raises_the_works_error(report_db, can_fork):
    work = background.in_background(report_db, _raises, "no such GPU: h999")
    with pytest.raises(ValueError, match="no such GPU: h999"):
        work()


@pytest.mark.parametrize("work", [_dies_in_child, _unpicklable])
def test_child_without_an_answer_falls_back_to_inline(report_db, can_fork, work):
    handle = background.in_parallel(report_db, work)
    assert isinstance(handle, background._ForkedWork)
    answer = handle()
    if work is _dies_in_child:
        assert answer == "answered by the parent"
    else:
        assert type(answer) is type(threading.Lock())


def test_a_refused_fork_runs_the_work_inline(report_db, can_fork, monkeypatch):
    def refuse() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refuse)
    work = background.in_background(report_db, _answer, 5, scale=Decimal(2))
    assert not isinstance(work, background._ForkedWork)
    assert work() == {"pid_is_parent": True, "value": Decimal(10), "list": [5, 5, 5]}


def test_a_child_never_asked_is_stopped_and_reaped(report_db, can_fork):
    handle = background.in_parallel(report_db, _never_asked)
    pid = handle._pid
    assert pid is not None
    del handle  # a build that failed before asking for the answer
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left behind


def test_no_fork_with_another_thread_running(report_db):
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait)
    helper.start()
    try:
        work = background.in_parallel(report_db, _answer, 2, scale=Decimal(1))
        _assert_ran_inline(work)
    finally:
        stop.set()
        helper.join()


def test_no_fork_while_a_connection_is_in_use(report_db, can_fork):
    with report_db.engine.connect():
        work = background.in_background(report_db, _answer, 3, scale=Decimal(1))
    _assert_ran_inline(work)


@pytest.mark.parametrize("setting", ["one CPU", "macOS"])
def test_no_fork_where_it_would_not_help_or_is_not_safe(report_db, can_fork, monkeypatch,
                                                        setting):
    if setting == "one CPU":
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    else:
        monkeypatch.setattr(background.sys, "platform", "darwin")
    work = background.in_parallel(report_db, _answer, 6, scale=Decimal(1))
    _assert_ran_inline(work)


def test_no_fork_for_an_in_memory_database(can_fork):
    from tracker.store.db import open_database

    db = open_database("sqlite://")
    try:
        work = background.in_background(db, _answer, 4, scale=Decimal(1))
        _assert_ran_inline(work)
    finally:
        db.close()


def test_report_with_children_equals_report_without(any_db_url, report_config, tmp_path,
                                                    monkeypatch, can_fork):
    from tests.reports.conftest import fill
    from tracker.store.db import open_database

    forked: list[str] = []
    start = background._ForkedWork.__init__

    def counting(self, db, work, args, kwargs):
        forked.append(work.__name__)
        start(self, db, work, args, kwargs)

    monkeypatch.setattr(background._ForkedWork, "__init__", counting)
    db = open_database(any_db_url)
    try:
        fill(db)
        files = {}
        for mode in ("forked", "inline"):
            if mode == "inline":
                monkeypatch.setattr(background, "_can_fork", lambda db: False)
            built = build_and_archive(db, report_config, WEEK, as_of=NOW,
                                      out_dir=tmp_path / mode, generated_at=NOW)
            files[mode] = [path.read_bytes() for path in
                           (built.path_json, built.path_csv, built.path_html)]
    finally:
        db.close()
    # The spans read twice: the dataset quotes a price in EUR, so the read in the report's
    # currency alone (started before the prices were read) gives way to one with every
    # currency, converted.
    assert forked == ["load_spans", "load_spans", "_market_section", "render_html"]
    assert files["forked"] == files["inline"]
