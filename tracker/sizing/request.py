"""The sizing request (every input of a sizing question) and result (memory by part, the plan,
the time), with the documented JSON keys."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any


@dataclass(frozen=True, kw_only=True)
class SizingRequest:
    """Every input of a sizing question. Defaults follow docs/sizing.md.

    Model: `model` (a preset name), `model_config` (a config.json path), or `params` alone
    (rough path), or the architecture
    (`layers`, `hidden`, `heads` and optionally `kv_heads`, `head_dim`, `intermediate`,
    `vocab`, `tied_embeddings`, `max_context`).
    """

    model: str | None = None
    model_config: str | None = None  # a local Hugging Face config.json, or its directory
    workload: str = "inference"
    gpu: str | None = None
    count: int | None = None
    tokens: float | None = None
    mfu: float | None = None
    precision: str = "bf16"
    kv_precision: str = "auto"
    optimizer: str = "adamw"
    sharding: str | None = None  # None: the planner chooses (training), else "none"
    offload: str = "none"
    attention: str = "flash"
    recompute: str | None = None  # None: the planner chooses (training), else "none"
    micro_batch: int | None = None  # None: the planner chooses (training), else 1
    seq_len: int | None = None
    context: int | None = None
    concurrency: int = 1
    lora_rank: int = 16
    lora_targets: str = "all-linear"
    # GPUs in one host; None = the GPU class's host (4 on an NVL72 compute tray, else 8).
    gpus_per_node: int | None = None
    internode_gbps: float | None = None  # GB/s per GPU, unidirectional (400 Gb/s NDR = 50)
    # The offer's links (tracker.core.fabric.Network); None = the GPU's typical ones.
    node_link: str | None = None  # nvlink3|nvlink4|nvlink5|nvlink-bridge|xgmi|pcie
    node_link_gbps: float | None = None  # GB/s per GPU, one direction
    cluster_gbps: float | None = None  # Gb/s per instance, all NICs (3,200 on p5.48xlarge)
    # GPUs in one scale-up (NVLink/Infinity Fabric) domain: 72 on an NVL72 rack of 4-GPU
    # hosts. TP and EP may span it; None = the offer's fabric data, else the GPU's.
    scale_up_domain: int | None = None
    # Training expert parallelism across the cluster network: the EP group may span nodes
    # (the largest divisor of the experts that divides DP), its all-to-all's cross-node part
    # on the NICs. The fastest plan searches both; False keeps EP inside the NVLink domain.
    ep_across_nodes: bool = False
    plan: str = "fastest"  # fastest | smallest (today's memory-minimal choice)
    adapter_precision: str | None = None  # LoRA/QLoRA adapters: bf16 (QLoRA's) or fp32
    cross_entropy: str = "full"  # training loss: full fp32 logits, or torchtune's chunked
    usable_fraction: float = 0.9
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    virtual_stages: int = 1
    global_batch_tokens: float | None = None
    quant_group_size: int = 128
    params: float | None = None
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    intermediate: int | None = None
    vocab: int | None = None
    tied_embeddings: bool = False
    max_context: int | None = None


_REQUEST_FIELDS = frozenset(f.name for f in fields(SizingRequest))


def _init_request(self: SizingRequest, /, **values: Any) -> None:
    """`SizingRequest.__init__`: only the given fields are stored, the class attributes hold
    the defaults. The generated frozen `__init__` sets all 45 fields through
    `object.__setattr__`, about a third of a whole sizing query's time in a sweep."""
    if not _REQUEST_FIELDS.issuperset(values):
        unknown = sorted(set(values) - _REQUEST_FIELDS)[0]
        raise TypeError(f"SizingRequest.__init__() got an unexpected keyword argument "
                        f"{unknown!r}")
    self.__dict__.update(values)


# The dataclass keeps its signature for type checkers, its eq, hash, repr and frozenness.
setattr(SizingRequest, "__init__", _init_request)  # noqa: B010


def with_changes(req: SizingRequest, **changes: Any) -> SizingRequest:
    """`dataclasses.replace` for `SizingRequest` without its per-field work: the planner
    builds one per searched query."""
    new = object.__new__(SizingRequest)
    new.__dict__.update(req.__dict__)
    new.__dict__.update(changes)
    return new


