"""The canonical GPU table: one list of GPU models used by the store, scrapers, sizing and reports.

Two ways in:
- `resolve_gpu(name)` for names a user types (`h100`, `A100-80GB`, `rtx4090`), strict, with
  the closest known names in the error;
- `canonical_gpu(raw, memory_gb=...)` for names a provider prints ("NVIDIA H100 80GB HBM3",
  "H100_SXM5", "nvidia-h100-mega-80gb", "Tesla V100-SXM2-16GB"), tolerant, None when unknown.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from tracker.errors import NotFound


@dataclass(frozen=True, slots=True)
class GpuSpecs:
    bf16_tflops: float | None
    fp8_tflops: float | None
    memory_bandwidth_gbps: float | None
    link_gbps_unidirectional: float | None
    tdp_watts: float | None
    sources: tuple[str, ...] = ()
    memory_bytes: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Gpu:
    id: str
    name: str
    vendor: str
    family: str
    memory_gb: int
    form_factor: str
    aliases: tuple[str, ...]
    specs: GpuSpecs | None

    @property
    def memory_bytes(self) -> int:
        """Physical memory in bytes (from the specs when given, else the vendor's GB figure)."""
        if self.specs is not None and self.specs.memory_bytes:
            return self.specs.memory_bytes
        return int(self.memory_gb * 10**9)


@dataclass(frozen=True, slots=True)
class Resolved:
    gpu: Gpu
    warnings: tuple[str, ...] = ()


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@cache
def gpu_table() -> dict[str, Gpu]:
    """All canonical GPUs by id, loaded once from the bundled `data/gpus.json`."""
    raw = json.loads(resources.files("data").joinpath("gpus.json").read_text("utf-8"))
    table: dict[str, Gpu] = {}
    for item in raw["gpus"]:
        specs = None
        if item.get("specs"):
            s = dict(item["specs"])
            known = {k: s.pop(k, None) for k in (
                "bf16_tflops", "fp8_tflops", "memory_bandwidth_gbps",
                "link_gbps_unidirectional", "tdp_watts", "memory_bytes")}
            sources = tuple(s.pop("sources", ()))
            specs = GpuSpecs(sources=sources, extra=s, **known)
        table[item["id"]] = Gpu(
            id=item["id"], name=item["name"], vendor=item["vendor"], family=item["family"],
            memory_gb=item["memory_gb"], form_factor=item["form_factor"],
            aliases=tuple(item.get("aliases", ())), specs=specs,
        )
    return table


@cache
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for gpu in gpu_table().values():
        for name in (gpu.id, gpu.name, *gpu.aliases):
            index.setdefault(_key(name), gpu.id)
    return index


def get_gpu(gpu_id: str) -> Gpu:
    try:
        return gpu_table()[gpu_id]
    except KeyError:
        raise NotFound(f"unknown GPU id {gpu_id!r}") from None


def resolve_gpu(name: str) -> Resolved:
    """Resolve a user-typed GPU name; ambiguous family names pick the datacenter SXM part."""
    table = gpu_table()
    found = _alias_index().get(_key(name))
    if found is None:
        found = canonical_gpu(name)
        if found is None:
            raise NotFound(_unknown_message("GPU", name, _suggestion_pool()))
        gpu = table[found]
    else:
        gpu = table[found]
    warnings: list[str] = []
    siblings = [g for g in table.values() if g.family == gpu.family and g.id != gpu.id]
    if siblings and _key(name) in {_key(gpu.family), _key(gpu.family.split("-")[0])}:
        others = ", ".join(sorted(g.id for g in siblings))
        warnings.append(f"'{name}' is ambiguous; using {gpu.id} ({gpu.name}); also: {others}")
    return Resolved(gpu, tuple(warnings))


def _suggestion_pool() -> list[str]:
    pool = set(gpu_table())
    for gpu in gpu_table().values():
        pool.update(gpu.aliases)
    return sorted(pool)


def _unknown_message(kind: str, name: str, pool: list[str]) -> str:
    close = difflib.get_close_matches(name.lower(), pool, n=4, cutoff=0.5)
    if not close:
        key = _key(name)
        close = [p for p in pool if key and (key in _key(p) or _key(p) in key)][:4]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint}"


# Provider-string normalization ---------------------------------------------------------------

