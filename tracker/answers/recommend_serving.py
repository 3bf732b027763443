"""A serve workload's recommendation: the cheapest deployment per million output tokens that
meets its service level and carries its load, the one-GPU vs cluster table, every TP plan of
the recommended GPUs, the seed article's 2x H200 vs 4x A100 80 GB, spot (not recommended for
24/7 serving) and rent vs buy.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.offers import joinable
from tracker.answers.recommend_shared import offer_fields, rent_vs_buy, sizing_summary
from tracker.answers.workloads import Workload
from tracker.core.errors import InvalidInput, NotFound
from tracker.core.gpus import gpu_name

if TYPE_CHECKING:
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow

# The seed article's serving question, answered for every serve workload with the week's prices.
VERSUS = (("h200", 2), ("a100-80gb", 4))



def _serving_spec(workload: Workload, **override: Any) -> Any:
    from tracker.sizing.serving import ServingSpec

    return ServingSpec(**{**workload.serve, **override})



def _serving_option(workload: Workload, choice: Any) -> dict[str, Any]:
    """One priced serving deployment as the report shows it."""
    from tracker.economics.serving import PER_TOKEN_PLACES
    from tracker.economics.units import money_out, sig

    offer, served, cost = choice.offer, choice.served, choice.cost
    point, plan = served.point, served.chosen
    hours = Decimal(repr(workload.hours_per_month or 730.0))
    monthly = offer.price_per_gpu_hour * choice.count * hours
    return {
        **offer_fields(choice.gpu, choice.count, choice.instances, offer),
        # A replica's layout as the training plans name theirs: TP x PP (pipeline stages
        # across nodes where no node holds it), its attention-DP group and the experts' EP.
        "plan": {"tensor_parallel": plan.tensor_parallel,
                 "pipeline_parallel": plan.pipeline_parallel, "data_parallel": plan.replicas,
                 "attention_data_parallel": plan.attention_data_parallel,
                 "expert_parallel": plan.expert_parallel},
        "wall_hours": None, "billed_hours": None, "meets_deadline": None,
        "cost": money_out(monthly), "monthly_cost": money_out(monthly),
        "formula": (f"{choice.count} GPUs × price per GPU-hour × "
                    f"{workload.hours_per_month:g} h; per million output tokens = price × "
                    "GPUs ÷ output tokens per hour × 10⁶"),
        "cost_per_million_output_tokens": money_out(cost.cost_per_million_output_tokens,
                                                    PER_TOKEN_PLACES),
        "cost_per_million_output_tokens_at_load": money_out(
            cost.cost_per_million_output_tokens_at_load, PER_TOKEN_PLACES),
        "cost_per_request": money_out(cost.cost_per_request, PER_TOKEN_PLACES),
        "tensor_parallel": plan.tensor_parallel, "replicas": plan.replicas,
        "concurrency": point.concurrency, "tokens_per_s_per_user": sig(1.0 / point.tpot_s, 4),
        "tpot_s": sig(point.tpot_s, 4), "ttft_s": sig(point.ttft_s, 4),
        "output_tokens_per_s": sig(served.output_tokens_per_s, 6),
        "meets_load": served.meets_load, "calibrated": served.calibration.calibrated,
        "billed_gpus": choice.billed_gpus, "instance_share": choice.share_note,
        "serving": served.to_json(),
    }



def _serving_choices(workload: Workload, rows: Sequence[PriceRow], settings: EconomicsSettings,
                     spec: Any, gpu_counts: Sequence[int] | None = None,
                     cheapest_only: bool = False) -> tuple[list, list]:
    from tracker.answers.candidates import serving_options

    sizing = {k: v for k, v in workload.sizing.items() if k != "tokens"}
    return serving_options([r for r in rows if r.category == "on-demand"], sizing, spec,
                           max_gpus=workload.max_gpus,
                           hours_per_month=settings.value("hours_per_month"),
                           gpu_counts=gpu_counts, cheapest_only=cheapest_only)



def evaluate_serving(workload: Workload, rows: Sequence[PriceRow], settings: EconomicsSettings,
                     *, best_only: bool = False) -> dict[str, Any]:
    """A serve workload: the cheapest per million output tokens that meets its service level
    (and carries its load), with throughput, latency and the monthly cost; the one-GPU vs
    cluster table by $/M tokens; and the seed's 2× H200 vs 4× A100 80 GB with this week's
    prices."""
    from tracker.sizing import SizingRequest, size_workload

    sizing = {k: v for k, v in workload.sizing.items() if k != "tokens"}
    size_workload(SizingRequest(**sizing))  # a wrong model or setting is the workload's error
    spec = _serving_spec(workload)
    # best_only: the first option alone is used (options that cannot rank first are left out).
    found, skipped = _serving_choices(workload, rows, settings, spec, cheapest_only=best_only)
    if not found:
        detail = f" ({'; '.join(skipped[:2])})" if skipped else ""
        return {"name": workload.name, "workload": workload.describe(), "best": None,
                "options_considered": 0,
                "note": f"no priced on-demand GPU up to {workload.max_gpus} serves it at its "
                        f"service level{detail}"}
    # Only the options the report shows become its dicts (a 50,000-offer store has
    # thousands of options): the best, the fewest GPUs, the fastest, the first on one GPU.
    shown: dict[int, dict[str, Any]] = {}

    def option(at: int) -> dict[str, Any]:
        if at not in shown:
            shown[at] = _serving_option(workload, found[at])
        return shown[at]

    best = option(0)
    result: dict[str, Any] = {"name": workload.name, "workload": workload.describe(),
                              "best": best, "meets_deadline": None}
    if best_only:
        return result
    from tracker.economics.units import sig

    at = range(len(found))
    fewest = option(min(at, key=lambda i: (found[i].count, i)))
    # By the TPOT the option shows (to 4 significant figures), then the ranking.
    fastest = option(min(at, key=lambda i: (sig(found[i].served.point.tpot_s, 4), i)))
    single_at = next((i for i in at if found[i].count == 1), None)
    single = option(single_at) if single_at is not None else None
    single_note = ""
    if single is None:
        try:
            from tracker.sizing.serving import serve

            serve(SizingRequest(gpu=best["gpu"], count=1, **sizing), spec)
            single_note = "no 1-GPU offer is priced"
        except (InvalidInput, NotFound) as exc:
            single_note = str(exc)
    sized = size_workload(SizingRequest(gpu=best["gpu"], count=best["count"], **sizing))
    result.update({
        "options_considered": len(found),
        "fewest_gpus": fewest, "fastest": fastest, "single_gpu": single,
        "single_gpu_note": single_note,
        "serving_plans": _plan_costs(best),
        "versus": _versus(workload, rows, settings),
        "sizing": sizing_summary(sized),
        "spot": _serving_spot(workload, best, rows),
        "rent_vs_buy": rent_vs_buy(workload, best, rows, settings),
        "skipped": skipped[:5],
    })
    return result



def _plan_costs(best: dict[str, Any]) -> list[dict[str, Any]]:
    """Every TP plan of the recommended GPUs at the recommended offer's price, by $/M."""
    from tracker.economics.serving import PER_TOKEN_PLACES
    from tracker.economics.units import money_out

    price, count = best["price_per_gpu_hour"], best["count"]
    out = []
    for plan in best["serving"]["plans"]:
        per_m = None
        if plan["meets_slo"] and plan["output_tokens_per_s"]:
            per_m = money_out(price * count / (Decimal(repr(plan["output_tokens_per_s"]))
                                               * 3600) * 1_000_000, PER_TOKEN_PLACES)
        out.append({**plan, "cost_per_million_output_tokens": per_m})
    return sorted(out, key=lambda p: (p["cost_per_million_output_tokens"] is None,
                                      p["cost_per_million_output_tokens"] or 0))