# The documented JSON keys, in order (README "Sizing"). Time keys appear only with `tokens`.
JSON_KEYS = (
    "params", "weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
    "kv_cache_bytes", "kv_cache_bytes_per_token", "overhead_bytes", "total_bytes",
    "per_gpu_bytes", "usable_gpu_bytes", "fits_single_gpu", "gpus_needed", "tensor_parallel",
    "pipeline_parallel", "data_parallel", "warnings",
)
TIME_KEYS = ("flops", "mfu", "scaling_efficiency", "wall_hours", "gpu_hours")
EXTRA_KEYS = (
    "model", "gpu", "workload", "precision", "active_params", "trainable_params", "count",
    "fits", "expert_parallel", "gpus_used", "per_gpu", "offloaded_bytes", "kv_capacity_tokens",
    "reason",
    "plan", "virtual_stages", "micro_batch", "gradient_accumulation", "recompute", "sharding",
    "links", "runners_up",
)
TIME_EXTRA_KEYS = ("tokens", "peak_tflops", "mfu_source", "mfu_range")


@dataclass(slots=True)
class SizingResult:
    """Memory by part (bytes), the plan, and with `tokens` the time. See `to_json`."""

    model: str
    workload: str
    precision: str
    params: int
    active_params: int
    trainable_params: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    kv_cache_bytes: int
    kv_cache_bytes_per_token: int
    overhead_bytes: int
    total_bytes: int
    offloaded_bytes: int
    gpu: str | None = None
    count: int | None = None
    per_gpu_bytes: int | None = None
    usable_gpu_bytes: int | None = None
    fits_single_gpu: bool | None = None
    gpus_needed: int | None = None
    fits: bool | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    data_parallel: int | None = None
    expert_parallel: int | None = None
    gpus_used: int | None = None
    per_gpu: dict[str, int] | None = None
    kv_capacity_tokens: int | None = None
    reason: str | None = None
    plan: str | None = None  # fastest | smallest | fixed
    virtual_stages: int | None = None
    micro_batch: int | None = None
    gradient_accumulation: int | None = None
    recompute: str | None = None
    sharding: str | None = None
    links: dict[str, Any] | None = None
    runners_up: list[dict[str, Any]] | None = None
    tokens: float | None = None
    flops: float | None = None
    mfu: float | None = None
    scaling_efficiency: float | None = None
    wall_hours: float | None = None
    gpu_hours: float | None = None
    peak_tflops: float | None = None
    mfu_source: str | None = None
    mfu_range: tuple[float, float] | None = None
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The documented keys (README, JSON contracts) in order, then the documented extras."""
        out: dict[str, Any] = {}
        for key in JSON_KEYS:
            value = getattr(self, key)
            out[key] = list(value) if key == "warnings" else value
        if self.tokens is not None:
            for key in TIME_KEYS:
                out[key] = getattr(self, key)
        for key in EXTRA_KEYS:
            out[key] = getattr(self, key)
        if self.tokens is not None:
            for key in TIME_EXTRA_KEYS:
                value = getattr(self, key)
                out[key] = list(value) if isinstance(value, tuple) else value
        return out


# Every result field at its default (None for the GPU-independent ones, which a
# preparation fills), in field order: see `result_template`.
_RESULT_DEFAULTS: dict[str, Any] = {
    f.name: None if f.default is MISSING else f.default for f in fields(SizingResult)}


def result_template(base: dict[str, Any]) -> dict[str, Any]:
    """Every `SizingResult` field, in field order: `base`'s (the GPU-independent fields)
    and the defaults. A copy with the per-query fields set builds a result positionally
    (`result_of`)."""
    template = dict(_RESULT_DEFAULTS)
    template.update(base)
    return template


def result_of(values: dict[str, Any]) -> SizingResult:
    """The result of a `result_template` copy: positional, as a sweep builds one per query
    (binding its ~47 fields by keyword costs several times as much)."""
    if len(values) != len(_RESULT_DEFAULTS):  # a key that is no field, or a missing one
        unknown = sorted(set(values).symmetric_difference(_RESULT_DEFAULTS))
        raise TypeError(f"SizingResult fields mismatch: {unknown}")
    return SizingResult(*values.values())
