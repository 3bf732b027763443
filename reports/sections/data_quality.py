"""Data quality: per source, the week's ingest runs, the last success, the offers and the
newest price it delivered, and whether it is stale or failing; the rejected rows by reason,
the scheduled jobs' runs, and the offers in other currencies that the report leaves out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from reports.sections.common import frame_rows

if TYPE_CHECKING:
    import pandas as pd

    from tracker.answers.catalogs import CatalogAge
    from tracker.answers.crosscheck import CrossCheck
    from tracker.answers.report_settings import ReportOptions
    from tracker.store.db import Database


@dataclass(frozen=True)
class RunHistory:
    """The rows of the week [start, as_of) this section reads, and nothing else does."""

    week_runs: Sequence[Any]  # ingest_run rows, oldest first
    last_ok: dict[str, datetime]  # source -> start of its last successful run before as_of
    rejected: Sequence[Any]  # (source, reason, count)
    job_rows: Sequence[Any]  # job_run rows, oldest first


def load_run_history(db: Database, start: datetime, as_of: datetime) -> RunHistory:
    from tracker.store.series import run_history_rows

    week_runs, last_ok, rejected, job_rows = run_history_rows(db, start, as_of)
    return RunHistory(week_runs=week_runs, last_ok=last_ok, rejected=rejected,
                      job_rows=job_rows)


def data_quality(history: RunHistory, as_of: datetime, now: pd.DataFrame,
                 options: ReportOptions, cross: CrossCheck | None = None,
                 catalogs: Sequence[CatalogAge] = ()) -> dict[str, Any]:
    """`now` is every price valid at `as_of`, in every currency; `cross` the cross-source
    check of those prices (tracker.answers.crosscheck), shown as its count and largest
    disagreement."""
    from tracker.answers.freshness import source_freshness
    from tracker.store.queries import sighting_at

    week_runs, last_ok = history.week_runs, history.last_ok
    newest: dict[str, datetime] = {}
    offers: dict[str, int] = {}
    for row in frame_rows(now):
        # The one rule for when a price was last confirmed by the as-of (as `sources` applies
        # it): a later sighting counts only up to the source's last successful run by then.
        seen = sighting_at(row.last_seen, as_of, last_ok.get(row.source))
        if row.source not in newest or seen > newest[row.source]:
            newest[row.source] = seen
        offers[row.source] = offers.get(row.source, 0) + 1


    sources = []
    for name in sorted(set(newest) | {r.source for r in week_runs} | set(last_ok)):
        runs = [r for r in week_runs if r.source == name]
        last = runs[-1] if runs else None
        newest_at = newest.get(name)
        # The one freshness rule (tracker/answers/freshness.py), as `sources` and `status` apply it,
        # at the report's as-of from the runs up to it: a run after the as-of does not count.
        freshness = source_freshness(
            last_run_at=last.started_at if last else last_ok.get(name),
            last_status=last.status if last else ("ok" if name in last_ok else None),
            last_success_at=last_ok.get(name), now=as_of,
            stale_after_hours=options.stale_after_hours, newest_price_at=newest_at)
        sources.append({
            "source": name, "runs": len(runs),
            "ok": sum(1 for r in runs if r.status == "ok"),
            "failed": sum(1 for r in runs if r.status == "failed"),
            "skipped": sum(1 for r in runs if r.status == "skipped"),
            "rejected": sum(r.rejected or 0 for r in runs),
            "last_run_at": last.started_at if last else None,
            "last_status": last.status if last else None,
            "last_error": last.error if last is not None and last.status != "ok" else None,
            "last_success_at": last_ok.get(name),
            "offers": offers.get(name, 0),
            "newest_price_at": newest_at,
            "age_hours": round(freshness.age_hours, 2)
            if freshness.age_hours is not None else None,
            # A source that never succeeded is "failed", not "stale"; one whose prices were
            # loaded after the as-of with older dates is as stale as those dates.
            "stale": freshness.stale and (name in last_ok or newest_at is not None),
        })
    rejected_rows = sorted(({"source": s, "reason": r, "count": int(n)}
                            for s, r, n in history.rejected),
                           key=lambda x: (-x["count"], x["source"], x["reason"]))
    jobs = []
    for name in sorted({r.job for r in history.job_rows}):
        runs = [r for r in history.job_rows if r.job == name]
        jobs.append({
            "job": name, "runs": len(runs),
            "ok": sum(1 for r in runs if r.status == "ok"),
            "failed": sum(1 for r in runs if r.status not in ("ok", "running", "skipped")),
            "last_status": runs[-1].status, "last_started_at": runs[-1].started_at,
            "last_error": runs[-1].error if runs[-1].status != "ok" else None,
        })
    other_currency = now[now["currency"] != options.currency]
    priced = [s for s in sources if s["offers"]]
    return {
        # No source with prices was confirmed within the window before the as-of: the week's
        # figures are old ones carried forward, and the headline says so.
        "no_fresh_prices": bool(priced) and all(s["stale"] for s in priced),
        "newest_price_at": max((s["newest_price_at"] for s in priced
                                if s["newest_price_at"] is not None), default=None),
        "as_of": as_of, "stale_after_hours": options.stale_after_hours,
        "sources": sources,
        "refreshed": [s["source"] for s in sources if s["ok"]],
        "failed": [s["source"] for s in sources if s["failed"]],
        "stale": [s["source"] for s in sources if s["stale"]],
        "rejected_total": sum(x["count"] for x in rejected_rows),
        "rejected": rejected_rows[:10],
        "jobs": jobs,
        "offers_total": len(now),
        "offers_other_currency": len(other_currency),
        "other_currencies": sorted(set(other_currency["currency"])),
        "cross_source": cross.summary_json() if cross is not None else None,
        "catalogs": [c.to_json() for c in catalogs],
        "stale_catalogs": [f"{c.source}/{c.provider}" for c in catalogs if c.stale],
    }
