"""Recommendations for the workloads configured in `[report] workloads`.

For each workload the sizing engine (tracker.sizing) sizes every priced GPU at every GPU count
the offers can tile, and the economics engine (tracker.economics) prices it:

- the cheapest way to run it (GPU, count, provider, on-demand) that meets its deadline, with
  wall time and cost; the fewest-GPU and the fastest option beside it (one GPU vs cluster);
- spot with checkpoints (Daly's interval and expected wall time, MTTI from the stored
  interruption band or the provider default) against that on-demand run;
- rent vs buy for the recommended GPUs at the workload's utilization: verdict, payback months,
  breakeven utilization, NPV.

Every figure carries its inputs (the `inputs` of each part), which the report's appendix
prints. Pure: prices and interruption bands come in as arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store import PriceRow

log = logging.getLogger(__name__)

KINDS = {  # config word -> sizing workload
    "finetune": "full-finetune", "full-finetune": "full-finetune", "lora": "lora",
    "qlora": "qlora", "pretrain": "pretrain", "serve": "inference", "inference": "inference",
}
DEFAULT_DEADLINE_HOURS = {"full-finetune": 24.0, "lora": 24.0, "qlora": 24.0,
                          "pretrain": 720.0}
DEFAULT_CHECKPOINT_MINUTES = 10.0
DEFAULT_RESTART_MINUTES = 15.0
# A serve workload's shape, service level and load (tracker.sizing.serving.ServingSpec).
SERVE_KEYS = ("prompt_tokens", "output_tokens", "concurrency", "max_tpot_ms",
              "min_tokens_per_s_per_user", "max_ttft_ms", "requests_per_day",
              "output_tokens_per_day")
# The seed article's serving question, answered for every serve workload with the week's prices.
VERSUS = (("h200", 2), ("a100-80gb", 4))
_SIZING_FIELDS = None


def _sizing_fields() -> frozenset[str]:
    global _SIZING_FIELDS
    if _SIZING_FIELDS is None:
        from tracker.sizing import SizingRequest

        _SIZING_FIELDS = frozenset(f.name for f in fields(SizingRequest)) - {"gpu", "count"}
    return _SIZING_FIELDS


@dataclass(frozen=True)
class Workload:
    name: str
    workload: str  # the sizing engine's workload
    sizing: dict[str, Any]  # SizingRequest fields (model, tokens, context, ...)
    deadline_hours: float | None
    runs_per_month: float
    hours_per_month: float | None  # serving: hours online per month
    utilization: float | None  # rent vs buy; None = derived from runs or hours
    checkpoint_minutes: float
    restart_minutes: float
    max_gpus: int
    serve: dict[str, Any] = field(default_factory=dict)  # ServingSpec fields (shape, SLO, load)

    @property
    def serving(self) -> bool:
        return self.workload == "inference"

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Workload:
        raw = dict(raw)
        name = str(raw.pop("name", "") or "")
        kind = str(raw.pop("kind", raw.pop("workload", "")) or "")
        if kind not in KINDS:
            raise InvalidInput(f"workload {name or '?'}: kind must be one of "
                               f"{', '.join(sorted(KINDS))}, got {kind!r}")
        workload = KINDS[kind]
        deadline = raw.pop("deadline_hours", DEFAULT_DEADLINE_HOURS.get(workload))
        runs = float(raw.pop("runs_per_month", 0) or 0)
        hours = raw.pop("hours_per_month", None)
        utilization = raw.pop("utilization", None)
        checkpoint = float(raw.pop("checkpoint_minutes", DEFAULT_CHECKPOINT_MINUTES))
        restart = float(raw.pop("restart_minutes", DEFAULT_RESTART_MINUTES))
        max_gpus = int(raw.pop("max_gpus", 64))
        extra = raw.pop("sizing", {}) or {}
        sizing = {**raw, **dict(extra)}
        serve = {k: sizing.pop(k) for k in SERVE_KEYS if k in sizing}
        unknown = sorted(set(sizing) - _sizing_fields())
        if unknown:
            raise InvalidInput(f"workload {name or kind}: unknown setting(s) {', '.join(unknown)}")
        sizing = _workload_fields(sizing, serve, workload, name or kind)
        if workload != "inference" and not sizing.get("tokens"):
            raise InvalidInput(f"workload {name or kind}: training needs `tokens`")
        if workload == "inference":
            hours = float(hours) if hours is not None else 730.0
        sizing["workload"] = workload
        if not name:
            name = f"{kind} {sizing.get('model') or sizing.get('params')}"
        return cls(name=name, workload=workload, sizing=sizing,
                   deadline_hours=float(deadline) if deadline else None,
                   runs_per_month=runs, hours_per_month=hours,
                   utilization=float(utilization) if utilization is not None else None,
                   checkpoint_minutes=checkpoint, restart_minutes=restart, max_gpus=max_gpus,
                   serve=serve)

    def describe(self) -> dict[str, Any]:
        return {
            "serve": dict(sorted(self.serve.items())),
            "name": self.name, "workload": self.workload, "sizing": dict(sorted(
                self.sizing.items())), "deadline_hours": self.deadline_hours,
            "runs_per_month": self.runs_per_month, "hours_per_month": self.hours_per_month,
            "utilization": self.utilization, "checkpoint_minutes": self.checkpoint_minutes,
            "restart_minutes": self.restart_minutes, "max_gpus": self.max_gpus,
        }


def _workload_fields(sizing: dict[str, Any], serve: dict[str, Any], workload: str,
                     name: str) -> dict[str, Any]:
    """The sizing fields of a configured workload, through the same function the CLI's
    workload options go through (`tracker.commands.workload.workload_request`): the same
    serving-only checks, and a serve workload's memory held at its request shape."""
    from tracker.commands.workload import workload_request
    from tracker.sizing.serving import check_spec, request_shape

    try:
        fields, spec = workload_request({**sizing, **serve, "workload": workload})
        if workload == "inference":
            check_spec(spec)
            request_shape(spec, fields.get("context"))
    except InvalidInput as exc:
        raise InvalidInput(f"workload {name}: {exc}") from None
    return fields


