"""Timing: the links a plan runs on, the training step and the run time of a sized plan."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.sizing.architecture import ModelSpec
from tracker.sizing.parts import GpuInfo, Prepared
from tracker.sizing.plan import SHARD_ZERO3, Plan, training_expert_parallel
from tracker.sizing.prepare import (
    DEFAULT_FINETUNE_BATCH_TOKENS,
    DEFAULT_GLOBAL_BATCH_TOKENS,
    gpu_info,
    host_size,
    tp_domain,
)
from tracker.sizing.replica import replica_point
from tracker.sizing.request import SizingRequest
from tracker.sizing.throughput import (
    FP8_MFU_FACTOR,
    FP32_PEAK_FACTOR,
    Links,
    StepModel,
    flops_per_token_factor,
    step_parts,
)


def peak_and_mfu(prep: Prepared, info: GpuInfo) -> tuple[float, float, float]:
    """(peak FLOP/s, MFU factor, single-node MFU) for the request's precision on this GPU."""
    peak, factor = float(info.bf16_flops or 0.0), 1.0
    if prep.precision == "fp8" and info.fp8_flops:
        peak, factor = info.fp8_flops, FP8_MFU_FACTOR
    elif prep.precision == "fp32":
        peak = peak * FP32_PEAK_FACTOR
    rng = info.mfu_range or (0.30, 0.40)
    return peak, factor, (info.compute_mfu or rng[1]) * factor


def tokens_per_step(req: SizingRequest, prep: Prepared, d: int) -> float:
    """Tokens per optimizer step: the request's or the default, at least one micro-batch per
    replica."""
    default = DEFAULT_GLOBAL_BATCH_TOKENS.get(prep.workload, DEFAULT_FINETUNE_BATCH_TOKENS)
    return max(float(req.global_batch_tokens or default), prep.micro_tokens * d)


def plan_links(req: SizingRequest) -> Links:
    """The links a plan for `req` runs its collectives on (the offer's, else the GPU's)."""
    if req.gpu is None:
        raise InvalidInput("links need --gpu")
    return gpu_links(req, gpu_info(req.gpu))


def gpu_links(req: SizingRequest, info: GpuInfo) -> Links:
    # Collectives see the scale-up domain as the node: inside it they run on NVLink (an
    # NVL72's 72 GPUs across 18 hosts), beyond it on the network.
    return link_facts(req, info)[0]


LinkFacts = tuple[Links, tuple[tuple[str, Any], ...]]


def link_facts(req: SizingRequest, info: GpuInfo) -> LinkFacts:
    """(`gpu_links`, the items of the result's `links`: the links the timing used, the
    offer's where given, else the GPU's typical ones) in one memo look-up: a sized result
    needs both, and a sweep sizes one result per query."""
    return _link_facts(req.node_link or info.link_kind,
                       req.node_link_gbps or info.intra_bw / 1e9, host_size(req, info),
                       tp_domain(req, info), req.cluster_gbps, req.internode_gbps,
                       info.inter_bw / 1e9, bool(req.node_link or req.cluster_gbps))


@lru_cache(maxsize=1024)
def _link_facts(kind: str, link_gbps: float, gpn: int, domain: int, cluster_gbps: float | None,
                internode_gbps: float | None, default_per_gpu: float,
                from_offer: bool) -> LinkFacts:
    from tracker.core.fabric import collective_ratios

    if cluster_gbps is not None and cluster_gbps <= 0:
        raise InvalidInput("cluster bandwidth must be positive (Gb/s per instance)")
    if internode_gbps is not None and internode_gbps <= 0:
        raise InvalidInput("--internode-bw must be positive (GB/s per GPU)")
    if cluster_gbps:
        net = cluster_gbps / 8.0 * 1e9
    else:
        net = (internode_gbps or default_per_gpu) * 1e9 * domain
    ratios = collective_ratios(kind)
    links = Links(gpus_per_node=domain, node_link_bw=link_gbps * 1e9,
                  allreduce_ratio=ratios.allreduce, gather_ratio=ratios.gather, nvls=ratios.nvls,
                  node_net_bw=net, net_ratio=collective_ratios("network").allreduce)
    cluster = cluster_gbps or (internode_gbps or default_per_gpu) * 8.0 * gpn
    return links, (("node_link", kind), ("node_link_gbps", link_gbps), ("gpus_per_node", gpn),
                   ("scale_up_domain", domain), ("cluster_gbps", round(cluster, 6)),
                   ("source", "offer" if from_offer else "gpu default"))


def plan_tuple(plan: Plan) -> tuple[int, int, int]:
    return plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel


# Per GPU (id) and precision, what the run time takes from the GPU table: see
# `_timing_constants`. Bounded: cleared when full.
_TIMING_CONSTANTS: dict[tuple[str, str], tuple[float, tuple[float, float], float,
                                               str | None, str | None]] = {}
TIMING_CONSTANTS = 1024


