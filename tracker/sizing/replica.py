"""One serving replica as the sizing engine times it: the GPU as the serving model sees it
(`hardware_for`), a prepared request's shape on a tensor-parallel group (`shape_for`), and
its operating point at the request's concurrency and context (`replica_point`, what
`size -w inference --tokens` reports). Below the engine: `serving` plans deployments on
top of both (docs/serving.md).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.core.gpus import on_gpu_overrides
from tracker.sizing.memory import compute_peak, weight_bits, weights_bytes
from tracker.sizing.serving_step import (
    Hardware,
    Point,
    Shape,
    Step,
    calibration_for,
    link_bandwidth,
    mla_decode_width,
    mla_moe_layer_overhead_s,
    operating_point,
)

DEFAULT_OUTPUT_TOKENS = 1000


def split_context(context: int) -> tuple[int, int]:
    """--context alone: min(1,000, context/2) output tokens, the rest prompt."""
    output = min(DEFAULT_OUTPUT_TOKENS, max(1, context // 2))
    return context - output, output


@lru_cache(maxsize=1024)
def _family(gpu_id: str) -> str:
    from tracker.core.gpus import resolve_gpu

    return resolve_gpu(gpu_id).gpu.family or ""


@lru_cache(maxsize=1024)
def hardware_for(info: Any, precision: str, node_link_gbps: float | None = None,
                 kv_precision: str = "auto") -> tuple[Hardware, tuple[str, ...]]:
    """The GPU as the serving model sees it at this weight precision, and its warnings.

    FP8 computes at the FP8 peak only with FP8 tensor cores, FP4/MXFP4 at the FP4 peak only
    with FP4 tensor cores; quantised weights elsewhere run weight-only (W8A16/W4A16) at the
    BF16 peak (tracker/sizing/memory.py compute_peak).
    """
    if info.bf16_flops is None or info.hbm_bw is None:
        from tracker.core.gpus import get_gpu, missing_figures_message

        raise InvalidInput(missing_figures_message(get_gpu(info.id), "serving throughput"))
    cal = calibration_for(info.id, _family(info.id))
    warnings = []
    peak, weight_only = compute_peak(precision, info.id, info.bf16_flops, info.fp8_flops,
                                     info.fp4_flops, info.fp4_formats, int8_ops=info.int8_ops)
    if weight_only is not None:
        warnings.append(weight_only)
    if not cal.calibrated:
        warnings.append(f"serving shares for {info.id} are extrapolated from the "
                        f"{cal.gpu_class} class calibration through its spec-sheet peaks; no "
                        "measurement of this GPU was fitted")
    hw = Hardware(info.id, info.memory_bytes, peak, info.hbm_bw,
                  link_bandwidth(info, node_link_gbps), cal,
                  attention_flops=attention_peak(info, precision, kv_precision),
                  bf16_flops=float(info.bf16_flops),
                  expert_flops=expert_peak(info, precision, peak))
    return hw, tuple(warnings)


def expert_peak(info: Any, precision: str, peak: float) -> float:
    """`Hardware.expert_flops`: MXFP4 experts multiply MXFP8 activations (W4A8) where the
    weights would otherwise run at the FP4 peak: TensorRT-LLM's GPT-OSS deployment guide
    lists its Blackwell MoE backends (CUTLASS, TRTLLM) as MXFP4 weights with MXFP8
    activations, and Blackwell's FP4 rate needs both operands in FP4, so the grouped GEMMs
    run at the FP8 peak. 0 (the weights' peak) otherwise: on Hopper MXFP4 already runs
    weight-only at the BF16 peak (TRITON backend, BF16 activations)."""
    if precision == "mxfp4" and info.fp8_flops and peak > info.fp8_flops:
        return float(info.fp8_flops)
    return 0.0


def sixteen_bit_active(model: Any, precision: str) -> float:
    """`Shape.wide_params`: active parameters whose GEMMs run in 16 bits beside quantised
    ones. A checkpoint that ships only its routed experts in MXFP4 (gpt-oss: attention,
    router and unembedding in BF16, `quantization_config.modules_to_not_convert`) served as
    shipped keeps every non-expert active parameter in BF16; an NVFP4 export of an MLA model
    its attention (`ModelSpec.sixteen_bit_params`)."""
    if model.is_moe and model.quant_method == "mxfp4" and precision == model.native_precision:
        return model.active_params - routed_active_params(model)
    return model.sixteen_bit_params(precision)


def routed_active_params(model: Any) -> float:
    """Routed-expert parameters one token passes through: k of E experts in every MoE
    layer (0 for a dense model)."""
    return model.routed_params / model.experts * model.experts_per_token if model.is_moe else 0.0


def attention_peak(info: Any, precision: str, kv_precision: str) -> float:
    """The dense peak attention's matmuls run at: the KV cache's precision, whatever the
    weights' (TensorRT-LLM tech blog 3: FP8 KV cache with FP8 attention, or BF16 KV with BF16
    attention, beside FP4 weights; no engine attends in FP4). FP8 only with FP8 tensor cores;
    INT8/INT4 KV is dequantised into 16-bit attention."""
    if kv_precision == "auto":
        kv_precision = precision if precision in ("fp32", "fp16") else "bf16"
    if kv_precision == "fp8" and info.fp8_flops:
        return float(info.fp8_flops)
    if kv_precision == "fp32":
        return float(info.bf16_flops) * 0.5
    return float(info.bf16_flops)


def expert_bytes_share(model: Any, precision: str = "bf16") -> float:
    """Share of the weight bytes in routed experts (0 for a dense model); as shipped, the
    experts may be stored narrower than the rest (gpt-oss: MXFP4 experts, bf16 attention),
    and an FP4 checkpoint may keep attention in 16 bits (`ModelSpec.sixteen_bit_params`,
    counted in `memory.weights_bytes`)."""
    if not model.is_moe:
        return 0.0
    if model.quant_method and precision == model.native_precision:
        expert = model.routed_params * model.quant_bits
        return expert / (model.quant_params * model.quant_bits
                         + (model.params - model.quant_params) * 16.0)
    kept = model.sixteen_bit_params(precision)
    if kept:
        # The experts' bytes are their share of the weights as if every matrix were at the
        # precision; the kept 16-bit matrices add to the whole, not to them.
        whole = weights_bytes(model, precision)
        widened = kept * (2.0 - weight_bits(precision) / 8.0)
        return model.routed_params / model.params * (whole - widened) / whole
    return model.routed_params / model.params


def shape_for(prep: Any, t: int, prompt: int, output: int, expert_share: float) -> Shape:
    """The step model's view of a prepared sizing request on a TP group of `t`."""
    model = prep.model
    kv_gpu = prep.kv_per_token / (t if t < model.kv_shards else model.kv_shards)
    return Shape(model.active_params, model.layers, model.hidden,
                 model.heads * model.head_dim, prep.weights, expert_share,
                 model.experts, model.experts_per_token, kv_gpu, prompt, output,
                 expert_active_share=routed_active_params(model) / model.active_params,
                 decode_attn_width=_decode_width(model),
                 wide_params=sixteen_bit_active(model, prep.precision),
                 block_fp8_experts=block_fp8_experts(model, prep.precision),
                 pass_overhead=layer_overhead_seconds(model),
                 window=float(model.sliding_window or 0), window_layers=model.sliding_layers)


