"""The sizing engine: a request in, memory by part, the plan that fits and the run time out.

`size_workload` is pure: no database, no clock, no I/O beyond the bundled presets and GPU
table (parsed once and cached). The GPU-independent part of a request (model, memory by part)
is memoised, so a sweep over GPUs × counts, as `compare` does, pays for it once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
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
    decode_step,
    flops_per_token_factor,
    training_step,
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
    sharding: str = "none"
    offload: str = "none"
    attention: str = "flash"
    recompute: str = "none"
    micro_batch: int = 1
    seq_len: int | None = None
    context: int | None = None
    concurrency: int = 1
    lora_rank: int = 16
    lora_targets: str = "all-linear"
    gpus_per_node: int = 8
    internode_gbps: float | None = None  # GB/s per GPU, unidirectional (400 Gb/s NDR = 50)
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
    )


@lru_cache(maxsize=16384)
def _prepare(key: tuple) -> _Prepared:
    (model_name, params, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, tied,
     max_context, workload, precision, kv_precision, optimizer, sharding, offload, attention,
     recompute, micro_batch, seq_len, context, concurrency, lora_rank, lora_targets,
     group_size) = key
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
            aw, ag, ao = mem.adapter_state_bytes(optimizer)
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
        # ZeRO-3/FSDP gathers one unit (a decoder layer or an embedding matrix) at a time and
        # prefetches the next; its gradients exist until reduce-scattered.
        unit = max(model.layer_params, 0.0 if model.rough else model.vocab * model.hidden)
        per_param_w = weights / model.params
        per_param_g = grads / model.params
        working_set = unit * (2.0 * per_param_w + per_param_g)
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
    mfu_range: tuple[float, float] | None
    mfu_calibrated: bool
    warnings: tuple[str, ...]


@lru_cache(maxsize=512)
def _gpu_info(name: str) -> _GpuInfo:
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
        mfu_range=(float(rng[0]), float(rng[1])) if rng else None,
        mfu_calibrated=bool(extra.get("mfu_calibrated", False)),
        warnings=tuple(resolved.warnings),
    )


# The engine -------------------------------------------------------------------------------


def size_workload(req: SizingRequest) -> SizingResult:
    """Size one job: memory by part, fit, smallest plan, and (with `tokens`) the time."""
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

    job = prep.jobs.get(usable)
    if job is None:
        if len(prep.jobs) > 256:
            prep.jobs.clear()
        job = prep.jobs[usable] = Job(
            training=training, usable=usable, model=model, weights=prep.gpu_weights,
            grads=prep.gpu_grads, optim=prep.gpu_optim, shard=prep.shard,
            offload_all=prep.offload_all, working_set=prep.working_set,
            kept_layer=prep.kept_layer, working_layer=prep.working_layer, out=prep.out,
            overhead=prep.overhead, kv=prep.kv, act_peak=prep.act_peak,
        )
    fits_single = job.per_gpu(1, 1, 1) <= usable
    smallest = Plan(1, 1, 1) if fits_single and req.tensor_parallel in (None, 1) and \
        pp in (None, 1) else job.smallest(tps, pp)
    gpus_needed = smallest.gpus if smallest is not None else None
    reason = None

    plan: Plan | None
    fits: bool
    if count is None:
        plan, fits = smallest, smallest is not None
    else:
        exact, lowest = job.on_count(count, tps, pp)
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
            if gpus_needed is None:
                reason = _nothing_fits_reason(job, tps, model, info, usable, training)
            else:
                reason = (f"does not fit on {count} × {info.id}: needs at least {gpus_needed} "
                          "GPUs")
            warnings.append(reason)
    if plan is None:
        reason = _nothing_fits_reason(job, tps, model, info, usable, training)
        warnings.append(reason)

    result_plan: dict[str, Any] = dict(
        gpu=info.id, count=count, usable_gpu_bytes=int(usable), fits_single_gpu=fits_single,
        gpus_needed=gpus_needed, fits=fits, reason=reason,
    )
    if plan is not None:
        w, g, o, a, kv, ov = job.parts(*_astuple(plan))
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

    if req.tokens is not None:
        result_plan.update(_timing(req, prep, info, plan, count, warnings))
    return SizingResult(**base, **result_plan, warnings=tuple(warnings))


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
            count: int | None, warnings: list[str]) -> dict[str, Any]:
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
    mfu_compute = rng[1] * mfu_factor
    t, p, d = _astuple(plan)
    inter = req.internode_gbps * 1e9 if req.internode_gbps else info.inter_bw
    if req.internode_gbps is not None and req.internode_gbps <= 0:
        raise InvalidInput("--internode-bw must be positive (GB/s per GPU)")
    if prep.training:
        frac = _stage_fraction(model, p) / t
        default_batch = DEFAULT_GLOBAL_BATCH_TOKENS.get(prep.workload,
                                                        DEFAULT_FINETUNE_BATCH_TOKENS)
        global_tokens = max(float(req.global_batch_tokens or default_batch),
                            prep.micro_tokens * d)
        step = training_step(
            flops_per_token=prep.flops_factor * model.active_params,
            micro_tokens=prep.micro_tokens, global_tokens=global_tokens, t=t, p=p, d=d,
            virtual_stages=req.virtual_stages, layers=model.layers, hidden=model.hidden,
            peak_flops=peak, mfu_compute=mfu_compute, grad_sync_bytes=prep.grad_sync * frac,
            zero3_bytes=prep.zero3_volume * frac, zero3=prep.shard == SHARD_ZERO3,
            recompute_full=prep.recompute_full, gpus_per_node=req.gpus_per_node,
            intra_bw=info.intra_bw, inter_bw=inter,
        )
        efficiency = step.efficiency
        mfu = mfu_compute * efficiency
        seconds = flops / (n * peak * mfu) if flops else 0.0
    else:
        if info.hbm_bw is None:
            warnings.append(f"no memory bandwidth for {info.id}; time not estimated")
            return out
        frac = _stage_fraction(model, p) / t
        weights_read = prep.weights * frac
        if model.is_moe:
            # Expected share of experts that `concurrency` tokens touch (uniform routing).
            touched = 1.0 - (1.0 - model.experts_per_token / model.experts) ** prep.concurrency
            expert_share = model.layers * model.experts * model.mlp_params / model.params
            weights_read *= (1.0 - expert_share) + expert_share * touched
        kv_share = 1.0 if p == 1 else math.ceil(model.layers / p) / model.layers
        per_head = 1.0 / t if t < model.kv_heads else 1.0 / model.kv_heads
        decode = decode_step(
            active_params=model.active_params, concurrency=prep.concurrency,
            weight_bytes_read=weights_read, kv_bytes_read=prep.kv * kv_share * per_head,
            t=t, p=p, layers=model.layers, hidden=model.hidden, peak_flops=peak,
            mfu_compute=mfu_compute, hbm_bw=info.hbm_bw, intra_bw=info.intra_bw,
        )
        seconds = tokens / (prep.concurrency * d) * decode.step
        efficiency = decode.efficiency
        mfu = flops / (n * peak * seconds) if seconds else 0.0
        warnings.append("serving time is decode-only (memory-bound roofline, KV read at the full "
                        "context); prefill is not included")
    out.update(mfu=mfu, scaling_efficiency=efficiency, mfu_source="modeled",
               wall_hours=seconds / 3600.0, gpu_hours=seconds / 3600.0 * paid)
    return out


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
