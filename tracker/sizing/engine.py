"""The sizing engine: a request in, memory by part, the plan that fits and the run time out.

`size_workload` is pure: no database, no clock, no I/O beyond the bundled presets and GPU
table (parsed once and cached). The GPU-independent part of a request (model, memory by part)
is memoised, so a sweep over GPUs × counts, as `compare` does, pays for it once.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any

from tracker.errors import InvalidInput, NotFound
from tracker.sizing import memory as mem
from tracker.sizing.models import (
    ModelSpec,
    build_model,
    parse_lora_targets,
    resolve_model,
    rough_model,
)
from tracker.sizing.plan import (
    SHARD_CODES,
    SHARD_ZERO3,
    Job,
    Plan,
    tensor_parallel_problem,
    valid_tensor_parallel,
)
from tracker.sizing.throughput import (
    FP8_MFU_FACTOR,
    FP32_PEAK_FACTOR,
    Links,
    StepModel,
    flops_per_token_factor,
    pipeline_bubble,
    step_parts,
)

GiB = mem.GiB
DEFAULT_GLOBAL_BATCH_TOKENS = {"pretrain": 4 * 2**20}  # 4 Mi tokens (Llama 2 pre-training)
DEFAULT_FINETUNE_BATCH_TOKENS = 2**20
DEFAULT_TRAIN_SEQ = 4096
DEFAULT_CONTEXT = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class SizingRequest:
    """Every input of a sizing question. Defaults follow docs/sizing.md.

    Model: `model` (a preset name), or `params` alone (rough path), or the architecture
    (`layers`, `hidden`, `heads` and optionally `kv_heads`, `head_dim`, `intermediate`,
    `vocab`, `tied_embeddings`, `max_context`).
    """

    model: str | None = None
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
    gpus_per_node: int = 8
    internode_gbps: float | None = None  # GB/s per GPU, unidirectional (400 Gb/s NDR = 50)
    # The offer's links (tracker.fabric.Network); None = the GPU's typical ones.
    node_link: str | None = None  # nvlink3|nvlink4|nvlink5|nvlink-bridge|xgmi|pcie
    node_link_gbps: float | None = None  # GB/s per GPU, one direction
    cluster_gbps: float | None = None  # Gb/s per instance, all NICs (3,200 on p5.48xlarge)
    plan: str = "fastest"  # fastest | smallest (today's memory-minimal choice)
    adapter_precision: str | None = None  # LoRA/QLoRA adapters: bf16 (QLoRA's) or fp32
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


_REQUEST_FIELDS = tuple(f.name for f in fields(SizingRequest))


def _with(req: SizingRequest, **changes: Any) -> SizingRequest:
    """`dataclasses.replace` for `SizingRequest` (every field is an init field) without its
    per-field checks: the planner builds one per searched query."""
    values = {name: getattr(req, name) for name in _REQUEST_FIELDS}
    values.update(changes)
    return SizingRequest(**values)


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
    "fits", "gpus_used", "per_gpu", "offloaded_bytes", "kv_capacity_tokens", "reason",
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


# Preparation (GPU-independent, memoised) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Prepared:
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
    warnings: tuple[str, ...]
    base: dict  # the GPU-independent result fields
    jobs: dict  # usable bytes -> Job (its per-plan memory function), filled on demand


def _check_choice(value: str, allowed: tuple[str, ...], flag: str) -> None:
    if value not in allowed:
        raise InvalidInput(f"unknown {flag} {value!r} (one of: {', '.join(allowed)})")


def _model_of(req: SizingRequest) -> ModelSpec:
    arch = (req.layers, req.hidden, req.heads)
    has_arch = any(v is not None for v in (*arch, req.kv_heads, req.head_dim, req.intermediate))
    given = sum((req.model is not None, req.params is not None, has_arch))
    if given == 0:
        raise InvalidInput("give a model: --model NAME, --params N, or --layers/--hidden/--heads")
    if given > 1:
        raise InvalidInput("give only one of --model, --params, or the architecture flags")
    if req.model is not None:
        return resolve_model(req.model)
    if req.params is not None:
        return rough_model(float(req.params))
    if any(v is None for v in arch):
        raise InvalidInput("architecture flags need at least --layers, --hidden and --heads")
    return _custom_model(req.layers, req.hidden, req.heads, req.kv_heads, req.head_dim,
                         req.intermediate, req.vocab, req.tied_embeddings, req.max_context)


@lru_cache(maxsize=1024)
def _custom_model(layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, tied,
                  max_context) -> ModelSpec:
    return build_model(
        id="custom", name=f"custom {layers}L/{hidden}h/{heads}a", layers=layers, hidden=hidden,
        heads=heads, kv_heads=kv_heads, head_dim=head_dim, intermediate=intermediate,
        vocab=vocab or 32000, tied_embeddings=tied, max_context=max_context,
        sources=("architecture flags",))


def _prepare_key(req: SizingRequest) -> tuple:
    return (
        req.model, req.params, req.layers, req.hidden, req.heads, req.kv_heads, req.head_dim,
        req.intermediate, req.vocab, req.tied_embeddings, req.max_context, req.workload,
        req.precision, req.kv_precision, req.optimizer, req.sharding, req.offload,
        req.attention, req.recompute, req.micro_batch, req.seq_len, req.context,
        req.concurrency, req.lora_rank, req.lora_targets, req.quant_group_size,
        req.adapter_precision or "bf16",
    )


@lru_cache(maxsize=16384)
def _prepare(key: tuple) -> _Prepared:
    (model_name, params, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, tied,
     max_context, workload, precision, kv_precision, optimizer, sharding, offload, attention,
     recompute, micro_batch, seq_len, context, concurrency, lora_rank, lora_targets,
     group_size, adapter_precision) = key
    sharding = sharding or "none"
    recompute = recompute or "none"
    micro_batch = 1 if micro_batch is None else micro_batch
    _check_choice(adapter_precision, mem.ADAPTER_PRECISIONS, "adapter precision")
    _check_choice(workload, mem.WORKLOADS, "workload")
    _check_choice(precision, mem.PRECISIONS, "precision")
    _check_choice(kv_precision, mem.KV_PRECISIONS, "KV precision")
    _check_choice(optimizer, mem.OPTIMIZERS, "optimizer")
    _check_choice(sharding, mem.SHARDINGS, "sharding")
    _check_choice(offload, mem.OFFLOADS, "offload")
    _check_choice(attention, mem.ATTENTIONS, "attention")
    _check_choice(recompute, mem.RECOMPUTES, "recompute")
    for label, value in (("--micro-batch", micro_batch), ("--concurrency", concurrency),
                         ("--lora-rank", lora_rank), ("--quant-group-size", group_size)):
        if not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{label} must be a positive integer, got {value!r}")
    req = SizingRequest(model=model_name, params=params, layers=layers, hidden=hidden,
                        heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                        intermediate=intermediate, vocab=vocab, tied_embeddings=tied,
                        max_context=max_context)
    model = _model_of(req)
    warnings: list[str] = []
    if model.rough:
        warnings.append("rough path: architecture assumed from --params (multi-head attention,"
                        " so the KV cache is an upper bound); give --model or the architecture "
                        "flags for exact figures")
    training = workload in mem.TRAINING_WORKLOADS
    adapters = workload in mem.ADAPTER_WORKLOADS

    # Sequence length and context, checked against the model's maximum.
    limit = model.max_context
    if training:
        length = seq_len or context or min(DEFAULT_TRAIN_SEQ, limit or DEFAULT_TRAIN_SEQ)
        flag = "--seq-len"
    else:
        length = context or seq_len or limit or DEFAULT_CONTEXT
        flag = "--context"
    if not isinstance(length, int) or length < 1:
        raise InvalidInput(f"{flag} must be a positive integer, got {length!r}")
    if limit is not None and length > limit:
        extended = model.max_context_extended
        if extended is not None and length <= extended:
            warnings.append(f"{flag} {length} exceeds {model.id}'s native {limit} tokens: "
                            f"needs rope scaling (YaRN) up to {extended}")
        else:
            raise InvalidInput(f"{flag} {length} is longer than {model.id}'s maximum context of "
                               f"{extended or limit} tokens")

    # Precision rules.
    nf4 = workload == "qlora"
    if nf4 and precision not in ("bf16", "fp16", "int4"):
        raise InvalidInput(f"qlora keeps the base in 4-bit NF4 with {precision} is not a QLoRA "
                           "setup; use --precision bf16 (compute) or --workload lora "
                           f"--precision {precision}")
    if training and not adapters and precision in ("int8", "int4"):
        raise InvalidInput(f"{precision} weights cannot be trained directly; use --workload "
                           "qlora (or lora) to train adapters on a quantised base")
    if not training:
        if sharding != "none" or offload != "none" or optimizer != "adamw":
            warnings.append("--sharding, --offload and --optimizer apply to training; ignored "
                            "for inference")
        sharding, offload = "none", "none"
    if offload == "all" and sharding not in ("zero3", "fsdp"):
        raise InvalidInput("--offload all (parameters too) needs --sharding zero3 or fsdp")

    kv_name = kv_precision
    if kv_name == "auto":
        kv_name = "fp32" if precision == "fp32" else ("fp16" if precision == "fp16" else "bf16")
    kv_byte = mem.KV_BYTES[kv_name]
    kv_per_token = mem.kv_bytes_per_token(model, kv_byte)

    weights = mem.weights_bytes(model, "int4" if nf4 else precision, group_size=group_size,
                                nf4=nf4)
    grads = optim = 0.0
    trainable = 0.0
    activations = kv = act_peak = 0.0
    kept_layer = working_layer = out = 0.0
    working_set = 0.0
    shard = SHARD_CODES[sharding]
    micro_tokens = float(micro_batch * length)
    overhead = mem.TRAIN_OVERHEAD_BYTES if training else mem.INFERENCE_OVERHEAD_BYTES
    grad_sync = zero3_volume = 0.0
    recompute_full = recompute == "full"
    if training:
        if adapters:
            targets = parse_lora_targets(lora_targets)
            trainable = model.lora_params(lora_rank, targets)
            aw, ag, ao = mem.adapter_state_bytes(optimizer, adapter_precision)
            weights += trainable * aw
            grads, optim = trainable * ag, trainable * ao
        else:
            trainable = model.params
            w_b, g_b, o_b = mem.state_bytes(precision, optimizer)
            weights = model.params * w_b
            grads, optim = model.params * g_b, model.params * o_b
        per_layer_token = mem.activation_bytes_per_token_layer(model, length, attention,
                                                               recompute)
        if recompute_full:
            kept_layer = 2.0 * model.hidden * micro_tokens
            working_layer = per_layer_token * micro_tokens
        else:
            kept_layer = per_layer_token * micro_tokens
        out = mem.training_output_bytes_per_token(model) * micro_tokens
        activations = model.layers * kept_layer + out + working_layer
        # ZeRO-3/FSDP working set as DeepSpeed estimates it (stage3.py@38327e0,
        # `largest_layer_memory = 4 * largest_layer_params`): the 16-bit parameters and
        # gradients of the largest module (one embedding or linear matrix), gathered.
        largest = (model.layer_params / 3.0 if model.rough else max(
            model.vocab * model.hidden, model.hidden * model.intermediate,
            model.hidden * model.heads * model.head_dim))
        per_param_w = weights / model.params
        per_param_g = grads / model.params
        working_set = largest * (per_param_w + per_param_g)
        if shard == SHARD_ZERO3:
            zero3_volume = 2.0 * weights + grads
        else:
            grad_sync = grads
        if adapters:
            warnings.append(f"{workload} throughput is not calibrated by any cited measurement; "
                            "FLOPs use ~4·N·D" + (" and QLoRA dequantisation makes it slower"
                                                 if nf4 else ""))
    else:
        kv = mem.kv_cache_bytes(model, kv_byte, length, concurrency)
        act_peak = mem.inference_activation_peak(model, context=length, concurrency=concurrency)
        activations = act_peak

    gpu_weights, gpu_grads, gpu_optim = weights, grads, optim
    offloaded = 0.0
    if offload in ("optimizer", "all"):
        # DeepSpeed ZeRO-Offload semantics: the reduced gradients and the optimizer states (and
        # its step) live in CPU memory; with "all" the parameters too (ZeRO-3 offload_param).
        offloaded += grads + optim
        gpu_grads = gpu_optim = 0.0
        if offload == "all":
            offloaded += weights
            gpu_weights = 0.0
        warnings.append(f"offload: CPU memory needed ≈ {offloaded / GiB:.1f} GiB; the CPU "
                        "optimizer step and PCIe transfers are not in the time estimate")

    return _Prepared(
        model=model, workload=workload, training=training,
        precision="nf4" if nf4 else precision, seq_len=float(length) if training else 0.0,
        context=float(length) if not training else 0.0, concurrency=concurrency,
        weights=weights, grads=grads, optim=optim, gpu_weights=gpu_weights, gpu_grads=gpu_grads,
        gpu_optim=gpu_optim, offloaded=offloaded, activations=activations, kv=kv,
        kv_per_token=kv_per_token, overhead=overhead, trainable=trainable, shard=shard,
        offload_all=offload == "all", working_set=working_set, kept_layer=kept_layer,
        working_layer=working_layer, out=out, act_peak=act_peak,
        flops_factor=flops_per_token_factor(workload, recompute), grad_sync=grad_sync,
        zero3_volume=zero3_volume, micro_tokens=micro_tokens, recompute_full=recompute_full,
        warnings=tuple(warnings),
        base=dict(
            model=model.id, workload=workload, precision="nf4" if nf4 else precision,
            params=round(model.params), active_params=round(model.active_params),
            trainable_params=round(trainable), weights_bytes=round(weights),
            gradients_bytes=round(grads), optimizer_bytes=round(optim),
            activations_bytes=round(activations), kv_cache_bytes=round(kv),
            kv_cache_bytes_per_token=round(kv_per_token),
            overhead_bytes=round(overhead),
            total_bytes=round(weights + grads + optim + activations + kv + overhead),
            offloaded_bytes=round(offloaded),
        ),
        jobs={},
    )


@dataclass(frozen=True, slots=True)
class _GpuInfo:
    id: str
    memory_bytes: float
    bf16_flops: float | None
    fp8_flops: float | None
    hbm_bw: float | None
    intra_bw: float
    inter_bw: float
    link_kind: str
    compute_mfu: float | None  # data/calibration.json, fitted to a published run
    mfu_range: tuple[float, float] | None
    mfu_calibrated: bool
    warnings: tuple[str, ...]


@lru_cache(maxsize=1)
def _compute_mfu() -> dict[str, float]:
    """Single-node compute MFU per GPU, each fitted to one published run
    (data/calibration.json; docs/calibration-training.md)."""
    import json
    from importlib import resources

    table = json.loads(resources.files("data").joinpath("calibration.json").read_text("utf-8"))
    return {gpu: float(row["value"]) for gpu, row in table["compute_mfu"].items()}


@lru_cache(maxsize=512)
def _gpu_info(name: str) -> _GpuInfo:
    from tracker.fabric import gpu_link
    from tracker.gpus import resolve_gpu

    resolved = resolve_gpu(name)
    gpu = resolved.gpu
    specs = gpu.specs
    extra = specs.extra if specs is not None else {}
    tflops = (specs.bf16_tflops if specs else None)
    fp8 = (specs.fp8_tflops if specs else None)
    hbm = (specs.memory_bandwidth_gbps if specs else None)
    link = (specs.link_gbps_unidirectional if specs else None) or 31.0
    inter = extra.get("internode_gbps_unidirectional") or 12.5
    rng = extra.get("mfu_range")
    return _GpuInfo(
        id=gpu.id, memory_bytes=float(gpu.memory_bytes),
        bf16_flops=tflops * 1e12 if tflops else None, fp8_flops=fp8 * 1e12 if fp8 else None,
        hbm_bw=hbm * 1e9 if hbm else None, intra_bw=link * 1e9, inter_bw=inter * 1e9,
        link_kind=gpu_link(gpu.id)[0], compute_mfu=_compute_mfu().get(gpu.id),
        mfu_range=(float(rng[0]), float(rng[1])) if rng else None,
        mfu_calibrated=bool(extra.get("mfu_calibrated", False)),
        warnings=tuple(resolved.warnings),
    )


# The engine -------------------------------------------------------------------------------


PLANS = ("fastest", "smallest")
# What the training planner tries when the request leaves a choice open (docs/sizing.md §1.11):
# micro-batches within the global batch, recomputation, ZeRO stage. ZeRO-1 and ZeRO-2 move
# the same bytes as DDP (ZeRO paper), so among them the least sharding that fits is as fast.
SEARCH_MICRO_BATCHES = (1, 2, 4, 8, 16)
SEARCH_SHARDINGS = ("none", "zero1", "zero2", "zero3")
RUNNERS_UP = 3


def size_workload(req: SizingRequest) -> SizingResult:
    """Size one job: memory by part, fit, the plan, and (with `tokens`) the time.

    Training on a GPU with compute specs: the fastest plan that fits, searched over TP, PP,
    DP, micro-batch (gradient accumulation fills the global batch), recomputation and ZeRO
    stage, with whatever the request fixes left fixed (`plan="smallest"`: the memory-minimal
    plan of earlier versions). Otherwise the smallest plan, or the one the request fixes.
    """
    if req.plan not in PLANS:
        raise InvalidInput(f"unknown --plan {req.plan!r} (one of: {', '.join(PLANS)})")
    if _searches(req):
        searched = _size_searched(req)
        if searched is not None:
            return searched
    fixed = all(v is not None for v in (req.tensor_parallel, req.pipeline_parallel))
    # Open choices take their memory-minimal defaults (micro-batch 1, no recompute, no
    # sharding) inside `_prepare`.
    return _size_fixed(req, "fixed" if fixed else "smallest")


def _peak_and_mfu(prep: _Prepared, info: _GpuInfo) -> tuple[float, float, float]:
    """(peak FLOP/s, MFU factor, single-node MFU) for the request's precision on this GPU."""
    peak, factor = float(info.bf16_flops or 0.0), 1.0
    if prep.precision == "fp8" and info.fp8_flops:
        peak, factor = info.fp8_flops, FP8_MFU_FACTOR
    elif prep.precision == "fp32":
        peak = peak * FP32_PEAK_FACTOR
    rng = info.mfu_range or (0.30, 0.40)
    return peak, factor, (info.compute_mfu or rng[1]) * factor


