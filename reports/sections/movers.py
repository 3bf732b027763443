"""Top movers: the same offers now and a week before, compared price by price; the biggest
increases and decreases, new and removed offers, and the moves per provider and region."""

from __future__ import annotations

import heapq
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reports.sections.common import frame_rows, offer_json, pct_change

if TYPE_CHECKING:
    import pandas as pd

    from tracker.answers.report_settings import ReportOptions


def movers(now: pd.DataFrame, prev: pd.DataFrame, options: ReportOptions) -> dict[str, Any]:
    cols = ["offer_id", "source", "provider", "region", "zone", "instance_type", "variant",
            "gpu", "gpu_count", "category", "price_per_hour", "price_per_gpu_hour"]
    merged = now[cols].merge(
        prev[["offer_id", "price_per_gpu_hour"]].rename(
            columns={"price_per_gpu_hour": "previous"}),
        on="offer_id", how="outer", indicator=True)
    compared = merged[merged["_merge"] == "both"].copy()
    new_ids = set(merged.loc[merged["_merge"] == "left_only", "offer_id"])
    removed_ids = set(merged.loc[merged["_merge"] == "right_only", "offer_id"])
    if compared.empty:
        compared["change"] = []
        compared["change_pct"] = []
    else:
        pairs = list(zip(compared["price_per_gpu_hour"].tolist(),
                         compared["previous"].tolist(), strict=True))
        compared["change"] = [a - b for a, b in pairs]
        compared["change_pct"] = [pct_change(a, b) for a, b in pairs]
    compared["sign"] = [(c > 0) - (c < 0) for c in compared["change"]]

    def offers(frame: pd.DataFrame, descending: bool) -> list[dict[str, Any]]:
        rows = heapq.nsmallest(  # sorted(...)[:options.movers]
            options.movers, frame_rows(frame),
            key=lambda r: ((-r.change_pct if descending else r.change_pct),
                           (-r.change if descending else r.change),
                           r.provider, r.region, r.zone, r.instance_type, r.variant,
                           r.category, r.offer_id))
        return [{**offer_json(r), "previous_price": r.previous, "change": r.change,
                 "change_pct": r.change_pct} for r in rows]

    increases = offers(compared[compared["sign"] > 0], descending=True)
    decreases = offers(compared[compared["sign"] < 0], descending=False)

    prev_by_provider = prev.groupby("provider").size().to_dict() if not prev.empty else {}
    removed_by_provider = (prev[prev["offer_id"].isin(removed_ids)].groupby("provider").size()
                           .to_dict() if removed_ids else {})
    new_by_provider = (now[now["offer_id"].isin(new_ids)].groupby("provider").size().to_dict()
                       if new_ids else {})
    by_provider = []
    providers = sorted({str(p) for p in now["provider"]} | {str(p) for p in prev_by_provider})
    # Each provider's compared rows in their order, from one grouping (not a mask each).
    of_provider = {str(p): rows for p, rows in compared.groupby("provider", sort=False)}
    for provider in providers:
        rows = of_provider.get(provider, compared.iloc[0:0])
        by_provider.append({
            "provider": provider, **_move_counts(rows),
            "new": int(new_by_provider.get(provider, 0)),
            "removed": int(removed_by_provider.get(provider, 0)),
        })
    by_region = []
    for (region_provider, region), rows in compared.groupby(["provider", "region"], sort=True):
        counts = _move_counts(rows)
        if counts["up"] or counts["down"]:
            by_region.append({"provider": region_provider, "region": region, **counts})
    by_region.sort(key=lambda r: (-abs(r["mean_change_pct"] or 0), r["provider"], r["region"]))
    return {
        "compared": len(compared), "changed": int((compared["sign"] != 0).sum()),
        "new_offers": len(new_ids), "removed_offers": len(removed_ids),
        "increases": increases, "decreases": decreases,
        "by_provider": by_provider, "by_region": by_region[:options.movers],
    }


def _move_counts(rows: pd.DataFrame) -> dict[str, Any]:
    # The mean of the exact relative changes, rounded once at the end.
    ratios = [(new - old) / old for new, old in zip(
        rows["price_per_gpu_hour"].tolist(), rows["previous"].tolist(), strict=True) if old]
    mean = (float((sum(ratios) / len(ratios) * 100).quantize(Decimal("0.01")))
            if ratios else None)
    return {
        "compared": len(rows), "up": int((rows["sign"] > 0).sum()),
        "down": int((rows["sign"] < 0).sum()), "unchanged": int((rows["sign"] == 0).sum()),
        "mean_change_pct": mean,
    }