def _timing_constants(info: GpuInfo, precision: str) -> tuple[
        float, tuple[float, float], float, str | None, str | None]:
    """(peak FLOP/s, MFU range as reported, single-node MFU, the no-FP8 warning, the
    uncalibrated-MFU warning) of a GPU at a compute precision: the same for every query on
    that GPU (every figure of a `GpuInfo` follows from its id), so built once."""
    key = (info.id, precision)
    found = _TIMING_CONSTANTS.get(key)
    if found is not None:
        return found
    assert info.bf16_flops is not None  # run_time answers a GPU without compute specs itself
    # Peak: dense BF16, FP8 for fp8 compute, TF32 (half BF16) for fp32 training.
    peak = info.bf16_flops
    mfu_factor = 1.0
    no_fp8 = None
    if precision == "fp8":
        if info.fp8_flops:
            peak, mfu_factor = info.fp8_flops, FP8_MFU_FACTOR
        else:
            no_fp8 = f"{info.id} has no FP8 tensor cores; using its BF16 peak"
    elif precision == "fp32":
        peak = info.bf16_flops * FP32_PEAK_FACTOR
    rng = info.mfu_range or (0.30, 0.40)
    # The range as reported: at the FP8 peak the same run is a smaller share of it.
    shown = (round(rng[0] * mfu_factor, 4), round(rng[1] * mfu_factor, 4))
    uncalibrated = None
    if not info.mfu_calibrated:
        uncalibrated = (f"default MFU for {info.id} is an uncalibrated assumption "
                        f"({shown[0]:.2f}-{shown[1]:.2f}); pass --mfu")
    found = (peak, shown, (info.compute_mfu or rng[1]) * mfu_factor, no_fp8, uncalibrated)
    if len(_TIMING_CONSTANTS) >= TIMING_CONSTANTS:
        _TIMING_CONSTANTS.clear()
    _TIMING_CONSTANTS[key] = found
    return found


def run_time(req: SizingRequest, prep: Prepared, info: GpuInfo, plan: Plan | None,
             count: int | None, warnings: list[str], links: Links,
             step_efficiency: float | None = None) -> dict[str, Any]:
    """The run-time fields; `step_efficiency`, when given, is this plan's training step's
    `StepModel.efficiency` (the planner timed it already)."""
    assert req.tokens is not None  # size() calls run_time only when tokens are given
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
        warnings.append(f"no bf16_tflops figure for {info.id} (data/gpus.json or "
                        f"[gpus.{info.id}]); time not estimated")
        return out
    if plan is None:
        warnings.append("no plan fits, so no time estimate")
        return out

    peak, mfu_range, mfu_compute, no_fp8, uncalibrated = _timing_constants(info,
                                                                           prep.precision)
    if no_fp8 is not None:
        warnings.append(no_fp8)
    t, p, d = plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel
    n = t * p * d
    paid = count if count is not None else n
    out["peak_tflops"] = peak / 1e12
    out["mfu_range"] = mfu_range

    if mfu_given is not None:
        # MFU is defined on the model's FLOPs (6·N·D for training, docs/sizing.md §1.9), not on
        # the executed ones: under full recompute the 8·N·D run takes the same hours at a given
        # MFU (its HFU is 4/3 higher), as PaLM reports 46.2 % MFU at 57.8 % HFU.
        model_flops = flops_per_token_factor(prep.workload, "none") * model.active_params * \
            tokens
        seconds = model_flops / (n * peak * mfu_given) if model_flops else 0.0
        out.update(mfu=mfu_given, scaling_efficiency=None, mfu_source="given",
                   wall_hours=seconds / 3600.0, gpu_hours=seconds / 3600.0 * paid)
        return out

    if uncalibrated is not None:
        warnings.append(uncalibrated)
    if prep.training:
        if step_efficiency is None:
            step_efficiency = _step(req, prep, t, p, d, peak, mfu_compute, links).efficiency
        efficiency = step_efficiency
        seconds = flops / (n * peak * mfu_compute * efficiency) if flops else 0.0
        # MFU counts the model's FLOPs (6·N·D), not the recomputed forward (docs/sizing.md §1.9).
        model_flops = flops_per_token_factor(prep.workload, "none") * model.active_params * \
            tokens
        mfu = model_flops / (n * peak * seconds) if seconds else mfu_compute * efficiency
    else:
        if info.hbm_bw is None:
            warnings.append(f"no memory bandwidth for {info.id}; time not estimated")
            return out
        # The serving model (tracker/sizing/replica.py, docs/serving.md): chunked-prefill
        # steps at the request's concurrency, resident KV, all-reduces, fitted shares.
        point, serve_step, serving_warnings = replica_point(prep, info, t,
                                                            links.node_link_bw / 1e9,
                                                            req.kv_precision)
        for w in serving_warnings:  # mostly none: no generator per query
            if w not in warnings:
                warnings.append(w)
        seconds = tokens / (point.output_tokens_per_s * d)
        efficiency = (serve_step.seconds - serve_step.communication) / serve_step.seconds
        mfu = flops / (n * peak * seconds) if seconds else 0.0
        if p > 1:
            warnings.append("serving with pipeline parallelism is timed as one batch passing "
                            "the stages in turn (no overlap across stages)")
    out.update(mfu=mfu, scaling_efficiency=efficiency, mfu_source="modeled",
               wall_hours=seconds / 3600.0, gpu_hours=seconds / 3600.0 * paid)
    return out


