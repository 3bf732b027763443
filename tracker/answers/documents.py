"""The answers of the economics commands: engine results assembled into their JSON documents.

Each `*_document` function takes plain inputs (prices already looked up, settings resolved)
and returns the document that `--format json` prints (the contract: the `*_KEYS` below are
always present) together with the unrounded engine results a human table is drawn from.
Amounts are rounded only here, at the edge (`money_out`, `ratio_out`, `sig`).

Pure: no database, no clock. Store lookups live in `tracker.answers.pricing`; the sizing engine is
imported only when a run has to be sized.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.economics import finance
from tracker.economics.cost import (
    BillingRule,
    RunCost,
    cost_per_success,
    expected_attempts,
    run_cost,
    runs_per_day,
    tiling_offer,
    time_to_result_hours,
)
from tracker.economics.defaults import Assumption
from tracker.economics.ownership import (
    OwnershipInputs,
    OwnershipResult,
    SensitivityRow,
    bound_utilization,
    evaluate,
    payback_within,
    sensitivity,
    verdict,
)
from tracker.economics.spot import SpotInputs, SpotPlan, plan_spot
from tracker.economics.units import RATE_PLACES, money_out, ratio_out, sig
from tracker.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.answers.candidates import Option
    from tracker.economics.defaults import EconomicsSettings
    from tracker.sizing import SizingResult
    from tracker.store import PriceRow

# Keys every document carries (the JSON contract; more keys may follow them).
COST_KEYS = ("flops", "wall_hours", "gpu_hours", "price_per_gpu_hour", "currency", "cost",
             "offer")
SPOT_KEYS = ("viable", "not_viable_reason", "checkpoint_interval_hours", "young_interval_hours",
             "expected_wall_hours",
             "expected_interruptions", "overhead_fraction", "spot_cost", "on_demand_cost",
             "savings_fraction", "meets_deadline")
BREAKEVEN_KEYS = ("verdict", "verdict_reason", "monthly_onprem_opex", "monthly_cloud_cost",
                  "payback_months", "payback_within_horizon", "discounted_payback_month",
                  "discounted_payback_within_horizon", "breakeven_utilization",
                  "breakeven_bound", "npv", "irr_monthly", "irr_annual",
                  "owned_cost_per_gpu_hour", "sensitivity")
COMPARE_KEYS = ("gpu", "count", "provider", "category", "ownership", "wall_hours", "cost")


def as_of_text(as_of: datetime | None) -> str:
    """The instant a price question is asked for, in messages: `now` or ISO 8601 UTC."""
    if as_of is None:
        return "now"
    from tracker.serialization import iso_utc

    return iso_utc(as_of)


def offer_json(row: PriceRow | None) -> dict[str, Any] | None:
    """A stored offer as the documents show it: the `prices` object plus its offer id."""
    if row is None:
        return None
    data = row.to_json()
    data["offer_id"] = row.offer_id
    return data


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

    run = run_cost(price, count, wall_hours, rule)
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


# breakeven ------------------------------------------------------------------------------------

DEFAULT_NODE_GPUS = 8  # the largest common single-node shape (HGX/DGX, p5, ND v5)


def comparable_offer(rows: Sequence[PriceRow], gpus: float,
                     node_gpus: int = DEFAULT_NODE_GPUS) -> tuple[PriceRow, int] | None:
    """The cloud offer to set bought hardware against: the first (cheapest, if `rows` are
    sorted) whose instance holds the same GPUs in one node (min(gpus, node_gpus) per
    instance) and whose instances make up `gpus`. Eight 1-GPU pods are not an 8-GPU server."""
    if gpus != int(gpus):
        return tiling_offer(rows, gpus)
    per_node = min(int(gpus), node_gpus)
    same_node = [r for r in rows if float(r.gpu_count) == per_node]
    return tiling_offer(same_node, gpus)


def describe_offer(row: PriceRow, instances: int | None = None) -> str:
    """'aws p5.48xlarge us-east-1 on-demand, 8 GPUs per instance x 1 (offer 12)'."""
    where = f" {row.region}" if row.region else ""
    many = f" x {instances}" if instances is not None else ""
    return (f"{row.provider} {row.instance_type}{where} {row.category}, "
            f"{float(row.gpu_count):g} GPUs per instance{many} (offer {row.offer_id})")


@dataclass(frozen=True, slots=True)
class Hardware:
    """What buying costs up front and draws: total capex, rated kW, and the defaults used."""

    capex: Decimal
    power_kw: Decimal
    assumptions: tuple[Assumption, ...]


def hardware_costs(
    settings: EconomicsSettings, *, gpu: str | None, gpus: Decimal, capex: Decimal | None,
    networking_per_gpu: Decimal | None, storage: Decimal, install: Decimal,
    power_kw: Decimal | None,
) -> Hardware:
    """Capex (given, or the per-GPU default × gpus plus networking) and power (given, or the
    GPU's default); every default taken is an assumption with its source."""
    assumptions: list[Assumption] = []
    if capex is None:
        if gpu is None:
            raise InvalidInput("give --capex, or --gpu for the per-GPU hardware default")
        per_gpu = settings.capex_per_gpu(gpu)
        if per_gpu is None:
            raise InvalidInput(f"no capex default for {gpu}; pass --capex (defaults exist "
                               f"for: {', '.join(settings.capex_gpus())})")
        servers = per_gpu * gpus
        assumptions.append(Assumption("capex_per_gpu", per_gpu, settings.capex_source(gpu)))
        if networking_per_gpu is None:
            networking_per_gpu = settings.value("networking_per_gpu")
            assumptions.append(Assumption("networking_per_gpu", networking_per_gpu,
                                          settings.source("networking_per_gpu")))
    else:
        servers = capex
    networking = (networking_per_gpu or Decimal(0)) * gpus
    total_capex = servers + networking + storage + install

    if power_kw is None:
        per_gpu_kw = settings.power_kw_per_gpu(gpu) if gpu else None
        if per_gpu_kw is None:
            known = ", ".join(settings.power_gpus())
            raise InvalidInput("give --power-kw (rated IT power), or --gpu with a power "
                               f"default ({known})")
        power_kw = per_gpu_kw * gpus
        assumptions.append(Assumption("power_kw", power_kw, settings.power_source(gpu or "")))
    return Hardware(total_capex, power_kw, tuple(assumptions))


# Ownership inputs that fall back to a scalar default of the same name.
_OWNERSHIP_DEFAULTS = ("pue", "kwh_price", "colo_per_kw_month", "other_opex_per_month",
                       "residual_fraction", "discount_rate", "hours_per_month", "power_factor",
                       "horizon_months")
_DEFAULT_RESIDUAL_HORIZON = 36  # months the residual default is stated for


@dataclass(frozen=True, slots=True)
class BreakevenDocument:
    data: dict[str, Any]  # the JSON document
    inputs: OwnershipInputs
    result: OwnershipResult
    sensitivity: list[SensitivityRow]


def breakeven_document(
    settings: EconomicsSettings, bought: Hardware, *, gpus: Decimal,
    cloud_price_per_hour: Decimal, utilization: Decimal, currency: str,
    offer: PriceRow | None = None, comparator: str | None = None,
    pue: Decimal | None = None, kwh_price: Decimal | None = None,
    colo_per_kw_month: Decimal | None = None, staff_per_month: Decimal | None = None,
    other_opex_per_month: Decimal | None = None, residual_fraction: Decimal | None = None,
    discount_rate: Decimal | None = None, hours_per_month: Decimal | None = None,
    power_factor: Decimal | None = None, horizon_months: int | None = None,
    depreciation: str | None = None, depreciation_years: int | None = None,
) -> BreakevenDocument:
    """Rent vs buy for `bought` against `cloud_price_per_hour` (for all `gpus`); inputs left
    None come from the defaults and are listed as assumptions. `offer` is where a stored
    cloud price came from and `comparator` names it (default: the offer, or 'given price').

    The verdict is the NPV's sign at `utilization`; paybacks beyond the horizon are null
    with a flag; breakeven utilizations outside 0-100 % read 'never' / 'always'."""
    given: dict[str, Any] = {
        "pue": pue, "kwh_price": kwh_price, "colo_per_kw_month": colo_per_kw_month,
        "staff_per_month": staff_per_month, "other_opex_per_month": other_opex_per_month,
        "residual_fraction": residual_fraction, "discount_rate": discount_rate,
        "hours_per_month": hours_per_month, "power_factor": power_factor,
        "horizon_months": horizon_months,
    }
    inputs = settings.ownership_inputs(
        capex=bought.capex, power_kw=bought.power_kw, cloud_price_per_hour=cloud_price_per_hour,
        utilization=utilization, gpus=gpus, **given)
    assumptions = list(bought.assumptions)
    for key in _OWNERSHIP_DEFAULTS:
        if given[key] is None:
            assumptions.append(Assumption(key, getattr(inputs, key), settings.source(key)))
    if staff_per_month is None:
        assumptions.append(Assumption(
            "staff_per_month", inputs.staff_per_month,
            f"{settings.value('staff_per_node_month')} per node x "
            f"{settings.nodes_for(gpus)} node(s): {settings.source('staff_per_node_month')}"))

    result = evaluate(inputs)
    table = sensitivity(inputs, settings.sensitivity_ranges())
    warnings = list(result.warnings)
    if residual_fraction is None and inputs.horizon_months != _DEFAULT_RESIDUAL_HORIZON:
        warnings.append("the residual default (20%) is stated for 36 months; pass "
                        "--residual-fraction for a different horizon")

    horizon = inputs.horizon_months
    chosen = verdict(inputs, result)
    breakeven, breakeven_bound = bound_utilization(result.breakeven_utilization)
    payback_inside = payback_within(result.payback_months, horizon)
    discounted_inside = payback_within(result.discounted_payback_month, horizon)
    if comparator is None:
        comparator = describe_offer(offer) if offer is not None else "given price"
    data: dict[str, Any] = {
        "verdict": chosen,
        "verdict_reason": verdict_reason(chosen, inputs, result, currency),
        "monthly_onprem_opex": money_out(result.monthly_onprem_opex),
        "monthly_cloud_cost": money_out(result.monthly_cloud_cost),
        "payback_months": ratio_out(result.payback_months, 4) if payback_inside else None,
        "payback_within_horizon": payback_inside,
        "discounted_payback_month": result.discounted_payback_month
        if discounted_inside else None,
        "discounted_payback_within_horizon": discounted_inside,
        "breakeven_utilization": ratio_out(breakeven),
        "breakeven_bound": breakeven_bound,
        "npv": money_out(result.npv),
        "irr_monthly": ratio_out(result.irr_monthly, 8),
        "irr_annual": ratio_out(result.irr_annual, 8),
        "owned_cost_per_gpu_hour": money_out(result.owned_cost_per_gpu_hour, RATE_PLACES),
        "sensitivity": [sensitivity_json(row) for row in table],
        "capex": bought.capex,
        "residual_value": money_out(result.residual_value),
        "monthly_power": money_out(result.monthly_power),
        "monthly_colo": money_out(result.monthly_colo),
        "monthly_staff": money_out(result.monthly_staff),
        "monthly_other_opex": money_out(result.monthly_other_opex),
        "monthly_net_saving": money_out(result.monthly_net_saving),
        "cloud_price_per_hour": cloud_price_per_hour,
        "comparator": comparator,
        "utilization": ratio_out(utilization),
        "currency": currency,
        "gpus": int(gpus) if gpus == gpus.to_integral_value() else float(gpus),
        "horizon_months": inputs.horizon_months,
        "offer": offer_json(offer),
        "assumptions": assumptions,
        "warnings": warnings,
    }
    if depreciation is not None:
        years = depreciation_years or max(1, round(inputs.horizon_months / 12))
        schedule = finance.depreciation_schedule(
            depreciation, bought.capex, result.residual_value, years)
        data["depreciation"] = {"method": depreciation, "years": len(schedule),
                                "per_year": [money_out(x) for x in schedule]}
    return BreakevenDocument(data, inputs, result, table)


def sensitivity_json(row: SensitivityRow) -> dict[str, Any]:
    low, low_bound = bound_utilization(row.breakeven_low)
    high, high_bound = bound_utilization(row.breakeven_high)
    return {"input": row.input, "base": row.base, "low": row.low, "high": row.high,
            "breakeven_low": ratio_out(low), "breakeven_low_bound": low_bound,
            "breakeven_high": ratio_out(high), "breakeven_high_bound": high_bound,
            "swing": ratio_out(row.swing)}


def verdict_reason(chosen: str, inputs: OwnershipInputs, result: OwnershipResult,
                   currency: str) -> str:
    """One sentence: the NPV at the stated utilization against the breakeven utilization."""
    horizon = inputs.horizon_months
    at = f"{float(inputs.utilization):.0%} utilization"
    npv = f"{money_out(abs(result.npv)):,.2f} {currency}"
    breakeven, bound = bound_utilization(result.breakeven_utilization)
    if chosen == "buy":
        above = ("buying pays at any utilization" if bound == "always" else
                 f"above the breakeven of {float(breakeven):.1%}" if breakeven is not None
                 else "")
        return f"buying saves {npv} (NPV) over {horizon} months at {at}" + (
            f", {above}" if above else "")
    if bound == "never":
        return (f"buying does not pay within {horizon} months even at 100% utilization; "
                f"at {at} it loses {npv} (NPV)")
    if breakeven is not None:
        return (f"at {at} buying loses {npv} (NPV) over {horizon} months; it pays only "
                f"above {float(breakeven):.1%} utilization")
    return f"at {at} buying loses {npv} (NPV) over {horizon} months"


# compare --------------------------------------------------------------------------------------

def compare_rows(
    options: Sequence[Option], *, skipped: Sequence[str], priced_gpus: Sequence[str],
    max_gpus: int, as_of: datetime | None, limit: int | None = None,
) -> list[dict[str, Any]]:
    """The ranked runs of `compare`, one row per option (cheapest first, at most `limit`).

    NotFound when no option fits: it names the GPUs that have prices (`priced_gpus`) and the
    first reasons some were skipped.
    """
    from tracker.categories import ownership_of

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
    if not rows:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        gpus = ", ".join(sorted(set(priced_gpus)))
        raise NotFound(f"no priced GPU count up to {max_gpus} fits this workload as of "
                       f"{as_of_text(as_of)}; GPUs with prices: {gpus}{detail}")
    return rows[:limit] if limit else rows


# serving (cost -w inference, compare -w inference) --------------------------------------------

SERVING_COST_KEYS = ("cost_per_million_output_tokens", "cost_per_million_tokens",
                     "cost_per_request", "cost_per_month")
SERVING_API_KEYS = ("api_cost_per_million_output_tokens", "breakeven_output_tokens_per_day",
                    "api_cost_per_month", "monthly_saving_vs_api")
SERVING_COMPARE_COLUMNS = ["gpu", "count", "provider", "category",
                           "cost_per_million_output_tokens",
                           "cost_per_million_output_tokens_at_load", "cost_per_month",
                           "tensor_parallel", "replicas", "concurrency",
                           "tokens_per_s_per_user", "ttft_s", "output_tokens_per_s",
                           "price_per_gpu_hour", "instance_type", "instances", "region"]


def serving_money(cost: Any) -> dict[str, Any]:
    """The money keys of a priced deployment (exact decimals, rounded at the edge)."""
    from tracker.economics.serving import PER_TOKEN_PLACES

    out: dict[str, Any] = {
        "cost_per_million_output_tokens": money_out(cost.cost_per_million_output_tokens,
                                                    PER_TOKEN_PLACES),
        "cost_per_million_tokens": money_out(cost.cost_per_million_tokens, PER_TOKEN_PLACES),
        "cost_per_request": money_out(cost.cost_per_request, PER_TOKEN_PLACES),
        "cost_per_month": money_out(cost.cost_per_month),
        "cost_per_million_output_tokens_at_load": money_out(
            cost.cost_per_million_output_tokens_at_load, PER_TOKEN_PLACES),
    }
    if cost.api_cost_per_million_output_tokens is not None:
        out.update({
            "api_cost_per_million_output_tokens": money_out(
                cost.api_cost_per_million_output_tokens, PER_TOKEN_PLACES),
            "breakeven_output_tokens_per_day": None
            if cost.breakeven_output_tokens_per_day is None
            else int(cost.breakeven_output_tokens_per_day.to_integral_value()),
            "api_cost_per_month": money_out(cost.api_cost_per_month),
            "monthly_saving_vs_api": money_out(cost.monthly_saving_vs_api),
        })
    return out


def serving_cost_document(
    settings: EconomicsSettings, *, served: Any, price: Decimal | None, count: int,
    currency: str, offer: PriceRow | None = None, instances: int | None = None,
    provider: str | None = None,
    tokens: float | None = None, sizing_warnings: Sequence[str] = (),
    api_price_per_million_input: Decimal | None = None,
    api_price_per_million_output: Decimal | None = None,
) -> dict[str, Any]:
    """`cost -w inference`: the COST_KEYS (a run of --tokens output tokens when given), the
    serving object and the per-token money (SERVING_COST_KEYS, SERVING_API_KEYS). The price
    per GPU-hour is the offer's when an offer is given, else `price`."""
    from tracker.economics.serving import serving_cost

    if offer is not None:
        price = offer.price_per_gpu_hour
        rule, billing_source = settings.billing(offer.provider)
    else:
        rule, billing_source = settings.billing(provider)
    if price is None:
        raise InvalidInput("serving cost: give a price per GPU-hour or an offer")
    chosen = served.chosen
    cost = serving_cost(
        price_per_gpu_hour=price, gpus=count, output_tokens_per_s=served.output_tokens_per_s,
        prompt_tokens=served.prompt_tokens, output_tokens=served.output_tokens,
        hours_per_month=settings.value("hours_per_month"),
        load_output_tokens_per_s=served.load_output_tokens_per_s,
        replica_gpus=chosen.tensor_parallel,
        replica_output_tokens_per_s=served.point.output_tokens_per_s,
        api_price_per_million_input=api_price_per_million_input,
        api_price_per_million_output=api_price_per_million_output)
    wall = run = None
    if tokens is not None:
        wall = float(tokens) / served.output_tokens_per_s / 3600.0
        run = run_cost(price, float(count), wall, rule)
    data: dict[str, Any] = {
        "flops": None, "wall_hours": sig(wall) if wall is not None else None,
        "gpu_hours": sig(run.gpu_hours) if run else None, "price_per_gpu_hour": price,
        "currency": currency, "cost": money_out(run.cost) if run else None,
        "offer": offer_json(offer), "gpu": served.gpu, "count": count,
        "instances": instances, "billing_source": billing_source,
        **serving_money(cost), "serving": served.to_json(),
    }
    data["warnings"] = [*sizing_warnings, *served.warnings]
    return data


def serving_compare_rows(options: Sequence[Any], *, skipped: Sequence[str],
                         priced_gpus: Sequence[str], max_gpus: int, as_of: datetime | None,
                         limit: int | None = None) -> list[dict[str, Any]]:
    """The ranked deployments of `compare -w inference`, cheapest per M output tokens first."""
    rows = []
    for o in options:
        s, p = o.served, o.served.point
        rows.append({
            "gpu": o.gpu, "count": o.count, "provider": o.offer.provider,
            "category": o.offer.category, **serving_money(o.cost),
            "tensor_parallel": s.chosen.tensor_parallel, "replicas": s.chosen.replicas,
            "concurrency": p.concurrency, "tokens_per_s_per_user": sig(1.0 / p.tpot_s),
            "tpot_s": sig(p.tpot_s), "ttft_s": sig(p.ttft_s),
            "output_tokens_per_s": sig(s.output_tokens_per_s),
            "price_per_gpu_hour": o.offer.price_per_gpu_hour, "currency": o.offer.currency,
            "instance_type": o.offer.instance_type, "instances": o.instances,
            "region": o.offer.region, "offer_id": o.offer.offer_id,
            "calibrated": s.calibration.calibrated,
        })
    if not rows:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        gpus = ", ".join(sorted(set(priced_gpus)))
        raise NotFound(f"no priced GPU count up to {max_gpus} serves this workload at the "
                       f"service level as of {as_of_text(as_of)}; GPUs with prices: {gpus}"
                       f"{detail}")
    return rows[:limit] if limit else rows
