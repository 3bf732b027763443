"""Executive summary: a headline over the key figures and the offers compared, then the few
items worth reading first: the biggest moves, new lows, changed recommendations, and sources
that failed or went stale."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from reports.sections.common import BUCKETS


def summary(key_figures: list[dict[str, Any]], new_lows: list[dict[str, Any]],
            recs: dict[str, Any], quality: dict[str, Any], movers: dict[str, Any],
            as_of: datetime, n_prices: int) -> dict[str, Any]:
    moves = []
    for entry in key_figures:
        for bucket in BUCKETS:
            cell = entry.get(bucket)
            if cell and cell["change"] is not None:
                moves.append({
                    "kind": "move", "gpu": entry["gpu"], "gpu_name": entry["gpu_name"],
                    "bucket": bucket, "category": cell["now"]["category"],
                    "price": cell["now"]["price"], "previous_price": cell["previous"]["price"],
                    "provider": cell["now"]["provider"], "change": cell["change"],
                    "change_pct": cell["change_pct"], "featured": entry["featured"],
                })
    changed = [m for m in moves if m["change"] != 0]
    changed.sort(key=lambda m: (-abs(m["change_pct"] or 0), not m["featured"], m["gpu"],
                                m["bucket"]))
    headline = {
        "kind": "headline", "as_of": as_of,
        # One number per featured GPU class: its cheapest on-demand and spot price per
        # GPU-hour now and the change on the week.
        "classes": [_class_figure(entry) for entry in key_figures
                    if entry["featured"] and any(entry.get(b) and entry[b]["now"]
                                                 for b in BUCKETS)],
        "classes_priced": sum(1 for e in key_figures for b in BUCKETS
                              if e.get(b) and e[b]["now"]),
        "classes_down": sum(1 for m in moves if m["change"] < 0),
        "classes_up": sum(1 for m in moves if m["change"] > 0),
        "classes_flat": sum(1 for m in moves if m["change"] == 0),
        "biggest": changed[0] if changed else None,
        "offers_changed": movers["changed"], "offers_compared": movers["compared"],
        # tracker/answers/freshness.py at the as-of: no source confirmed a price within the window.
        "no_fresh_prices": quality.get("no_fresh_prices", False),
        "newest_price_at": quality.get("newest_price_at"),
        "stale_after_hours": quality.get("stale_after_hours"),
    }
    items: list[dict[str, Any]] = []
    if n_prices == 0:
        items.append({"kind": "no_data"})
    items.extend(changed[:3])
    items.extend({"kind": "new_low", **low} for low in new_lows[:3])
    items.extend(item for item in recs.get("changes", []))
    if quality["failed"] or quality["stale"]:
        items.append({"kind": "data_quality", "failed": len(quality["failed"]),
                      "failed_sources": quality["failed"], "stale": len(quality["stale"]),
                      "stale_sources": quality["stale"]})
    return {"headline": headline, "items": items}


def _class_figure(entry: dict[str, Any]) -> dict[str, Any]:
    figure: dict[str, Any] = {"gpu": entry["gpu"], "gpu_name": entry["gpu_name"]}
    for bucket in BUCKETS:
        cell = entry.get(bucket)
        if not cell or not cell["now"]:
            figure[bucket] = None
            continue
        figure[bucket] = {"price": cell["now"]["price"], "provider": cell["now"]["provider"],
                          "category": cell["now"]["category"], "change": cell["change"],
                          "change_pct": cell["change_pct"]}
    return figure
