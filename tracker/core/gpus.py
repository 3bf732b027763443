"""The canonical GPU table: one list of GPU models used by the store, scrapers, sizing and reports.

Two ways in:
- `resolve_gpu(name)` for names a user types (`h100`, `A100-80GB`, `rtx4090`), strict, with
  the closest known names in the error;
- `canonical_gpu(raw, memory_gb=...)` for names a provider prints ("NVIDIA H100 80GB HBM3",
  "H100_SXM5", "nvidia-h100-mega-80gb", "Tesla V100-SXM2-16GB"), tolerant, None when unknown.

Everything about names is data, in `data/gpus.json`: the GPU models, the ordered name patterns
every source's names go through (`name_patterns`), and the instance-name form-factor rules
(`instance_form_factors`). Helpers for what sources print around the name: `mig_slice` (MIG
profiles as fractions of the parent), `with_form_factor` (PCIe/SXM from the instance name) and
`memory_mismatch` (a per-GPU memory more than 10 % off the GPU's, which ingest rejects).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cache

from tracker.core.data_files import read_json
from tracker.core.errors import NotFound


@dataclass(frozen=True, slots=True)
class GpuSpecs:
    """Dense (no sparsity) peaks, memory and links of one GPU, each cited in `sources`.

    A peak is None where the hardware has no such tensor cores (no FP8 on Ampere, no FP4
    before Blackwell/CDNA 4). `scale_up_domain` is how many GPUs share the scale-up link (8 on
    an HGX/OAM board, 72 on an NVL72 rack, 1 on a plain PCIe card); `scale_up_link` its kind
    (a data/fabric.json collectives key, or pcie). `host_gpus` is how many share one host where
    that is not the HGX board's 8 (4 on an NVL72 rack's compute tray): `--gpus-per-node`'s
    default for the class."""

    bf16_tflops: float | None
    fp8_tflops: float | None
    memory_bandwidth_gbps: float | None
    link_gbps_unidirectional: float | None
    tdp_watts: float | None
    sources: tuple[str, ...] = ()
    memory_bytes: int | None = None
    fp4_tflops: float | None = None
    int8_tops: float | None = None
    tf32_tflops: float | None = None
    fp32_tflops: float | None = None
    scale_up_link: str | None = None
    scale_up_domain: int | None = None
    pcie_gen: int | None = None
    fp4_formats: tuple[str, ...] = ()
    host_gpus: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)


# The figures data/gpus.json (or a `[gpus.<id>]` table) may give a GPU, with their units.
SPEC_FIGURES: dict[str, str] = {
    "bf16_tflops": "dense BF16 (FP16 where the GPU has no BF16) tensor TFLOPS",
    "fp8_tflops": "dense FP8 tensor TFLOPS (absent: no FP8 tensor cores)",
    "fp4_tflops": "dense FP4 tensor TFLOPS (absent: no FP4 tensor cores)",
    "int8_tops": "dense INT8 tensor TOPS",
    "tf32_tflops": "dense TF32 tensor TFLOPS",
    "fp32_tflops": "FP32 TFLOPS",
    "memory_bandwidth_gbps": "HBM/GDDR bandwidth, GB/s",
    "memory_bytes": "memory as the driver reports it (nvidia-smi / rocm-smi), bytes",
    "link_gbps_unidirectional": "scale-up link bandwidth per GPU, GB/s one direction",
    "scale_up_link": "scale-up link kind (nvlink2-5, nvlink-bridge, xgmi, pcie)",
    "scale_up_domain": "GPUs sharing the scale-up link (8 HGX, 72 NVL72, 1 PCIe card)",
    "pcie_gen": "PCIe generation of the host interface",
    "host_gpus": "GPUs in one host, --gpus-per-node's default (8 HGX, 4 NVL72 compute tray)",
    "tdp_watts": "board power, W",
}
# Without these a GPU cannot be sized for time or serving; the rest have stated fallbacks
# (memory_gb x 10^9 for memory_bytes, PCIe 4.0 for the link, 1 for the domain).
SIZING_FIGURES = ("bf16_tflops", "memory_bandwidth_gbps")
_TYPED = ("bf16_tflops", "fp8_tflops", "memory_bandwidth_gbps", "link_gbps_unidirectional",
          "tdp_watts", "memory_bytes", "fp4_tflops", "int8_tops", "tf32_tflops",
          "fp32_tflops", "scale_up_link", "scale_up_domain", "pcie_gen", "host_gpus")
# The host a plan assumes when neither the user (--gpus-per-node) nor the GPU's data says:
# an HGX/OAM board's 8 GPUs, the most common multi-GPU server.
DEFAULT_HOST_GPUS = 8


def host_gpus(gpu: Gpu) -> int:
    """GPUs in one host of this class: its `host_gpus` figure (4 on a GB200/GB300 NVL72
    compute tray), else DEFAULT_HOST_GPUS."""
    return int(gpu.specs.host_gpus or DEFAULT_HOST_GPUS) if gpu.specs else DEFAULT_HOST_GPUS


def missing_figures(gpu: Gpu) -> tuple[str, ...]:
    """The figures sizing needs that `gpu` lacks (SIZING_FIGURES), in that order."""
    specs = gpu.specs
    return tuple(k for k in SIZING_FIGURES if specs is None or getattr(specs, k) is None)


def missing_figures_message(gpu: Gpu, what: str) -> str:
    """One line naming the figures `what` needs and where to give them."""
    lacks = " and ".join(missing_figures(gpu))
    return (f"{gpu.id} has no {lacks} figure in data/gpus.json, so {what} cannot be "
            f"estimated; give it in the configuration as [gpus.{gpu.id}] {lacks.split()[0]} = "
            "... (see `gpu-tracker check coverage`)")


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


_OVERRIDES: dict[str, dict] = {}


def set_gpu_overrides(overrides: dict[str, dict]) -> None:
    """Figures from the configuration's `[gpus.<id>]` tables (already validated by
    tracker/config/sections.py), laid over data/gpus.json: a known id's figures replace its
    own, a new id becomes a GPU class. Clears every cache that holds a GPU's figures."""
    global _OVERRIDES
    if overrides == _OVERRIDES:
        return
    _OVERRIDES = {k: dict(v) for k, v in overrides.items()}
    gpu_table.cache_clear()
    _alias_index.cache_clear()
    canonical_gpu.cache_clear()
    _family_patterns.cache_clear()
    for clear in _CACHE_CLEARERS:
        clear()


