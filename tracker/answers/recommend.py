"""The report's recommendations for the workloads configured in `[report] workloads`.

For each workload the sizing engine (tracker.sizing) sizes every priced GPU at every GPU count
the offers can tile, and the economics engine (tracker.economics) prices it:

- the cheapest way to run it (GPU, count, provider, on-demand) that meets its deadline, with
  wall time and cost; the fewest-GPU and the fastest option beside it (one GPU vs cluster);
- spot with checkpoints (Daly's interval and expected wall time, MTTI from the stored
  interruption band or the provider default) against that on-demand run;
- rent vs buy for the recommended GPUs at the workload's utilization: verdict, payback months,
  breakeven utilization, NPV.

Every figure carries its inputs (the `inputs` of each part), which the report's appendix
prints. Pure: prices and interruption bands come in as arguments. The parts are
recommend_training.py, recommend_serving.py and recommend_shared.py; the workloads themselves
are workloads.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tracker.answers.workloads import Workload
from tracker.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tracker.core.fabric import Override
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import PriceRow


def evaluate_workload(
    workload: Workload, rows: Sequence[PriceRow], settings: EconomicsSettings,
    bands: Mapping[tuple[str, str, str], Any], *, best_only: bool = False,
    overrides: Mapping[str, Override] | None = None,
) -> dict[str, Any]:
    """Size and price every way to run the workload on the rows; pick the recommendation.
    `overrides` (`[fabric.overrides]`) join unclustered hosts for training, as in `compare`;
    serving replicas never span instances."""
    if workload.serving:
        from tracker.answers.recommend_serving import evaluate_serving

        return evaluate_serving(workload, rows, settings, best_only=best_only)
    from tracker.answers.recommend_training import evaluate_training

    return evaluate_training(workload, rows, settings, bands, best_only=best_only,
                             overrides=overrides)


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
    overrides = options.fabric_overrides or None
    for raw in workloads:
        try:
            workload = Workload.parse(raw)
        except (InvalidInput, TypeError, ValueError) as exc:
            entries.append({"name": str(raw.get("name", "?")), "error": str(exc)})
            continue
        try:
            entry = evaluate_workload(workload, now, settings, bands or {},
                                      overrides=overrides)
            before = evaluate_workload(workload, prev, settings, bands or {}, best_only=True,
                                       overrides=overrides)
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