def dp_shape_for(prep: Any, prompt: int, output: int, expert_share: float) -> Shape:
    """The step model's view of a MoE replica under attention data parallelism: the whole
    model's KV per token (each GPU holds its own sequences), the MoE layers' all-to-alls."""
    model = prep.model
    routed_active = routed_active_params(model)
    return Shape(model.active_params, model.layers, model.hidden,
                 model.heads * model.head_dim, prep.weights, expert_share,
                 model.experts, model.experts_per_token, prep.kv_per_token, prompt, output,
                 moe_layers=model.moe_layers,
                 expert_active_share=routed_active / model.active_params, attention_dp=True,
                 decode_attn_width=_decode_width(model),
                 wide_params=sixteen_bit_active(model, prep.precision),
                 block_fp8_experts=block_fp8_experts(model, prep.precision),
                 pass_overhead=layer_overhead_seconds(model),
                 window=float(model.sliding_window or 0), window_layers=model.sliding_layers)


def layer_overhead_seconds(model: Any) -> float:
    """`Shape.pass_overhead`: the fixed kernel costs of a forward pass of an MLA + MoE model
    (DeepSeek-V3/R1, Kimi K2), whose decoder layer runs a dozen small kernels (TensorRT-LLM
    tech blog 1's "Everything in One Diagram": 13 modules) that batch-1 decode measures far
    above their bytes; 0 for other models, whose few large GEMMs the fitted shares cover."""
    if model.is_moe and model.is_mla:
        return model.layers * mla_moe_layer_overhead_s()
    return 0.0


