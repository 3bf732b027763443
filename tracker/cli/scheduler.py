"""The built-in scheduler (`gpu-tracker schedule run`): APScheduler 3.x, jobs from the config.

For hosts without cron. A `BlockingScheduler` with a `MemoryJobStore` whose jobs are
rebuilt from the `[schedule]` section at every start (nothing pickled, no shared job store):

- a refresh job for the `[refresh] sources` (`refresh_cron`, `refresh_jitter_seconds`),
- a refresh job per `[[schedule.groups]]` entry (own sources, cron and jitter); grouped
  sources leave the default job,
- the weekly report (`report_day` at `report_time` in `timezone`), built, archived and mailed
  by `reports`.

Every job has `coalesce=True` and `max_instances=1`, and a long `misfire_grace_time`. As the
job store is rebuilt at start, a scheduler that was down when a job was due does not know it
missed it; so at start, each job whose latest due time lies within its grace period and
that no scheduler has run since (the job history says) is run at once, once. A run skips a
slot another scheduler (another host on the same database) has already done, and takes the
same run locks as cron-started runs (tracker/store/locks.py), so nothing runs twice.

Cron expressions are the classic 5 fields (`minute hour day month weekday`, weekday 0 or 7 =
Sunday as in crontab, not APScheduler 3's 0 = Monday), an optional leading seconds field (6
fields), or @hourly/@daily/@weekly/@monthly. A signal (SIGTERM, SIGINT) stops the scheduler:
no new job starts, the one in flight finishes (its transaction commits); a second signal
exits at once and the unfinished transaction rolls back. Nothing is ever half-written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tracker.core.cron import cron_trigger, fire_times, previous_fire_time, report_cron
from tracker.core.errors import InvalidInput

if TYPE_CHECKING:
    from scrapers.http import Transport
    from tracker.config.schema import Config
    from tracker.store.db import Database
    from tracker.store.jobs import JobOutcome

log = logging.getLogger(__name__)

# The `[schedule]` keys and defaults are declared with every other section in
# tracker/config/sections.py (ScheduleSection, ScheduleGroup), which checks their types.
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


# -- jobs from the configuration ---------------------------------------------------------------

@dataclass(frozen=True)
class JobSpec:
    """One scheduled job as configured: `refresh` (of `sources`) or `report`."""

    id: str
    kind: str
    cron: str
    timezone: str
    sources: tuple[str, ...] = ()
    jitter_seconds: int = 0
    misfire_grace_seconds: int = 3600

    def trigger(self, *, jitter: bool = True) -> Any:
        from zoneinfo import ZoneInfo

        return cron_trigger(self.cron, ZoneInfo(self.timezone),
                            self.jitter_seconds if jitter else None)

    def next_runs(self, now: datetime, count: int = 3) -> list[datetime]:
        return fire_times(self.trigger(jitter=False), now, count)

    def last_due(self, now: datetime, *, with_jitter: bool = True) -> datetime | None:
        """The slot a run at `now` belongs to: the latest due time (without jitter) that a run
        may still start for, i.e. within the grace period plus the jitter."""
        window = max(self.misfire_grace_seconds, 1) + (self.jitter_seconds if with_jitter else 0)
        return previous_fire_time(self.trigger(jitter=False), now, window)

    @property
    def locks(self) -> list[str]:
        from tracker.collect.refresh import source_lock

        return [source_lock(s) for s in self.sources] if self.kind == "refresh" else ["report"]


def _timezone(name: str) -> str:
    from tracker.config.checks import check_time_zone

    try:
        return check_time_zone(name)
    except ValueError as exc:
        raise InvalidInput(f"schedule.timezone: {exc}") from None


def _source_list(value: Any, name: str) -> list[str]:
    from scrapers import load_source
    from tracker.core.serialization import comma_list

    value = comma_list(value)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{name} must be a list of source names, got {value!r}")
    for source in value:
        load_source(source)  # unknown names fail here, with suggestions
    return list(dict.fromkeys(value))


def job_specs(config: Config) -> list[JobSpec]:
    """The jobs the configuration asks for, validated (bad cron, zone or source: InvalidInput)."""
    from tracker.collect.refresh import configured_sources

    section = config.schedule
    timezone = _timezone(section.timezone)
    specs: list[JobSpec] = []
    claimed: dict[str, str] = {}
    for group in section.groups:
        name = group.name.strip().lower()
        if not _NAME.match(name):
            raise InvalidInput(f"schedule.groups: each group needs a name of a-z, 0-9, - or _,"
                               f" got {group.name!r}")
        job_id = f"refresh:{name}"
        if any(s.id == job_id for s in specs):
            raise InvalidInput(f"schedule.groups: two groups are named {name!r}")
        sources = _source_list(group.sources, f"schedule.groups {name}: sources")
        if not sources:
            raise InvalidInput(f"schedule.groups {name}: sources is empty")
        for source in sources:
            if source in claimed:
                raise InvalidInput(f"source {source} is in two schedule groups "
                                   f"({claimed[source]} and {name})")
            claimed[source] = name
        spec = JobSpec(
            id=job_id, kind="refresh", cron=group.cron or section.refresh_cron,
            timezone=timezone, sources=tuple(sources),
            jitter_seconds=section.refresh_jitter_seconds if group.jitter_seconds is None
            else group.jitter_seconds,
            misfire_grace_seconds=section.refresh_misfire_grace_seconds
            if group.misfire_grace_seconds is None else group.misfire_grace_seconds)
        spec.trigger()  # validates the expression
        specs.append(spec)
    default_sources = _source_list(section.refresh_sources or configured_sources(config),
                                   "schedule.refresh_sources")
    rest = [s for s in default_sources if s not in claimed]
    if section.refresh_cron.strip() and rest:
        spec = JobSpec(
            id="refresh", kind="refresh", cron=section.refresh_cron.strip(),
            timezone=timezone, sources=tuple(rest),
            jitter_seconds=section.refresh_jitter_seconds,
            misfire_grace_seconds=section.refresh_misfire_grace_seconds)
        spec.trigger()
        specs.insert(0, spec)
    if section.report_enabled:
        spec = JobSpec(
            id="report", kind="report",
            cron=report_cron(section.report_day, section.report_time),
            timezone=timezone, jitter_seconds=section.report_jitter_seconds,
            misfire_grace_seconds=section.report_misfire_grace_seconds)
        spec.trigger()
        specs.append(spec)
    return specs


# -- the weekly report -------------------------------------------------------------------------

def weekly_report(db: Database, config: Config, *, send: bool = True) -> JobOutcome:
    """Build and archive the newest finished week's report, then mail it to the configured
    recipients (`reports.send_report` skips those already sent to, and says so when there
    are none). `reports` is imported here so the scheduler starts without pandas."""
    from reports import build_and_archive, send_report
    from tracker.store.jobs import JobOutcome

    built = build_and_archive(db, config, week=None)
    summary: dict[str, Any] = {"report": built.to_json()}
    if send:
        delivery = send_report(db, config, built)
        summary["delivery"] = delivery.to_json()
    return JobOutcome(status="ok", summary=summary, value=built)


# -- running -------------------------------------------------------------------------------------

@dataclass
class JobRunner:
    """What APScheduler calls (in a worker thread) for each due job; counts jobs in flight."""

    db: Database
    config: Config
    specs: dict[str, JobSpec]
    notify: Callable[[str], None] = log.info
    transport: Transport | None = None
    environ: Mapping[str, str] | None = None
    report: Callable[[Database, Config], JobOutcome] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    _active: int = 0
    _idle: threading.Condition = field(default_factory=threading.Condition)
    # Alerts run on their own thread, one check at a time: a slow webhook or mail server
    # holds neither the refresh job that asked for the check nor the next refresh. A check
    # asked for while one runs is folded into one more check after it.
    _alerts_thread: threading.Thread | None = None
    _alerts_again: bool = False

    def __call__(self, job_id: str) -> None:
        spec = self.specs[job_id]
        if self.stopping.is_set():
            return  # a stop was asked for: start nothing new
        with self._idle:
            self._active += 1
        try:
            self._run(spec)
        except Exception as exc:  # the scheduler keeps going; the job history has the error
            log.error("job %s failed: %s", spec.id, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            self.notify(f"{spec.id}: failed: {exc}")
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def _run(self, spec: JobSpec) -> None:
        from tracker.collect.refresh import refresh_job
        from tracker.store.jobs import run_job

        wait = self.config.schedule.lock_wait_seconds
        slot = spec.last_due(datetime.now(UTC))
        if spec.kind == "refresh":
            run = refresh_job(self.db, self.config, list(spec.sources), trigger="scheduler",
                              job=spec.id, wait=wait, slot=slot, transport=self.transport,
                              environ=self.environ)
            job = run.job
            if job is not None and job.skipped:
                self.notify(f"{spec.id}: skipped: {job.note}")
                return
            parts = [f"{s.source}: {s.offers_seen} offers, {s.prices_changed} prices changed, "
                     f"{s.rejected} rejected" if s.status == "ok"
                     else f"{s.source}: {s.status} ({s.error})" for s in run.summaries]
            parts += [f"{name}: busy (another run has it)" for name in run.busy]
            self.notify(f"{spec.id}: {job.status if job else '?'}; {'; '.join(parts)}")
            self.request_alerts_check()
            return
        send = self.config.schedule.report_send
        make = self.report or (lambda db, config: weekly_report(db, config, send=send))
        result = run_job(self.db, spec.id, lambda _locks: make(self.db, self.config),
                         trigger="scheduler", locks=spec.locks, wait=wait, slot=slot)
        detail = result.note or _report_line(result.summary)
        self.notify(f"{spec.id}: {result.status}" + (f": {detail}" if detail else ""))

    def request_alerts_check(self) -> None:
        """Check the alerts after a refresh, off the refresh's thread (see `_alerts_thread`);
        the check counts as a job in flight, so a stop lets it finish (each delivery has its
        own deadline)."""
        with self._idle:
            if self._alerts_thread is not None:
                self._alerts_again = True
                return
            self._active += 1
            self._alerts_thread = threading.Thread(target=self._alerts_loop,
                                                   name="alerts-check", daemon=True)
            self._alerts_thread.start()

    def _alerts_loop(self) -> None:
        try:
            while True:
                self._check_alerts()
                with self._idle:
                    if not self._alerts_again or self.stopping.is_set():
                        self._alerts_thread = None
                        self._alerts_again = False
                        return
                    self._alerts_again = False
        finally:
            with self._idle:
                self._alerts_thread = None
                self._active -= 1
                self._idle.notify_all()

    def _check_alerts(self) -> None:
        """Alerts are evaluated after every refresh; a failing check never stops the scheduler."""
        from tracker.market.alert_checks import check_alerts

        try:
            results = check_alerts(self.db, self.config, datetime.now(UTC),
                                   transport=self.transport)
        except Exception as exc:
            log.error("alerts check failed: %s", exc)
            self.notify(f"alerts: failed: {exc}")
            return
        for result in results:
            if result.event:
                self.notify(f"alert {result.rule}: {result.event}: {result.message}")

    @property
    def active(self) -> int:
        with self._idle:
            return self._active

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no job is running; False if `timeout` passed first."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._active:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                # short waits so signal handlers (a second SIGTERM) run promptly
                self._idle.wait(0.5 if remaining is None else min(0.5, remaining))
        return True


def _report_line(summary: Mapping[str, Any]) -> str:
    report = summary.get("report") or {}
    delivery = summary.get("delivery") or {}
    parts = [f"week {report['week']}"] if report.get("week") else []
    if delivery:
        sent = delivery.get("recipients") or []
        parts.append(f"mailed to {len(sent)}" if delivery.get("status") == "sent"
                     else f"not mailed ({delivery.get('note') or 'already sent'})")
    return ", ".join(parts)


def catch_up_time(db: Database, spec: JobSpec, now: datetime) -> datetime | None:
    """The due time to run `spec` at once on start, if it was missed within its grace period."""
    from tracker.store.jobs import slot_done_by

    due = spec.last_due(now, with_jitter=False)  # APScheduler's own misfire test
    if due is None or slot_done_by(db, spec.id, due) is not None:
        return None
    return due


def build_scheduler(
    db: Database, config: Config, runner: JobRunner | None = None, *,
    now: datetime | None = None, specs: Sequence[JobSpec] | None = None,
) -> tuple[Any, JobRunner]:
    """A BlockingScheduler with the configured jobs (missed ones due at once); not started."""
    from zoneinfo import ZoneInfo

    from apscheduler.events import EVENT_JOB_MISSED
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.schedulers.blocking import BlockingScheduler

    specs = list(specs if specs is not None else job_specs(config))
    if not specs:
        raise InvalidInput("nothing to schedule: no refresh sources, no groups and the report "
                           "is disabled ([schedule] in the config file)")
    if runner is None:
        runner = JobRunner(db, config, {s.id: s for s in specs})
    else:
        runner.specs = {s.id: s for s in specs}
    timezone = ZoneInfo(specs[0].timezone)
    workers = config.schedule.max_workers
    scheduler = BlockingScheduler(
        jobstores={"default": MemoryJobStore()},
        executors={"default": ThreadPoolExecutor(max_workers=workers)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600},
        timezone=timezone)
    now = now or datetime.now(UTC)
    for spec in specs:
        extra: dict[str, Any] = {}
        missed = catch_up_time(db, spec, now)
        if missed is not None:
            extra["next_run_time"] = missed
            runner.notify(f"{spec.id}: due at {missed.isoformat()} and not run yet: running now")
        scheduler.add_job(
            runner, trigger=spec.trigger(), args=[spec.id], id=spec.id,
            name=f"{spec.id} [{spec.cron}]", coalesce=True, max_instances=1,
            misfire_grace_time=max(spec.misfire_grace_seconds, 1), replace_existing=True,
            **extra)

    def on_missed(event: Any) -> None:
        runner.notify(f"{event.job_id}: run due at {event.scheduled_run_time.isoformat()} "
                      "was missed (beyond its misfire grace time)")

    scheduler.add_listener(on_missed, EVENT_JOB_MISSED)
    return scheduler, runner


def _shutdown(scheduler: Any) -> None:
    import time

    from apscheduler.schedulers import SchedulerNotRunningError

    # A signal that arrives just before start(): let the scheduler come up, then stop it.
    deadline = time.monotonic() + 5
    while not scheduler.running and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(SchedulerNotRunningError):
        scheduler.shutdown(wait=False)


def run_scheduler(
    db: Database, config: Config, *, notify: Callable[[str], None] = log.info,
    install_signals: bool = True, transport: Transport | None = None,
) -> int:
    """Run the scheduler until SIGTERM/SIGINT; returns the exit status (0 after a clean stop)."""
    specs = job_specs(config)
    runner = JobRunner(db, config, {s.id: s for s in specs}, notify=notify, transport=transport)
    scheduler, runner = build_scheduler(db, config, runner, specs=specs)
    signals_seen: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        signals_seen.append(signum)
        if len(signals_seen) > 1:
            notify("second signal: stopping at once; the unfinished transaction rolls back")
            os._exit(128 + signum)
        runner.stopping.set()
        in_flight = runner.active
        notify("stopping: " + (f"waiting for {in_flight} running job(s) to finish (signal "
                               "again to stop at once)" if in_flight else "no job running"))
        # shutdown takes the scheduler's locks: not from inside a signal handler
        threading.Thread(target=_shutdown, args=(scheduler,), name="scheduler-stop",
                         daemon=True).start()

    previous: dict[signal.Signals, Any] = {}
    if install_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, stop)
    try:
        if not runner.stopping.is_set():
            scheduler.start()  # blocks until shutdown
        runner.wait_idle()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    notify("scheduler stopped")
    return 0


__all__ = ["JobRunner", "JobSpec", "build_scheduler", "catch_up_time", "job_specs",
           "run_scheduler", "weekly_report"]
