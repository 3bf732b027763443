"""Refresh: run price sources concurrently, each into its own transaction.

A source that fails (HTTP, parsing, a bug) is recorded as a failed run and never blocks the
others; a source whose key is missing is skipped with a one-line warning.

`refresh_job` is what the CLI and the scheduler run: the same refresh under the run lock of
each source (`refresh:<name>`, tracker/locks.py), recorded in the job history
(tracker/jobs.py). A source whose lock another run holds is skipped, not waited for
(unless `wait`), so cron, a systemd timer and schedulers on several hosts never refresh the
same source twice at once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from scrapers import load_source, source_names
from scrapers.http import HttpClient, HttpSettings
from tracker.errors import MissingCredentials, TrackerError
from tracker.ingest import RunSummary, ingest_records, record_skipped_run

if TYPE_CHECKING:
    import httpx

    from scrapers.base import Source
    from tracker.config import Config
    from tracker.db import Database
    from tracker.jobs import JobResult
    from tracker.locks import HeldLocks

log = logging.getLogger(__name__)


def http_settings(config: Config) -> HttpSettings:
    section = config["http"]
    return HttpSettings(**{k: section[k] for k in HttpSettings.__dataclass_fields__
                           if k in section})


def build_source(name: str, config: Config, environ: Mapping[str, str] | None = None) -> Source:
    cls = load_source(name)
    return cls.from_config(config.source_settings(name), environ)


def exit_code(summaries: Sequence[RunSummary]) -> int:
    """0 when every source that ran succeeded, 3 when some failed, 1 when all failed."""
    failed = [s for s in summaries if s.status == "failed"]
    ran = [s for s in summaries if s.status != "skipped"]
    if not failed:
        return 0
    return 1 if len(failed) == len(ran) else 3


def refresh_sources(
    db: Database, config: Config, names: Sequence[str] | None = None, *,
    trigger: str = "manual", now: datetime | None = None,
    transport: httpx.BaseTransport | None = None, environ: Mapping[str, str] | None = None,
    on_done: Callable[[RunSummary], None] | None = None,
) -> list[RunSummary]:
    """Refresh the named sources (default: `[refresh] sources` of the configuration)."""
    environ = os.environ if environ is None else environ
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
    try:
        def run(item: tuple[str, Source]) -> RunSummary:
            name, source = item
            summary = ingest_records(db, name, source.fetch(client, started),
                                     started_at=started, trigger=trigger)
            if on_done is not None:
                on_done(summary)
            return summary

        workers = max(1, min(int(config.get("refresh", "max_workers") or 4), len(runnable) or 1))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="refresh") as pool:
            for summary in pool.map(run, runnable):
                summaries[summary.source] = summary
    finally:
        client.close()
    return [summaries[name] for name in names if name in summaries]


def configured_sources(config: Config) -> list[str]:
    return list(config.get("refresh", "sources") or ["bundled"])


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
        return self.job is not None and self.job.skipped

    @property
    def exit_code(self) -> int:
        return exit_code(self.summaries)


def refresh_job(
    db: Database, config: Config, names: Sequence[str] | None = None, *,
    trigger: str = "manual", job: str = "refresh", wait: float = 0.0,
    slot: datetime | None = None, now: datetime | None = None,
    transport: httpx.BaseTransport | None = None, environ: Mapping[str, str] | None = None,
    on_done: Callable[[RunSummary], None] | None = None,
) -> RefreshRun:
    """Refresh under the per-source run locks and record the run as job `job`.

    Sources whose lock another run holds are skipped (listed in `busy`) after waiting up to
    `wait` seconds; when every source is busy the whole run is a recorded skip.
    """
    from tracker.jobs import JobOutcome, check_trigger, run_job

    check_trigger(trigger)
    names = list(dict.fromkeys(names or configured_sources(config)))
    for name in names:
        load_source(name)  # unknown names fail before anything is locked or recorded
    by_lock = {source_lock(name): name for name in names}

    def work(got: HeldLocks) -> JobOutcome:
        todo = [name for name in names if source_lock(name) in got.held]
        summaries = refresh_sources(db, config, todo, trigger=trigger, now=now,
                                    transport=transport, environ=environ, on_done=on_done)
        code = exit_code(summaries)
        failed = [s for s in summaries if s.status == "failed"]
        return JobOutcome(
            status="ok" if code == 0 else ("partial" if code == 3 else "failed"),
            summary={"sources": [_summary_json(s) for s in summaries],
                     "busy_sources": [by_lock[k] for k in got.busy]},
            error="; ".join(f"{s.source}: {s.error}" for s in failed) or None,
            value=summaries)

    result = run_job(db, job, work, trigger=trigger, locks=list(by_lock), wait=wait,
                     partial=True, slot=slot)
    return RefreshRun(summaries=list(result.value or []),
                      busy=[by_lock[k] for k in result.busy], job=result)


def _summary_json(summary: RunSummary) -> dict:
    data = summary.to_json()
    data["duration_s"] = round(summary.duration_s, 3)
    return data


def _raise(exc: Exception):
    raise exc
    yield  # a generator that fails when ingest starts reading it


__all__ = ["RefreshRun", "build_source", "configured_sources", "exit_code", "http_settings",
           "refresh_job", "refresh_sources", "source_lock", "source_names"]
