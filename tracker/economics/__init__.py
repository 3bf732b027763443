"""The economics engine: pure functions over Decimal money and frozen dataclasses.

- `cost`: cost per run / per success, billing granularity, runs per day, time to result;
- `spot`: Young and Daly checkpoint intervals, Daly's expected wall time, notice windows,
  Spot Advisor band → MTTI, spot vs on-demand with a deadline;
- `ownership`: rent vs buy (opex, payback, NPV, IRR, breakeven utilization, sensitivity);
- `finance`: npv/irr/pmt with numpy-financial's conventions, depreciation schedules;
- `defaults`: data/economics.json and the `[economics]` config section.

Nothing here touches the database or the clock; the application layer (tracker/answers/)
looks prices up in the store and passes them in, and builds the answers' documents. No heavy
imports at module level.
"""

from tracker.economics.cost import (
    BillingRule,
    RunCost,
    cost_per_success,
    run_cost,
    runs_per_day,
    time_to_result_hours,
)
from tracker.economics.finance import irr, npv, pmt
from tracker.economics.ownership import OwnershipInputs, OwnershipResult, evaluate, sensitivity
from tracker.economics.spot import (
    SpotInputs,
    SpotPlan,
    daly_interval,
    expected_wall_hours,
    plan_spot,
    young_interval,
)

__all__ = [
    "BillingRule", "OwnershipInputs", "OwnershipResult", "RunCost", "SpotInputs", "SpotPlan",
    "cost_per_success", "daly_interval", "evaluate", "expected_wall_hours", "irr", "npv",
    "plan_spot", "pmt", "run_cost", "runs_per_day", "sensitivity", "time_to_result_hours",
    "young_interval",
]