def _virtual_options(req: SizingRequest, p: int, layers: int) -> tuple[int, ...]:
    """Interleaved chunks per GPU to try: the request's, or 1, 2, 4, ... while every chunk
    keeps at least one layer (Megatron's interleaved 1F1B)."""
    if p == 1:
        return (1,)
    if req.virtual_stages != 1:
        return (req.virtual_stages,)
    out, v = [], 1
    while v * p <= layers and v <= MAX_VIRTUAL_STAGES:
        out.append(v)
        v *= 2
    return tuple(out) or (1,)


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


_KEY_SHARDING, _KEY_RECOMPUTE, _KEY_MICRO_BATCH = 15, 18, 19
MAX_VIRTUAL_STAGES = 8


def _size_searched(req: SizingRequest) -> SizingResult | None:
    """The fastest fitting training plan, or None to let the fixed path answer (and raise
    the one-line error) when the request cannot be searched or nothing fits.

    Every candidate's step costs at least its compute (k·N per token over all GPUs at peak ×
    MFU), its pipeline bubble at the most micro-batches, and its TP all-reduces at bandwidth;
    candidates go from the least model parallelism up and stop being timed once that bound
    passes the best time found. Memory grows with the micro-batch, so the scan over
    micro-batches stops at the first that does not fit.
    """
    if not 0 < req.usable_fraction <= 1 or not isinstance(req.gpus_per_node, int) or \
            req.gpus_per_node < 1 or (req.count is not None and (
                not isinstance(req.count, int) or req.count < 1)) or req.virtual_stages < 1:
        return None
    info = _gpu_info(req.gpu)
    if info.bf16_flops is None:
        return None
    usable = req.usable_fraction * info.memory_bytes
    gpn = req.gpus_per_node
    if req.offload == "all" and req.sharding is None:
        shardings: tuple[str, ...] = ("zero3",)
    else:
        shardings = (req.sharding,) if req.sharding else SEARCH_SHARDINGS
    if req.recompute:
        recomputes: tuple[str, ...] = (req.recompute,)
    else:
        recomputes = ("none", "selective", "full") if req.attention == "eager" else \
            ("none", "full")
    mbs = (req.micro_batch,) if req.micro_batch else SEARCH_MICRO_BATCHES
    request_key = _prepare_key(req)
    base_key = list(request_key)
    # GPU-independent: shared by every GPU (and count) the same request is searched on.
    variants = _variant_table(request_key)

    def variant(sh: str, rc: str, mb: int) -> tuple[_Prepared, Job]:
        """The prepared variant and its memory function (usable-independent: compare
        `per_gpu` with `usable`, never call `fits`)."""
        found = variants.get((sh, rc, mb))
        if found is None:
            base_key[_KEY_SHARDING], base_key[_KEY_RECOMPUTE] = sh, rc
            base_key[_KEY_MICRO_BATCH] = mb
            prep = _prepare(tuple(base_key))
            found = variants[(sh, rc, mb)] = (prep, _job(prep, math.inf))
        return found

    first, _ = variant(shardings[0], recomputes[0], mbs[0])
    model = first.model
    tps = valid_tensor_parallel(model, True, gpn)
    if req.tensor_parallel is not None:
        if req.tensor_parallel not in tps:
            return None
        tps = (req.tensor_parallel,)
    pp = req.pipeline_parallel
    if pp is not None and (not isinstance(pp, int) or not 1 <= pp <= model.layers):
        return None

    # The fewest GPUs: the most frugal choice (most sharding, full recompute, the smallest
    # micro-batch) decides it; a search fit below it lowers it further.
    frugal_prep, _unbounded = variant(shardings[-1], recomputes[-1], mbs[0])
    frugal = _job(frugal_prep, usable)
    if frugal.per_gpu(1, 1, 1) <= usable and tps[0] == 1 and pp in (None, 1):
        smallest: Plan | None = Plan(1, 1, 1)
    else:
        smallest = frugal.smallest(tps, pp)
    gpus_needed = smallest.gpus if smallest is not None else None
    count = req.count if req.count is not None else gpus_needed
    if count is None:
        return None

    peak, _factor, mfu_compute = _peak_and_mfu(first, info)
    links = _links(req, info)
    global_batch = float(req.global_batch_tokens or DEFAULT_GLOBAL_BATCH_TOKENS.get(
        first.workload, DEFAULT_FINETUNE_BATCH_TOKENS))
    layers = math.ceil(model.layers)
    seq = first.micro_tokens / (mbs[0] if req.micro_batch else 1)
    params = model.active_params
    per_token_compute = params / (count * peak * mfu_compute)

    def search(limit: float) -> list[tuple]:
        found: list[tuple] = []
        # Candidates are timed while their bound beats the best few (the plan and its
        # runners-up); `tops` holds those times, ascending.
        tops: list[float] = []
        best = math.inf
        layouts = []
        for t in tps:
            if count % t:
                continue
            rest = count // t
            for p in ([pp] if pp is not None else _divisors(rest)):
                if p <= layers and rest % p == 0:
                    options = _virtual_options(req, p, layers)
                    tried = options if len(options) <= 2 else (options[0], options[-1])
                    layouts.append((t * p, p, t, rest // p, tried))
        layouts.sort()
        base_jobs = {(sh, rc): variant(sh, rc, mbs[0])[1]
                     for sh in shardings for rc in recomputes}
        for rc in recomputes:
            frugal_job = base_jobs[(shardings[-1], rc)]
            factor = flops_per_token_factor(first.workload, rc)
            colls = 6 if rc == "full" else 4
            for _mp, p, t, d, tried in layouts:
                if seq * mbs[0] * d > limit:
                    continue  # even the smallest micro-batch overfills the global batch
                v_top = tried[-1]
                m_max = max(1.0, limit / (seq * mbs[0] * d))
                bound = factor * per_token_compute * (1.0 + pipeline_bubble(p, m_max, v_top))
                if t > 1:
                    bound += (colls * math.ceil(model.layers / p) * model.hidden * 4.0
                              * (t - 1) / t / links.intra_allreduce(t) / d)
                if bound >= best:
                    continue
                # Nothing fits this layout if its most frugal choice fits at no chunk count
                # tried (interleaving adds activations: the fewest chunks may fit where the
                # most do not).
                if all(frugal_job.per_gpu(t, p, d, v) > usable for v in tried):
                    continue
                for v in tried:
                    dense_done = False
                    for sh in shardings:
                        zero3 = sh in ("zero3", "fsdp")
                        if dense_done and (not zero3 or d == 1):
                            # ZeRO-1/2 time as DDP does, and with one replica every stage
                            # is DDP: the first that fits counts.
                            continue
                        # Activations scale with the micro-batch and nothing else does,
                        # so one sizing gives the largest micro-batch that fits.
                        job1 = base_jobs[(sh, rc)]
                        per1 = job1.per_gpu(t, p, d, v)
                        if per1 > usable or seq * mbs[0] * d > limit:
                            continue
                        act1 = job1.activations(t, p, v)
                        cap = (mbs[0] * (usable - per1 + act1) / act1 if act1 > 0
                               else math.inf)
                        sizes = [mb for mb in mbs if mb <= cap * (1 + 1e-12)
                                 and seq * mb * d <= limit]
                        dense_done = True if d == 1 else (dense_done or not zero3)
                        if p == 1:
                            # Without a pipeline a larger micro-batch is never slower (the
                            # same compute per token, fewer messages and gathers, more
                            # backward to hide the all-reduce behind): time the largest.
                            sizes = sizes[-1:]
                        elif len(sizes) > 2:
                            # With one, the bubble favours the smallest and message latency
                            # the largest; the ends bracket the choice.
                            sizes = [sizes[0], sizes[-1]]
                        fitting = []
                        for mb in sizes:
                            prep, job = variant(sh, rc, mb)
                            if job.per_gpu(t, p, d, v) <= usable:  # the estimate, checked
                                fitting.append((mb, prep))
                        for mb, prep in fitting:
                            # `limit` only filters; a step holds the global batch or, when
                            # one micro-batch per replica exceeds it, that many tokens.
                            step = _step_parts_of(prep, t, p, d, v, global_batch, peak,
                                                  mfu_compute, links)[-1]
                            per_token = step / max(global_batch, prep.micro_tokens * d)
                            bisect.insort(tops, per_token)
                            if len(tops) > RUNNERS_UP + 1:
                                tops.pop()
                            if len(tops) == RUNNERS_UP + 1:
                                best = tops[-1]
                            found.append((per_token, _SHARDING_RANK.get(sh, 9),
                                          recomputes.index(rc), t * p, p, v, mb, sh, rc, t, d))
        return found

    # Micro-batch × DP stays within the global batch; only when one sequence per replica
    # already exceeds it on this many GPUs does the step grow past it.
    found = search(global_batch) or search(math.inf)
    if not found:
        return None
    found.sort()
    _pt, _r, _c, _tp, p, v, mb, sh, rc, t, _d = found[0]
    chosen = _with(req, sharding=sh, recompute=rc, micro_batch=mb, tensor_parallel=t,
                     pipeline_parallel=p, count=count, virtual_stages=v)
    # The search covers more layouts than the smallest-plan walk (any PP at any TP), so a
    # fit it finds below that count lowers it: "fits on N" and "needs M" never disagree.
    result = _size_fixed(chosen, "fastest",
                         count if gpus_needed is None else min(gpus_needed, count))
    if req.count is None:
        result.count = None
    runners: list[dict[str, Any]] = []
    for per_token, _r, _c, _tp, p2, v2, mb2, sh2, rc2, t2, d2 in found[1:]:
        if len(runners) == RUNNERS_UP:
            break
        entry: dict[str, Any] = {
            "tensor_parallel": t2, "pipeline_parallel": p2, "virtual_stages": v2,
            "data_parallel": d2, "micro_batch": mb2, "recompute": rc2, "sharding": sh2,
            "seconds_per_million_tokens": per_token * 1e6,
        }
        if req.tokens is not None:
            entry["wall_hours"] = per_token * float(req.tokens) / 3600.0
        runners.append(entry)
    result.runners_up = runners
    return result


_SHARDING_RANK = {name: i for i, name in enumerate((*SEARCH_SHARDINGS, "fsdp"))}


@lru_cache(maxsize=4096)
def _variant_table(request_key: tuple) -> dict[tuple[str, str, int], tuple[_Prepared, Job]]:
    """(sharding, recompute, micro-batch) -> (prepared variant, its memory function at
    unbounded usable memory), filled by the search: pure in the request's GPU-independent
    key, so the GPUs a request is compared on share it (at most 4 × 3 × 5 entries)."""
    return {}


def _searches(req: SizingRequest) -> bool:
    if req.plan != "fastest" or req.gpu is None or req.workload not in mem.TRAINING_WORKLOADS:
        return False
    return any(v is None for v in (req.tensor_parallel, req.pipeline_parallel, req.micro_batch,
                                    req.recompute, req.sharding))


def _size_fixed(req: SizingRequest, plan_kind: str,
                gpus_needed: int | None = None) -> SizingResult:
    """Size with every plan choice but (t, p, d) fixed by the request. `gpus_needed`, when
    the caller (the planner) already knows it and the plan on `req.count` fits, skips the
    smallest-plan walk."""
    prep = _prepare(_prepare_key(req))
    model = prep.model
    warnings = list(prep.warnings)
    base = prep.base
    if req.gpu is None:
        if req.count is not None or req.tokens is not None:
            raise InvalidInput("--count and --tokens need --gpu")
        return SizingResult(**base, warnings=tuple(warnings))

    usable_fraction = req.usable_fraction
    if not 0 < usable_fraction <= 1:
        raise InvalidInput(f"--usable-fraction must be in (0, 1], got {usable_fraction}")
    gpn = req.gpus_per_node
    if not isinstance(gpn, int) or gpn < 1:
        raise InvalidInput(f"--gpus-per-node must be a positive integer, got {gpn!r}")
    count = req.count
    if count is not None and (not isinstance(count, int) or count < 1):
        raise InvalidInput(f"--count must be a positive integer, got {count!r}")
    info = _gpu_info(req.gpu)
    warnings.extend(info.warnings)
    usable = usable_fraction * info.memory_bytes
    training = prep.training

    tps = valid_tensor_parallel(model, training, gpn)
    if req.tensor_parallel is not None:
        t = req.tensor_parallel
        if not isinstance(t, int) or t < 1:
            raise InvalidInput(f"--tp must be a positive integer, got {t!r}")
        problem = tensor_parallel_problem(model, t, training)
        if problem:
            raise InvalidInput(problem)
        if t > gpn:
            raise InvalidInput(f"--tp {t} is larger than --gpus-per-node {gpn}; tensor "
                               "parallelism stays inside a node")
        tps = (t,)
    pp = req.pipeline_parallel
    if pp is not None and (not isinstance(pp, int) or not 1 <= pp <= model.layers):
        raise InvalidInput(f"--pp must be between 1 and the {model.layers:g} layers, got {pp!r}")
    if req.virtual_stages < 1:
        raise InvalidInput("--virtual-stages must be at least 1")

    job = _job(prep, usable)
    fits_single = job.per_gpu(1, 1, 1) <= usable
    if gpus_needed is None:
        smallest = Plan(1, 1, 1) if fits_single and req.tensor_parallel in (None, 1) and \
            pp in (None, 1) else job.smallest(tps, pp)
        gpus_needed = smallest.gpus if smallest is not None else None
    else:
        smallest = None  # known: the plan on req.count fits (the planner checked it)
    reason = None

    plan: Plan | None
    fits: bool
    if count is None:
        plan = smallest
        fits = smallest is not None and job.fits(*_astuple(smallest), req.virtual_stages)
    else:
        exact, lowest = job.on_count(count, tps, pp, req.virtual_stages)
        if exact is not None:
            plan, fits = exact, True
        elif smallest is not None and smallest.gpus <= count:
            mp = smallest.tensor_parallel * smallest.pipeline_parallel
            plan = Plan(smallest.tensor_parallel, smallest.pipeline_parallel, count // mp)
            fits = job.fits(*_astuple(plan))
            idle = count - plan.gpus
            warnings.append(f"{count} GPUs do not factor into a fitting TP×PP×DP plan; using "
                            f"{plan.gpus} ({idle} idle)")
        else:
            plan, fits = lowest, False
            # About the plan whose memory is printed beside it, then the way out.
            w, g, o, a, kv, ov = job.parts(*_astuple(lowest), req.virtual_stages)
            reason = (f"does not fit on {count} × {info.id}: as TP {lowest.tensor_parallel} × "
                      f"PP {lowest.pipeline_parallel} × DP {lowest.data_parallel} one GPU "
                      f"needs {(w + g + o + a + kv + ov) / GiB:.1f} GiB (activations "
                      f"{a / GiB:.1f}, model states and KV {(w + g + o + kv) / GiB:.1f}) > "
                      f"usable {usable / GiB:.1f} GiB")
            if gpus_needed is not None:
                reason += f"; needs at least {gpus_needed} GPUs"
            elif training:
                reason += ("; try --recompute full, a smaller --micro-batch or --seq-len, "
                           "--sharding zero3 or offload, or a larger GPU")
            warnings.append(reason)
    if plan is None:
        reason = _nothing_fits_reason(job, tps, model, info, usable, training)
        warnings.append(reason)

    links = _links(req, info)
    result_plan: dict[str, Any] = dict(
        gpu=info.id, count=count, usable_gpu_bytes=int(usable), fits_single_gpu=fits_single,
        gpus_needed=gpus_needed, fits=fits, reason=reason, plan=plan_kind,
        links=_links_json(req, info),
    )
    if training:
        result_plan.update(micro_batch=req.micro_batch or 1, recompute=req.recompute or "none",
                           sharding=req.sharding or "none", virtual_stages=req.virtual_stages)
    if plan is not None:
        w, g, o, a, kv, ov = job.parts(*_astuple(plan), req.virtual_stages)
        per_gpu = w + g + o + a + kv + ov
        result_plan.update(
            tensor_parallel=plan.tensor_parallel, pipeline_parallel=plan.pipeline_parallel,
            data_parallel=plan.data_parallel, gpus_used=plan.gpus, per_gpu_bytes=int(per_gpu),
            per_gpu={"weights": int(w), "gradients": int(g), "optimizer": int(o),
                     "activations": int(a), "kv_cache": int(kv), "overhead": int(ov)},
        )
        if not training and prep.kv_per_token:
            # Tokens of KV (summed over requests, full-attention layers) that fit beside the
            # weights, activations and overhead on this plan: vLLM's "max concurrency × length".
            t, p = plan.tensor_parallel, plan.pipeline_parallel
            share = 1.0 if p == 1 else math.ceil(model.layers / p) / model.layers
            per_head = 1.0 / t if t < model.kv_heads else 1.0 / model.kv_heads
            room = usable - (per_gpu - kv)
            per_token = prep.kv_per_token * share * per_head
            result_plan["kv_capacity_tokens"] = int(room / per_token) if room > 0 else 0
    else:
        floor = _floor_plan(job, tps, model)
        result_plan["per_gpu_bytes"] = int(job.per_gpu(*floor))

    if training and plan is not None:
        result_plan["gradient_accumulation"] = math.ceil(
            _global_tokens(req, prep, plan.data_parallel)
            / (prep.micro_tokens * plan.data_parallel) - 1e-9)
    if req.tokens is not None:
        result_plan.update(_timing(req, prep, info, plan, count, warnings, links))
    return SizingResult(**base, **result_plan, warnings=tuple(warnings))


def _job(prep: _Prepared, usable: float) -> Job:
    """The per-plan memory function of a prepared request at `usable` bytes per GPU."""
    job = prep.jobs.get(usable)
    if job is None:
        if len(prep.jobs) > 256:
            prep.jobs.clear()
        job = prep.jobs[usable] = Job(
            training=prep.training, usable=usable, model=prep.model, weights=prep.gpu_weights,
            grads=prep.gpu_grads, optim=prep.gpu_optim, shard=prep.shard,
            offload_all=prep.offload_all, working_set=prep.working_set,
            kept_layer=prep.kept_layer, working_layer=prep.working_layer, out=prep.out,
            overhead=prep.overhead, kv=prep.kv, act_peak=prep.act_peak,
        )
    return job


def _global_tokens(req: SizingRequest, prep: _Prepared, d: int) -> float:
    """Tokens per optimizer step: the request's or the default, at least one micro-batch per
    replica."""
    default = DEFAULT_GLOBAL_BATCH_TOKENS.get(prep.workload, DEFAULT_FINETUNE_BATCH_TOKENS)
    return max(float(req.global_batch_tokens or default), prep.micro_tokens * d)


def plan_links(req: SizingRequest) -> Links:
    """The links a plan for `req` runs its collectives on (the offer's, else the GPU's)."""
    if req.gpu is None:
        raise InvalidInput("links need --gpu")
    return _links(req, _gpu_info(req.gpu))


def _links(req: SizingRequest, info: _GpuInfo) -> Links:
    return _links_of(req.node_link or info.link_kind, req.node_link_gbps or info.intra_bw / 1e9,
                     req.gpus_per_node, req.cluster_gbps, req.internode_gbps,
                     info.inter_bw / 1e9)


@lru_cache(maxsize=1024)
def _links_of(kind: str, link_gbps: float, gpn: int, cluster_gbps: float | None,
              internode_gbps: float | None, default_per_gpu: float) -> Links:
    from tracker.fabric import collective_ratios

    if cluster_gbps is not None and cluster_gbps <= 0:
        raise InvalidInput("cluster bandwidth must be positive (Gb/s per instance)")
    if internode_gbps is not None and internode_gbps <= 0:
        raise InvalidInput("--internode-bw must be positive (GB/s per GPU)")
    if cluster_gbps:
        net = cluster_gbps / 8.0 * 1e9
    else:
        net = (internode_gbps or default_per_gpu) * 1e9 * gpn
    ratios = collective_ratios(kind)
    return Links(gpus_per_node=gpn, node_link_bw=link_gbps * 1e9,
                 allreduce_ratio=ratios.allreduce, gather_ratio=ratios.gather, nvls=ratios.nvls,
                 node_net_bw=net, net_ratio=collective_ratios("network").allreduce)


def _links_json(req: SizingRequest, info: _GpuInfo) -> dict[str, Any]:
    """The links the timing used: the offer's where given, else the GPU's typical ones."""
    return dict(_links_items(req.node_link or info.link_kind,
                             req.node_link_gbps or info.intra_bw / 1e9, req.gpus_per_node,
                             req.cluster_gbps, req.internode_gbps, info.inter_bw / 1e9,
                             bool(req.node_link or req.cluster_gbps)))


@lru_cache(maxsize=1024)
def _links_items(kind: str, link_gbps: float, gpn: int, cluster_gbps: float | None,
                 internode_gbps: float | None, default_per_gpu: float,
                 from_offer: bool) -> tuple[tuple[str, Any], ...]:
    cluster = cluster_gbps or (internode_gbps or default_per_gpu) * 8.0 * gpn
    return (("node_link", kind), ("node_link_gbps", link_gbps), ("gpus_per_node", gpn),
            ("cluster_gbps", round(cluster, 6)),
            ("source", "offer" if from_offer else "gpu default"))


def _astuple(plan: Plan) -> tuple[int, int, int]:
    return plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel


def _floor_plan(job: Job, tps: tuple[int, ...], model: ModelSpec) -> tuple[int, int, int]:
    """The most split plan tried: top TP, one layer per stage (ZeRO-3: states sharded away)."""
    t = tps[-1]
    if job.training and job.shard == SHARD_ZERO3:
        return t, 1, 1 << 20
    p = max(1, math.ceil(model.layers))
    return t, p, (1 << 20) if job.training and job.shard else 1


def _nothing_fits_reason(job: Job, tps: tuple[int, ...], model: ModelSpec, info: _GpuInfo,
                         usable: float, training: bool) -> str:
    t, p, d = _floor_plan(job, tps, model)
    w, g, o, a, kv, ov = job.parts(t, p, d)
    total = w + g + o + a + kv + ov
    how = f"TP={t}" + (f", one layer per stage (PP={p})" if p > 1 else "") + (
        ", ZeRO sharding across any number of GPUs" if training and job.shard else "")
    hint = ("try --recompute full, a smaller --micro-batch or --seq-len, --sharding zero3 or "
            "offload, or a larger GPU") if training else \
        "try a shorter --context, lower --concurrency, --kv-precision fp8, or a larger GPU"
    return (f"nothing fits on {info.id}: even with {how} one GPU needs {total / GiB:.1f} GiB "
            f"(activations {a / GiB:.1f} GiB, model states and KV {(w + g + o + kv) / GiB:.1f}"
            f" GiB) > usable {usable / GiB:.1f} GiB; {hint}")


def _timing(req: SizingRequest, prep: _Prepared, info: _GpuInfo, plan: Plan | None,
            count: int | None, warnings: list[str], links: Links) -> dict[str, Any]:
    assert req.tokens is not None  # size() calls _timing only when tokens are given
    tokens = float(req.tokens)
    if tokens < 0:
        raise InvalidInput(f"--tokens must be non-negative, got {req.tokens}")
    mfu_given = req.mfu
    if mfu_given is not None and not 0 < mfu_given <= 1:
        raise InvalidInput(f"--mfu must be in (0, 1] (a fraction, e.g. 0.4), got {mfu_given}")
    model = prep.model
    flops = prep.flops_factor * model.active_params * tokens
    out: dict[str, Any] = {"tokens": tokens, "flops": flops}
    if info.bf16_flops is None:
        warnings.append(f"no compute specs for {info.id}; time not estimated")
        return out
    if plan is None:
        warnings.append("no plan fits, so no time estimate")
        return out

    # Peak: dense BF16, FP8 for fp8 compute, TF32 (half BF16) for fp32 training.
    peak = info.bf16_flops
    mfu_factor = 1.0
    if prep.precision == "fp8":
        if info.fp8_flops:
            peak, mfu_factor = info.fp8_flops, FP8_MFU_FACTOR
        else:
            warnings.append(f"{info.id} has no FP8 tensor cores; using its BF16 peak")
    elif prep.precision == "fp32":
        peak = info.bf16_flops * FP32_PEAK_FACTOR
    n = plan.gpus
    paid = count if count is not None else n
    out["peak_tflops"] = peak / 1e12
    rng = info.mfu_range or (0.30, 0.40)
    out["mfu_range"] = (round(rng[0] * mfu_factor, 4), round(rng[1] * mfu_factor, 4))

    if mfu_given is not None:
        seconds = flops / (n * peak * mfu_given) if flops else 0.0
        out.update(mfu=mfu_given, scaling_efficiency=None, mfu_source="given",
                   wall_hours=seconds / 3600.0, gpu_hours=seconds / 3600.0 * paid)
        return out

    if not info.mfu_calibrated:
        warnings.append(f"default MFU for {info.id} is an uncalibrated assumption "
                        f"({rng[0]:.2f}-{rng[1]:.2f}); pass --mfu")
    mfu_compute = (info.compute_mfu or rng[1]) * mfu_factor
    t, p, d = _astuple(plan)
    if prep.training:
        step = _step(req, prep, t, p, d, peak, mfu_compute, links)
        efficiency = step.efficiency
        seconds = flops / (n * peak * mfu_compute * efficiency) if flops else 0.0
        # MFU counts the model's FLOPs (6·N·D), not the recomputed forward (docs/sizing.md §1.9).
        model_flops = flops_per_token_factor(prep.workload, "none") * model.active_params * \
            tokens
        mfu = model_flops / (n * peak * seconds) if seconds else mfu_compute * efficiency
    else:
        if info.hbm_bw is None:
            warnings.append(f"no memory bandwidth for {info.id}; time not estimated")
            return out
        # The serving model (tracker/sizing/serving.py, docs/serving.md): chunked-prefill
        # steps at the request's concurrency, resident KV, all-reduces, fitted shares.
        from tracker.sizing.serving import replica_point

        point, serve_step, serving_warnings = replica_point(prep, info, t,
                                                            links.node_link_bw / 1e9)
        warnings.extend(w for w in serving_warnings if w not in warnings)
        seconds = tokens / (point.output_tokens_per_s * d)
        efficiency = (serve_step.seconds - serve_step.communication) / serve_step.seconds
        mfu = flops / (n * peak * seconds) if seconds else 0.0
        if p > 1:
            warnings.append("serving with pipeline parallelism is timed as one batch passing "
                            "the stages in turn (no overlap across stages)")
    out.update(mfu=mfu, scaling_efficiency=efficiency, mfu_source="modeled",
               wall_hours=seconds / 3600.0, gpu_hours=seconds / 3600.0 * paid)
    return out


def _step(req: SizingRequest, prep: _Prepared, t: int, p: int, d: int, peak: float,
          mfu_compute: float, links: Links) -> StepModel:
    return _step_of(prep, t, p, d, req.virtual_stages, _global_tokens(req, prep, d), peak,
                    mfu_compute, links)


def _step_of(prep: _Prepared, t: int, p: int, d: int, v: int, global_tokens: float,
             peak: float, mfu_compute: float, links: Links) -> StepModel:
    return StepModel(*_step_parts_of(prep, t, p, d, v, global_tokens, peak, mfu_compute,
                                     links))


def _step_parts_of(prep: _Prepared, t: int, p: int, d: int, v: int, global_tokens: float,
                   peak: float, mfu_compute: float, links: Links) -> tuple[float, ...]:
    model = prep.model
    frac = _stage_fraction(model, p) / t
    return step_parts(
        prep.flops_factor * model.active_params, prep.micro_tokens,
        max(global_tokens, prep.micro_tokens * d), t, p, d, v, model.layers, model.hidden,
        peak, mfu_compute, prep.grad_sync * frac, prep.zero3_volume * frac,
        prep.shard == SHARD_ZERO3, prep.recompute_full, links,
    )


def _stage_fraction(model: ModelSpec, p: int) -> float:
    if p == 1:
        return 1.0
    extra = 0.0 if model.rough else model.vocab * model.hidden + model.hidden
    return min(1.0, (math.ceil(model.layers / p) * model.layer_params + extra) / model.params)


def smallest_plan(req: SizingRequest) -> SizingResult:
    """The smallest fitting plan on `req.gpu` (the same as size_workload with count=None)."""
    if req.count is not None:
        from dataclasses import replace

        req = replace(req, count=None)
    return size_workload(req)


__all__ = ["NotFound", "SizingRequest", "SizingResult", "size_workload", "smallest_plan"]
