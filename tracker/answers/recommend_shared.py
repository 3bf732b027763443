"""What every recommended option carries, training or serving: the offer's keys, the sizing
summary, and rent vs buy for the recommended GPUs (answered as `gpu-tracker breakeven` answers
it).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.workloads import Workload
from tracker.core.errors import InvalidInput
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow


def offer_fields(gpu: str, count: int, instances: int, offer: Any) -> dict[str, Any]:
    """The keys every recommended option carries about the GPUs and the stored offer priced
    (training and serving options alike)."""
    return {
        "gpu": gpu, "gpu_name": gpu_name(gpu), "count": count,
        "gpu_count": float(offer.gpu_count), "instances": instances,
        "provider": offer.provider, "region": offer.region, "zone": offer.zone,
        "instance_type": offer.instance_type, "category": offer.category,
        "offer_id": offer.offer_id, "source": offer.source,
        "price_per_gpu_hour": offer.price_per_gpu_hour,
        "price_observed_at": offer.observed_at,
    }



def sizing_summary(sized: Any) -> dict[str, Any]:
    from tracker.economics.units import sig

    return {
        "params": sized.params, "total_bytes": sized.total_bytes,
        "per_gpu_bytes": sized.per_gpu_bytes, "usable_gpu_bytes": sized.usable_gpu_bytes,
        "gpus_needed": sized.gpus_needed, "tensor_parallel": sized.tensor_parallel,
        "pipeline_parallel": sized.pipeline_parallel, "data_parallel": sized.data_parallel,
        "flops": sig(sized.flops), "mfu": sig(sized.mfu, 4), "mfu_source": sized.mfu_source,
        "peak_tflops": sig(sized.peak_tflops), "wall_hours": sig(sized.wall_hours),
        "gpu_hours": sig(sized.gpu_hours), "warnings": list(sized.warnings),
    }



def rent_vs_buy_utilization(workload: Workload, best: dict[str, Any],
                            settings: EconomicsSettings) -> tuple[Decimal, str]:
    """The workload's utilization of owned GPUs (configured, from hours online, or from runs
    per month × the run's billed hours), exact, so that the month of cloud in rent vs buy is
    the recommendation's monthly cost to the cent and the CLI can be asked the same."""
    from tracker.economics.units import dec

    hours_per_month = settings.value("hours_per_month")
    horizon = settings.integer("horizon_months")
    wall = float(best["wall_hours"] or 0.0)  # serving: no run, paid per hour online
    billed = dec(best.get("billed_hours") or best["wall_hours"] or 0, "billed hours")
    if workload.utilization is not None:
        utilization, basis = dec(workload.utilization, "utilization"), "configured"
    elif workload.serving:
        utilization = dec(workload.hours_per_month or 730.0, "hours") / hours_per_month
        basis = f"{workload.hours_per_month:g} h online per month"
    elif workload.runs_per_month:
        utilization = dec(workload.runs_per_month, "runs") * billed / hours_per_month
        basis = f"{workload.runs_per_month:g} runs × {wall:,.4g} h per month"
    else:
        utilization = billed / (horizon * hours_per_month)
        basis = f"one {wall:,.4g} h run over the {horizon}-month horizon"
    return min(Decimal(1), max(utilization, Decimal("0.000001"))), basis