# --------------------------------------------------------------------------------------------


def recommendations(
    workloads: Sequence[Mapping[str, Any]], rows_now: Sequence[PriceRow],
    rows_prev: Sequence[PriceRow], options: Any,
    bands: Mapping[tuple[str, str, str], Any] | None = None,
) -> dict[str, Any]:
    """The recommendations section: one entry per workload, plus the changes since last week
    for the executive summary."""
    from tracker.economics.defaults import EconomicsSettings

    settings = EconomicsSettings(options.economics or None)
    currency = options.currency
    now = [r for r in rows_now if r.currency == currency]
    prev = [r for r in rows_prev if r.currency == currency]
    entries: list[dict[str, Any]] = []
    changes = []
    for raw in workloads:
        try:
            workload = Workload.parse(raw)
        except (InvalidInput, TypeError, ValueError) as exc:
            entries.append({"name": str(raw.get("name", "?")), "error": str(exc)})
            continue
        try:
            entry = evaluate_workload(workload, now, settings, bands or {})
            before = evaluate_workload(workload, prev, settings, bands or {}, best_only=True)
        except (InvalidInput, NotFound) as exc:
            entries.append({"name": workload.name, "error": str(exc),
                            "workload": workload.describe()})
            continue
        entry["previous_best"] = before.get("best")
        change = _change(workload, entry.get("best"), before.get("best"))
        entry["change"] = change
        changes.append(change)
        entries.append(entry)
    return {"currency": currency, "workloads": entries, "changes": changes}


def _change(workload: Workload, now: dict | None, before: dict | None) -> dict[str, Any]:
    def pick(option: dict | None) -> dict[str, Any] | None:
        if option is None:
            return None
        return {k: option[k] for k in ("gpu", "gpu_name", "count", "gpu_count", "provider",
                                       "category", "cost")}

    key = ("gpu", "count", "provider")
    changed = bool(now and before and any(now[k] != before[k] for k in key))
    return {
        "kind": "recommendation", "workload": workload.name,
        "basis": "month" if workload.serving else "run", "now": pick(now),
        "previous": pick(before), "changed": changed,
        "cost_change": (now["cost"] - before["cost"]) if now and before else None,
    }


def _size(workload: Workload, gpu: str, count: int) -> Any:
    from tracker.sizing import SizingRequest, size_workload

    return size_workload(SizingRequest(gpu=gpu, count=count, **workload.sizing))


