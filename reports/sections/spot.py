"""Spot and interruptible: every spot or bid offer beside the matching on-demand price (the
discount) and the provider's interruption band, with a per-GPU summary of the discounts."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reports.sections.common import frame_rows, gpu_order, offer_json
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    import pandas as pd

    from tracker.answers.report_settings import ReportOptions


def spot(now: pd.DataFrame, bands: dict[tuple[str, str, str], Any],
         options: ReportOptions) -> dict[str, Any]:
    interruptible = now[now["bucket"] == "spot"]
    on_demand = now[now["category"] == "on-demand"]
    # The matching on-demand price per GPU-hour: same provider, region, instance type and
    # variant, any zone (AWS quotes spot per zone, on-demand per region); the cheapest if
    # several. Read as column lists: the offers' other columns are not needed here.
    od_best: dict[tuple, Any] = {}
    keys = ("source", "provider", "region", "instance_type", "variant")
    for *key, price in zip(*(on_demand[c].tolist() for c in (*keys, "price_per_gpu_hour")),
                           strict=True):
        od_best.setdefault(tuple(key), price)
    order = gpu_order()
    rows = []
    for row in frame_rows(interruptible):
        od = od_best.get((row.source, row.provider, row.region, row.instance_type, row.variant))
        fact = bands.get((row.provider, row.region, row.instance_type))
        discount = None
        if od is not None and od > 0:
            discount = float(((1 - row.price_per_gpu_hour / od) * 100)
                             .quantize(Decimal("0.01")))
        rows.append({
            **offer_json(row),
            "on_demand_price": od,
            "discount_pct": discount,
            "interruption": None if fact is None else {
                "band": fact.band, "label": fact.band_label, "min_pct": fact.min_pct,
                "max_pct": fact.max_pct, "as_of": fact.as_of},
        })
    rows.sort(key=lambda r: (order.get(r["gpu"], len(order)), r["gpu"],
                             -(r["discount_pct"] if r["discount_pct"] is not None else -1e9),
                             r["price"], r["provider"], r["region"], r["zone"],
                             r["instance_type"], r["variant"], r["offer_id"]))
    # Each class's offers and discounts, gathered in one pass over the rows.
    offers_of: dict[str, int] = {}
    discounts_of: dict[str, list[float]] = {}
    for r in rows:
        offers_of[r["gpu"]] = offers_of.get(r["gpu"], 0) + 1
        if r["discount_pct"] is not None:
            discounts_of.setdefault(r["gpu"], []).append(r["discount_pct"])
    by_gpu = []
    for gpu in sorted(offers_of, key=lambda g: (order.get(g, len(order)), g)):
        discounts = sorted(discounts_of.get(gpu, []))
        by_gpu.append({
            "gpu": gpu, "gpu_name": gpu_name(gpu),
            "offers": offers_of[gpu],
            "matched": len(discounts),
            "median_discount_pct": _median(discounts),
            "max_discount_pct": discounts[-1] if discounts else None,
        })
    return {"offers": rows, "by_gpu": by_gpu, "display_limit": options.spot_rows,
            "with_interruption_band": sum(1 for r in rows if r["interruption"])}


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    mid = len(values) // 2
    if len(values) % 2:
        return values[mid]
    return round((values[mid - 1] + values[mid]) / 2, 2)
