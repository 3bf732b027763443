"""Job history: every run of a job (refresh, report) recorded in the `job_run` table.

`run_job` is the one wrapper the CLI and the scheduler both use. It takes the run locks
(tracker/store/locks.py), records the run as `running`, does the work, and records how it ended:

- `ok`, `partial` (some of the work failed), `failed` (with the error);
- `skipped` when another run holds the lock, or when another scheduler (maybe on another
  host) already ran this job for the same scheduled slot; skipping is normal, not an error;
- `abandoned` for a run whose process died without finishing (kill -9, power loss). The
  next run that holds one of its locks marks it: holding the lock proves the old owner is
  gone, because an owner keeps its locks from before its row is written until after it is
  finished. Its data was never half-written: each source's data is one transaction.

Each row carries the job name, the trigger (cron | scheduler | manual), the host, start and
end, a JSON summary and the error. `status` and the weekly report's data-quality footer
read this history (`job_runs`, `latest_runs`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from tracker.core.errors import InvalidInput
from tracker.store.locks import HeldLocks, hold_locks
from tracker.store.models import JobRun

if TYPE_CHECKING:
    from tracker.store.db import Database

log = logging.getLogger(__name__)

TRIGGERS = ("cron", "scheduler", "manual")
FINAL_STATUSES = ("ok", "partial", "failed", "skipped", "abandoned", "interrupted")
DONE_STATUSES = ("ok", "partial")  # a scheduled slot counts as done after one of these


@dataclass
class JobOutcome:
    """What the work of a job returns: how it went, a JSON-able summary, and any value."""

    status: str = "ok"
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    value: Any = None


@dataclass(frozen=True)
class JobRunRow:
    """One row of the job history."""

    id: int
    job: str
    trigger: str
    host: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    summary: dict[str, Any]
    error: str | None

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"duration_s": self.duration_s}


@dataclass
class JobResult:
    """How one call of `run_job` went; `value` is what the work returned (None if skipped)."""

    job: str
    trigger: str
    host: str
    started_at: datetime
    finished_at: datetime
    status: str
    summary: dict[str, Any]
    error: str | None = None
    run_id: int | None = None
    value: Any = None
    held: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    note: str | None = None  # one line for people when the run was skipped

    @property
    def skipped(self) -> bool:
        return self.status == "skipped"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _dumps(summary: dict[str, Any]) -> str:
    from tracker.core.secrets import scrub_tree
    from tracker.core.serialization import to_jsonable

    return json.dumps(scrub_tree(to_jsonable(summary)), sort_keys=True, ensure_ascii=False)


def _loads(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {"unparsed": text}
    return value if isinstance(value, dict) else {"value": value}


def _row(record: Any) -> JobRunRow:
    return JobRunRow(
        id=record.id, job=record.job, trigger=record.trigger, host=record.host,
        started_at=record.started_at, finished_at=record.finished_at, status=record.status,
        summary=_loads(record.summary), error=record.error)


def _one_line(exc: BaseException) -> str:
    from tracker.core.errors import TrackerError

    message = str(exc).strip()
    first = message.splitlines()[0] if message else ""
    if isinstance(exc, TrackerError) and first:
        return first
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def check_trigger(trigger: str) -> str:
    if trigger not in TRIGGERS:
        raise InvalidInput(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")
    return trigger


# -- reading the history ------------------------------------------------------------------------

def job_runs(
    db: Database, *, job: str | Sequence[str] | None = None, status: str | Sequence[str] |
    None = None, trigger: str | None = None, since: datetime | None = None,
    until: datetime | None = None, limit: int | None = None,
) -> list[JobRunRow]:
    """Job runs, newest first, filtered by job name(s), status(es), trigger and start time."""
    t = JobRun.__table__
    query = select(t).order_by(t.c.started_at.desc(), t.c.id.desc())
    if job is not None:
        query = query.where(t.c.job.in_([job] if isinstance(job, str) else list(job)))
    if status is not None:
        query = query.where(t.c.status.in_([status] if isinstance(status, str) else
                                            list(status)))
    if trigger is not None:
        query = query.where(t.c.trigger == trigger)
    if since is not None:
        query = query.where(t.c.started_at >= since)
    if until is not None:
        query = query.where(t.c.started_at < until)
    if limit is not None:
        query = query.limit(limit)
    with db.engine.connect() as conn:
        return [_row(r) for r in conn.execute(query)]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but someone else's
        return True
    except OSError:
        return True
    return True


def reap_dead_local(db: Database, *, host: str | None = None,
                    now: datetime | None = None) -> list[int]:
    """Mark `running` rows of this host whose process (pid) no longer exists as abandoned.

    A killed scheduler's jobs would otherwise show `running` until a later run of the same
    job takes their locks; a row is only judged on its own host, where its pid means
    something.
    """
    host = host or socket.gethostname()
    dead = [row for row in job_runs(db, status="running")
            if row.host == host and isinstance(row.summary.get("pid"), int)
            and row.summary["pid"] != os.getpid() and not _pid_alive(row.summary["pid"])]
    if not dead:
        return []
    when = now or _utcnow()
    from tracker.core.serialization import iso_utc

    table = JobRun.__table__
    with db.write() as conn:
        for row in dead:
            conn.execute(table.update().where(
                (table.c.id == row.id) & (table.c.status == "running")).values(
                status="abandoned", finished_at=None,
                summary=_dumps(row.summary | {"abandoned_noticed_at": when}),
                error=(f"the run on {row.host} (pid {row.summary['pid']}) ended without "
                       "finishing (its process is gone); nothing of its unfinished work was "
                       f"stored; noticed {iso_utc(when)}")))
    for row in dead:
        log.warning("job %s run %d (pid %s) was abandoned: its process is gone", row.job,
                    row.id, row.summary["pid"])
    return [row.id for row in dead]


def latest_runs(db: Database, *, finished_only: bool = False,
                as_of: datetime | None = None) -> dict[str, JobRunRow]:
    """The newest run of each job started by `as_of` (default: any; skipped runs excluded:
    they say nothing about the job). Runs of this host whose process died are marked
    abandoned first."""
    try:
        reap_dead_local(db)
    except Exception:  # a read-only database still answers; the row is reaped later
        log.debug("could not mark dead runs abandoned", exc_info=True)
    latest: dict[str, JobRunRow] = {}
    statuses = [s for s in FINAL_STATUSES if s != "skipped"]
    if not finished_only:
        statuses.append("running")
    for row in job_runs(db, status=statuses):
        if as_of is None or row.started_at <= as_of:
            latest.setdefault(row.job, row)
    return latest


def lock_holders(db: Database, keys: Iterable[str]) -> dict[str, JobRunRow]:
    """For each lock key, the running job that says it holds it (if it has written its row)."""
    wanted = set(keys)
    holders: dict[str, JobRunRow] = {}
    for row in job_runs(db, status="running"):
        for key in row.summary.get("locks", []):
            if key in wanted and key not in holders:
                holders[key] = row
    return holders


def describe_holder(row: JobRunRow | None) -> str:
    if row is None:
        return "another run holds the lock"
    from tracker.core.serialization import iso_utc

    pid = row.summary.get("pid")
    who = f"{row.host}" + (f" pid {pid}" if pid else "")
    return f"{row.job} ({row.trigger}) running on {who} since {iso_utc(row.started_at)}"


# -- writing the history ------------------------------------------------------------------------

def _insert(db: Database, **values: Any) -> int:
    from tracker.core.secrets import scrub
    from tracker.store.db import inserted_id

    table = JobRun.__table__
    values["summary"] = _dumps(values.get("summary") or {})
    values["error"] = scrub(values.get("error"))
    with db.write() as conn:
        return inserted_id(conn.execute(table.insert().values(**values)))


def _finish(db: Database, run_id: int, **values: Any) -> None:
    from tracker.core.secrets import scrub

    table = JobRun.__table__
    values["summary"] = _dumps(values.get("summary") or {})
    values["error"] = scrub(values.get("error"))
    with db.write() as conn:
        conn.execute(table.update().where(table.c.id == run_id).values(**values))


def reap_abandoned(db: Database, held: Iterable[str], *, now: datetime | None = None) -> list[int]:
    """Mark `running` rows whose locks we now hold as abandoned: their process is gone."""
    held = set(held)
    table = JobRun.__table__
    abandoned: list[JobRunRow] = [
        row for row in job_runs(db, status="running")
        if held & set(row.summary.get("locks", []))]
    if not abandoned:
        return []
    when = now or _utcnow()
    from tracker.core.serialization import iso_utc

    with db.write() as conn:
        for row in abandoned:
            pid = row.summary.get("pid")
            conn.execute(table.update().where(
                (table.c.id == row.id) & (table.c.status == "running")).values(
                status="abandoned",
                summary=_dumps(row.summary | {"abandoned_noticed_at": when}),
                error=(f"the run on {row.host}" + (f" (pid {pid})" if pid else "") +
                       " ended without finishing (killed or crashed); nothing of its "
                       f"unfinished work was stored; noticed {iso_utc(when)}")))
    for row in abandoned:
        log.warning("job %s run %d on %s was abandoned (killed or crashed)", row.job, row.id,
                    row.host)
    return [row.id for row in abandoned]


def slot_done_by(db: Database, job: str, slot: datetime) -> JobRunRow | None:
    """A scheduled run of `job` that already did the slot starting at `slot`, if any."""
    rows = job_runs(db, job=job, status=DONE_STATUSES, trigger="scheduler", since=slot, limit=1)
    return rows[0] if rows else None


def run_job(
    db: Database, job: str, work: Callable[[HeldLocks], JobOutcome], *, trigger: str,
    locks: Sequence[str], wait: float = 0.0, partial: bool = False,
    slot: datetime | None = None, host: str | None = None,
    clock: Callable[[], datetime] = _utcnow, stop: Callable[[], bool] | None = None,
) -> JobResult:
    """Run `work` under the locks `locks` and record the run in the job history.

    `work` gets the locks held (with `partial`, some may be busy) and returns a JobOutcome.
    When no lock could be taken (within `wait` seconds), or when `slot` is given and a
    scheduled run already did that slot, the run is recorded as skipped and `work` is not
    called. An exception from `work` is recorded as a failed run and raised again.
    """
    check_trigger(trigger)
    host = host or socket.gethostname()
    started = clock()
    base = {"job": job, "trigger": trigger, "host": host, "started_at": started}
    with hold_locks(db, locks, wait=wait, partial=partial, stop=stop) as got:
        if locks and not got.held:
            holders = lock_holders(db, got.busy)
            note = "; ".join(describe_holder(holders.get(k)) for k in got.busy[:1])
            summary: dict[str, Any] = {"reason": "locked", "busy": got.busy,
                       "held_by": {k: r.id for k, r in holders.items()}}
            run_id = _insert(db, **base, finished_at=started, status="skipped",
                             summary=summary, error=None)
            return JobResult(job=job, trigger=trigger, host=host, started_at=started,
                             finished_at=started, status="skipped", summary=summary,
                             run_id=run_id, busy=got.busy, note=note)
        if slot is not None:
            done = slot_done_by(db, job, slot)
            if done is not None:
                summary = {"reason": "done", "slot": slot, "done_by_run": done.id}
                note = (f"{job}: the run for {slot.isoformat()} was already done on "
                        f"{done.host} (run {done.id})")
                run_id = _insert(db, **base, finished_at=started, status="skipped",
                                 summary=summary, error=None)
                return JobResult(job=job, trigger=trigger, host=host, started_at=started,
                                 finished_at=started, status="skipped", summary=summary,
                                 run_id=run_id, held=got.held, note=note)
        reap_abandoned(db, got.held, now=started)
        own: dict[str, Any] = {"locks": got.held, "pid": os.getpid()}
        if got.busy:
            own["busy"] = got.busy
        if slot is not None:
            own["slot"] = slot
        run_id = _insert(db, **base, finished_at=None, status="running", summary=own,
                         error=None)
        try:
            outcome = work(got)
        except BaseException as exc:
            from tracker.core.errors import Interrupted

            stopped = isinstance(exc, (KeyboardInterrupt, Interrupted))
            try:
                _finish(db, run_id, finished_at=clock(),
                        status="interrupted" if stopped else "failed", summary=own,
                        error="interrupted" if isinstance(exc, KeyboardInterrupt)
                        else _one_line(exc))
            except Exception:  # keep the original error; the next run reaps the row
                log.warning("could not record the failure of job %s", job, exc_info=True)
            raise
        if outcome.status not in FINAL_STATUSES:
            raise ValueError(f"job {job} returned unknown status {outcome.status!r}")
        finished = clock()
        summary = own | outcome.summary
        _finish(db, run_id, finished_at=finished, status=outcome.status, summary=summary,
                error=outcome.error)
    return JobResult(job=job, trigger=trigger, host=host, started_at=started,
                     finished_at=finished, status=outcome.status, summary=summary,
                     error=outcome.error, run_id=run_id, value=outcome.value, held=got.held,
                     busy=got.busy)


__all__ = ["TRIGGERS", "JobOutcome", "JobResult", "JobRunRow", "describe_holder",
           "job_runs", "latest_runs", "lock_holders", "reap_abandoned", "reap_dead_local",
           "run_job"]
