"""Cost per run, per success, runs per day and time to result (docs/economics.md §1.1).

    cost_run        = gpus × price_per_gpu_hour × billed_hours
    billed_hours    = wall hours rounded up to the billing granularity (and at least the minimum)
    E[cost/success] = cost_run × (1 + f_fail × (1 − p) / p)      (geometric retries)
    runs_per_day    = floor(24 × slot_utilization / wall_hours)
    time_to_result  = ceil(K / P) × wall_hours                    (K experiments, P parallel slots)

Storage, egress and idle time are not in cost_run; they are separate line items.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.economics.units import dec, fraction, positive

SECONDS_PER_HOUR = Decimal(3600)
# Wall times from the sizing model are floats: 0.75 h can arrive as 0.7500000000000001, which
# must not round up to an extra billed second. Microsecond resolution absorbs that noise.
_MICROSECOND = Decimal("0.000001")


@dataclass(frozen=True, slots=True)
class BillingRule:
    """How a provider rounds a run's duration: increments of `granularity_seconds`, at least
    `minimum_seconds` per instance start."""

    granularity_seconds: int = 1
    minimum_seconds: int = 0

    def __post_init__(self) -> None:
        if self.granularity_seconds < 1:
            raise InvalidInput(
                f"billing granularity must be at least 1 second, got {self.granularity_seconds}")
        if self.minimum_seconds < 0:
            raise InvalidInput(f"billing minimum must be 0 or more, got {self.minimum_seconds}")

    def billed_seconds(self, wall_hours: Decimal | float | int) -> Decimal:
        hours = dec(wall_hours, "wall hours")
        positive(hours, "wall hours", allow_zero=True)
        seconds = (hours * SECONDS_PER_HOUR).quantize(_MICROSECOND)
        seconds = max(seconds, Decimal(self.minimum_seconds))
        step = Decimal(self.granularity_seconds)
        units = (seconds / step).to_integral_value(rounding=ROUND_CEILING)
        return units * step

    def billed_hours(self, wall_hours: Decimal | float | int) -> Decimal:
        return self.billed_seconds(wall_hours) / SECONDS_PER_HOUR


PER_SECOND = BillingRule(1, 0)


@dataclass(frozen=True, slots=True)
class RunCost:
    gpus: float
    wall_hours: float
    billed_hours: Decimal
    gpu_hours: float
    price_per_gpu_hour: Decimal
    cost: Decimal


def run_cost(
    price_per_gpu_hour: Decimal, gpus: float, wall_hours: float | Decimal,
    billing: BillingRule = PER_SECOND,
) -> RunCost:
    """What one run costs: every GPU billed for the wall time rounded up to the billing rule."""
    price = dec(price_per_gpu_hour, "price per GPU-hour")
    positive(price, "price per GPU-hour", allow_zero=True)
    positive(float(gpus), "GPU count")
    seconds = billing.billed_seconds(wall_hours)
    # One division at the end keeps exact results exact (6 h × $4 × 1 GPU = $24, not 23.99…).
    cost = price * dec(gpus, "GPU count") * seconds / SECONDS_PER_HOUR
    return RunCost(
        gpus=float(gpus), wall_hours=float(wall_hours), billed_hours=seconds / SECONDS_PER_HOUR,
        gpu_hours=float(gpus) * float(wall_hours), price_per_gpu_hour=price, cost=cost,
    )


def node_run_cost(
    price_per_node_hour: Decimal, nodes: int, wall_hours: float | Decimal,
    billing: BillingRule = PER_SECOND,
) -> Decimal:
    """The same cost with per-instance prices: nodes × price per node-hour × billed hours."""
    price = dec(price_per_node_hour, "price per node-hour")
    positive(price, "price per node-hour", allow_zero=True)
    if nodes < 1:
        raise InvalidInput(f"node count must be at least 1, got {nodes}")
    return price * nodes * billing.billed_seconds(wall_hours) / SECONDS_PER_HOUR


def expected_attempts(success_rate: Decimal | float) -> Decimal:
    p = dec(success_rate, "success rate")
    fraction(p, "success rate")
    return Decimal(1) / p


def cost_per_success(
    cost_run: Decimal, success_rate: Decimal | float | str,
    fail_fraction: Decimal | float | str = Decimal(1),
) -> Decimal:
    """Expected cost of one successful experiment with geometric retries.

    Failed attempts cost `fail_fraction` of a run (1.0: a failure shows only at the end).
    """
    p = dec(success_rate, "success rate")
    f = dec(fail_fraction, "fail fraction")
    fraction(p, "success rate")
    fraction(f, "fail fraction", allow_zero=True)
    return dec(cost_run, "cost per run") * (1 + f * (1 - p) / p)


def runs_per_day(wall_hours: float | Decimal, slot_utilization: Decimal | float = 1) -> int:
    hours = dec(wall_hours, "wall hours")
    positive(hours, "wall hours")
    u = dec(slot_utilization, "slot utilization")
    fraction(u, "slot utilization")
    return int((24 * u / hours).to_integral_value(rounding=ROUND_FLOOR))


def time_to_result_hours(experiments: int, parallel_slots: int, wall_hours: float) -> float:
    """Hours until K experiments are done on P slots, runs back to back: ceil(K/P) × wall."""
    if experiments < 1:
        raise InvalidInput(f"experiments must be at least 1, got {experiments}")
    if parallel_slots < 1:
        raise InvalidInput(f"parallel slots must be at least 1, got {parallel_slots}")
    positive(float(wall_hours), "wall hours")
    waves = -(-experiments // parallel_slots)
    return waves * float(wall_hours)


def cluster_premium(single_gpu_cost: Decimal, scaling_efficiency: float) -> Decimal:
    """Extra $ of running on N GPUs at efficiency e instead of one: cost(1) × (1/e − 1)."""
    e = dec(scaling_efficiency, "scaling efficiency")
    fraction(e, "scaling efficiency")
    return dec(single_gpu_cost, "single-GPU cost") * (1 / e - 1)


def tiling_offer(rows: Sequence[Any], gpus: float) -> tuple[Any, int] | None:
    """The first (cheapest, if `rows` are sorted) offer whose instances tile `gpus` exactly.

    16 GPUs can be two 8-GPU instances or sixteen 1-GPU ones, but not one 8-GPU instance;
    a 1-GPU job cannot rent part of an 8-GPU instance. Returns (row, instances) or None.
    Rows need `gpu_count` (GPUs per instance).
    """
    for row in rows:
        per_instance = float(row.gpu_count)
        if per_instance <= 0:
            continue
        instances = gpus / per_instance
        whole = round(instances)
        if whole >= 1 and abs(instances - whole) < 1e-9:
            return row, whole
    return None
