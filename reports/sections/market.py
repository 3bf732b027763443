"""Market: the GPU price index of the featured classes over the trend window (median with the
p10-p90 band, providers counted) with each class's 90-day forecast band and its back-test
(tracker.market.forecasts, as `gpu-tracker forecast` answers it), the invoice check of
imported FOCUS usage charged this week, and the exchange rates the report converted with.

Reads the store through the application layer (tracker.market): the same functions the
`index` and `check invoices` commands call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from reports.sections.common import gpu_order, pct_change
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    from decimal import Decimal

    from tracker.answers.report_settings import ReportOptions
    from tracker.store.db import Database
    from tracker.store.queries import PriceRow


def last_index_day(as_of: datetime) -> date:
    """The newest day the index samples: only days that have ended by `as_of` (the report
    never looks past its instant)."""
    from tracker.market.index import sample_instant

    last_day = as_of.date()
    if sample_instant(last_day) > as_of:
        last_day -= timedelta(days=1)
    return last_day


def job_index_days(as_of: datetime) -> list[date]:
    """The days of the cost-per-job index: the end of this week and the three before."""
    last_day = last_index_day(as_of)
    return [last_day - timedelta(days=7 * i) for i in range(JOB_INDEX_WEEKS - 1, -1, -1)]


def market(db: Database, options: ReportOptions, *, week_start: datetime, as_of: datetime,
           window_start: datetime, rates_used: list[dict[str, Any]],
           rows_at: Mapping[date, Sequence[PriceRow]] | None = None,
           charts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """`rows_at`: the price rows valid at the job index days' sampling instants, when the
    report has read them already (tracker.store.queries.price_rows_over); `charts`: what
    `index_charts` answers for the same options and instants, when computed already."""
    from tracker.market.focus import invoice_check

    if charts is None:
        charts = index_charts(db, options, as_of=as_of, window_start=window_start)
    jobs = _job_index(db, options, as_of, rows_at)
    invoices = invoice_check(db, since=week_start, until=as_of)
    saving: dict[str, Decimal] = {}
    for row in invoices:
        if row["saving"] is not None:
            saving[row["currency"]] = saving.get(row["currency"], 0) + row["saving"]
    return {"index": {"category": "on-demand", "charts": charts,
                      "start": window_start.date(), "end": last_index_day(as_of)},
            "job_index": jobs,
            "invoices": {"lines": invoices,
                         "saving_by_currency": dict(sorted(saving.items()))},
            "exchange_rates": rates_used}


def index_charts(db: Database, options: ReportOptions, *, as_of: datetime,
                 window_start: datetime) -> list[dict[str, Any]]:
    """The featured classes' on-demand price index over the trend window, each with its
    forecast (from the store alone: the report reads it while computing other sections)."""
    from tracker.market.index import price_index

    order = gpu_order()
    gpus = sorted(options.featured_gpus, key=lambda g: (order.get(g, len(order)), g))
    last_day = last_index_day(as_of)
    charts = []
    if gpus and last_day >= window_start.date():
        result = price_index(db, gpus, since=window_start.date(), until=last_day,
                             currency=options.currency, categories=["on-demand"],
                             max_age_hours=options.stale_after_hours)
        by_gpu: dict[str, list[Any]] = {}
        for point in result.points:
            by_gpu.setdefault(point.gpu, []).append(point)
        for gpu in gpus:
            points = by_gpu.get(gpu)
            if not points:
                continue
            last = points[-1]
            week_before = next((p for p in reversed(points)
                                if p.date <= last.date - timedelta(days=7)), None)
            charts.append({
                "chart_id": f"index-{gpu}", "gpu": gpu, "gpu_name": gpu_name(gpu),
                "category": "on-demand",
                "days": [p.date for p in points],
                "median": [p.median for p in points], "p10": [p.p10 for p in points],
                "p90": [p.p90 for p in points], "providers": [p.providers for p in points],
                "latest": last.to_json(),
                "previous_median": week_before.median if week_before else None,
                "change_pct": pct_change(last.median, week_before.median)
                if week_before else None,
                "forecast": _forecast(db, gpu, options, last_day),
            })
    return charts


JOB_INDEX_WEEKS = 4
FORECAST_HORIZON_DAYS = 90
FORECAST_HISTORY_DAYS = 365
FORECAST_MARKS = (30, 60, 90)  # the days ahead the table shows


def _forecast(db: Database, gpu: str, options: ReportOptions, last_day: Any) -> dict[str, Any]:
    """The class's on-demand index forecast from the day after `last_day`: what `gpu-tracker
    forecast --gpu G --as-of <last day>` prints, or why there is none."""
    from datetime import UTC, datetime, time

    from tracker.core.errors import InvalidInput
    from tracker.market.forecasts import price_forecast

    try:
        answer = price_forecast(
            db, gpu, category="on-demand",
            as_of=datetime.combine(last_day, time.max, tzinfo=UTC),
            horizon_days=FORECAST_HORIZON_DAYS, history_days=FORECAST_HISTORY_DAYS,
            currency=options.currency, max_age_hours=options.stale_after_hours)
    except InvalidInput as exc:
        return {"available": False, "note": str(exc)}
    data = answer.data
    points = data["points"]
    return {
        "available": True, "method": data["method"],
        "method_description": data["method_description"],
        "horizon_days": FORECAST_HORIZON_DAYS, "history_days": data["history_days"],
        "trend_pct_per_year": data["trend_pct_per_year"],
        "days": [p["date"] for p in points], "p10": [p["p10"] for p in points],
        "p50": [p["p50"] for p in points], "p90": [p["p90"] for p in points],
        "marks": [{"days_ahead": d, **points[d - 1]} for d in FORECAST_MARKS
                  if d <= len(points)],
        "backtest": data["backtest"], "warnings": data["warnings"],
    }


def _job_index(db: Database, options: ReportOptions, as_of: datetime,
               rows_at: Mapping[date, Sequence[PriceRow]] | None) -> dict[str, Any]:
    """The configured workloads' cheapest on-demand cost at the end of this week and the
    three before (per run; serve workloads per million tokens), from the price history."""
    from tracker.core.errors import InvalidInput
    from tracker.market.index import job_index

    days = job_index_days(as_of)
    try:
        points = job_index(db, options.workloads, days, currency=options.currency,
                           economics=options.economics or None,
                           max_age_hours=options.stale_after_hours, rows_at=rows_at)
    except InvalidInput as exc:  # a bad workload is reported by the recommendations too
        return {"days": days, "jobs": [], "error": str(exc)}
    jobs: dict[str, dict[str, Any]] = {}
    for point in points:
        entry = jobs.setdefault(point.job, {"job": point.job, "basis": point.basis,
                                            "costs": [], "offers": []})
        entry["costs"].append(point.cost)
        entry["offers"].append(f"{point.count}x {point.gpu} {point.provider}"
                               if point.gpu else None)
    for entry in jobs.values():
        first = next((c for c in entry["costs"] if c is not None), None)
        last = entry["costs"][-1]
        entry["change_pct"] = pct_change(last, first) if first is not None else None
    return {"days": days, "jobs": list(jobs.values()), "error": None}
