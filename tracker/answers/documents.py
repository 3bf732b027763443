"""The answers of the economics commands: engine results assembled into their JSON documents.

Each `*_document` function takes plain inputs (prices already looked up, settings resolved)
and returns the document that `--format json` prints (the contract: the `*_KEYS` are always
present) together with the unrounded engine results a human table is drawn from. Amounts are
rounded only here, at the edge (`money_out`, `ratio_out`, `sig`). This module: cost, spot and
compare; rent vs buy is breakeven_documents.py, serving is serving_documents.py.

Pure: no database, no clock. Store lookups live in `tracker.answers.pricing`; the sizing engine
is imported only when a run has to be sized.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.offers import billed_share, offer_json
from tracker.core.errors import InvalidInput, NotFound
from tracker.economics.cost import (
    BillingRule,
    RunCost,
    cost_per_success,
    expected_attempts,
    run_cost,
    runs_per_day,
    time_to_result_hours,
)
from tracker.economics.spot import SpotInputs, SpotPlan, plan_spot
from tracker.economics.units import money_out, ratio_out, sig

if TYPE_CHECKING:
    from tracker.answers.candidates import Option
    from tracker.economics.defaults import EconomicsSettings
    from tracker.sizing import SizingResult
    from tracker.store.queries import PriceRow

# Keys every document carries (the JSON contract; more keys may follow them).
COST_KEYS = ("flops", "wall_hours", "gpu_hours", "price_per_gpu_hour", "currency", "cost",
             "offer")
SPOT_KEYS = ("viable", "not_viable_reason", "checkpoint_interval_hours", "young_interval_hours",
             "expected_wall_hours",
             "expected_interruptions", "overhead_fraction", "spot_cost", "on_demand_cost",
             "savings_fraction", "meets_deadline")
COMPARE_KEYS = ("gpu", "count", "provider", "category", "ownership", "wall_hours", "cost")


def as_of_text(as_of: datetime | None) -> str:
    """The instant a price question is asked for, in messages: `now` or ISO 8601 UTC."""
    if as_of is None:
        return "now"
    from tracker.core.serialization import iso_utc

    return iso_utc(as_of)


# Sizing a run ---------------------------------------------------------------------------------

def whole_count(count: float) -> int:
    """The GPU count as the sizing engine takes it (whole GPUs only)."""
    if count != int(count):
        raise InvalidInput(f"the sizing engine needs a whole GPU count, got {count:g}; "
                           "pass --hours for fractional GPUs")
    return int(count)


def size_run(gpu: str, count: float, workload: Mapping[str, Any]) -> SizingResult:
    """Run the sizing engine for `count` GPUs; `workload` holds SizingRequest fields (None =
    the engine's default)."""
    from tracker.sizing import SizingRequest, size_workload

    fields = {k: v for k, v in workload.items() if v is not None}
    return size_workload(SizingRequest(gpu=gpu, count=whole_count(count), **fields))


def check_fits(result: SizingResult, count: float, gpu: str) -> None:
    """Refuse a sizing that does not fit `count` GPUs or gave no run time."""
    if result.fits is False:
        need = f"at least {result.gpus_needed}" if result.gpus_needed else "more"
        raise InvalidInput(f"the job does not fit on {count:g} x {gpu}: it needs {need} "
                           "GPUs (see `gpu-tracker size`); raise --count")
    if result.wall_hours is None:
        why = f" ({result.reason})" if result.reason else ""
        raise InvalidInput(f"the sizing engine gave no run time for this job{why}; "
                           "pass --hours")


# cost -----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CostDocument:
    data: dict[str, Any]  # the JSON document
    run: RunCost
    billing: BillingRule
    flops: float | None
    offer: PriceRow | None  # where a stored price came from


def cost_document(
    settings: EconomicsSettings, *, gpu: str | None, count: float, currency: str,
    hours: float | None, workload: Mapping[str, Any], price: Decimal | None = None,
    offer: PriceRow | None = None, instances: int | None = None,
    sized: SizingResult | None = None, provider: str | None = None,
    billing_seconds: int | None = None, billing_minimum_seconds: int | None = None,
    success_rate: Decimal | None = None, fail_fraction: Decimal | None = None,
    experiments: int | None = None, parallel: int = 1, slot_utilization: Decimal | None = None,
) -> CostDocument:
    """Cost of one run on `count` GPUs (and per success, runs per day, time to result).

    The price is the stored `offer`'s (billed by its provider's rule) or the given `price`
    (billed by `provider`'s rule). Wall time is `hours`, else the sizing: `sized` (the
    offer's own sizing) or a fresh one of `workload` on `gpu`.
    """
    warnings: list[str] = []
    flops = None
    if hours is None and gpu is None:  # the command checks this first, with the same message
        raise InvalidInput("give --hours, or --gpu for the sizing engine to estimate the run time")
    if offer is not None:
        price = offer.price_per_gpu_hour
        rule, billing_source = settings.billing(offer.provider)
    else:
        rule, billing_source = settings.billing(provider)
        if hours is None and gpu is not None:
            sized = size_run(gpu, count, workload)
    if price is None:
        raise InvalidInput("give a price per GPU-hour or a stored offer")
    if hours is None:
        # gpu is given (checked above); a stored offer comes with its own sizing
        # (pricing.offer_for_run) when there are no hours, otherwise it was sized just above.
        assert gpu is not None and sized is not None
        check_fits(sized, count, gpu)
        warnings.extend(sized.warnings or ())
        wall_hours = float(sized.wall_hours)
        flops = sized.flops
    else:
        wall_hours = hours

    if billing_seconds is not None or billing_minimum_seconds is not None:
        rule = BillingRule(
            billing_seconds if billing_seconds is not None else rule.granularity_seconds,
            billing_minimum_seconds if billing_minimum_seconds is not None
            else rule.minimum_seconds)
        billing_source = "flag"

    # A run on part of one larger instance pays for the whole instance.
    billed_gpus, share = billed_share(offer, instances, count)
    run = run_cost(price, billed_gpus or count, wall_hours, rule)
    data: dict[str, Any] = {
        "flops": sig(flops) if flops is not None else None,
        "wall_hours": sig(run.wall_hours),
        "gpu_hours": sig(run.gpu_hours),
        "price_per_gpu_hour": price,
        "currency": currency,
        "cost": money_out(run.cost),
        "offer": offer_json(offer),
        "gpu": gpu,
        "count": int(count) if count == int(count) else count,
        "instances": instances,
        "billed_hours": sig(float(run.billed_hours), 9),
        "billing_seconds": rule.granularity_seconds,
        "billing_minimum_seconds": rule.minimum_seconds,
        "billing_source": billing_source,
        "billed_gpus": billed_gpus,
        "instance_share": share,
    }
    slot_u = slot_utilization if slot_utilization is not None else settings.value(
        "slot_utilization")
    data["runs_per_day"] = runs_per_day(wall_hours, slot_u)
    if success_rate is not None:
        fail = fail_fraction if fail_fraction is not None else settings.value("fail_fraction")
        data["cost_per_success"] = money_out(cost_per_success(run.cost, success_rate, fail))
        data["expected_attempts"] = ratio_out(expected_attempts(success_rate))
    elif fail_fraction is not None:
        raise InvalidInput("--fail-fraction needs --success-rate")
    if experiments is not None:
        data["time_to_result_hours"] = sig(
            time_to_result_hours(experiments, parallel, wall_hours))
    data["warnings"] = warnings
    return CostDocument(data, run, rule, flops, offer)


# spot -----------------------------------------------------------------------------------------

def band_mtti(fact: Any, settings: EconomicsSettings) -> tuple[float, str]:
    """(node MTTI hours, source) from a stored interruption band, converted as the settings
    say: the one conversion behind `spot` and the report."""
    from tracker.economics.spot import band_probability, mtti_from_probability

    conversion, window, point, open_top = settings.band_settings()
    share = band_probability(fact.min_pct, fact.max_pct, point, open_top)
    mtti = mtti_from_probability(share, conversion, window)
    source = (f"{fact.provider} interruption band '{fact.band_label}' for {fact.instance_type} "
              f"in {fact.region} (as of {as_of_text(fact.as_of)}): {share:.1%} per "
              f"{window:g} h as a {conversion}")
    return mtti, source


def node_mtti(settings: EconomicsSettings, bands: Mapping[tuple[str, str, str], Any], *,
              provider: str | None, region: str | None, instance_type: str | None,
              given: float | None = None) -> tuple[float, str]:
    """(node MTTI hours, source) of a spot plan: the given MTTI, else the stored interruption
    band of the instance type in the region (`bands`, keyed (provider, region, instance
    type): `pricing.interruption_bands`), else the provider's default (data/providers.json,
    through the settings). The one rule behind `spot`, the pricing answers and the report."""
    if given is not None:
        return given, "given"
    fact = bands.get((provider or "", region or "", instance_type or ""))
    if fact is not None:
        return band_mtti(fact, settings)
    return settings.default_mtti_hours(provider)


def spot_candidates(rows: Sequence[PriceRow], gpus: int) -> list[tuple[PriceRow, int, int]]:
    """(row, GPUs, instances) for every spot or bid row whose instances can make up a plan of
    `gpus` GPUs: the plan's count, or the next whole number of a larger instance (a 2-GPU plan
    on one 8-GPU p6-b200). Rows keep their order (cheapest per GPU-hour first)."""
    found = []
    for row in rows:
        size = float(row.gpu_count)
        if row.category not in ("spot", "bid") or size < 1 or size != int(size):
            continue
        instances = -(-gpus // int(size))
        found.append((row, instances * int(size), instances))
    return found


def spot_rank(plan: SpotPlan, row: PriceRow) -> tuple:
    """Order of preference among spot plans: viable first, then the cheapest expected cost."""
    return (not plan.viable, plan.spot_cost is None, plan.spot_cost or 0, row.provider,
            row.instance_type, row.region, row.zone)


NO_SPOT_PRICES = ("no prices given or stored, so no costs: pass --spot-price and "
                  "--on-demand-price (per instance-hour), or --instance and --region to use "
                  "stored prices")


@dataclass(frozen=True, slots=True)
class SpotDocument:
    data: dict[str, Any]  # the JSON document
    inputs: SpotInputs
    plan: SpotPlan


def spot_document(
    inputs: SpotInputs, *, mtti_source: str, currency: str, spot_offer: PriceRow | None = None,
    on_demand_offer: PriceRow | None = None,
) -> SpotDocument:
    """Plan the job on spot against on-demand; the offers are where stored prices came from."""
    plan = plan_spot(inputs)
    warnings = list(plan.warnings)
    if inputs.spot_price_per_node_hour is None and inputs.on_demand_price_per_node_hour is None:
        warnings.append(NO_SPOT_PRICES)
    data: dict[str, Any] = {
        "viable": plan.viable,
        "not_viable_reason": plan.not_viable_reason,
        "checkpoint_interval_hours": sig(plan.checkpoint_interval_hours),
        "young_interval_hours": sig(plan.young_interval_hours),
        "expected_wall_hours": sig(plan.expected_wall_hours),
        "expected_interruptions": sig(plan.expected_interruptions),
        "overhead_fraction": ratio_out(plan.overhead_fraction),
        "spot_cost": money_out(plan.spot_cost),
        "on_demand_cost": money_out(plan.on_demand_cost),
        "savings_fraction": ratio_out(plan.savings_fraction),
        "meets_deadline": plan.meets_deadline,
        "work_hours": inputs.work_hours,
        "nodes": inputs.nodes,
        "mtti_hours": sig(inputs.mtti_node_hours),
        "mtti_job_hours": sig(plan.mtti_job_hours),
        "mtti_source": mtti_source,
        "billed_spot_hours": sig(plan.billed_spot_hours),
        "on_demand_hours": sig(plan.on_demand_hours),
        "forced_restarts": plan.forced_restarts,
        "notice_window_used": plan.notice_window_used,
        "deadline_hours": inputs.deadline_hours,
        "deadline_reachable": plan.deadline_reachable,
        "on_demand_hours_for_deadline": sig(plan.on_demand_hours_for_deadline)
        if plan.on_demand_hours_for_deadline is not None else None,
        "mixed_cost": money_out(plan.mixed_cost),
        "spot_price_per_hour": inputs.spot_price_per_node_hour,
        "on_demand_price_per_hour": inputs.on_demand_price_per_node_hour,
        "currency": currency,
        "spot_offer": offer_json(spot_offer),
        "on_demand_offer": offer_json(on_demand_offer),
        "warnings": warnings,
    }
    return SpotDocument(data, inputs, plan)


# compare --------------------------------------------------------------------------------------

def compare_rows(
    options: Sequence[Option], *, skipped: Sequence[str], priced_gpus: Sequence[str],
    max_gpus: int, as_of: datetime | None, limit: int | None = None,
) -> list[dict[str, Any]]:
    """The ranked runs of `compare`, one row per option (cheapest first, at most `limit`).

    NotFound when no option fits: it names the GPUs that have prices (`priced_gpus`) and the
    first reasons some were skipped.
    """
    from tracker.core.categories import ownership_of

    rows: list[dict[str, Any]] = [{
        "gpu": o.gpu, "count": o.count, "provider": o.offer.provider,
        "category": o.offer.category, "ownership": ownership_of(o.offer.category),
        "wall_hours": sig(o.wall_hours),
        "cost": money_out(o.cost), "gpu_hours": sig(o.run.gpu_hours),
        "price_per_gpu_hour": o.offer.price_per_gpu_hour, "currency": o.offer.currency,
        "instance_type": o.offer.instance_type, "instances": o.instances,
        "region": o.offer.region, "offer_id": o.offer.offer_id,
        "node_link": o.offer.node_link, "cluster_network": o.cluster_network,
        "override": o.override,
        **({"owned_cost": o.offer.attributes["owned_cost"]}
           if "owned_cost" in (o.offer.attributes or {}) else {}),
    } for o in options]
    return ranked_rows(rows, limit, fits="fits this workload", skipped=skipped,
                       priced_gpus=priced_gpus, max_gpus=max_gpus, as_of=as_of)


def ranked_rows(rows: list[dict[str, Any]], limit: int | None, *, fits: str,
                skipped: Sequence[str], priced_gpus: Sequence[str], max_gpus: int,
                as_of: datetime | None) -> list[dict[str, Any]]:
    """The first `limit` rows of a ranking; NotFound when nothing `fits`, naming the GPUs that
    have prices and the first reasons some were skipped."""
    if not rows:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        gpus = ", ".join(sorted(set(priced_gpus)))
        raise NotFound(f"no priced GPU count up to {max_gpus} {fits} as of "
                       f"{as_of_text(as_of)}; GPUs with prices: {gpus}{detail}")
    return rows[:limit] if limit else rows
