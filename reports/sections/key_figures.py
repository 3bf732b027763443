"""Key figures: the cheapest price per GPU class and bucket (on-demand, spot) now and a week
before; and the new lows: the cheapest prices now below every price seen in the trend window
before this week."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from reports.sections.common import (
    BUCKETS,
    epoch_ms,
    frame_rows,
    gpu_order,
    offer_json,
    pct_change,
)
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    import pandas as pd

    from tracker.answers.report_settings import ReportOptions


def _cheapest(frame: pd.DataFrame) -> dict[tuple[str, str], Any]:
    """The cheapest row per (GPU, bucket); frames are sorted cheapest first already."""
    if frame.empty:
        return {}
    best = frame.dropna(subset=["bucket"]).drop_duplicates(["gpu", "bucket"], keep="first")
    counts = frame.groupby(["gpu", "bucket"]).size().to_dict()
    return {(r.gpu, r.bucket): (r, int(counts[(r.gpu, r.bucket)]))
            for r in frame_rows(best)}


def key_figures(now: pd.DataFrame, prev: pd.DataFrame,
                options: ReportOptions) -> list[dict[str, Any]]:
    best_now, best_prev = _cheapest(now), _cheapest(prev)
    order = gpu_order()
    gpus = sorted({g for g, _ in best_now} | {g for g, _ in best_prev},
                  key=lambda g: (order.get(g, len(order)), g))
    figures = []
    for gpu in gpus:
        entry: dict[str, Any] = {"gpu": gpu, "gpu_name": gpu_name(gpu),
                                 "featured": gpu in options.featured_gpus}
        for bucket in BUCKETS:
            current, previous = best_now.get((gpu, bucket)), best_prev.get((gpu, bucket))
            if current is None and previous is None:
                entry[bucket] = None
                continue
            cell: dict[str, Any] = {"now": None, "previous": None, "change": None,
                                    "change_pct": None, "offers": 0}
            if current is not None:
                cell["now"] = offer_json(current[0])
                cell["offers"] = current[1]
            if previous is not None:
                cell["previous"] = offer_json(previous[0])
            if current is not None and previous is not None:
                new, old = current[0].price_per_gpu_hour, previous[0].price_per_gpu_hour
                cell["change"] = new - old
                cell["change_pct"] = pct_change(new, old)
            entry[bucket] = cell
        figures.append(entry)
    return figures


def new_lows(key_figures: list[dict[str, Any]], spans: pd.DataFrame, week_start: datetime,
             window_start: datetime, options: ReportOptions) -> list[dict[str, Any]]:
    """Cheapest prices now below every price seen in the trend window before this week."""
    if spans.empty:
        return []
    start_ms = epoch_ms(week_start)
    before = spans[spans["first_ms"] < start_ms]
    if before.empty:
        return []
    # Between spans of one price the provider first by name, not whichever the database
    # read first: SQLite and PostgreSQL name the same previous low.
    lows = before.sort_values(["rank", "provider"], kind="stable").drop_duplicates(
        ["gpu", "bucket"])
    low_of = {(r.gpu, r.bucket): r for r in frame_rows(lows)}
    result = []
    for entry in key_figures:
        for bucket in BUCKETS:
            cell = entry.get(bucket)
            if not cell or not cell["now"]:
                continue
            low = low_of.get((entry["gpu"], bucket))
            if low is not None and cell["now"]["price"] < low.price:
                result.append({
                    "gpu": entry["gpu"], "gpu_name": entry["gpu_name"], "bucket": bucket,
                    "category": cell["now"]["category"], "price": cell["now"]["price"],
                    "provider": cell["now"]["provider"], "region": cell["now"]["region"],
                    "instance_type": cell["now"]["instance_type"],
                    "previous_low": low.price, "previous_low_provider": low.provider,
                    "window_start": window_start, "window_weeks": options.trend_weeks,
                })
    return result
