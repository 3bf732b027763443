"""The rent vs buy answer (`gpu-tracker breakeven`, the report's rent vs buy) as its JSON
document: what buying costs (capex and power, from the flags or the defaults), the cloud offer
it is set against, and the ownership engine's verdict, paybacks, NPV, IRR and sensitivity.

Pure, like tracker/answers/documents.py, whose offer helpers it shares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.offers import describe_offer, joinable, offer_json
from tracker.core.errors import InvalidInput
from tracker.core.money import format_money
from tracker.economics import finance
from tracker.economics.cost import tiling_offer
from tracker.economics.defaults import Assumption
from tracker.economics.ownership import (
    TREND_POINTS,
    OwnershipInputs,
    OwnershipResult,
    SensitivityRow,
    bound_utilization,
    evaluate,
    payback_within,
    sensitivity,
    verdict,
)
from tracker.economics.units import RATE_PLACES, money_out, ratio_out

if TYPE_CHECKING:
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow


BREAKEVEN_KEYS = ("verdict", "verdict_reason", "monthly_onprem_opex", "monthly_cloud_cost",
                  "payback_months", "payback_within_horizon", "discounted_payback_month",
                  "discounted_payback_within_horizon", "breakeven_utilization",
                  "breakeven_bound", "npv", "irr_monthly", "irr_annual",
                  "owned_cost_per_gpu_hour", "sensitivity")

DEFAULT_NODE_GPUS = 8  # the largest common single-node shape (HGX/DGX, p5, ND v5)


def comparable_offer(rows: Sequence[PriceRow], gpus: float,
                     node_gpus: int = DEFAULT_NODE_GPUS) -> tuple[PriceRow, int] | None:
    """The cloud offer to set bought hardware against: the first (cheapest, if `rows` are
    sorted) whose instance holds the same GPUs in one node (min(gpus, node_gpus) per
    instance) and whose instances make up `gpus`, joined by a cluster network when there are
    several (bought servers come with their fabric). Eight 1-GPU pods are not an 8-GPU
    server, and two 8-GPU hosts without a cluster network are not a 16-GPU cluster."""
    if gpus != int(gpus):
        return tiling_offer(rows, gpus)
    per_node = min(int(gpus), node_gpus)
    same_node = [r for r in rows if float(r.gpu_count) == per_node]
    instances = -(-int(gpus) // per_node)
    return tiling_offer([r for r in same_node if joinable(r, instances)], gpus)


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


def _assumptions(settings: EconomicsSettings, bought: Hardware, inputs: OwnershipInputs,
                 given: Mapping[str, Any], gpus: Decimal) -> list[Assumption]:
    """The hardware's assumptions, then each ownership input not `given` (a default, with
    its source); staff from the per-node default times the nodes `gpus` take."""
    assumptions = list(bought.assumptions)
    for key in _OWNERSHIP_DEFAULTS:
        if given[key] is None:
            assumptions.append(Assumption(key, getattr(inputs, key), settings.source(key)))
    if given["staff_per_month"] is None:
        assumptions.append(Assumption(
            "staff_per_month", inputs.staff_per_month,
            f"{settings.value('staff_per_node_month')} per node x "
            f"{settings.nodes_for(gpus)} node(s): {settings.source('staff_per_node_month')}"))
    return assumptions


def _verdict_json(inputs: OwnershipInputs, result: OwnershipResult,
                  currency: str) -> dict[str, Any]:
    """The verdict and the figures it rests on, the first keys of the document: paybacks
    beyond the horizon null with a flag, a breakeven utilization outside 0-100 % bounded."""
    horizon = inputs.horizon_months
    chosen = verdict(inputs, result)
    breakeven, breakeven_bound = bound_utilization(result.breakeven_utilization)
    payback_inside = payback_within(result.payback_months, horizon)
    discounted_inside = payback_within(result.discounted_payback_month, horizon)
    return {
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
    }


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
    cloud_price_trend: Decimal | None = None, trend_source: str | None = None,
) -> BreakevenDocument:
    """Rent vs buy for `bought` against `cloud_price_per_hour` (for all `gpus`); inputs left
    None come from the defaults and are listed as assumptions. `offer` is where a stored
    cloud price came from and `comparator` names it (default: the offer, or 'given price').

    The verdict is the NPV's sign at `utilization`; paybacks beyond the horizon are null
    with a flag; breakeven utilizations outside 0-100 % read 'never' / 'always'.
    `cloud_price_trend` (a fraction per year) moves the rental price along the horizon;
    `trend_source` says where it came from (given, or the forecast it was read from)."""
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
    assumptions = _assumptions(settings, bought, inputs, given, gpus)

    trend = cloud_price_trend or Decimal(0)
    if trend:
        inputs = replace(inputs, cloud_price_trend=trend)
    result = evaluate(inputs)
    table = sensitivity(inputs, settings.sensitivity_ranges())
    warnings = list(result.warnings)
    if residual_fraction is None and inputs.horizon_months != _DEFAULT_RESIDUAL_HORIZON:
        warnings.append("the residual default (20%) is stated for 36 months; pass "
                        "--residual-fraction for a different horizon")

    if comparator is None:
        comparator = describe_offer(offer) if offer is not None else "given price"
    data: dict[str, Any] = {
        **_verdict_json(inputs, result, currency),
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
        "hours_per_month": inputs.hours_per_month,
        "discount_rate": inputs.discount_rate,
        "offer": offer_json(offer),
        "assumptions": assumptions,
        "warnings": warnings,
        "cloud_price_trend_pct_per_year": float(trend * 100),
        "cloud_price_trend_source": trend_source or ("given" if trend else
                                                     "none: today's price for the horizon"),
        "last_monthly_cloud_cost": money_out(result.last_monthly_cloud_cost
                                             if result.last_monthly_cloud_cost is not None
                                             else result.monthly_cloud_cost),
        "trend_sensitivity": trend_sensitivity(inputs),
    }
    if depreciation is not None:
        years = depreciation_years or max(1, round(inputs.horizon_months / 12))
        schedule = finance.depreciation_schedule(
            depreciation, bought.capex, result.residual_value, years)
        data["depreciation"] = {"method": depreciation, "years": len(schedule),
                                "per_year": [money_out(x) for x in schedule]}
    return BreakevenDocument(data, inputs, result, table)


def trend_sensitivity(inputs: OwnershipInputs) -> list[dict[str, Any]]:
    """Breakeven utilization, NPV and verdict at each trend of TREND_POINTS (and the one
    used), the other inputs as given: how far the answer depends on where the market goes."""
    points = sorted({*TREND_POINTS, inputs.cloud_price_trend})
    rows = []
    for trend in points:
        changed = replace(inputs, cloud_price_trend=trend)
        result = evaluate(changed)
        share, bound = bound_utilization(result.breakeven_utilization)
        rows.append({"trend_pct_per_year": float(trend * 100),
                     "breakeven_utilization": ratio_out(share), "breakeven_bound": bound,
                     "npv": money_out(result.npv), "verdict": verdict(changed, result)})
    return rows


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
    npv = format_money(abs(result.npv), currency)
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