def block_fp8_experts(model: Any, precision: str) -> bool:
    """Whether a MoE model's routed experts are served as shipped in block-scaled FP8
    (`quantization_config.weight_block_size`: its fp32 scales put quant_bits above 8)."""
    return bool(model.is_moe and model.quant_method == "fp8" and precision == "fp8"
                and model.quant_bits > 8.0)


def _decode_width(model: Any) -> float:
    """MLA's weights-absorbed decode width (serving_step.mla_decode_width); 0 otherwise."""
    if not model.is_mla:
        return 0.0
    return mla_decode_width(model.heads, model.kv_lora_rank, model.qk_rope_head_dim)


def dp_kv_capacity(prep: Any, t: int, room: float, expert_share: float) -> int:
    """KV tokens of a replica of `t` GPUs under attention data parallelism. `room`: the bytes
    a GPU has for weights and KV (usable memory less the activations and overhead the sizing
    engine puts beside them on a TP group); each GPU keeps the whole non-expert weights,
    (1 − r)·W, its 1/t of the routed experts, r·W/t, and whole tokens' KV (its own
    sequences)."""
    left = room - prep.weights * ((1.0 - expert_share) + expert_share / t)
    return int(t * left / prep.kv_per_token) if left > 0 else 0


def room_beside_kv(prep: Any, t: int, tp_capacity: int) -> float:
    """A TP group of `t`'s bytes per GPU for weights and KV, from its KV capacity: the KV
    room plus its weight shard."""
    model = prep.model
    kv_tp = prep.kv_per_token / (t if t < model.kv_shards else model.kv_shards)
    return tp_capacity * kv_tp + prep.weights / t


def replica_expert_parallel(model: Any, gpus: int) -> int:
    """GPUs one replica spreads its routed experts over: the TP group's (vLLM's
    --enable-expert-parallel puts whole experts on each rank instead of slicing every expert;
    the bytes per GPU are the same), 1 for a dense model."""
    if not model.is_moe:
        return 1
    return math.gcd(int(model.experts), gpus)


def replica_point(prep: Any, info: Any, t: int, node_link_gbps: float | None = None,
                  kv_precision: str = "auto") -> tuple[Point, Step, tuple[str, ...]]:
    """One replica of a sized inference plan at the request's concurrency and context
    (prompt and output split as --context alone splits them): what `size -w inference
    --tokens` times. A pipeline runs its stages one after another for one batch, so its
    step is that of the TP group holding every layer."""
    prompt, output = split_context(int(prep.context))
    hw, warnings = hardware_for(info, prep.precision, node_link_gbps, kv_precision)
    shape = shape_for(prep, t, prompt, output, expert_bytes_share(prep.model, prep.precision))
    point = operating_point(shape, t, prep.concurrency, hw)
    return point, point.step, warnings


on_gpu_overrides(_family.cache_clear)
