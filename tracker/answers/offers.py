"""A stored offer as the answers show it: its JSON object in a document, its one-line
description in a message. Shared by the cost, spot, compare, serving and rent vs buy
documents and the report's recommendations; it imports no engine, so `breakeven` with its
prices given does not load the cost, spot and compare documents for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracker.store import PriceRow


def offer_json(row: PriceRow | None) -> dict[str, Any] | None:
    """A stored offer as the documents show it: the `prices` object plus its offer id."""
    if row is None:
        return None
    data = row.to_json()
    data["offer_id"] = row.offer_id
    return data


def describe_offer(row: PriceRow, instances: int | None = None) -> str:
    """'aws p5.48xlarge us-east-1 on-demand, 8 GPUs per instance x 1 (offer 12)'."""
    where = f" {row.region}" if row.region else ""
    many = f" x {instances}" if instances is not None else ""
    return (f"{row.provider} {row.instance_type}{where} {row.category}, "
            f"{float(row.gpu_count):g} GPUs per instance{many} (offer {row.offer_id})")
