"""The sizing engine: a request in, memory by part, the plan that fits and the run time out.

`size_workload` is pure: no database, no clock, no I/O beyond the bundled presets and GPU
table (parsed once and cached). The GPU-independent part of a request (model, memory by part)
is memoised, so a sweep over GPUs × counts, as `compare` does, pays for it once.

The parts: `request` (the request and result types), `prepare` (the GPU-independent part),
`search` (the training planner's fastest-plan search), `fixed` (sizing a plan whose choices
are made), `timing` (links, step and run time).
"""

from __future__ import annotations

from tracker.core.errors import InvalidInput, NotFound
from tracker.sizing.fixed import size_fixed
from tracker.sizing.request import JSON_KEYS, TIME_KEYS, SizingRequest, SizingResult
from tracker.sizing.search import searches, size_searched
from tracker.sizing.timing import plan_links

PLANS = ("fastest", "smallest")


def size_workload(req: SizingRequest) -> SizingResult:
    """Size one job: memory by part, fit, the plan, and (with `tokens`) the time.

    Training on a GPU with compute specs: the fastest plan that fits, searched over TP, PP,
    DP, micro-batch (gradient accumulation fills the global batch), recomputation and ZeRO
    stage, with whatever the request fixes left fixed (`plan="smallest"`: the memory-minimal
    plan). Otherwise the smallest plan, or the one the request fixes.
    """
    if req.plan not in PLANS:
        raise InvalidInput(f"unknown --plan {req.plan!r} (one of: {', '.join(PLANS)})")
    if searches(req):
        searched = size_searched(req)
        if searched is not None:
            return searched
    fixed = all(v is not None for v in (req.tensor_parallel, req.pipeline_parallel))
    # Open choices take their memory-minimal defaults (micro-batch 1, no recompute, no
    # sharding) inside `preparation`.
    return size_fixed(req, "fixed" if fixed else "smallest")


def smallest_plan(req: SizingRequest) -> SizingResult:
    """The smallest fitting plan on `req.gpu` (the same as size_workload with count=None)."""
    if req.count is not None:
        from dataclasses import replace

        req = replace(req, count=None)
    return size_workload(req)


__all__ = ["JSON_KEYS", "TIME_KEYS", "NotFound", "SizingRequest", "SizingResult", "plan_links",
           "size_workload", "smallest_plan"]
