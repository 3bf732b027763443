"""Scheduled operation: `schedule run|list`, `status` (freshness for monitoring), `config show`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import as_of_option
from tracker.cli.commands.printing import emit, format_option

if TYPE_CHECKING:
    from tracker.config.schema import Config

STATUS_COLUMNS = ["source", "state", "last_success_at", "age_hours", "offers",
                  "rejected_last_run", "last_status", "last_error"]
LIST_COLUMNS = ["job", "kind", "sources", "cron", "timezone", "jitter_seconds",
                "misfire_grace_seconds", "next_runs", "last_status", "last_started_at"]
EXIT_STALE = 2  # for monitoring: something is stale or failing


# -- schedule run | list --------------------------------------------------------------------------

@click.group()
def schedule() -> None:
    """The built-in scheduler: an alternative to cron for refreshes and the weekly report.

    Jobs come from the `[schedule]` section of the configuration at every start. Use either
    this or cron/systemd timers for a job, not both (both are safe, thanks to the run
    locks, but one of them would only ever skip).
    """


@schedule.command("run")
@pass_app
def schedule_run(app: AppContext) -> None:
    """Run the scheduler in the foreground until SIGTERM or Ctrl-C.

    A stop lets the job in flight finish; a second signal stops at once (its transaction
    rolls back, nothing half-written). One line per job run goes to stderr.
    """
    from tracker.cli.scheduler import job_specs, run_scheduler

    specs = job_specs(app.config)
    db = app.db
    now = datetime.now(UTC)

    def say(message: str) -> None:
        from tracker.core.secrets import scrub

        click.echo(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {scrub(message)}", err=True)

    for spec in specs:
        upcoming = spec.next_runs(now, 1)
        say(f"job {spec.id}: {spec.cron} ({spec.timezone})"
            + (f", sources {', '.join(spec.sources)}" if spec.sources else "")
            + (f", next {upcoming[0].isoformat()}" if upcoming else ""))
    code = run_scheduler(db, app.config, notify=say if not app.quiet else _silent)
    sys.exit(code)


def _silent(_message: str) -> None:
    pass


def _covering_run(app: AppContext, spec: Any, newest: Any) -> Any:
    """The newest run of a refresh job that ran every source the job names: a manual
    `refresh --source bundled` (or the demo) records a run of the same job, and saying the
    job is "ok" after it would hide that its sources never ran."""
    from tracker.store.jobs import FINAL_STATUSES, job_runs

    wanted = set(spec.sources)

    def covers(row: Any) -> bool:
        ran = {s.get("source") for s in row.summary.get("sources", [])}
        ran |= set(row.summary.get("skipped_sources", []))
        return not wanted or wanted <= ran

    if covers(newest):
        return newest
    for row in job_runs(app.db, job=spec.id,
                        status=[s for s in FINAL_STATUSES if s != "skipped"]):
        if covers(row):
            return row
    return None


@schedule.command("list")
@click.option("--count", type=click.IntRange(min=1, max=50), default=3, show_default=True,
              help="How many next run times to show per job.")
@format_option
@pass_app
def schedule_list(app: AppContext, count: int, fmt: str) -> None:
    """Each scheduled job with its trigger, next run times and last run."""
    from tracker.cli.scheduler import job_specs
    from tracker.store.jobs import latest_runs

    specs = job_specs(app.config)
    now = datetime.now(UTC)
    last = latest_runs(app.db)
    rows = []
    for spec in specs:
        runs = spec.next_runs(now, count)
        previous = last.get(spec.id)
        if previous is not None and spec.kind == "refresh":
            previous = _covering_run(app, spec, previous)
        rows.append({
            "job": spec.id, "kind": spec.kind, "sources": list(spec.sources),
            "cron": spec.cron, "timezone": spec.timezone,
            "jitter_seconds": spec.jitter_seconds,
            "misfire_grace_seconds": spec.misfire_grace_seconds,
            "next_runs": runs if fmt == "json" else " ".join(t.isoformat() for t in runs),
            "last_status": previous.status if previous else None,
            "last_started_at": previous.started_at if previous else None,
        })
        if fmt != "json":
            rows[-1]["sources"] = ", ".join(spec.sources)
    if not rows and fmt == "table":
        app.note("no jobs: see [schedule] in `gpu-tracker config show`")
    emit(rows, fmt, LIST_COLUMNS if fmt != "json" else None)


# -- status ---------------------------------------------------------------------------------------

def monitored_sources(config: Config) -> list[str]:
    """The sources expected to stay fresh: `[refresh] sources` plus every scheduled source."""
    from tracker.collect.refresh import configured_sources

    names = list(configured_sources(config))
    names += config.schedule.refresh_sources
    for group in config.schedule.groups:
        names += group.sources
    return list(dict.fromkeys(names))


def job_problems(latest: Mapping[str, Any], *, now: datetime,
                 stale_after_hours: float) -> list[dict]:
    """Jobs whose newest run (within the staleness window) failed or was abandoned."""
    problems = []
    for job, row in sorted(latest.items()):
        age = (now - row.started_at).total_seconds() / 3600
        if row.status in ("failed", "abandoned") and age <= stale_after_hours:
            problems.append({"job": job, "status": row.status, "started_at": row.started_at,
                             "host": row.host, "trigger": row.trigger, "error": row.error})
    return problems


@click.command()
@click.option("--source", "sources", multiple=True, metavar="NAME",
              help="Check only this source (repeatable). Default: the configured sources.")
@click.option("--stale-after", "stale_after", type=click.FloatRange(min=0), metavar="HOURS",
              help="Stale when the last success is older than this. Default: "
                   "[refresh] stale_after_hours.")
@as_of_option("Freshness judged")
@format_option
@pass_app
def status(app: AppContext, sources: tuple[str, ...], stale_after: float | None,
           as_of: datetime | None, fmt: str) -> None:
    """Freshness per source, for monitoring; with --as-of, as it stood then (the runs started
    and the prices valid by then).

    Exit status: 0 when every source is fresh, 2 when one is stale, failing or never ran,
    a job's latest run failed, or a GPU class with offers cannot be sized (`check coverage`;
    1 for errors such as an unreachable database).
    """
    from scrapers import load_source
    from tracker.answers.freshness import source_states, stale_after_hours
    from tracker.store.jobs import latest_runs
    from tracker.store.queries import source_statuses

    names = list(dict.fromkeys(sources)) or monitored_sources(app.config)
    for name in names:
        load_source(name)
    threshold = float(stale_after if stale_after is not None
                      else stale_after_hours(app.config))
    now = as_of or datetime.now(UTC)
    known = {s.source: s for s in source_statuses(app.db, names, as_of=as_of)}
    rows = source_states([known[n] for n in names], now=now, stale_after_hours=threshold)
    for row in rows:
        key = load_source(row["source"]).SECRET_ENV
        if row["state"] == "never" and key and not os.environ.get(key):
            # A refresh would skip it (a fresh install without the key): not "never ran".
            row["state"] = "skipped"
            row["last_error"] = f"source {row['source']} skipped: {key} is not set"
    jobs = job_problems(latest_runs(app.db, as_of=as_of), now=now,
                        stale_after_hours=threshold)
    failing = any(r["state"] == "failing" for r in rows) or bool(jobs)
    stale = any(r["state"] in ("stale", "never") for r in rows)
    overall = "failing" if failing else ("stale" if stale else "fresh")
    from tracker.answers.gpu_catalog import coverage

    unsized = [r.to_json() for r in coverage(app.db, now) if not r.sizeable]
    if fmt == "json":
        emit({"status": overall, "checked_at": now, "stale_after_hours": threshold,
              "sources": rows, "failing_jobs": jobs, "unsizeable_gpus": unsized}, fmt)
    else:
        emit(rows, fmt, STATUS_COLUMNS)
        # One summary line, each source under the state the table shows: a source skipped
        # for want of its key is not failing, and does not make the exit status non-zero.
        words = {"failing": "failing", "stale": "stale", "never": "never ran",
                 "skipped": "skipped (no key set, not monitored)"}
        groups = [f"{words[state]}: {', '.join(r['source'] for r in rows if r['state'] == state)}"
                  for state in words if any(r["state"] == state for r in rows)]
        if groups:
            app.note(f"{'; '.join(groups)} (threshold {threshold:g} h)")
        for job in jobs:
            app.note(f"job {job['job']}: last run {job['status']} on {job['host']}: "
                     f"{job['error']}")
        for row in unsized:
            app.note(f"gpu {row['gpu']} ({row['offers']} offers) cannot be sized: no "
                     f"{' or '.join(row['missing'])} (gpu-tracker check coverage)")
    if overall != "fresh" or unsized:
        sys.exit(EXIT_STALE)


# -- config show ----------------------------------------------------------------------------------

@click.group()
def config() -> None:
    """The effective configuration (file, environment and defaults merged)."""


def effective_config(app: AppContext, environ: Mapping[str, str] | None = None) -> dict:
    """The configuration as a run would see it, secrets masked.

    Adds the database URL actually used (password hidden) and each source's resolved
    settings (defaults < file < environment), with its key variable shown as set or missing.
    """
    import os

    from scrapers import SOURCES, load_source
    from tracker.store.db import safe_url

    environ = os.environ if environ is None else environ
    data = app.config.masked()
    data.setdefault("database", {})["url"] = safe_url(app.database_url)
    resolved: dict[str, Any] = {}
    for name in SOURCES:
        try:
            cls = load_source(name)
            settings = cls.resolve_settings(app.config.source_settings(name), environ)
        except Exception as exc:  # a source module missing or misconfigured: say so, go on
            resolved[name] = {"error": str(exc).splitlines()[0] if str(exc) else repr(exc)}
            continue
        if cls.SECRET_ENV:
            settings["credentials"] = cls.SECRET_ENV + (
                " (set)" if environ.get(cls.SECRET_ENV) else " (missing)")
        resolved[name] = settings
    from tracker.config.schema import mask_secrets

    data["sources"] = mask_secrets(resolved)
    return data


def _json_value(value: Any) -> str:
    """A list or table as one CSV cell, in JSON: a spreadsheet cell holds one line, and JSON
    writes a nested value on one."""
    import json

    from tracker.core.serialization import to_jsonable

    return json.dumps(to_jsonable(value), ensure_ascii=False)


def render_toml(data: Mapping[str, Any]) -> str:
    """The configuration as TOML that loads back as a config file (tracker/config/schema.py)."""
    from tracker.config.toml_text import to_toml

    return to_toml(data).rstrip("\n")


def _flatten(node: Any, prefix: str = "") -> list[dict[str, Any]]:
    if isinstance(node, Mapping):
        rows: list[dict[str, Any]] = []
        for key, value in node.items():
            rows += _flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return rows
    return [{"key": prefix, "value": node if not isinstance(node, (list, dict))
             else _json_value(node)}]


@config.command("show")
@format_option
@pass_app
def config_show(app: AppContext, fmt: str) -> None:
    """Print the effective configuration; secrets are masked (`***`)."""
    data = effective_config(app)
    source = app.config.path
    app.note(f"config file: {source}" if source else
             "config file: none (built-in defaults and environment)")
    if fmt == "csv":
        emit(_flatten(data), fmt, ["key", "value"])
    else:
        emit(data, fmt, table_text=render_toml(data))
