"""The week's prices (the CSV): every offer priced at the report's instant, in every currency,
with its price a week before and the change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reports.sections.common import frame_rows, gpu_order, pct_change
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    import pandas as pd

PRICE_COLUMNS = (
    "gpu", "gpu_name", "provider", "region", "zone", "instance_type", "variant", "gpu_count",
    "category", "price_per_hour", "price_per_gpu_hour", "currency",
    "previous_price_per_gpu_hour", "change_pct", "first_seen", "last_seen", "source",
)


def prices(now: pd.DataFrame, prev: pd.DataFrame) -> dict[str, Any]:
    # Three columns of last week's rows, as lists (not each row's every column).
    previous = {(offer_id, currency): price for offer_id, currency, price in zip(
        prev["offer_id"].tolist(), prev["currency"].tolist(),
        prev["price_per_gpu_hour"].tolist(), strict=True)}
    order = gpu_order()
    rows = []
    for r in frame_rows(now):
        before = previous.get((r.offer_id, r.currency))
        rows.append({
            "gpu": r.gpu, "gpu_name": gpu_name(r.gpu), "provider": r.provider,
            "region": r.region, "zone": r.zone, "instance_type": r.instance_type,
            "variant": r.variant, "gpu_count": float(r.gpu_count), "category": r.category,
            "price_per_hour": r.price_per_hour, "price_per_gpu_hour": r.price_per_gpu_hour,
            "currency": r.currency, "previous_price_per_gpu_hour": before,
            "change_pct": pct_change(r.price_per_gpu_hour, before),
            "first_seen": r.observed_at, "last_seen": r.last_seen, "source": r.source,
            "_rank": r.rank,
        })
    rows.sort(key=lambda x: (order.get(x["gpu"], len(order)), x["gpu"], x["category"],
                             x["currency"], x["_rank"]))
    for row in rows:
        del row["_rank"]
    return {"columns": list(PRICE_COLUMNS), "count": len(rows), "rows": rows}