def rent_vs_buy(workload: Workload, best: dict[str, Any], rows: Sequence[PriceRow],
                 settings: EconomicsSettings) -> dict[str, Any]:
    """Rent vs buy for the recommended GPUs, answered by `breakeven_document` exactly as
    `gpu-tracker breakeven --gpu G --count N --utilization u --as-of <report>` answers it:
    the same capex and power defaults and the same comparable cloud offer."""
    from tracker.answers.breakeven_documents import (
        breakeven_document,
        comparable_offer,
        hardware_costs,
    )
    from tracker.answers.offers import describe_offer

    gpu, count = best["gpu"], Decimal(best["count"])
    try:
        bought = hardware_costs(settings, gpu=gpu, gpus=count, capex=None,
                                networking_per_gpu=None, storage=Decimal(0),
                                install=Decimal(0), power_kw=None)
    except InvalidInput:
        # A sentence for the reader, not the CLI's flag advice: what is missing and where
        # the report would take it from.
        if settings.capex_per_gpu(gpu) is not None:
            return {"available": False, "reason": "no_power",
                    "note": f"Left out: the rated power of a {gpu_name(gpu)} server is not "
                            f"known; set [economics.node_power_kw] {gpu} in the "
                            "configuration to compare owning these GPUs with renting them"}
        known = settings.capex_gpus()
        have = (f"bundled purchase prices cover {', '.join(gpu_name(g) for g in known)}"
                if known else "no purchase prices are bundled")
        return {"available": False, "reason": "no_capex",
                "note": f"Left out: the purchase price of {gpu_name(gpu)} is not known "
                        f"({have}; data/economics.json, with their sources). Set "
                        f"[economics.capex_per_gpu] {gpu} in the configuration to compare "
                        "owning these GPUs with renting them"}
    on_demand = [r for r in rows if r.gpu == gpu and r.category == "on-demand"]
    chosen = comparable_offer(on_demand, float(count))
    chosen_by = "comparable"
    if chosen is None:
        # No one-node offer with these GPUs: compare with the recommended run's own offer
        # and say so (the CLI's `--offer <offer_id>` asks the same question).
        recommended = [r for r in on_demand if r.offer_id == best["offer_id"]]
        if not recommended:
            return {"available": False,
                    "note": f"no on-demand offer holds {count}x {best['gpu_name']} in one "
                            "node to compare owning with"}
        chosen, chosen_by = (recommended[0], best["instances"]), "recommended"
    offer, instances = chosen
    comparator = describe_offer(offer, instances)
    if chosen_by == "recommended":
        comparator += (f", the recommended run's offer (no on-demand offer holds {count} "
                       "GPUs in one node)")
    utilization, basis = rent_vs_buy_utilization(workload, best, settings)
    answer = breakeven_document(
        settings, bought, gpus=count, cloud_price_per_hour=offer.price_per_gpu_hour * count,
        utilization=utilization, currency=offer.currency, offer=offer,
        comparator=comparator)
    data, inputs = answer.data, answer.inputs
    return {
        "available": True,
        **{key: data[key] for key in (
            "verdict", "verdict_reason", "npv", "payback_months", "payback_within_horizon",
            "discounted_payback_month", "breakeven_utilization", "breakeven_bound",
            "monthly_onprem_opex", "monthly_power", "monthly_colo", "monthly_staff",
            "monthly_other_opex", "monthly_cloud_cost", "owned_cost_per_gpu_hour",
            "irr_annual", "comparator", "warnings", "cloud_price_trend_pct_per_year",
            "cloud_price_trend_source", "trend_sensitivity")},
        "utilization": utilization, "utilization_basis": basis,
        "offer_id": offer.offer_id, "comparator_chosen_by": chosen_by,
        "inputs": {
            "capex": bought.capex,
            "assumptions": [{"name": a.name, "value": a.value, "source": a.source}
                            for a in data["assumptions"]],
            "cloud_price_per_hour": inputs.cloud_price_per_hour, "gpus": count,
            "horizon_months": inputs.horizon_months, "hours_per_month": inputs.hours_per_month,
            "pue": inputs.pue, "kwh_price": inputs.kwh_price,
            "colo_per_kw_month": inputs.colo_per_kw_month,
            "staff_per_month": inputs.staff_per_month,
            "other_opex_per_month": inputs.other_opex_per_month,
            "residual_fraction": inputs.residual_fraction,
            "discount_rate": inputs.discount_rate, "power_factor": inputs.power_factor,
            "power_kw": inputs.power_kw,
        },
    }