def evaluate_workload(
    workload: Workload, rows: Sequence[PriceRow], settings: EconomicsSettings,
    bands: Mapping[tuple[str, str, str], Any], *, best_only: bool = False,
) -> dict[str, Any]:
    """Size and price every (GPU, count, provider) option; pick the recommendation."""
    if workload.serving:
        return evaluate_serving(workload, rows, settings, best_only=best_only)
    from tracker.answers.candidates import priced_options
    from tracker.economics.units import money_out, sig
    from tracker.sizing import SizingRequest, size_workload

    # A wrong model name or setting is the workload's error, not "nothing fits".
    size_workload(SizingRequest(**{k: v for k, v in workload.sizing.items() if k != "tokens"}))
    absent: list[str] = []
    found, skipped = priced_options(
        [r for r in rows if r.category == "on-demand"], workload.sizing,
        billing=settings.billing, max_gpus=workload.max_gpus, absent=absent)
    options: list[dict[str, Any]] = []
    for choice in found:
        offer, sized, count = choice.offer, choice.sized, choice.count
        wall = choice.wall_hours
        option = {
            **_offer_fields(choice.gpu, count, choice.instances, offer),
            "plan": {"tensor_parallel": sized.tensor_parallel,
                     "pipeline_parallel": sized.pipeline_parallel,
                     "data_parallel": sized.data_parallel},
            "mfu": sig(sized.mfu, 4),
            "scaling_efficiency": sig(sized.scaling_efficiency, 4),
            "wall_hours": sig(wall),
        }
        run, rule = choice.run, choice.billing  # (serve workloads: evaluate_serving)
        monthly = run.cost * Decimal(repr(workload.runs_per_month))
        option.update(
            cost=money_out(run.cost),
            monthly_cost=money_out(monthly) if workload.runs_per_month else None,
            billed_hours=run.billed_hours,
            billing={"granularity_seconds": rule.granularity_seconds,
                     "minimum_seconds": rule.minimum_seconds,
                     "source": choice.billing_source},
            meets_deadline=(wall <= workload.deadline_hours
                            if workload.deadline_hours else None),
            formula=f"{count} GPUs × price per GPU-hour × billed hours")
        option["_exact"] = choice.run.cost
        option["_sized"] = sized
        options.append(option)
    if not options:
        detail = f" ({'; '.join(skipped[:2])})" if skipped else ""
        return {"name": workload.name, "workload": workload.describe(), "best": None,
                "options_considered": 0,
                "note": f"no priced on-demand GPU up to {workload.max_gpus} fits{detail}"}

    def by_cost(o: dict[str, Any]) -> tuple:
        return (o["_exact"], o["wall_hours"], o["gpu"], o["count"], o["provider"],
                o["region"], o["instance_type"])

    eligible = [o for o in options if o["meets_deadline"] is not False]
    fastest = min(options, key=lambda o: (o["wall_hours"], *by_cost(o)))
    best = min(eligible, key=by_cost) if eligible else fastest
    cheapest = min(options, key=by_cost)
    # Deadline-aware: say when the cheapest run misses the deadline (and which one meets it).
    cheapest_misses = cheapest if (cheapest is not best and cheapest["meets_deadline"] is False
                                   and cheapest["cost"] < best["cost"]) else None
    fewest = min(options, key=lambda o: (o["count"], *by_cost(o)))
    singles = [o for o in options if o["count"] == 1]
    single = min(singles, key=by_cost) if singles else None
    best_sized = best["_sized"]
    for option in options:
        option.pop("_exact")
        option.pop("_sized")
    result: dict[str, Any] = {"name": workload.name, "workload": workload.describe(),
                              "best": best, "meets_deadline": bool(eligible),
                              "cheapest_misses_deadline": cheapest_misses}
    if best_only:
        return result
    single_note = None
    if not single:
        try:
            single_note = _size(workload, best["gpu"], 1).reason
        except (InvalidInput, NotFound) as exc:
            single_note = str(exc)
    sized = best_sized
    result.update({
        "options_considered": len(options),
        "fewest_gpus": fewest, "fastest": fastest,
        "single_gpu": single,
        "single_gpu_note": single_note or ("" if single else "no 1-GPU offer is priced"),
        "sizing": _sizing_summary(sized),
        "spot": _spot_plan(workload, best, rows, settings, bands),
        "rent_vs_buy": _rent_vs_buy(workload, best, rows, settings),
        "skipped": skipped[:5],
        "absent": absent[:5],
    })
    return result


def _offer_fields(gpu: str, count: int, instances: int, offer: Any) -> dict[str, Any]:
    """The keys every recommended option carries about the GPUs and the stored offer priced
    (training and serving options alike)."""
    return {
        "gpu": gpu, "gpu_name": _gpu_name(gpu), "count": count,
        "gpu_count": float(offer.gpu_count), "instances": instances,
        "provider": offer.provider, "region": offer.region, "zone": offer.zone,
        "instance_type": offer.instance_type, "category": offer.category,
        "offer_id": offer.offer_id, "source": offer.source,
        "price_per_gpu_hour": offer.price_per_gpu_hour,
        "price_observed_at": offer.observed_at,
    }


