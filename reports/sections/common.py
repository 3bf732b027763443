"""What the sections share: the price buckets, exact ranking of Decimal prices, percent
changes, GPU names and display order, and one offer row in its JSON form.

Money stays Decimal: where a minimum over many rows is needed, prices are ranked exactly
(sorted unique Decimals mapped to integers) instead of being converted to float.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    import pandas as pd

# Interruptible prices: cloud spot and marketplace minimum bids (Vast.ai) are one bucket.
BUCKET_OF = {"on-demand": "on_demand", "spot": "spot", "bid": "spot"}
BUCKETS = ("on_demand", "spot")


def frame_rows(frame: pd.DataFrame) -> Iterator[Any]:
    """The frame's rows as named tuples (`itertuples(index=False)`). Typed Any: a column's type
    is known only at run time (the section queries build them: Decimal prices, UTC datetimes,
    str keys), while pandas-stubs types every field as the union of all scalars."""
    return frame.itertuples(index=False)


def exact_rank(values: Iterable[Decimal]) -> list[int]:
    """Integer ranks that order Decimals exactly (equal amounts share a rank)."""
    values = list(values)
    order = {value: i for i, value in enumerate(sorted(set(values)))}
    return [order[v] for v in values]


def pct_change(new: Decimal | None, old: Decimal | None) -> float | None:
    """Percent change rounded to 0.01; None when there is no base (infracost leaves it blank)."""
    if new is None or old is None or old == 0:
        return None
    return float(((new - old) / old * 100).quantize(Decimal("0.01")))


def epoch_ms(moment: datetime) -> int:
    """The instant in the unit of the spans' `first_ms` / `valid_to_ms` columns."""
    return round(moment.timestamp() * 1000)


def gpu_order() -> dict[str, int]:
    from tracker.core.gpus import gpu_table

    return {gpu_id: i for i, gpu_id in enumerate(gpu_table())}


def offer_json(row: Any, price_key: str = "price_per_gpu_hour") -> dict[str, Any]:
    return {
        "offer_id": int(row.offer_id), "provider": row.provider, "region": row.region,
        "zone": row.zone, "instance_type": row.instance_type, "variant": row.variant,
        "gpu": row.gpu, "gpu_name": gpu_name(row.gpu), "gpu_count": float(row.gpu_count),
        "category": row.category, "price": getattr(row, price_key),
        "price_per_hour": row.price_per_hour, "source": row.source,
    }
