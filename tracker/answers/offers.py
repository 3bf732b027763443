"""A stored offer as the answers show it: its JSON object in a document, its one-line
description in a message. Shared by the cost, spot, compare, serving and rent vs buy
documents and the report's recommendations; it imports no engine, so `breakeven` with its
prices given does not load the cost, spot and compare documents for them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracker.core.fabric import Override
    from tracker.store.queries import PriceRow


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


def joinable(row: PriceRow, instances: int, overrides: Mapping[str, Override] | None = None,
             allow_unclustered: bool = False) -> bool:
    """Whether `instances` of this offer can run one job: a single instance always can;
    several only over a cluster network (stored, or a `[fabric.overrides]` entry;
    tracker.core.fabric, docs/fabric.md §4). Sixteen community pods on 100 Mb/s are not a
    cluster."""
    if instances <= 1:
        return True
    from tracker.core.fabric import effective_cluster

    kind, _gbps, _text = effective_cluster(row.provider, row.instance_type, row.network,
                                           overrides, allow_unclustered)
    return kind is not None


def plan_shaped_offer(rows: Sequence[PriceRow], gpus: float, *,
                      overrides: Mapping[str, Override] | None = None,
                      allow_unclustered: bool = False
                      ) -> tuple[PriceRow, int, Decimal] | None:
    """The comparator of a plan on `gpus` GPUs: the offer it is cheapest to hold them on in a
    shape that can run the same job (one instance with at least `gpus` GPUs, or whole
    instances a cluster network joins), as (row, instances, price per GPU-hour of the plan).

    Ranked by what the instances bill an hour, so a 12-GPU plan on 8-GPU instances pays for
    16; the plan's price per GPU-hour is that bill over `gpus`. None: no offer has the shape.
    """
    best: tuple[Decimal, int, PriceRow, int] | None = None
    for index, row in enumerate(rows):
        size = float(row.gpu_count)
        if size <= 0:
            continue
        instances = max(1, math.ceil(gpus / size - 1e-9))
        if not joinable(row, instances, overrides, allow_unclustered):
            continue
        bill = row.price_per_hour * instances
        if best is None or (bill, index) < (best[0], best[1]):
            best = (bill, index, row, instances)
    if best is None:
        return None
    bill, _index, row, instances = best
    return row, instances, bill / Decimal(repr(float(gpus)))


def describe_comparator(row: PriceRow, instances: int, gpus: float) -> str:
    """'aws p5.48xlarge us-east-1 on-demand, 8 GPUs per instance x 2 (offer 12)', and when
    the instances hold more GPUs than the plan, that it pays for them."""
    text = describe_offer(row, instances)
    held = float(row.gpu_count) * instances
    if held > gpus + 1e-9:
        text += f", {held:g} GPUs billed for {gpus:g}"
    return text


def billed_share(row: PriceRow | None, instances: int | None, gpus: float
                 ) -> tuple[int | None, str | None]:
    """(GPUs the instances bill, that in words) when a run on `gpus` GPUs holds part of them
    (2 of an 8-GPU node: the instance bills all 8); (None, None) when it uses every one."""
    if row is None or instances is None:
        return None, None
    held = float(row.gpu_count) * instances
    if held <= gpus + 1e-9 or held != int(held):
        return None, None
    return int(held), (f"{gpus:g} of the {held:g} GPUs of {describe_offer(row, instances)}: "
                       f"the instance bills all {held:g}, so the run costs its bill")