def _versus(workload: Workload, rows: Sequence[PriceRow],
            settings: EconomicsSettings) -> dict[str, Any]:
    """2× H200 vs 4× A100 80 GB: at the workload's service level and at max throughput."""
    sides = []
    for gpu, count in VERSUS:
        gpu_rows = [r for r in rows if r.gpu == gpu]
        side: dict[str, Any] = {"gpu": gpu, "gpu_name": gpu_name(gpu), "count": count}
        for label, spec in (("at_slo", _serving_spec(workload)),
                            ("max_throughput", _serving_spec(
                                workload, concurrency=None, max_tpot_ms=None,
                                min_tokens_per_s_per_user=None,
                                max_ttft_ms=None, requests_per_day=None,
                                output_tokens_per_day=None))):
            found, skipped = _serving_choices(workload, gpu_rows, settings, spec,
                                              gpu_counts=[count])
            side[label] = _serving_option(workload, found[0]) if found else None
            if not found:
                side[f"{label}_note"] = _versus_note(gpu_rows, gpu, count, skipped)
        sides.append(side)
    verdict: dict[str, str | None] = {}
    for label in ("at_slo", "max_throughput"):
        priced = [s for s in sides if s[label] is not None]
        if len(priced) == 2:
            cheaper = min(priced, key=lambda s: Decimal(
                s[label]["cost_per_million_output_tokens"]))
            verdict[label] = f"{cheaper['count']}× {cheaper['gpu_name']}"
        else:
            verdict[label] = None
    return {"sides": sides, "cheaper": verdict}



def _versus_note(rows: Sequence[PriceRow], gpu: str, count: int,
                 skipped: Sequence[str]) -> str:
    """Why one side of the comparison has no price, in a reader's words (never the sizing
    engine's message: the report goes to finance)."""
    name = gpu_name(gpu)
    sizes = sorted({int(float(r.gpu_count)) for r in rows if r.category == "on-demand"})
    if not sizes:
        return f"no on-demand {name} offer is priced this week"
    if max(sizes) < count and not any(joinable(r, 2) for r in rows
                                      if r.category == "on-demand"):
        listed = ", ".join(str(n) for n in sizes)
        return (f"no on-demand offer holds {count}× {name} in one node this week (priced "
                f"instances have {listed} GPU{'s' if sizes != [1] else ''}, and no cluster "
                "network joins them)")
    if any("service level" in line for line in skipped):
        return f"{count}× {name} does not meet the service level"
    return f"{count}× {name} cannot hold the model and one request at this context"


def _serving_spot(workload: Workload, best: dict[str, Any],
                  rows: Sequence[PriceRow]) -> dict[str, Any]:
    from tracker.economics.cost import tiling_offer
    from tracker.economics.units import ratio_out

    spot_rows = [r for r in rows if r.gpu == best["gpu"] and r.category in ("spot", "bid")]
    tiled = tiling_offer(spot_rows, float(best["count"]))
    note = ("not recommended: 24/7 serving cannot checkpoint its way through interruptions; "
            "a reclaimed instance drops traffic")
    if tiled is None:
        return {"available": False, "note": note}
    offer, _ = tiled
    saving = 1 - offer.price_per_gpu_hour / best["price_per_gpu_hour"]
    return {"available": False, "note": note, "provider": offer.provider,
            "price_per_gpu_hour": offer.price_per_gpu_hour,
            "price_savings_fraction": ratio_out(saving, 4)}

