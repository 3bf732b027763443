"""The economics engine: pure functions over Decimal money and frozen dataclasses.

- `cost`: cost per run / per success, billing granularity, runs per day, time to result;
- `spot`: Young and Daly checkpoint intervals, Daly's expected wall time, notice windows,
  Spot Advisor band → MTTI, spot vs on-demand with a deadline;
- `ownership`: rent vs buy (opex, payback, NPV, IRR, breakeven utilization, sensitivity);
- `finance`: npv/irr/pmt with numpy-financial's conventions, depreciation schedules;
- `defaults`: data/economics.json and the `[economics]` config section.

Nothing here touches the database or the clock; the application layer (tracker/answers/)
looks prices up in the store and passes them in, and builds the answers' documents. No heavy
imports at module level, and the names below are imported from their module on first use
(`from tracker.economics import run_cost`), so importing one module (`tracker.economics.cost`
for `breakeven`) does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports them (_MODULES)
    from tracker.economics.cost import BillingRule as BillingRule
    from tracker.economics.cost import RunCost as RunCost
    from tracker.economics.cost import cost_per_success as cost_per_success
    from tracker.economics.cost import run_cost as run_cost
    from tracker.economics.cost import runs_per_day as runs_per_day
    from tracker.economics.cost import time_to_result_hours as time_to_result_hours
    from tracker.economics.finance import irr as irr
    from tracker.economics.finance import npv as npv
    from tracker.economics.finance import pmt as pmt
    from tracker.economics.ownership import OwnershipInputs as OwnershipInputs
    from tracker.economics.ownership import OwnershipResult as OwnershipResult
    from tracker.economics.ownership import evaluate as evaluate
    from tracker.economics.ownership import sensitivity as sensitivity
    from tracker.economics.spot import SpotInputs as SpotInputs
    from tracker.economics.spot import SpotPlan as SpotPlan
    from tracker.economics.spot import daly_interval as daly_interval
    from tracker.economics.spot import expected_wall_hours as expected_wall_hours
    from tracker.economics.spot import plan_spot as plan_spot
    from tracker.economics.spot import young_interval as young_interval

_MODULES = {
    "cost": ("BillingRule", "RunCost", "cost_per_success", "run_cost", "runs_per_day",
             "time_to_result_hours"),
    "finance": ("irr", "npv", "pmt"),
    "ownership": ("OwnershipInputs", "OwnershipResult", "evaluate", "sensitivity"),
    "spot": ("SpotInputs", "SpotPlan", "daly_interval", "expected_wall_hours", "plan_spot",
             "young_interval"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