_CACHE_CLEARERS: list = []


def on_gpu_overrides(clear: object) -> None:
    """Register a cache (its `cache_clear`) that holds GPU figures, cleared on overrides."""
    _CACHE_CLEARERS.append(clear)


def gpu_overrides() -> dict[str, dict]:
    return {k: dict(v) for k, v in _OVERRIDES.items()}


def _specs_of(raw: dict) -> GpuSpecs:
    s = dict(raw)
    known = {k: s.pop(k, None) for k in _TYPED}
    sources = tuple(s.pop("sources", ()))
    formats = tuple(s.pop("fp4_formats", ()) or ())
    return GpuSpecs(sources=sources, extra=s, fp4_formats=formats, **known)


def _with_override(item: dict, override: dict) -> dict:
    item = dict(item)
    specs = dict(item.get("specs") or {})
    for key in ("name", "vendor", "family", "memory_gb", "form_factor"):
        if key in override:
            item[key] = override[key]
    if "aliases" in override:
        item["aliases"] = list(item.get("aliases", ())) + list(override["aliases"])
    figures = {k: v for k, v in override.items() if k in SPEC_FIGURES or k == "fp4_formats"}
    if figures:
        specs.update(figures)
        specs["sources"] = [*specs.get("sources", ()),
                            f"configuration [gpus.{item['id']}]: {', '.join(sorted(figures))}",
                            *override.get("sources", ())]
    item["specs"] = specs or None
    return item


@cache
def gpu_table() -> dict[str, Gpu]:
    """All canonical GPUs by id: the bundled `data/gpus.json` with the configuration's
    `[gpus.<id>]` figures laid over it (`set_gpu_overrides`)."""
    raw = _gpu_data()
    items = {item["id"]: item for item in raw["gpus"]}
    for gpu_id, override in _OVERRIDES.items():
        base = items.get(gpu_id) or {
            "id": gpu_id, "name": override.get("name", gpu_id),
            "vendor": override.get("vendor", "custom"),
            "family": override.get("family", gpu_id), "memory_gb": override["memory_gb"],
            "form_factor": override.get("form_factor", "PCIe"), "aliases": []}
        items[gpu_id] = _with_override(base, override)
    table: dict[str, Gpu] = {}
    for item in items.values():
        specs = _specs_of(item["specs"]) if item.get("specs") else None
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