def _gpu_name(gpu: str) -> str:
    from reports.sections.common import gpu_name

    return gpu_name(gpu)


def _sizing_summary(sized: Any) -> dict[str, Any]:
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


def _spot_plan(workload: Workload, best: dict[str, Any], rows: Sequence[PriceRow],
               settings: EconomicsSettings,
               bands: Mapping[tuple[str, str, str], Any]) -> dict[str, Any]:
    """Spot with checkpoints for the recommended GPU: every spot or bid offer whose instances
    can make up the plan (the recommended count, or the next multiple of a larger instance,
    sized again for that count), planned by the same `spot_document` as `gpu-tracker spot`.
    The cheapest viable plan wins; its saving is against the recommended on-demand run."""
    from tracker.answers.candidates import priced_options
    from tracker.answers.documents import (
        band_mtti,
        spot_candidates,
        spot_document,
        spot_rank,
    )
    from tracker.economics.spot import SpotInputs
    from tracker.economics.units import money_out, ratio_out

    count = best["count"]
    spot_rows = [r for r in rows if r.gpu == best["gpu"] and r.category in ("spot", "bid")]
    if not spot_rows:
        return {"available": False,
                "note": f"no spot or bid offer for {best['gpu_name']} this week"}
    by_count: dict[int, list[PriceRow]] = {}
    for row, need, _instances in spot_candidates(spot_rows, count):
        by_count.setdefault(need, []).append(row)
    plans: list[tuple[Any, dict[str, Any], PriceRow]] = []
    notes: list[str] = []
    for need, group in sorted(by_count.items()):
        found, skipped = priced_options(group, workload.sizing, billing=settings.billing,
                                        max_gpus=need, gpu_counts=[need])
        notes.extend(skipped[:1])
        if not found:
            notes.append(f"the job does not fit {need}x {best['gpu_name']} on the spot "
                         "offers' instances")
        for choice in found:
            offer = choice.offer
            fact = bands.get((offer.provider, offer.region, offer.instance_type))
            if fact is not None:
                mtti, mtti_source = band_mtti(fact, settings)
            else:
                mtti, mtti_source = settings.default_mtti_hours(offer.provider)
            od_node_price = best["price_per_gpu_hour"] * Decimal(repr(float(offer.gpu_count)))
            inputs = SpotInputs(
                work_hours=choice.wall_hours, mtti_node_hours=mtti,
                checkpoint_hours=workload.checkpoint_minutes / 60.0,
                restart_hours=workload.restart_minutes / 60.0, nodes=choice.instances,
                spot_price_per_node_hour=offer.price_per_hour,
                on_demand_price_per_node_hour=od_node_price,
                deadline_hours=workload.deadline_hours)
            try:
                doc = spot_document(inputs, mtti_source=mtti_source,
                                    currency=offer.currency, spot_offer=offer)
            except InvalidInput as exc:
                notes.append(f"{offer.provider}: {exc}")
                continue
            data, plan = doc.data, doc.plan
            # The difference of the two printed figures, so the report and the CLI agree.
            recommended = best["cost"]
            spot_cost = money_out(plan.spot_cost)
            saving = recommended - spot_cost if spot_cost is not None else None
            plans.append((plan, {
                "provider": offer.provider, "region": offer.region, "zone": offer.zone,
                "instance_type": offer.instance_type, "category": offer.category,
                "offer_id": offer.offer_id, "nodes": choice.instances, "count": need,
                "gpu_count": float(offer.gpu_count),
                "price_per_gpu_hour": offer.price_per_gpu_hour,
                **{key: data[key] for key in (
                    "viable", "not_viable_reason", "expected_wall_hours",
                    "expected_interruptions", "checkpoint_interval_hours",
                    "overhead_fraction", "spot_cost", "on_demand_cost", "savings_fraction",
                    "meets_deadline", "warnings")},
                # Against the recommended on-demand run (its billed cost), not a second
                # on-demand estimate: the two figures a reader compares are the same ones.
                "recommended_on_demand_cost": money_out(recommended),
                "savings": money_out(saving),
                "savings_vs_recommended_fraction": ratio_out(
                    saving / recommended if saving is not None and recommended else None, 4),
                "inputs": {
                    "work_hours": choice.wall_hours, "mtti_node_hours": mtti,
                    "mtti_source": mtti_source,
                    "checkpoint_minutes": workload.checkpoint_minutes,
                    "restart_minutes": workload.restart_minutes, "nodes": choice.instances,
                    "spot_price_per_node_hour": offer.price_per_hour,
                    "on_demand_price_per_node_hour": od_node_price,
                    "deadline_hours": workload.deadline_hours,
                    "model": "Daly (2006) interval and expected wall time",
                },
            }, offer))
    if not plans:
        return {"available": False, "note": "; ".join(notes) or
                f"no spot or bid offer can make up {count}x {best['gpu_name']}"}

    chosen = min(plans, key=lambda item: spot_rank(item[0], item[2]))[1]
    return {"available": True, "considered": len(plans), **chosen}


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


