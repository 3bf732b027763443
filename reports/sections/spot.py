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
    # The matching on-demand price: same provider, region, instance type and variant, any
    # zone (AWS quotes spot per zone, on-demand per region); the cheapest if several.
    od_best: dict[tuple, Any] = {}
    for row in frame_rows(on_demand):
        od_best.setdefault((row.source, row.provider, row.region, row.instance_type,
                            row.variant), row)
    order = gpu_order()
    rows = []
    for row in frame_rows(interruptible):
        od = od_best.get((row.source, row.provider, row.region, row.instance_type, row.variant))
        fact = bands.get((row.provider, row.region, row.instance_type))
        discount = None
        if od is not None and od.price_per_gpu_hour > 0:
            discount = float(((1 - row.price_per_gpu_hour / od.price_per_gpu_hour) * 100)
                             .quantize(Decimal("0.01")))
        rows.append({
            **offer_json(row),
            "on_demand_price": od.price_per_gpu_hour if od is not None else None,
            "discount_pct": discount,
            "interruption": None if fact is None else {
                "band": fact.band, "label": fact.band_label, "min_pct": fact.min_pct,
                "max_pct": fact.max_pct, "as_of": fact.as_of},
        })
    rows.sort(key=lambda r: (order.get(r["gpu"], len(order)), r["gpu"],
                             -(r["discount_pct"] if r["discount_pct"] is not None else -1e9),
                             r["price"], r["provider"], r["region"], r["zone"],
                             r["instance_type"], r["variant"], r["offer_id"]))
    by_gpu = []
    for gpu in sorted({r["gpu"] for r in rows}, key=lambda g: (order.get(g, len(order)), g)):
        discounts = sorted(r["discount_pct"] for r in rows
                           if r["gpu"] == gpu and r["discount_pct"] is not None)
        by_gpu.append({
            "gpu": gpu, "gpu_name": gpu_name(gpu),
            "offers": sum(1 for r in rows if r["gpu"] == gpu),
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