def gpu_name(gpu_id: str) -> str:
    """The GPU's name for people (`H100 SXM`), or the id itself when it is not in the table."""
    gpu = gpu_table().get(gpu_id)
    return gpu.name if gpu is not None else gpu_id


def get_gpu(gpu_id: str) -> Gpu:
    try:
        return gpu_table()[gpu_id]
    except KeyError:
        raise NotFound(f"unknown GPU id {gpu_id!r}") from None


def resolve_gpu(name: str) -> Resolved:
    """Resolve a user-typed GPU name, strictly: an id or alias of data/gpus.json (case,
    spaces, '-' and '_' ignored), or a family with form factor and/or memory (`a100-80`,
    `h100 94gb`, `NVIDIA H100 SXM 80GB`) that names exactly the parts it says. Anything else is
    NotFound with the closest names: a typed name never goes through the tolerant provider
    parser, which would read `a100-80` as the 40 GB part or `xh100` as an H100.
    An ambiguous name picks the datacenter SXM part and says so."""
    table = gpu_table()
    typed = name.strip()
    key = _typed_key(typed)
    found = _alias_index().get(key) if key else None
    pool: list[Gpu] = [table[found]] if found is not None else _typed_pool(key) if key else []
    if not pool:
        error = NotFound(_unknown_message("GPU", name, _suggestion_pool()))
        error.usage = True  # a typed value: the CLI exits 2
        raise error
    gpu = min(pool, key=_typed_preference)
    warnings: list[str] = []
    siblings = [g for g in table.values() if g.family == gpu.family and g.id != gpu.id]
    others = [g.id for g in pool if g.id != gpu.id]
    if found is not None and siblings and key in {_key(gpu.family),
                                                  _key(gpu.family.split("-")[0])}:
        others = sorted(g.id for g in siblings)
    if others:
        warnings.append(f"'{name}' is ambiguous; using {gpu.id} ({gpu.name}); also: "
                        f"{', '.join(sorted(others))}")
    return Resolved(gpu, tuple(warnings))


# What a typed name may hold besides the family: the form factor, the memory, the memory type.
_TYPED_CHARS = re.compile(r"[A-Za-z0-9 _\-]+")
_TYPED_VENDOR = re.compile(r"^(?:nvidia|amd|intel|habana|tesla|geforce|radeon|instinct)+")
_TYPED_MODIFIER = re.compile(
    r"(?P<ff>sxm[4-6]?|pcie|nvl|oam)|(?P<mem>[1-9][0-9]{0,2})(?:gib|gb|g)?|hbm[23]e?")
_TYPED_FORM_FACTORS = {"sxm": "SXM", "pcie": "PCIe", "nvl": "NVL", "oam": "OAM"}
_TYPED_ORDER = {"SXM": 0, "OAM": 1, "NVL": 2, "PCIe": 3}


def _typed_key(typed: str) -> str:
    """The alias key of a typed name, or "" when it holds a character no GPU name has
    (`h100!!!` is a typo, not an H100)."""
    if not typed or not _TYPED_CHARS.fullmatch(typed):
        return ""
    return _key(typed)


def _typed_preference(gpu: Gpu) -> tuple[int, int]:
    """Among parts a name fits equally, the datacenter SXM part, then the smaller memory (an
    `a100` is the 40 GB part, as providers print it)."""
    return (_TYPED_ORDER.get(gpu.form_factor, 9), gpu.memory_gb)