def _rent_vs_buy(workload: Workload, best: dict[str, Any], rows: Sequence[PriceRow],
                 settings: EconomicsSettings) -> dict[str, Any]:
    """Rent vs buy for the recommended GPUs, answered by `breakeven_document` exactly as
    `gpu-tracker breakeven --gpu G --count N --utilization u --as-of <report>` answers it:
    the same capex and power defaults and the same comparable cloud offer."""
    from tracker.answers.documents import (
        breakeven_document,
        comparable_offer,
        describe_offer,
        hardware_costs,
    )

    gpu, count = best["gpu"], Decimal(best["count"])
    try:
        bought = hardware_costs(settings, gpu=gpu, gpus=count, capex=None,
                                networking_per_gpu=None, storage=Decimal(0),
                                install=Decimal(0), power_kw=None)
    except InvalidInput as exc:
        # The CLI's own message (what is missing, which defaults exist), and where the
        # report takes it from instead of a flag.
        return {"available": False,
                "note": f"{exc} (for the report: [economics.capex_per_gpu] and "
                        "[economics.node_power_kw] in the config)"}
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
            "irr_annual", "comparator", "warnings")},
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


# Serving ------------------------------------------------------------------------------------


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
        **_offer_fields(choice.gpu, choice.count, choice.instances, offer),
        "plan": {"tensor_parallel": plan.tensor_parallel, "pipeline_parallel": 1,
                 "data_parallel": plan.replicas},
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
        "serving": served.to_json(),
    }


def _serving_choices(workload: Workload, rows: Sequence[PriceRow], settings: EconomicsSettings,
                     spec: Any, gpu_counts: Sequence[int] | None = None) -> tuple[list, list]:
    from tracker.answers.candidates import serving_options

    sizing = {k: v for k, v in workload.sizing.items() if k != "tokens"}
    return serving_options([r for r in rows if r.category == "on-demand"], sizing, spec,
                           max_gpus=workload.max_gpus,
                           hours_per_month=settings.value("hours_per_month"),
                           gpu_counts=gpu_counts)


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
    found, skipped = _serving_choices(workload, rows, settings, spec)
    if not found:
        detail = f" ({'; '.join(skipped[:2])})" if skipped else ""
        return {"name": workload.name, "workload": workload.describe(), "best": None,
                "options_considered": 0,
                "note": f"no priced on-demand GPU up to {workload.max_gpus} serves it at its "
                        f"service level{detail}"}
    options = [_serving_option(workload, choice) for choice in found]
    best = options[0]
    result: dict[str, Any] = {"name": workload.name, "workload": workload.describe(),
                              "best": best, "meets_deadline": None}
    if best_only:
        return result
    fewest = min(options, key=lambda o: (o["count"], options.index(o)))
    fastest = min(options, key=lambda o: (o["tpot_s"], options.index(o)))
    singles = [o for o in options if o["count"] == 1]
    single = singles[0] if singles else None
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
        "options_considered": len(options),
        "fewest_gpus": fewest, "fastest": fastest, "single_gpu": single,
        "single_gpu_note": single_note,
        "serving_plans": _plan_costs(best),
        "versus": _versus(workload, rows, settings),
        "sizing": _sizing_summary(sized),
        "spot": _serving_spot(workload, best, rows),
        "rent_vs_buy": _rent_vs_buy(workload, best, rows, settings),
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
        side: dict[str, Any] = {"gpu": gpu, "gpu_name": _gpu_name(gpu), "count": count}
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
                side[f"{label}_note"] = (skipped[0] if skipped else
                                         f"no on-demand offer makes up {count}× {gpu}")
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
