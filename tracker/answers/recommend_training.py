"""A training workload's recommendation: every (GPU, count, provider) on-demand run sized and
priced, the cheapest that meets the deadline beside the fewest-GPU and fastest runs, spot with
checkpoints for the recommended GPU, and rent vs buy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.recommend_shared import offer_fields, rent_vs_buy, sizing_summary
from tracker.answers.workloads import Workload
from tracker.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.core.fabric import Override
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow


# Runs within 1% of the cheapest cost the same to a budget (the report's rule, stated with
# the recommendation; not a measured figure): then the fastest of them is the pick.
SAME_COST = Decimal("0.01")
# The cheapest run's share of the deadline above which finishing sooner decides between runs
# of the same cost (the same kind of rule: a run that uses most of its schedule leaves no
# room for a restart).
TIME_MATTERS = 0.5


def _size(workload: Workload, gpu: str, count: int) -> Any:
    from tracker.sizing import SizingRequest, size_workload

    return size_workload(SizingRequest(gpu=gpu, count=count, **workload.sizing))



def _option(choice: Any, workload: Workload) -> dict[str, Any]:
    """One priced run (a `priced_options` choice) as the recommendation lists it."""
    from tracker.economics.units import money_out, sig

    offer, sized, count = choice.offer, choice.sized, choice.count
    wall = choice.wall_hours
    option = {
        **offer_fields(choice.gpu, count, choice.instances, offer),
        "plan": {"tensor_parallel": sized.tensor_parallel,
                 "pipeline_parallel": sized.pipeline_parallel,
                 "data_parallel": sized.data_parallel},
        "mfu": sig(sized.mfu, 4),
        "scaling_efficiency": sig(sized.scaling_efficiency, 4),
        "wall_hours": sig(wall),
        "cluster_network": choice.cluster_network, "override": choice.override,
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
        meets_deadline=_meets_deadline(wall, workload),
        formula=f"{count} GPUs × price per GPU-hour × billed hours")
    return option


def _meets_deadline(wall_hours: float, workload: Workload) -> bool | None:
    return wall_hours <= workload.deadline_hours if workload.deadline_hours else None


@dataclass(eq=False, slots=True)
class _Run:
    """A priced run as the picks compare it: its unrounded cost, its wall hours as the
    option shows them, whether it meets the deadline. Only the runs picked become the
    option dicts the report shows (`shown`): a 50,000-offer store prices thousands."""

    choice: Any  # the priced_options choice
    exact: Decimal
    wall_hours: float
    meets_deadline: bool | None
    option: dict[str, Any] | None = None

    @classmethod
    def of(cls, choice: Any, workload: Workload) -> _Run:
        from tracker.economics.units import sig

        wall = choice.wall_hours  # positive and finite: priced_options times every run
        shown = sig(wall)
        return cls(choice, choice.run.cost, wall if shown is None else shown,
                   _meets_deadline(wall, workload))

    def shown(self, workload: Workload) -> dict[str, Any]:
        if self.option is None:
            self.option = _option(self.choice, workload)
        return self.option


def _by_cost(run: _Run) -> tuple:
    choice = run.choice
    offer = choice.offer
    return (run.exact, run.wall_hours, choice.gpu, choice.count, offer.provider,
            offer.region, offer.instance_type)


def _trade_off(eligible: list[_Run], best: _Run,
               workload: Workload) -> tuple[dict[str, Any] | None, _Run]:
    """(the trade-off said beside the pick, or None; the pick) for time against cost: among
    the runs that meet the deadline, one within SAME_COST of the cheapest (`best`) costs the
    same to a budget. When the cheapest would take more than half the deadline, the fastest
    of those is recommended (16x B200 for 4.2 weeks to save $0.03 against 64x B200 in 7.4
    days is no recommendation); otherwise the cheapest stays, and the faster run is named
    beside it."""
    from tracker.economics.units import money_out, sig

    limit = best.exact * (1 + SAME_COST)
    close = [run for run in eligible if run.exact <= limit]
    quicker = min(close, key=lambda run: (run.wall_hours, *_by_cost(run)))
    if quicker is best or quicker.wall_hours >= best.wall_hours:
        return None, best
    switch = bool(workload.deadline_hours
                  and best.wall_hours > TIME_MATTERS * workload.deadline_hours)
    slower, faster = (best, quicker)
    keys = ("gpu", "gpu_name", "count", "provider", "wall_hours", "cost")
    trade_off = {
        "switched": switch,
        "cheapest": {k: slower.shown(workload)[k] for k in keys},
        "faster": {k: faster.shown(workload)[k] for k in keys},
        "extra_cost": money_out(faster.exact - slower.exact),
        "hours_saved": sig(slower.wall_hours - faster.wall_hours),
        "same_cost_pct": float(SAME_COST * 100),
        "deadline_hours": workload.deadline_hours,
    }
    return trade_off, quicker if switch else best


def evaluate_training(
    workload: Workload, rows: Sequence[PriceRow], settings: EconomicsSettings,
    bands: Mapping[tuple[str, str, str], Any], *, best_only: bool = False,
    overrides: Mapping[str, Override] | None = None,
) -> dict[str, Any]:
    """Size and price every (GPU, count, provider) option; pick the recommendation."""
    from tracker.answers.candidates import priced_options
    from tracker.sizing import SizingRequest, size_workload

    # A wrong model name or setting is the workload's error, not "nothing fits".
    size_workload(SizingRequest(**{k: v for k, v in workload.sizing.items() if k != "tokens"}))
    absent: list[str] = []
    found, skipped = priced_options(
        [r for r in rows if r.category == "on-demand"], workload.sizing,
        billing=settings.billing, max_gpus=workload.max_gpus, overrides=overrides,
        absent=None if best_only else absent)
    runs = [_Run.of(choice, workload) for choice in found]
    if not runs:
        detail = f" ({'; '.join(skipped[:2])})" if skipped else ""
        return {"name": workload.name, "workload": workload.describe(), "best": None,
                "options_considered": 0,
                "note": f"no priced on-demand GPU up to {workload.max_gpus} fits{detail}"}

    eligible = [run for run in runs if run.meets_deadline is not False]
    fastest = min(runs, key=lambda run: (run.wall_hours, *_by_cost(run)))
    pick = min(eligible, key=_by_cost) if eligible else fastest
    trade_off = None
    if eligible:
        trade_off, pick = _trade_off(eligible, pick, workload)
    best = pick.shown(workload)
    cheapest = min(runs, key=_by_cost)
    # Deadline-aware: say when the cheapest run misses the deadline (and which one meets it).
    cheapest_misses = cheapest.shown(workload) if (
        cheapest is not pick and cheapest.meets_deadline is False
        and cheapest.shown(workload)["cost"] < best["cost"]) else None
    result: dict[str, Any] = {"name": workload.name, "workload": workload.describe(),
                              "best": best, "meets_deadline": bool(eligible),
                              "cheapest_misses_deadline": cheapest_misses,
                              "trade_off": trade_off}
    if best_only:
        return result
    fewest = min(runs, key=lambda run: (run.choice.count, *_by_cost(run)))
    singles = [run for run in runs if run.choice.count == 1]
    single = min(singles, key=_by_cost).shown(workload) if singles else None
    single_note = None
    if not single:
        try:
            single_note = _size(workload, best["gpu"], 1).reason
        except (InvalidInput, NotFound) as exc:
            single_note = str(exc)
    result.update({
        "options_considered": len(runs),
        "fewest_gpus": fewest.shown(workload), "fastest": fastest.shown(workload),
        "single_gpu": single,
        "single_gpu_note": single_note or ("" if single else "no 1-GPU offer is priced"),
        "sizing": sizing_summary(pick.choice.sized),
        "spot": _spot_plan(workload, best, rows, settings, bands, overrides),
        "rent_vs_buy": rent_vs_buy(workload, best, rows, settings),
        "skipped": skipped[:5],
        "absent": absent[:5],
    })
    return result



def _spot_plan(workload: Workload, best: dict[str, Any], rows: Sequence[PriceRow],
               settings: EconomicsSettings,
               bands: Mapping[tuple[str, str, str], Any],
               overrides: Mapping[str, Override] | None = None) -> dict[str, Any]:
    """Spot with checkpoints for the recommended GPU: every spot or bid offer whose instances
    can make up the plan (the recommended count, or the next multiple of a larger instance,
    sized again for that count), planned by the same `spot_document` as `gpu-tracker spot`.
    The cheapest viable plan wins; its saving is against the recommended on-demand run."""
    from tracker.answers.candidates import priced_options
    from tracker.answers.documents import node_mtti, spot_candidates, spot_document, spot_rank
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
    plans: list[tuple[Any, dict[str, Any], PriceRow, Any]] = []
    notes: list[str] = []
    for need, group in sorted(by_count.items()):
        found, skipped = priced_options(group, workload.sizing, billing=settings.billing,
                                        max_gpus=need, gpu_counts=[need],
                                        overrides=overrides)
        notes.extend(skipped[:1])
        if not found:
            notes.append(f"the job does not fit {need}x {best['gpu_name']} on the spot "
                         "offers' instances")
        for choice in found:
            offer = choice.offer
            mtti, mtti_source = node_mtti(settings, bands, provider=offer.provider,
                                          region=offer.region, instance_type=offer.instance_type)
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
            }, offer, doc))
    if not plans:
        return {"available": False, "note": "; ".join(notes) or
                f"no spot or bid offer can make up {count}x {best['gpu_name']}"}

    _plan, chosen, _offer, chosen_doc = min(plans, key=lambda item: spot_rank(item[0], item[2]))
    return {"available": True, "considered": len(plans), **chosen,
            "range": _spot_range(chosen_doc)}


def _spot_range(doc: Any) -> dict[str, Any]:
    """The chosen spot plan simulated (`gpu-tracker spot ... --simulate N` at the report's
    replicas and seed): P50/P90 of cost and wall time, the chance of the deadline."""
    from tracker.answers.spot_ranges import DEFAULT_SEED, REPORT_REPLICAS, simulation_document

    try:
        sim = simulation_document(doc, replicas=REPORT_REPLICAS, seed=DEFAULT_SEED)
    except InvalidInput as exc:
        return {"available": False, "note": str(exc)}
    cost = sim["cost"] or {}
    return {"available": True, "replicas": sim["replicas"], "seed": sim["seed"],
            "cost_p50": cost.get("p50"), "cost_p90": cost.get("p90"),
            "wall_hours_p50": sim["wall_hours"]["p50"],
            "wall_hours_p90": sim["wall_hours"]["p90"],
            "deadline_hours": sim["deadline_hours"],
            "deadline_probability": sim["deadline_probability"],
            "mean_vs_daly_pct": sim["mean_vs_daly_pct"]}