_VENDOR_WORDS = re.compile(
    r"\b(nvidia|tesla|geforce|amd|instinct|intel|habana|radeon|quadro|gpu|gpus|accelerator)\b"
)
# (family, pattern) in order of specificity: GH200 before H200, L40S before L40 before L4, ...
_FAMILIES: list[tuple[str, str]] = [
    ("gh200", r"gh200(?![0-9])"),
    ("h200", r"h200(?![0-9])"),
    ("h100", r"h100(?![0-9])"),
    ("b300", r"b300(?![0-9])"),
    ("b200", r"(?<![a-z])b200(?![0-9])"),
    ("a100", r"a100(?![0-9])"),
    ("l40s", r"l40s"),
    ("l40", r"l40(?!s)"),
    ("l4", r"(?<![a-z0-9])l4(?![0-9])"),
    ("a10g", r"a10g"),
    ("a10", r"(?<![a-z0-9])a10(?![0-9g])"),
    ("a40", r"(?<![a-z0-9])a40(?![0-9])"),
    ("a30", r"(?<![a-z0-9])a30(?![0-9])"),
    ("t4", r"(?<![a-z0-9])t4(?![0-9])"),
    ("v100", r"v100(?![0-9])"),
    ("p100", r"p100(?![0-9])"),
    ("k80", r"k80(?![0-9])"),
    ("rtx-pro-6000", r"rtx ?pro ?(server ?)?6000|rtxpro6000"),
    ("rtx-6000-ada", r"(rtx ?)?6000 ?ada|ada ?6000"),
    ("rtx-4000-ada", r"(rtx ?)?4000 ?ada"),
    ("quadro-rtx-6000", r"rtx ?6000"),  # Turing, 24 GB: after RTX PRO 6000 and 6000 Ada
    ("a16", r"(?<![a-z0-9])a16(?![0-9])"),
    ("rtx-a6000", r"(rtx ?)?a6000"),
    ("rtx-a5000", r"(rtx ?)?a5000"),
    ("rtx-a4000", r"(rtx ?)?a4000"),
    ("rtx-5090", r"(rtx ?)?5090"),
    ("rtx-4090", r"(rtx ?)?4090"),
    ("rtx-3090", r"(rtx ?)?3090"),
    ("mi325x", r"mi325x?"),
    ("mi300x", r"mi300x?"),
    ("mi250x", r"mi250x?"),
    ("gaudi3", r"gaudi ?3|hl ?325"),
    ("gaudi2", r"gaudi ?2|hl ?225"),
]
_FAMILY_RES = [(fam, re.compile(pat)) for fam, pat in _FAMILIES]
_MEMORY_RE = re.compile(r"(?<![0-9])(\d{2,3}) ?g(?:b|ib)?(?![a-z0-9])")


def _clean(raw: str) -> str:
    text = raw.lower()
    text = re.sub(r"[_\-/,()\[\]:]+", " ", text)
    text = _VENDOR_WORDS.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


def _form_factor_hint(text: str) -> str | None:
    if re.search(r"nvl", text):
        return "NVL"
    if re.search(r"pcie|pci e", text):
        return "PCIe"
    if re.search(r"sxm|hbm3|mega|nvlink|hgx", text):
        return "SXM"
    return None


@cache
def canonical_gpu(raw: str, memory_gb: float | None = None) -> str | None:
    """Map a provider's GPU name (and optional per-GPU memory in GB) to a canonical id.

    Memory from the name wins over the argument; either snaps to the family's nearest size
    within 7 % (as gpuhunt does). Without a form-factor hint a family prefers its SXM part.
    """
    if not raw:
        return None
    text = _clean(raw)
    family = next((fam for fam, rx in _FAMILY_RES if rx.search(text)), None)
    if family is None:
        direct = _alias_index().get(_key(raw))
        return direct
    candidates = [g for g in gpu_table().values() if g.family == family]
    if len(candidates) == 1:
        return candidates[0].id
    ff = _form_factor_hint(text)
    mem_match = _MEMORY_RE.search(text)
    mem = float(mem_match.group(1)) if mem_match else memory_gb
    pool = candidates
    if ff is not None:
        narrowed = [g for g in pool if g.form_factor == ff]
        pool = narrowed or pool
    if mem is not None:
        sized = [g for g in pool if abs(g.memory_gb - mem) <= 0.07 * g.memory_gb]
        if not sized:
            # "40GB" of an A100 is sometimes printed as 40960 MiB -> 42.9 GB; take the nearest.
            sized = [min(pool, key=lambda g: abs(g.memory_gb - mem))]
        pool = sized
    order = {"SXM": 0, "OAM": 1, "NVL": 2, "PCIe": 3}
    return min(pool, key=lambda g: (order.get(g.form_factor, 9), -g.memory_gb if mem is None
                                    and family != "a100" else g.memory_gb)).id