@cache
def _typed_bases() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(key, GPU ids) a typed name may start with: a family (all its parts) or an id or alias
    (that part), longest first."""
    bases: dict[str, set[str]] = {}
    for gpu in gpu_table().values():
        bases.setdefault(_key(gpu.family), set()).add(gpu.id)
    for key, gpu_id in _alias_index().items():
        if key not in bases:
            bases[key] = {gpu_id}
    return tuple(sorted(((k, tuple(sorted(v))) for k, v in bases.items()),
                        key=lambda item: -len(item[0])))


def _typed_pool(key: str) -> list[Gpu]:
    """The parts a structured typed name names (empty when it names none or is not one)."""
    key = _TYPED_VENDOR.sub("", key)
    table = gpu_table()
    for base, ids in _typed_bases():
        if not key.startswith(base):
            continue
        rest = key[len(base):]
        form_factor: str | None = None
        memory: int | None = None
        position = 0
        while position < len(rest):
            match = _TYPED_MODIFIER.match(rest, position)
            if match is None:
                break
            if match.group("ff"):
                if form_factor is not None:
                    break
                form_factor = _TYPED_FORM_FACTORS[re.sub(r"[0-9]", "", match.group("ff"))]
            elif match.group("mem"):
                if memory is not None:
                    break
                memory = int(match.group("mem"))
            position = match.end()
        if position < len(rest):
            continue
        pool = [table[i] for i in ids]
        if form_factor is not None:
            pool = [g for g in pool if g.form_factor == form_factor]
        if memory is not None:
            pool = [g for g in pool if abs(g.memory_gb - memory) <= 0.07 * g.memory_gb]
        if pool:
            return pool
    return []


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


@cache
def _gpu_data() -> dict:
    return read_json("gpus.json")


@cache
def _family_patterns() -> list[tuple[str, str]]:
    """`name_patterns` of data/gpus.json as (family, pattern), in order of specificity (first
    match wins). Each is compiled by `re` (and kept in its cache) when a name is first tried
    against it: a source of a few datacenter GPUs matches within the first dozen, and
    compiling all 58 cost ~5 ms in every new process."""
    return [(item["family"], item["pattern"]) for item in _gpu_data()["name_patterns"]]


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
    family = next((fam for fam, pattern in _family_patterns() if re.search(pattern, text)),
                  None)
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


# Form factor from instance names, MIG slices, memory sanity -----------------------------------

MEMORY_TOLERANCE = 0.10  # a stored offer's per-GPU memory may differ this much from its GPU's


@cache
def _instance_form_factors() -> list[tuple[str, re.Pattern[str], str]]:
    return [(item["provider"], re.compile(item["pattern"], re.IGNORECASE), item["form_factor"])
            for item in _gpu_data()["instance_form_factors"]]


def form_factor_of_instance(provider: str, instance_type: str) -> str | None:
    """The form factor an instance name states (token or provider convention), else None."""
    for who, pattern, form_factor in _instance_form_factors():
        if who in ("*", provider) and pattern.search(instance_type):
            return form_factor
    return None


def with_form_factor(gpu_name: str, provider: str, instance_type: str) -> str:
    """The GPU name with the instance's form factor appended when the name states none
    (gpuhunt and SkyPilot print plain `H100` for `gpu_1x_h100_pcie`)."""
    if _form_factor_hint(_clean(gpu_name)) is not None:
        return gpu_name
    form_factor = form_factor_of_instance(provider, instance_type)
    return f"{gpu_name} {form_factor}" if form_factor else gpu_name


_MIG_RE = re.compile(r"\s*\bMIG\b\s*(\d+)g\.(\d+)gb\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class MigSlice:
    parent_name: str  # the provider's name without the MIG profile
    profile: str  # e.g. "1g.24gb"
    memory_gb: float  # the slice's memory


def mig_slice(gpu_name: str) -> MigSlice | None:
    """A MIG profile in a provider's GPU name ("... Server Edition MIG 1g.24gb"), else None.

    A slice is stored as a fraction of its parent GPU: fraction = slice memory / parent memory
    (1g.24gb of a 96 GB RTX PRO 6000 is 0.25 GPU), the per-GPU memory stays the parent's."""
    match = _MIG_RE.search(gpu_name)
    if match is None:
        return None
    parent = (gpu_name[:match.start()] + gpu_name[match.end():]).strip()
    return MigSlice(parent, f"{match.group(1)}g.{match.group(2)}gb", float(match.group(2)))


def memory_mismatch(gpu_id: str, memory_gb: float | None) -> str | None:
    """Why a per-GPU memory figure cannot be this GPU's (off by more than 10 %), else None."""
    if memory_gb is None:
        return None
    expected = gpu_table()[gpu_id].memory_gb
    if abs(memory_gb - expected) <= MEMORY_TOLERANCE * expected:
        return None
    return (f"memory {memory_gb:g} GB per GPU disagrees with {gpu_id} ({expected} GB) by more "
            f"than {MEMORY_TOLERANCE:.0%}")
