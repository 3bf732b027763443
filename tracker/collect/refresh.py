"""Refresh: run price sources concurrently, each into its own transaction.

A source that fails (HTTP, parsing, a bug) is recorded as a failed run and never blocks the
others; a source whose key is missing is skipped with a one-line warning.

`refresh_job` is what the CLI and the scheduler run: the same refresh under the run lock of
each source (`refresh:<name>`, tracker/store/locks.py), recorded in the job history
(tracker/store/jobs.py). A source whose lock another run holds is skipped, not waited for
(unless `wait`), so cron, a systemd timer and schedulers on several hosts never refresh the
same source twice at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapers import load_source, source_names
from scrapers.http import HttpClient
from tracker.core.errors import Interrupted, MissingCredentials, TrackerError
from tracker.core.http_settings import HttpSettings
from tracker.store.ingest import RunSummary, ingest_records, record_skipped_run

if TYPE_CHECKING:
    from scrapers.base import Source
    from scrapers.http import Transport
    from tracker.config.schema import Config
    from tracker.store.db import Database
    from tracker.store.jobs import JobResult
    from tracker.store.locks import HeldLocks

log = logging.getLogger(__name__)


# After the first Ctrl-C / SIGTERM, running sources get this long to finish (their fetch and
# one write transaction) before they are aborted and rolled back.
INTERRUPT_GRACE_S = 15.0
INTERRUPTED_EXIT = 130


class StopControl:
    """How a refresh is asked to stop: `stop()` (first signal: start nothing new, let running
    sources finish within `grace_s`), `abort()` (second signal or grace over: cancel running
    fetches, roll their transactions back). Thread-safe; signal handlers only set events."""

    def __init__(self, grace_s: float = INTERRUPT_GRACE_S) -> None:
        self.grace_s = grace_s
        self.stopping = threading.Event()
        self.aborting = threading.Event()
        self.stopped_at: float | None = None
        self.reason = "interrupted"
        self._on_abort: list[Callable[[], None]] = []

    def stop(self, reason: str = "interrupted") -> None:
        if not self.stopping.is_set():
            self.reason = reason
            self.stopped_at = time.monotonic()
            self.stopping.set()

    def abort(self) -> None:
        self.stop()
        if not self.aborting.is_set():
            self.aborting.set()
            for callback in list(self._on_abort):
                with contextlib.suppress(Exception):
                    callback()

    def on_abort(self, callback: Callable[[], None]) -> None:
        self._on_abort.append(callback)

    @property
    def interrupted(self) -> bool:
        return self.stopping.is_set()

    def grace_over(self) -> bool:
        return (self.stopped_at is not None
                and time.monotonic() - self.stopped_at >= self.grace_s)


@contextlib.contextmanager
def interrupt_signals(control: StopControl,
                      notify: Callable[[str], None] | None = None) -> Iterator[StopControl]:
    """SIGINT and SIGTERM stop the refresh gracefully the first time and abort it the second
    (main thread only; elsewhere, e.g. in tests' worker threads, nothing is installed)."""
    if threading.current_thread() is not threading.main_thread():
        yield control
        return

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if not control.stopping.is_set():
            control.stop(f"interrupted by {name}")
            if notify is not None:
                notify(f"{name}: stopping — no new sources; running ones get "
                       f"{control.grace_s:.0f} s to finish (again to abort now)")
        else:
            if notify is not None and not control.aborting.is_set():
                notify(f"{name} again: aborting; unfinished sources roll back")
            control.abort()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield control
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _watched(records: Iterator[Any], control: StopControl) -> Iterator[Any]:
    """The source's records, stopped with `Interrupted` once the refresh is aborted (whatever
    the fetch raises after the abort closed its connection is the abort, not a fault)."""
    try:
        for record in records:
            if control.aborting.is_set():
                raise Interrupted(f"{control.reason}; this source's run was rolled back")
            yield record
    except Interrupted:
        raise
    except Exception:
        if control.aborting.is_set():
            raise Interrupted(f"{control.reason}; this source's run was rolled back") from None
        raise
    if control.aborting.is_set():
        raise Interrupted(f"{control.reason}; this source's run was rolled back")


def http_settings(config: Config) -> HttpSettings:
    return config.http.settings()


def build_source(name: str, config: Config, environ: Mapping[str, str] | None = None) -> Source:
    cls = load_source(name)
    return cls.from_config(config.source_settings(name), environ)


def exit_code(summaries: Sequence[RunSummary], interrupted: bool = False) -> int:
    """0 when every source that ran succeeded, 3 when some failed, 1 when all failed; 130
    when the run was interrupted (whatever committed before stays)."""
    if interrupted:
        return INTERRUPTED_EXIT
    failed = [s for s in summaries if s.status == "failed"]
    ran = [s for s in summaries if s.status != "skipped"]
    if not failed:
        return 0
    return 1 if len(failed) == len(ran) else 3


def refresh_sources(
    db: Database, config: Config, names: Sequence[str] | None = None, *,
    trigger: str = "manual", now: datetime | None = None,
    transport: Transport | None = None, environ: Mapping[str, str] | None = None,
    on_done: Callable[[RunSummary], None] | None = None,
    control: StopControl | None = None,
) -> list[RunSummary]:
    """Refresh the named sources (default: `[refresh] sources` of the configuration).

    With `control`, a stop request starts no further source (those get status
    `interrupted`, nothing recorded) and lets running ones finish within its grace time; an
    abort (or the grace running out) closes the HTTP client, so running fetches end at once
    and their runs roll back (status `interrupted`, no ingest row: the store keeps exactly
    the runs that committed).
    """
    environ = os.environ if environ is None else environ
    control = control or StopControl()
    names = list(names or configured_sources(config))
    for name in names:
        load_source(name)  # unknown names fail before anything runs
    started = now or datetime.now(UTC)
    summaries: dict[str, RunSummary] = {}
    runnable: list[tuple[str, Source]] = []
    for name in names:
        try:
            runnable.append((name, build_source(name, config, environ)))
        except MissingCredentials as exc:
            log.warning("%s", exc)
            record_skipped_run(db, name, started, str(exc), trigger)
            summaries[name] = RunSummary(source=name, status="skipped", error=str(exc))
        except TrackerError as exc:
            summaries[name] = ingest_records(
                db, name, _raise(exc), started_at=started, trigger=trigger)
    client = HttpClient(http_settings(config), transport=transport)
    control.on_abort(client.close)
    started_names: set[str] = set()
    try:
        def run(item: tuple[str, Source]) -> RunSummary:
            name, source = item
            if control.interrupted:
                return RunSummary(source=name, status="interrupted",
                                  error=f"{control.reason} before it started")
            started_names.add(name)
            summary = ingest_records(db, name, _watched(source.fetch(client, started), control),
                                     started_at=started, trigger=trigger,
                                     allow_empty=source.MAY_BE_EMPTY)
            if on_done is not None:
                on_done(summary)
            return summary

        workers = max(1, min(config.refresh.max_workers, len(runnable) or 1))
        for summary in _run_all(run, runnable, workers, control):
            summaries[summary.source] = summary
    finally:
        client.close()
    for name, _source in runnable:  # left behind by an abort: never written
        when = "; its run was rolled back" if name in started_names else " before it started"
        summaries.setdefault(name, RunSummary(source=name, status="interrupted",
                                              error=f"{control.reason}{when}"))
    return [summaries[name] for name in names if name in summaries]


# After an abort, how long the main thread still waits for running sources to unwind (a
# source inside its write transaction finishes it; one blocked in a read is left behind:
# its thread is a daemon and whatever it fetches afterwards is never written).
ABORT_WAIT_S = 2.0


def _run_all(run: Callable[[tuple[str, Source]], RunSummary],
             items: Sequence[tuple[str, Source]], workers: int,
             control: StopControl) -> Iterator[RunSummary]:
    """Run `run` over `items` on `workers` daemon threads, yielding summaries as they finish.

    Daemon threads (not a ThreadPoolExecutor, whose workers the interpreter joins at exit)
    so an aborted refresh exits at once even while a fetch is blocked in a socket read.
    """
    todo: queue.Queue[tuple[str, Source]] = queue.Queue()
    for item in items:
        todo.put(item)
    done: queue.Queue[RunSummary] = queue.Queue()

    def worker() -> None:
        while True:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put(run(item))
            except BaseException as exc:  # on_done or a bug: the source still gets a summary
                done.put(RunSummary(source=item[0], status="failed",
                                    error=f"{type(exc).__name__}: {exc}"))

    for index in range(workers):
        threading.Thread(target=worker, name=f"refresh-{index}", daemon=True).start()
    remaining = len(items)
    give_up_at: float | None = None
    while remaining:
        try:
            # Short waits keep the main thread responsive to signals and the grace clock.
            summary = done.get(timeout=0.2)
        except queue.Empty:
            if control.interrupted and control.grace_over():
                control.abort()
            if control.aborting.is_set():
                give_up_at = give_up_at or time.monotonic() + ABORT_WAIT_S
                if time.monotonic() >= give_up_at:
                    return
            continue
        remaining -= 1
        yield summary


def configured_sources(config: Config) -> list[str]:
    """`[refresh] sources`: what a plain `gpu-tracker refresh` runs (never empty: the schema
    refuses an empty list, and its default is the live public sources)."""
    return list(config.refresh.sources)


def source_lock(name: str) -> str:
    """The run-lock key of a source's refresh (shared by the CLI and the scheduler)."""
    return f"refresh:{name}"


@dataclass
class RefreshRun:
    """A locked, recorded refresh: per-source summaries, the sources another run held."""

    summaries: list[RunSummary]
    busy: list[str] = field(default_factory=list)
    job: JobResult | None = None

    @property
    def skipped(self) -> bool:
        """Skipped as a whole because other runs held every source (nothing ran); a run
        whose sources all lacked keys is recorded `skipped` too but has their summaries."""
        return self.job is not None and self.job.skipped and not self.summaries

    @property
    def interrupted(self) -> bool:
        return self.job is not None and self.job.status == "interrupted"

    @property
    def exit_code(self) -> int:
        return exit_code(self.summaries, self.interrupted)


def refresh_job(
    db: Database, config: Config, names: Sequence[str] | None = None, *,
    trigger: str = "manual", job: str = "refresh", wait: float = 0.0,
    slot: datetime | None = None, now: datetime | None = None,
    transport: Transport | None = None, environ: Mapping[str, str] | None = None,
    on_done: Callable[[RunSummary], None] | None = None,
    control: StopControl | None = None,
) -> RefreshRun:
    """Refresh under the per-source run locks and record the run as job `job`.

    Sources whose lock another run holds are skipped (listed in `busy`) after waiting up to
    `wait` seconds; when every source is busy the whole run is a recorded skip. A run
    stopped by `control` (Ctrl-C, SIGTERM) is recorded `interrupted` with what committed; a
    run whose every source was skipped for a missing key is recorded `skipped`.
    """
    control = control or StopControl()
    from tracker.store.jobs import JobOutcome, check_trigger, run_job

    check_trigger(trigger)
    names = list(dict.fromkeys(names or configured_sources(config)))
    for name in names:
        load_source(name)  # unknown names fail before anything is locked or recorded
    by_lock = {source_lock(name): name for name in names}

    def work(got: HeldLocks) -> JobOutcome:
        todo = [name for name in names if source_lock(name) in got.held]
        summaries = refresh_sources(db, config, todo, trigger=trigger, now=now,
                                    transport=transport, environ=environ, on_done=on_done,
                                    control=control)
        code = exit_code(summaries)
        failed = [s for s in summaries if s.status == "failed"]
        missing_key = [s.source for s in summaries if s.status == "skipped"]
        if control.interrupted:
            status = "interrupted"
        elif summaries and len(missing_key) == len(summaries):
            status = "skipped"
        else:
            status = "ok" if code == 0 else ("partial" if code == 3 else "failed")
        summary: dict[str, Any] = {"sources": [_summary_json(s) for s in summaries],
                                   "busy_sources": [by_lock[k] for k in got.busy]}
        if missing_key:
            summary["skipped_sources"] = missing_key
        if control.interrupted:
            summary["interrupted"] = control.reason
            summary["committed_sources"] = [s.source for s in summaries if s.status == "ok"]
        error = "; ".join(f"{s.source}: {s.error}" for s in failed) or None
        if control.interrupted:
            error = control.reason + (f"; {error}" if error else "")
        elif status == "skipped":
            error = "; ".join(f"{s.source}: {s.error}" for s in summaries)
        return JobOutcome(status=status, summary=summary, error=error, value=summaries)

    result = run_job(db, job, work, trigger=trigger, locks=list(by_lock), wait=wait,
                     partial=True, slot=slot, stop=control.stopping.is_set)
    return RefreshRun(summaries=list(result.value or []),
                      busy=[by_lock[k] for k in result.busy], job=result)


def _summary_json(summary: RunSummary) -> dict:
    data = summary.to_json()
    data["duration_s"] = round(summary.duration_s, 3)
    return data


def _raise(exc: Exception):
    raise exc
    yield  # a generator that fails when ingest starts reading it


__all__ = [
    "RefreshRun",
    "StopControl",
    "build_source",
    "configured_sources",
    "exit_code",
    "http_settings",
    "interrupt_signals",
    "refresh_job",
    "refresh_sources",
    "source_lock",
    "source_names",
]
