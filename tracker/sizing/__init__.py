"""Sizing engine: memory by part, GPU count and parallelism, FLOPs and run time.

    from tracker.sizing import SizingRequest, size_workload
    res = size_workload(SizingRequest(model="llama-3.1-70b", workload="inference",
                                      context=131072, gpu="h100-sxm"))
    res.gpus_needed, res.tensor_parallel, res.per_gpu_bytes, res.to_json()

Formulas and their sources: docs/sizing.md, summarised in each module
(`models` parameter counts, `memory` bytes by part, `plan` parallelism search, `throughput`
FLOPs/MFU/communication). Pure functions; bundled data is parsed once and cached.
"""

from tracker.sizing.engine import (
    JSON_KEYS,
    TIME_KEYS,
    SizingRequest,
    SizingResult,
    size_workload,
    smallest_plan,
)
from tracker.sizing.models import ModelSpec, model_presets, resolve_model

__all__ = [
    "JSON_KEYS",
    "TIME_KEYS",
    "ModelSpec",
    "SizingRequest",
    "SizingResult",
    "model_presets",
    "resolve_model",
    "size_workload",
    "smallest_plan",
]
