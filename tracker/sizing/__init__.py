"""Sizing engine: memory by part, GPU count and parallelism, FLOPs and run time.

    from tracker.sizing import SizingRequest, size_workload
    res = size_workload(SizingRequest(model="llama-3.1-70b", workload="inference",
                                      context=131072, gpu="h100-sxm"))
    res.gpus_needed, res.tensor_parallel, res.per_gpu_bytes, res.to_json()

Formulas and their sources: docs/sizing.md, summarised in each module
(`models` parameter counts, `memory` bytes by part, `plan` parallelism search, `throughput`
FLOPs/MFU/communication). Pure functions; bundled data is parsed once and cached.
"""

from importlib import import_module
from typing import Any

# Loaded on first use (PEP 562), so that importing a leaf module such as
# `tracker.sizing.memory` (the workload option choices) does not load the engine: the
# economics commands that never size (breakeven, spot) start without it.
_EXPORTS = {
    "JSON_KEYS": "tracker.sizing.engine", "TIME_KEYS": "tracker.sizing.engine",
    "SizingRequest": "tracker.sizing.engine", "SizingResult": "tracker.sizing.engine",
    "size_workload": "tracker.sizing.engine", "smallest_plan": "tracker.sizing.engine",
    "ModelSpec": "tracker.sizing.architecture", "model_presets": "tracker.sizing.models",
    "resolve_model": "tracker.sizing.models",
}


def compiled() -> bool:
    """Whether the engine runs compiled: `pip install .` builds its modules with mypyc
    (setup.py); an editable install, or a build without a C compiler, runs the sources."""
    from importlib.machinery import EXTENSION_SUFFIXES

    path = import_module("tracker.sizing.search").__file__ or ""
    return path.endswith(tuple(EXTENSION_SUFFIXES))


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracker.sizing' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "JSON_KEYS",
    "TIME_KEYS",
    "ModelSpec",
    "SizingRequest",
    "SizingResult",
    "compiled",
    "model_presets",
    "resolve_model",
    "size_workload",
    "smallest_plan",
]