def _step(req: SizingRequest, prep: Prepared, t: int, p: int, d: int, peak: float,
          mfu_compute: float, links: Links) -> StepModel:
    return _step_of(prep, t, p, d, req.virtual_stages, tokens_per_step(req, prep, d), peak,
                    mfu_compute, links)


def _step_of(prep: Prepared, t: int, p: int, d: int, v: int, global_tokens: float,
             peak: float, mfu_compute: float, links: Links) -> StepModel:
    return StepModel(*_step_parts_of(prep, t, p, d, v, global_tokens, peak, mfu_compute,
                                     links))


def _step_parts_of(prep: Prepared, t: int, p: int, d: int, v: int, global_tokens: float,
                   peak: float, mfu_compute: float, links: Links) -> tuple[float, ...]:
    work, volumes = step_inputs(prep, t, p, d, v, global_tokens)
    return step_parts(*work, peak, mfu_compute, *volumes, links)


StepWork = tuple[float, float, float, int, int, int, int, float, float]
StepVolumes = tuple[float, float, bool, bool, float, int, tuple[int, float, float, float] | None]


def step_inputs(prep: Prepared, t: int, p: int, d: int, v: int, global_tokens: float,
                micro_tokens: float | None = None) -> tuple[StepWork, StepVolumes]:
    """`step_parts`' GPU-independent arguments, before and after (peak, MFU): the work
    (FLOPs per token, micro-batch and step tokens, the layout, layers, hidden) and the
    collective volumes of this plan (the planner keeps them across GPUs). `micro_tokens`:
    the tokens per micro-batch when not `prep`'s (the planner's larger micro-batches, whose
    other inputs are the same)."""
    model = prep.model
    frac = _stage_fraction(model, p) / t
    if micro_tokens is None:
        micro_tokens = prep.micro_tokens
    a2a_bytes, a2a_count = _all_to_all(prep, t, p, d, micro_tokens)
    wide = _all_to_all_span(prep, t, d, micro_tokens) if a2a_count else None
    return ((prep.flops_factor * model.active_params, micro_tokens,
             max(global_tokens, micro_tokens * d), t, p, d, v, model.layers, model.hidden),
            (prep.grad_sync * frac, prep.zero3_volume * frac, prep.shard == SHARD_ZERO3,
             prep.recompute_full, a2a_bytes, a2a_count, wide))


def _all_to_all(prep: Prepared, t: int, p: int, d: int,
                micro_tokens: float) -> tuple[float, int]:
    """(bytes per GPU, collectives) of one micro-batch's expert-parallel all-to-alls.

    Per MoE layer of the stage: dispatch and combine forward, the same backward (and again in
    a full recompute), each sending a GPU's micro_tokens/t tokens to their top-k experts,
    k·h·2 bytes a token, of which (EP − 1)/EP leave the GPU (GShard, arXiv 2006.16668 §3.2;
    Megatron-Core's MoE token dispatcher). (0, 0) for a dense model or EP 1."""
    model = prep.model
    if not (prep.training and model.is_moe) or model.rough:
        return 0.0, 0
    ep = training_expert_parallel(int(model.experts), t, d, prep.ep_domain)
    if ep == 1:
        return 0.0, 0
    layers = math.ceil(model.moe_layers * math.ceil(model.layers / p) / model.layers)
    count = (6 if prep.recompute_full else 4) * layers
    per = micro_tokens / t * model.experts_per_token * model.hidden * 2.0 * (ep - 1) / ep
    return per * count, count


def _all_to_all_span(prep: Prepared, t: int, d: int,
                     micro_tokens: float) -> tuple[int, float, float, float]:
    """What the cross-node part of the expert all-to-all needs besides the links: (GPUs the
    EP group spans with TP innermost, t·EP; bytes of one copy of a GPU's micro_tokens/t
    tokens, h·2 each; experts per token k; the share of routing groups a token may reach,
    topk_group/n_group, or 0 without group-limited routing). `step_parts` puts the group on
    the links' nodes (docs/sizing.md §1.12)."""
    model = prep.model
    ep = training_expert_parallel(int(model.experts), t, d, prep.ep_domain)
    limit = model.groups_per_token / model.routing_groups if model.routing_groups else 0.0
    return t * ep, micro_tokens / t * model.hidden * 2.0, float(model.experts_per_token), limit


def _stage_fraction(model: ModelSpec, p: int) -> float:
    if p == 1:
        return 1.0
    extra = 0.0 if model.rough else model.vocab * model.hidden + model.hidden
    return min(1.0, (math.ceil(model.layers / p) * model.layer_params + extra) / model.params)
