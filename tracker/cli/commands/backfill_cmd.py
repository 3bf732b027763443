"""`gpu-tracker backfill`: import a source's past catalog versions as dated history."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import click

from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.params import Instant, check_range
from tracker.cli.commands.printing import emit, format_option

COLUMNS = ["version", "status", "offers_seen", "prices_changed", "new_offers", "offers_closed",
           "rejected", "duration_s", "error"]


@click.command()
@click.argument("source", type=click.Choice(["skypilot", "gpuhunt"]))
@click.option("--cloud", "clouds", multiple=True, metavar="NAME",
              help="Cloud (skypilot: aws, lambda, ...) or provider (gpuhunt: aws, lambdalabs, "
                   "...) to backfill; repeatable. Default: the source's configured list.")
@click.option("--since", type=Instant(), metavar="DATE",
              help="Oldest version to import (date or ISO time, UTC).")
@click.option("--until", type=Instant(end_of_day=True), metavar="DATE",
              help="Newest version to import; a bare date includes that whole day.")
@click.option("--from-dir", "from_dir", metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="skypilot: read dated vms.csv copies from DIR (or DIR/<cloud>/) instead of "
                   "GitHub; names like vms-2025-06-01.csv or 2025-06-01_<sha>.csv.")
@click.option("--version", "versions", multiple=True, metavar="VERSION",
              help="gpuhunt: catalog version to import (e.g. 20250601-42); repeatable. "
                   "Without it the bucket listing is used.")
@click.option("--daily", is_flag=True,
              help="gpuhunt listing: import only the last version of each day.")
@click.option("--wait", type=click.FloatRange(min=0), default=0.0, metavar="SECONDS",
              help="Wait this long for a running refresh of the source to finish.")
@format_option
@pass_app
def backfill(app: AppContext, source: str, clouds: tuple[str, ...], since: datetime | None,
             until: datetime | None, from_dir: str | None, versions: tuple[str, ...],
             daily: bool, wait: float, fmt: str) -> None:
    """Import past versions of the SkyPilot catalog (git history) or of gpuhunt (S3).

    Each version becomes one ingest run, oldest first; versions imported before are
    skipped, so an interrupted backfill resumes where it stopped. GitHub's API allows 60
    requests an hour without a token (one request lists 100 versions); set
    GPU_TRACKER_GITHUB_TOKEN for more. Exit status 0 when done, 3 when it stopped early
    with part of the range imported (run it again to continue), 1 on errors.

    \b
    Examples:
      gpu-tracker backfill skypilot --cloud aws --since 2025-06-01
      gpu-tracker backfill skypilot --cloud lambda --from-dir ./lambda-history
      gpu-tracker backfill gpuhunt --cloud lambdalabs --version 20250601-42
    """
    from scrapers import load_source
    from tracker.collect.backfill import BackfillStopped, backfill_skypilot
    from tracker.collect.backfill_gpuhunt import backfill_gpuhunt
    from tracker.collect.refresh import source_lock
    from tracker.core.errors import InvalidInput, TrackerError
    from tracker.store.locks import hold_locks

    check_range(since, until)
    if source == "gpuhunt" and from_dir:
        raise InvalidInput("--from-dir is for skypilot; for gpuhunt use --version")
    if source == "skypilot" and (versions or daily):
        raise InvalidInput("--version and --daily are for gpuhunt")
    settings = load_source(source).resolve_settings(app.config.source_settings(source))
    configured = list(settings["clouds" if source == "skypilot" else "providers"])
    check_backfill_targets(source, clouds, configured)
    targets = list(clouds) or configured
    if from_dir and len(targets) > 1 and not clouds:
        raise InvalidInput("--from-dir needs --cloud (the cloud its files belong to)")
    if source == "skypilot" and since is None and not from_dir:
        raise InvalidInput("--since is required for a GitHub backfill (e.g. --since 2025-06-01)")
    if source == "gpuhunt" and since is None and not versions:
        # The catalog is republished hourly: an open-ended listing is thousands of versions.
        raise InvalidInput("gpuhunt backfill needs --since (with the bucket listing) or "
                           "--version")

    summaries: list[Any] = []
    stopped: BackfillStopped | None = None
    note = app.note if not app.quiet else None
    # The source's run lock: a backfill and a scheduled refresh of the same source never
    # write its offers at the same time.
    with hold_locks(app.db, [source_lock(source)], wait=wait) as got, \
            _http_client(app) as client:
        if not got.held:
            raise TrackerError(f"a refresh of {source} is running (lock {got.busy[0]}); "
                            "try again later or pass --wait SECONDS")
        for target in targets:
            if note:
                note(f"{source} {target}: looking for versions…")
            try:
                if source == "skypilot":
                    summaries += backfill_skypilot(
                        app.db, client, target, since, until, settings=settings,
                        local_dir=from_dir, on_progress=note)
                else:
                    summaries += backfill_gpuhunt(
                        app.db, client, target, since, until, settings=settings,
                        versions=list(versions) or None, daily=daily, on_progress=note)
            except BackfillStopped as exc:
                summaries += exc.summaries
                stopped = exc
                break

    rows = [s.to_json() | {"duration_s": round(s.duration_s, 3)} for s in summaries]
    if rows or fmt != "table":
        emit(rows, fmt, COLUMNS if fmt != "json" else None)
    elif note:
        note("nothing new to import")
    if stopped is not None:
        from tracker.core.secrets import scrub

        click.echo(f"Error: {scrub(str(stopped))}", err=True)
        imported = any(s.status == "ok" for s in summaries)
        sys.exit(3 if imported else 1)


def _http_client(app: AppContext) -> Any:
    from scrapers.http import HttpClient
    from tracker.collect.refresh import http_settings

    return HttpClient(http_settings(app.config))


def check_backfill_targets(source: str, clouds: tuple[str, ...], configured: list[str]) -> None:
    """A `--cloud` the source publishes no catalog for is a usage error before any request:
    the known ones are the source's defaults and what the configuration adds."""
    from scrapers.gpuhunt import OFFLINE_PROVIDERS
    from scrapers.skypilot import DEFAULT_CLOUDS
    from tracker.core.errors import usage_error

    known = sorted({*(DEFAULT_CLOUDS if source == "skypilot" else OFFLINE_PROVIDERS),
                    *configured})
    for cloud in clouds:
        if cloud not in known:
            what = "cloud" if source == "skypilot" else "provider"
            raise usage_error(f"--cloud {cloud!r}: {source} has no catalog for that {what}; "
                              f"known: {', '.join(known)}")
