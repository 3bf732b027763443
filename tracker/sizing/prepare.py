"""Preparation: the GPU-independent part of a request (model, memory by part, FLOP and
communication volumes), checked and memoised; and the GPU table's figures the engine uses.

Pure: no database, no clock, no I/O beyond the bundled presets and GPU table (parsed once
and cached).
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache
from operator import attrgetter
from typing import Any

from tracker.core.errors import InvalidInput, usage_error
from tracker.core.gpus import on_gpu_overrides
from tracker.sizing import memory as mem
from tracker.sizing.architecture import ModelSpec, build_model, rough_model
from tracker.sizing.models import parse_lora_targets, resolve_model
from tracker.sizing.parts import (
    KEY_ATTENTION,
    KEY_MICRO_BATCH,
    KEY_OFFLOAD,
    KEY_RECOMPUTE,
    KEY_SHARDING,
    KEY_WORKLOAD,
    GpuInfo,
    Prepared,
)
from tracker.sizing.plan import EP_ACROSS_NODES, EP_DOMAIN, SHARD_CODES, SHARD_ZERO3, Job
from tracker.sizing.request import SizingRequest, result_template
from tracker.sizing.throughput import flops_per_token_factor

GiB = mem.GiB
DEFAULT_GLOBAL_BATCH_TOKENS = {"pretrain": 4 * 2**20}  # 4 Mi tokens (Llama 2 pre-training)
DEFAULT_FINETUNE_BATCH_TOKENS = 2**20
DEFAULT_TRAIN_SEQ = 4096
DEFAULT_CONTEXT = 4096


def _check_choice(value: str, allowed: tuple[str, ...], flag: str) -> None:
    if value not in allowed:
        raise InvalidInput(f"unknown {flag} {value!r} (one of: {', '.join(allowed)})")


def _model_of(req: SizingRequest) -> ModelSpec:
    arch = (req.layers, req.hidden, req.heads)
    has_arch = any(v is not None for v in (*arch, req.kv_heads, req.head_dim, req.intermediate))
    given = sum((req.model is not None, req.model_config is not None, req.params is not None,
                 has_arch))
    # The flags the user typed: a usage error (exit 2), which no offer of cost or compare hides
    if given == 0:
        raise usage_error("give a model: --model NAME, --model-config FILE, --params N, or "
                          "--layers/--hidden/--heads")
    if given > 1:
        raise usage_error("give only one of --model, --model-config, --params, or the "
                          "architecture flags")
    if req.model is not None:
        return resolve_model(req.model)
    if req.model_config is not None:
        from tracker.sizing.hf_config import load_model_config

        return load_model_config(req.model_config)
    if req.params is not None:
        return rough_model(float(req.params))
    if any(v is None for v in arch):
        raise usage_error("architecture flags need at least --layers, --hidden and --heads")
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


def prepare_key(req: SizingRequest) -> tuple:
    return (
        req.model, req.params, req.layers, req.hidden, req.heads, req.kv_heads, req.head_dim,
        req.intermediate, req.vocab, req.tied_embeddings, req.max_context, req.workload,
        req.precision, req.kv_precision, req.optimizer, req.sharding, req.offload,
        req.attention, req.recompute, req.micro_batch, req.seq_len, req.context,
        req.concurrency, req.lora_rank, req.lora_targets, req.quant_group_size,
        req.adapter_precision or "bf16", req.model_config, req.cross_entropy, ep_domain(req),
    )


def ep_domain(req: SizingRequest) -> int:
    """The GPUs a training TP × EP group may span, so its all-to-all stays on NVLink: one
    HGX/OAM board's 8 (plan.EP_DOMAIN), or a rack-scale domain where the request or the GPU
    has one (an NVL72 rack's 72, docs/sizing.md §1.12). Part of the preparation's key: the
    planner's GPU-independent tables differ only for rack-scale GPUs. With
    `ep_across_nodes` the group is not capped (`plan.EP_ACROSS_NODES`): it spans nodes and
    its all-to-all crosses the cluster network (timing.step_inputs)."""
    if req.ep_across_nodes and req.workload in mem.TRAINING_WORKLOADS:
        return EP_ACROSS_NODES
    if req.scale_up_domain and req.scale_up_domain > HOST_DOMAIN:
        return int(req.scale_up_domain)
    if req.gpu is None or req.workload not in mem.TRAINING_WORKLOADS:
        return EP_DOMAIN
    try:
        domain = gpu_info(req.gpu).scale_up_domain
    except (InvalidInput, LookupError):  # an unknown GPU is refused by the sizing itself
        return EP_DOMAIN
    return domain if domain > HOST_DOMAIN else EP_DOMAIN


@lru_cache(maxsize=2048)
def preparation(key: tuple) -> Prepared:
    """The prepared request of a `prepare_key`. Training micro-batches above one derive
    from the micro-batch-1 preparation (only activations scale with it), so the planner's
    micro-batch variants cost one preparation."""
    micro_batch = key[KEY_MICRO_BATCH]
    if key[KEY_WORKLOAD] in mem.TRAINING_WORKLOADS:
        if isinstance(micro_batch, int) and micro_batch > 1:
            unit = preparation((*key[:KEY_MICRO_BATCH], 1, *key[KEY_MICRO_BATCH + 1:]))
            return _with_micro_batch(unit, micro_batch)
        sharding, recompute = key[KEY_SHARDING] or "none", key[KEY_RECOMPUTE] or "none"
        # Derived only from valid choices: the unit's preparation checks the rest in the
        # same order, so a bad request fails with the same message either way.
        if (sharding, recompute) != ("none", "none") and key[KEY_OFFLOAD] != "all" and \
                sharding in mem.SHARDINGS and recompute in mem.RECOMPUTES:
            unit_key = list(key)
            unit_key[KEY_SHARDING] = unit_key[KEY_RECOMPUTE] = "none"
            return _with_choices(preparation(tuple(unit_key)), key, sharding, recompute)
    return _prepare_request(key)


def _with_micro_batch(unit: Prepared, micro_batch: int) -> Prepared:
    """A micro-batch-1 training preparation at `micro_batch` sequences per micro-batch."""
    micro_tokens = float(micro_batch * int(unit.seq_len))
    kept_layer, working_layer, out, activations = _activation_fields(
        unit.model, unit.per_layer_token, unit.out_per_token, unit.recompute_full, micro_tokens)
    # `dataclasses.replace` without its per-field work (positional: one attrgetter call).
    values = list(_PREPARED_VALUES(unit))
    for name, value in (("micro_tokens", micro_tokens), ("kept_layer", kept_layer),
                        ("working_layer", working_layer), ("out", out),
                        ("activations", activations), ("jobs", {}),
                        ("base", {**unit.base, **_activation_totals(
                            unit.weights, unit.grads, unit.optim, activations, unit.kv,
                            unit.overhead)})):
        values[_PREPARED_INDEX[name]] = value
    return Prepared(*values)


def _with_choices(unit: Prepared, key: tuple, sharding: str, recompute: str) -> Prepared:
    """A training preparation without sharding or recomputation (`unit`) at `sharding` and
    `recompute`: only the shard code, the collective volumes, the activations and the FLOPs
    factor depend on them (see `_prepare_request`), so the planner's variants of one request
    cost one whole preparation."""
    shard = SHARD_CODES[sharding]
    recompute_full = recompute == "full"
    per_layer_token = mem.activation_bytes_per_token_layer(
        unit.model, int(unit.seq_len), key[KEY_ATTENTION], recompute,
        fp8_cache=mem.fp8_activation_cache(unit.workload, unit.precision))
    kept_layer, working_layer, out, activations = _activation_fields(
        unit.model, per_layer_token, unit.out_per_token, recompute_full, unit.micro_tokens)
    zero3_volume, grad_sync = (2.0 * unit.weights + unit.grads, 0.0) \
        if shard == SHARD_ZERO3 else (0.0, unit.grads)
    values = list(_PREPARED_VALUES(unit))
    for name, value in (("shard", shard), ("recompute_full", recompute_full),
                        ("per_layer_token", per_layer_token), ("kept_layer", kept_layer),
                        ("working_layer", working_layer), ("out", out),
                        ("activations", activations), ("zero3_volume", zero3_volume),
                        ("grad_sync", grad_sync),
                        ("flops_factor", flops_per_token_factor(unit.workload, recompute)),
                        ("jobs", {}),
                        ("base", {**unit.base, **_activation_totals(
                            unit.weights, unit.grads, unit.optim, activations, unit.kv,
                            unit.overhead)})):
        values[_PREPARED_INDEX[name]] = value
    return Prepared(*values)


_PREPARED_FIELDS = tuple(f.name for f in fields(Prepared))
_PREPARED_INDEX = {name: i for i, name in enumerate(_PREPARED_FIELDS)}
_PREPARED_VALUES = attrgetter(*_PREPARED_FIELDS)


def _activation_fields(model: ModelSpec, per_layer_token: float, out_per_token: float,
                       recompute_full: bool,
                       micro_tokens: float) -> tuple[float, float, float, float]:
    """(kept per layer, working layer, output layer, total) activation bytes of a training
    micro-batch of `micro_tokens` (docs/sizing.md §1.5)."""
    working_layer = 0.0
    if recompute_full:
        kept_layer = 2.0 * model.hidden * micro_tokens
        working_layer = per_layer_token * micro_tokens
    else:
        kept_layer = per_layer_token * micro_tokens
    out = out_per_token * micro_tokens
    return kept_layer, working_layer, out, model.layers * kept_layer + out + working_layer


def _activation_totals(weights: float, grads: float, optim: float, activations: float,
                       kv: float, overhead: float) -> dict[str, int]:
    return {"activations_bytes": round(activations),
            "total_bytes": round(weights + grads + optim + activations + kv + overhead)}


def _prepare_request(key: tuple) -> Prepared:
    """The whole preparation: checks, model, sequence, memory by part, volumes."""
    (model_name, params, layers, hidden, heads, kv_heads, head_dim, intermediate, vocab, tied,
     max_context, workload, precision, kv_precision, optimizer, sharding, offload, attention,
     recompute, micro_batch, seq_len, context, concurrency, lora_rank, lora_targets,
     group_size, adapter_precision, model_config, cross_entropy, domain) = key
    sharding = sharding or "none"
    recompute = recompute or "none"
    micro_batch = 1 if micro_batch is None else micro_batch
    _check_choices(key, sharding, recompute, micro_batch)
    req = SizingRequest(model=model_name, params=params, layers=layers, hidden=hidden,
                        heads=heads, kv_heads=kv_heads, head_dim=head_dim,
                        intermediate=intermediate, vocab=vocab, tied_embeddings=tied,
                        max_context=max_context, model_config=model_config)
    model = _model_of(req)
    # --precision native: the weights as the config ships them, computing at their precision.
    native = precision == "native"
    if native:
        precision = model.native_precision
    warnings: list[str] = []
    if model.rough:
        warnings.append("rough path: architecture assumed from --params (multi-head attention,"
                        " so the KV cache is an upper bound); give --model or the architecture "
                        "flags for exact figures")
    training = workload in mem.TRAINING_WORKLOADS
    adapters = workload in mem.ADAPTER_WORKLOADS

    length = _sequence_length(model, training, seq_len, context, warnings)
    nf4 = workload == "qlora"
    _check_precision(workload, precision, training)
    if not training:
        if sharding != "none" or offload != "none" or optimizer != "adamw":
            warnings.append("--sharding, --offload and --optimizer apply to training; ignored "
                            "for inference")
        sharding, offload = "none", "none"
    if offload == "all" and sharding not in ("zero3", "fsdp"):
        raise InvalidInput("--offload all (parameters too) needs --sharding zero3 or fsdp")

    kv_byte = _kv_byte(kv_precision, precision)
    kv_per_token = mem.kv_bytes_per_token(model, kv_byte)

    weights = mem.weights_bytes(model, "native" if native and not nf4 else (
        "int4" if nf4 else precision), group_size=group_size, nf4=nf4)
    grads = optim = 0.0
    trainable = 0.0
    activations = kv = act_peak = 0.0
    kept_layer = working_layer = out = 0.0
    per_layer_token = out_per_token = 0.0
    working_set = 0.0
    shard = SHARD_CODES[sharding]
    micro_tokens = float(micro_batch * length)
    overhead = mem.TRAIN_OVERHEAD_BYTES if training else mem.INFERENCE_OVERHEAD_BYTES
    grad_sync = zero3_volume = 0.0
    recompute_full = recompute == "full"
    if training:
        trainable, weights, grads, optim = _model_states(
            model, adapters, weights, precision, optimizer, lora_rank, lora_targets,
            adapter_precision)
        per_layer_token = mem.activation_bytes_per_token_layer(
            model, length, attention, recompute,
            fp8_cache=mem.fp8_activation_cache(workload, precision))
        out_per_token = mem.training_output_bytes_per_token(model, cross_entropy)
        kept_layer, working_layer, out, activations = _activation_fields(
            model, per_layer_token, out_per_token, recompute_full, micro_tokens)
        working_set = _zero3_working_set(model, weights, grads)
        if shard == SHARD_ZERO3:
            zero3_volume = 2.0 * weights + grads
        else:
            grad_sync = grads
        warnings.extend(_training_warnings(model, workload, adapters, nf4))
    else:
        kv = mem.kv_cache_bytes(model, kv_byte, length, concurrency)
        act_peak = mem.inference_activation_peak(model, context=length, concurrency=concurrency)
        activations = act_peak

    gpu_weights, gpu_grads, gpu_optim, offloaded = _offloaded(offload, weights, grads, optim,
                                                              warnings)

    return Prepared(
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
        per_layer_token=per_layer_token, out_per_token=out_per_token, warnings=tuple(warnings),
        base=_result_base(model, workload, "nf4" if nf4 else precision, trainable, weights,
                          grads, optim, activations, kv, kv_per_token, overhead, offloaded),
        jobs={}, ep_domain=domain,
    )


def _training_warnings(model: ModelSpec, workload: str, adapters: bool,
                       nf4: bool) -> list[str]:
    """What a training estimate leaves out: expert imbalance, and adapters' calibration."""
    warnings = []
    if model.is_moe:
        warnings.append("MoE training time: balanced routing assumed (no expert "
                        "imbalance) and the expert all-to-all not overlapped with compute "
                        "(no DualPipe); DeepSeek-V3's published 2.664M H800 GPU-hours come "
                        "out ~7 % lower, with EP inside the node (docs/sizing.md §1.12)")
    if adapters:
        warnings.append(f"{workload} throughput is not calibrated by any cited measurement; "
                        "FLOPs use ~4·N·D" + (" and QLoRA dequantisation makes it slower"
                                             if nf4 else ""))
    return warnings


def _result_base(model: ModelSpec, workload: str, precision: str, trainable: float,
                 weights: float, grads: float, optim: float, activations: float, kv: float,
                 kv_per_token: float, overhead: float, offloaded: float) -> dict[str, Any]:
    """The result fields a preparation fixes (`result_template`), before any GPU."""
    return result_template(dict(
        model=model.id, workload=workload, precision=precision,
        params=round(model.params), active_params=round(model.active_params),
        trainable_params=round(trainable), weights_bytes=round(weights),
        gradients_bytes=round(grads), optimizer_bytes=round(optim),
        **_activation_totals(weights, grads, optim, activations, kv, overhead),
        kv_cache_bytes=round(kv), kv_cache_bytes_per_token=round(kv_per_token),
        overhead_bytes=round(overhead), offloaded_bytes=round(offloaded),
    ))


def _check_choices(key: tuple, sharding: str, recompute: str, micro_batch: Any) -> None:
    (_model, _params, _layers, _hidden, _heads, _kv_heads, _head_dim, _intermediate, _vocab,
     _tied, _max_context, workload, precision, kv_precision, optimizer, _sharding, offload,
     attention, _recompute, _micro_batch, _seq_len, _context, concurrency, lora_rank,
     _lora_targets, group_size, adapter_precision, _model_config, cross_entropy,
     _domain) = key
    _check_choice(adapter_precision, mem.ADAPTER_PRECISIONS, "adapter precision")
    _check_choice(cross_entropy, mem.CROSS_ENTROPIES, "cross entropy")
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


def _sequence_length(model: ModelSpec, training: bool, seq_len: Any, context: Any,
                     warnings: list[str]) -> int:
    """Sequence length (training) or context (serving), checked against the model's
    maximum."""
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
    return length


def _kv_byte(kv_precision: str, precision: str) -> float:
    """Bytes per KV element; "auto" follows the compute precision."""
    if kv_precision == "auto":
        kv_precision = "fp32" if precision == "fp32" else (
            "fp16" if precision == "fp16" else "bf16")
    return mem.KV_BYTES[kv_precision]


def _check_precision(workload: str, precision: str, training: bool) -> None:
    if workload == "qlora" and precision not in ("bf16", "fp16", "int4"):
        raise InvalidInput(f"qlora keeps the base in 4-bit NF4 with {precision} is not a QLoRA "
                           "setup; use --precision bf16 (compute) or --workload lora "
                           f"--precision {precision}")
    if training and workload not in mem.ADAPTER_WORKLOADS and \
            precision in mem.QUANTISED_PRECISIONS:
        raise InvalidInput(f"{precision} weights cannot be trained directly; use --workload "
                           "qlora (or lora) to train adapters on a quantised base")


def _model_states(model: ModelSpec, adapters: bool, base_weights: float, precision: str,
                  optimizer: str, lora_rank: int, lora_targets: str,
                  adapter_precision: str) -> tuple[float, float, float, float]:
    """(trainable parameters, weight, gradient, optimizer bytes) of a training job."""
    if adapters:
        trainable = model.lora_params(lora_rank, parse_lora_targets(lora_targets))
        aw, ag, ao = mem.adapter_state_bytes(optimizer, adapter_precision)
        return trainable, base_weights + trainable * aw, trainable * ag, trainable * ao
    w_b, g_b, o_b = mem.state_bytes(precision, optimizer)
    return model.params, model.params * w_b, model.params * g_b, model.params * o_b


def _zero3_working_set(model: ModelSpec, weights: float, grads: float) -> float:
    """ZeRO-3/FSDP working set as DeepSpeed estimates it (stage3.py@38327e0,
    `largest_layer_memory = 4 * largest_layer_params`): the 16-bit parameters and gradients
    of the largest module (one embedding or linear matrix), gathered."""
    largest = (model.layer_params / 3.0 if model.rough else max(
        model.vocab * model.hidden, model.hidden * model.intermediate,
        model.hidden * model.heads * model.head_dim))
    per_param_w = weights / model.params
    per_param_g = grads / model.params
    return largest * (per_param_w + per_param_g)


def _offloaded(offload: str, weights: float, grads: float, optim: float,
               warnings: list[str]) -> tuple[float, float, float, float]:
    """(GPU-resident weights, gradients, optimizer bytes, bytes offloaded to the CPU).

    DeepSpeed ZeRO-Offload semantics: the reduced gradients and the optimizer states (and its
    step) live in CPU memory; with "all" the parameters too (ZeRO-3 offload_param)."""
    if offload not in ("optimizer", "all"):
        return weights, grads, optim, 0.0
    offloaded = grads + optim
    gpu_weights = weights
    if offload == "all":
        offloaded += weights
        gpu_weights = 0.0
    warnings.append(f"offload: CPU memory needed ≈ {offloaded / GiB:.1f} GiB; the CPU "
                    "optimizer step and PCIe transfers are not in the time estimate")
    return gpu_weights, 0.0, 0.0, offloaded


@lru_cache(maxsize=1)
def _compute_mfu() -> dict[str, float]:
    """Single-node compute MFU per GPU, each fitted to one published run
    (data/calibration.json; docs/calibration-training.md)."""
    from tracker.core.data_files import read_json

    table = read_json("calibration.json")
    return {gpu: float(row["value"]) for gpu, row in table["compute_mfu"].items()}


@lru_cache(maxsize=512)
def gpu_info(name: str) -> GpuInfo:
    from tracker.core.fabric import gpu_link
    from tracker.core.gpus import host_gpus, resolve_gpu

    resolved = resolve_gpu(name)
    gpu = resolved.gpu
    specs = gpu.specs
    extra = specs.extra if specs is not None else {}
    tflops = (specs.bf16_tflops if specs else None)
    fp8 = (specs.fp8_tflops if specs else None)
    fp4 = (specs.fp4_tflops if specs else None)
    hbm = (specs.memory_bandwidth_gbps if specs else None)
    link = (specs.link_gbps_unidirectional if specs else None) or 31.0
    inter = extra.get("internode_gbps_unidirectional") or 12.5
    rng = extra.get("mfu_range")
    return GpuInfo(
        id=gpu.id, memory_bytes=float(gpu.memory_bytes),
        bf16_flops=tflops * 1e12 if tflops else None, fp8_flops=fp8 * 1e12 if fp8 else None,
        fp4_flops=fp4 * 1e12 if fp4 else None,
        fp4_formats=frozenset(specs.fp4_formats if specs and specs.fp4_formats
                              else mem.FP4_PRECISIONS),
        int8_ops=specs.int8_tops * 1e12 if specs and specs.int8_tops else None,
        hbm_bw=hbm * 1e9 if hbm else None, intra_bw=link * 1e9, inter_bw=inter * 1e9,
        link_kind=gpu_link(gpu.id)[0],
        scale_up_domain=int(specs.scale_up_domain or 1) if specs else 1,
        host_gpus=host_gpus(gpu),
        compute_mfu=_compute_mfu().get(gpu.id),
        mfu_range=(float(rng[0]), float(rng[1])) if rng else None,
        mfu_calibrated=bool(extra.get("mfu_calibrated", False)),
        warnings=tuple(resolved.warnings),
    )


HOST_DOMAIN = 8  # the largest scale-up domain inside one host (HGX, OAM boards)


def host_size(req: SizingRequest, info: GpuInfo) -> int:
    """GPUs in one host: `--gpus-per-node`, else the GPU class's own host (4 on a GB200/GB300
    NVL72 compute tray, data/gpus.json `host_gpus`), else an HGX board's 8."""
    return info.host_gpus if req.gpus_per_node is None else req.gpus_per_node


def tp_domain(req: SizingRequest, info: GpuInfo) -> int:
    """The most GPUs one tensor- or expert-parallel group may span: the host
    (`host_size`), or the scale-up domain where it is larger (an NVL72 rack's 72 GPUs
    share one NVLink fabric across its 4-GPU hosts)."""
    # A board's domain (8 on HGX/OAM) is one host's; only a rack-scale one spans hosts.
    domain = req.scale_up_domain or (
        info.scale_up_domain if info.scale_up_domain > HOST_DOMAIN else 1)
    if not isinstance(domain, int) or domain < 1:
        raise InvalidInput(f"the scale-up domain must be a positive number of GPUs, got "
                           f"{domain!r}")
    return max(host_size(req, info), domain)


on_gpu_overrides(gpu_info.cache_clear)



def memory_job(prep: Prepared, usable: float) -> Job:
    """The per-plan memory function of a prepared request at `usable` bytes per GPU."""
    job = prep.jobs.get(usable)
    if job is None:
        if len(prep.jobs) > 256:
            prep.jobs.clear()
        job = prep.jobs[usable] = _new_job(prep, usable)
    return job


def _new_job(prep: Prepared, usable: float) -> Job:
    """`memory_job` without its memo, for a caller that keeps what it computes with the job (a
    memo per GPU memory size would hold a job per prepared variant and GPU, and the garbage
    collector's full passes cost in proportion to what the memos hold)."""
    return Job(
        training=prep.training, usable=usable, model=prep.model, weights=prep.gpu_weights,
        grads=prep.gpu_grads, optim=prep.gpu_optim, shard=prep.shard,
        offload_all=prep.offload_all, working_set=prep.working_set,
        kept_layer=prep.kept_layer, working_layer=prep.working_layer, out=prep.out,
        overhead=prep.overhead, kv=prep.kv, act_peak=prep.act_peak, ep_domain=prep.ep_domain,
    )
