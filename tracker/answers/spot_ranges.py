"""The spread of a spot run (`spot --simulate`, the report's spot range): one function both call.

`simulation_document` runs tracker.economics.spot_simulation on the inputs and plan a
`SpotDocument` already holds (the same τ, MTTI, prices and deadline as Daly's figures beside
it) and returns the `simulation` object of the JSON contract. `history_price_path` reads a
stored offer's price spans from a start date for `--price-path history`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.answers.documents import SpotDocument
    from tracker.store.db import Database

PRICE_PATHS = ("flat", "history")
DEFAULT_SEED = 0
REPORT_REPLICAS = 4000  # per training workload in the weekly report: ±1% on the P90 at seed 0
SIMULATION_JSON_KEYS = ("replicas", "seed", "wall_hours", "cost", "deadline_hours",
                        "deadline_probability", "daly_expected_cost", "mean_vs_daly_pct")


def history_price_path(
    db: Database, offer: Mapping[str, Any], *, start: datetime, currency: str,
) -> tuple[tuple[tuple[float, Decimal], ...], list[str]]:
    """((hours from `start`, price per instance-hour), ...) of one stored offer from `start`
    on, and warnings. A gap between spans keeps the price before it; after the last stored
    price it holds on (said in a warning)."""
    from tracker.store.queries import history

    if offer.get("currency") != currency:
        raise InvalidInput(f"--price-path history prices the offer in its own currency "
                           f"({offer.get('currency')}); pass --currency {offer.get('currency')}")
    spans = [s for s in history(db, offer["gpu"], provider=offer["provider"],
                                category=offer["category"], region=offer["region"] or None,
                                since=start)
             if s.offer_id == offer["offer_id"]]
    spans.sort(key=lambda s: s.valid_from)
    if not spans or spans[0].valid_from > start:
        raise NotFound(f"offer {offer['offer_id']} ({offer['provider']} "
                       f"{offer['instance_type']}) has no stored price at --start "
                       f"{start.date().isoformat()}")
    path: list[tuple[float, Decimal]] = []
    for span in spans:
        at = max(0.0, (span.valid_from - start).total_seconds() / 3600.0)
        if path and at <= path[-1][0]:
            path[-1] = (path[-1][0], Decimal(span.price_per_hour))
        else:
            path.append((at, Decimal(span.price_per_hour)))
    last = spans[-1]
    end = last.valid_to or last.last_seen
    warnings = [f"the stored history of offer {offer['offer_id']} ends "
                f"{end.date().isoformat()}; runs longer than "
                f"{(end - start).total_seconds() / 3600.0:,.0f} h pay its last price "
                f"({last.price_per_hour}) after that"]
    return tuple(path), warnings


def simulation_document(
    doc: SpotDocument, *, replicas: int, seed: int = DEFAULT_SEED,
    min_probability: float | None = None,
    price_path: tuple[tuple[float, Decimal], ...] | None = None,
    path_warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The `simulation` object for a planned spot run (see the module docstring)."""
    from tracker.core.serialization import to_jsonable
    from tracker.economics.spot_simulation import (
        SimulationInputs,
        choose_for_deadline,
        simulate,
    )
    from tracker.economics.units import dec, money_out

    inputs, plan = doc.inputs, doc.plan
    if not plan.viable and math.isinf(plan.expected_wall_hours):
        raise InvalidInput(f"nothing to simulate: {plan.not_viable_reason}")
    if inputs.max_runtime_hours is not None:
        raise InvalidInput("--simulate does not model forced stops (--max-runtime-hours, "
                           "--legacy-preemptible): Daly's figures above do")
    if min_probability is not None and inputs.deadline_hours is None:
        raise InvalidInput("--min-probability needs --deadline-hours")
    sim_inputs = SimulationInputs(
        work_hours=inputs.work_hours, interval_hours=plan.checkpoint_interval_hours,
        checkpoint_hours=inputs.checkpoint_hours, restart_hours=inputs.restart_hours,
        mtti_job_hours=plan.mtti_job_hours, replicas=replicas, seed=seed,
        notice_window=plan.notice_window_used, unbilled_wait_hours=inputs.unbilled_wait_hours,
        nodes=inputs.nodes, spot_price_per_node_hour=inputs.spot_price_per_node_hour,
        price_path=price_path, deadline_hours=inputs.deadline_hours)
    result = simulate(sim_inputs, keep_completions=min_probability is not None)

    daly_cost: Decimal | None
    if price_path is not None:
        import numpy as np

        from tracker.economics.spot_simulation import path_cost

        share = plan.billed_spot_hours / plan.expected_wall_hours
        daly_cost = money_out(dec(float(path_cost(
            price_path, np.array([plan.expected_wall_hours]))[0]) * share * inputs.nodes,
            "cost"))
    else:
        daly_cost = money_out(plan.spot_cost)
    if result.cost is not None and daly_cost:
        vs_daly = float((result.cost.mean - daly_cost) / daly_cost * 100)
    else:
        vs_daly = (result.wall_hours.mean - plan.expected_wall_hours) / \
            plan.expected_wall_hours * 100.0

    def hours(s: Any) -> dict[str, float]:
        return {k: _sig(getattr(s, k)) for k in ("p10", "p50", "p90", "mean", "stderr")}

    data: dict[str, Any] = {
        "replicas": result.replicas, "seed": result.seed,
        "wall_hours": hours(result.wall_hours),
        "cost": None if result.cost is None else {
            k: to_jsonable(getattr(result.cost, k))
            for k in ("p10", "p50", "p90", "mean", "stderr")},
        "deadline_hours": inputs.deadline_hours,
        "deadline_probability": None if result.deadline_probability is None
        else round(result.deadline_probability, 4),
        "daly_expected_cost": to_jsonable(daly_cost),
        "daly_expected_wall_hours": _sig(plan.expected_wall_hours),
        "mean_vs_daly_pct": round(vs_daly, 3),
        "model_expected_wall_hours": _sig(result.exact_expected_wall_hours),
        "interruptions": hours(result.interruptions),
        "billed_hours": hours(result.billed_hours),
        "segments": result.segments,
        "price_path": "history" if price_path is not None else "flat",
        "on_demand_cost": to_jsonable(money_out(plan.on_demand_cost)),
        "on_demand_hours": _sig(plan.on_demand_hours),
        "on_demand_deadline_probability": None if inputs.deadline_hours is None
        else (1.0 if plan.on_demand_hours <= inputs.deadline_hours else 0.0),
        "warnings": list(result.warnings) + list(path_warnings or ()),
    }
    if min_probability is not None:
        choice = choose_for_deadline(
            sim_inputs, result, min_probability=min_probability,
            on_demand_hours=plan.on_demand_hours,
            on_demand_price_per_node_hour=inputs.on_demand_price_per_node_hour)
        data["choice"] = {
            "option": choice.option, "min_probability": choice.min_probability,
            "probability": None if choice.probability is None
            else round(choice.probability, 4),
            "expected_cost": to_jsonable(choice.expected_cost),
            "fallback_after_hours": None if choice.fallback_after_hours is None
            else _sig(choice.fallback_after_hours),
            "reason": choice.reason,
        }
    return data


def _sig(value: float) -> float:
    """Six significant figures: the replicas' statistics carry no more."""
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.6g}")
