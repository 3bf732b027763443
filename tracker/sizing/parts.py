"""What the sizing engine's parts share (`prepare`, `timing`, `fixed`, `search`, `serving`):
the GPU-independent preparation of a request, a GPU's figures as the engine uses them, and
where the planner's choices sit in a preparation's key (`prepare.prepare_key`)."""

from __future__ import annotations

from dataclasses import dataclass

from tracker.sizing.architecture import ModelSpec
from tracker.sizing.plan import EP_DOMAIN

# Positions in `prepare.prepare_key`'s tuple of the fields the planner varies.
KEY_WORKLOAD, KEY_SHARDING, KEY_OFFLOAD, KEY_ATTENTION, KEY_RECOMPUTE, \
    KEY_MICRO_BATCH = 11, 15, 16, 17, 18, 19


@dataclass(slots=True)
class Prepared:
    """The GPU-independent part of a request (memoised by `preparation`; never mutated after
    construction: not frozen only because a frozen __init__ costs a third of a preparation,
    and the planner derives several per request)."""

    model: ModelSpec
    workload: str
    training: bool
    precision: str
    seq_len: float
    context: float
    concurrency: int
    weights: float
    grads: float
    optim: float
    gpu_weights: float  # GPU-resident totals after offload
    gpu_grads: float
    gpu_optim: float
    offloaded: float
    activations: float
    kv: float
    kv_per_token: float
    overhead: float
    trainable: float
    shard: int
    offload_all: bool
    working_set: float
    kept_layer: float
    working_layer: float
    out: float
    act_peak: float
    flops_factor: float
    grad_sync: float
    zero3_volume: float
    micro_tokens: float
    recompute_full: bool
    per_layer_token: float  # activation bytes per token and layer (kept, or worked on)
    out_per_token: float  # output-layer activation bytes per token
    warnings: tuple[str, ...]
    base: dict  # every result field (`result_template`): the GPU-independent ones set
    jobs: dict  # usable bytes -> Job (its per-plan memory function), filled on demand
    ep_domain: int = EP_DOMAIN  # GPUs a training EP group may span with TP (see ep_domain)


@dataclass(frozen=True, slots=True)
class GpuInfo:
    id: str
    memory_bytes: float
    bf16_flops: float | None
    fp8_flops: float | None
    fp4_flops: float | None
    fp4_formats: frozenset[str]
    int8_ops: float | None  # dense INT8 tensor-core peak, op/s (only for the W8A8 warning)
    hbm_bw: float | None
    intra_bw: float
    inter_bw: float
    link_kind: str
    scale_up_domain: int  # GPUs sharing the scale-up link (data/gpus.json; 1 when not given)
    host_gpus: int  # GPUs in one host: --gpus-per-node's default (4 on an NVL72 tray, else 8)
    compute_mfu: float | None  # data/calibration.json, fitted to a published run
    mfu_range: tuple[float, float] | None
    mfu_calibrated: bool
    warnings: tuple[str, ...]
