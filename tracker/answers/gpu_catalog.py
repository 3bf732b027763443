"""The GPU classes as `gpus` lists them, and which classes with stored offers lack a figure.

`gpu_rows` is the table of `gpu-tracker gpus` (data/gpus.json with the configuration's
`[gpus.<id>]` figures laid over it, tracker.core.gpus); `coverage` is `gpu-tracker check coverage`
and the `coverage` part of `status`: every GPU class with offers valid at `as_of`, the figures
sizing needs that it lacks (tracker.core.gpus.SIZING_FIGURES) and the optional ones it falls back
on.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.core.gpus import Gpu, gpu_overrides, gpu_table, host_gpus, missing_figures

GPU_COLUMNS = ["id", "name", "memory_gb", "form_factor", "bf16_tflops", "fp8_tflops",
               "fp4_tflops", "memory_bandwidth_gbps", "scale_up_link",
               "link_gbps_unidirectional", "scale_up_domain", "tdp_watts"]

# Figures whose absence has a stated fallback (or means the hardware has none): listed by
# coverage, never blocking.
_FALLBACKS = {
    "memory_bytes": "memory_gb x 10^9",
    "link_gbps_unidirectional": "PCIe 4.0 (31 GB/s)",
    "scale_up_domain": "--gpus-per-node",
    "tdp_watts": "no power figure",
}


def gpu_row(gpu: Gpu, *, listed: bool = False) -> dict[str, Any]:
    """One GPU class as `gpus --format json` prints it (README "JSON contracts")."""
    specs = gpu.specs
    aliases: Any = ", ".join(gpu.aliases) if listed else list(gpu.aliases)

    def fig(name: str) -> Any:
        return getattr(specs, name) if specs is not None else None

    formats = list(specs.fp4_formats) if specs is not None and specs.fp4_formats else (
        ["fp4", "mxfp4"] if fig("fp4_tflops") else [])
    return {
        "id": gpu.id, "name": gpu.name, "memory_gb": gpu.memory_gb,
        "form_factor": gpu.form_factor,
        "bf16_tflops": fig("bf16_tflops"), "fp8_tflops": fig("fp8_tflops"),
        "memory_bandwidth_gbps": fig("memory_bandwidth_gbps"), "tdp_watts": fig("tdp_watts"),
        "aliases": aliases,
        "fp4_tflops": fig("fp4_tflops"),
        "fp4_formats": ", ".join(formats) if listed else formats,
        "int8_tops": fig("int8_tops"), "tf32_tflops": fig("tf32_tflops"),
        "fp32_tflops": fig("fp32_tflops"),
        "memory_bytes": gpu.memory_bytes,
        "memory_bytes_measured": bool(fig("memory_bytes")),
        "scale_up_link": fig("scale_up_link"),
        "link_gbps_unidirectional": fig("link_gbps_unidirectional"),
        "scale_up_domain": fig("scale_up_domain"),
        "pcie_gen": fig("pcie_gen"),
        "host_gpus": host_gpus(gpu),
        "sizeable": not missing_figures(gpu),
        "from_config": gpu.id in gpu_overrides(),
    }


def gpu_rows(*, listed: bool = False) -> list[dict[str, Any]]:
    """Every GPU class; `listed` joins the lists for a table or CSV cell."""
    return [gpu_row(gpu, listed=listed) for gpu in gpu_table().values()]


@dataclass(frozen=True, slots=True)
class CoverageRow:
    gpu: str
    name: str
    offers: int
    sizeable: bool
    missing: tuple[str, ...]  # figures sizing needs (tracker.core.gpus.SIZING_FIGURES)
    fallbacks: tuple[str, ...]  # optional figures absent, with what is used instead

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "name": self.name, "offers": self.offers,
                "sizeable": self.sizeable, "missing": list(self.missing),
                "fallbacks": list(self.fallbacks)}


def coverage_of(offer_counts: dict[str, int]) -> list[CoverageRow]:
    """Coverage of the GPU classes in `offer_counts` (id -> offers), worst first."""
    table = gpu_table()
    rows = []
    for gpu_id, offers in offer_counts.items():
        gpu = table.get(gpu_id)
        if gpu is None:
            rows.append(CoverageRow(gpu_id, gpu_id, offers, False, ("class",), ()))
            continue
        missing = missing_figures(gpu)
        specs = gpu.specs
        fallbacks = tuple(f"{k} ({v})" for k, v in _FALLBACKS.items()
                          if specs is None or getattr(specs, k) is None)
        rows.append(CoverageRow(gpu.id, gpu.name, offers, not missing, missing, fallbacks))
    rows.sort(key=lambda r: (r.sizeable, -r.offers, r.gpu))
    return rows


def coverage(db: Any, as_of: datetime | None = None) -> list[CoverageRow]:
    """Every GPU class with offers valid at `as_of` (default: now) and what it lacks."""
    from tracker.store.queries import price_rows

    counts = Counter(row.gpu for row in price_rows(db, as_of=as_of))
    return coverage_of(dict(counts))
