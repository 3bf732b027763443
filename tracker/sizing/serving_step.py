"""The serving step model (docs/serving.md): the achievable shares of one GPU class
(data/serving.json), and the cost of one continuous-batching step, TTFT and the operating
point of a replica. Pure arithmetic on plain numbers; `tracker.sizing.serving` sizes and
searches plans with it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tracker.core.data_files import read_json
from tracker.sizing.throughput import BUSBW_EFFICIENCY

# Calibration ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Calibration:
    """Achievable shares for one GPU class, and whether this GPU was measured."""

    gpu_class: str
    bandwidth_share: float  # of peak HBM bandwidth, in decode
    prefill_compute_share: float  # of dense peak, for prompt tokens
    decode_compute_share: float  # of dense peak, for decode tokens
    allreduce_latency_s: float  # per tensor-parallel all-reduce
    memory_utilization: float  # share of GPU memory the engine takes (weights + KV)
    token_budget: int  # tokens per step (chunked prefill)
    max_batch: int  # sequences per replica
    calibrated: bool
    source: str
    # Speed at which a decode step's grouped GEMMs read block-scaled FP8 routed experts,
    # relative to the dense GEMMs the bandwidth share was fitted on (1: the same);
    # `Shape.block_fp8_experts`, docs/serving.md "Expert reads".
    block_fp8_expert_read: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return {"gpu_class": self.gpu_class, "calibrated": self.calibrated,
                "bandwidth_share": self.bandwidth_share,
                "prefill_compute_share": self.prefill_compute_share,
                "decode_compute_share": self.decode_compute_share,
                "allreduce_latency_us": round(self.allreduce_latency_s * 1e6, 3),
                "source": self.source}


@lru_cache(maxsize=1)
def _serving_data() -> dict[str, Any]:
    return read_json("serving.json")


@lru_cache(maxsize=256)
def calibration_for(gpu_id: str, family: str) -> Calibration:
    data = _serving_data()
    engine = data["engine"]
    chosen_name: str = data["fallback_class"]
    chosen: dict[str, Any] | None = None
    for name, cls in data["classes"].items():
        if gpu_id in cls["gpus"] or family in cls.get("families", ()):
            chosen_name, chosen = name, cls
            break
    if chosen is None:
        chosen = data["classes"][chosen_name]
    return Calibration(
        gpu_class=chosen_name, bandwidth_share=float(chosen["bandwidth_share"]),
        prefill_compute_share=float(chosen["prefill_compute_share"]),
        decode_compute_share=float(chosen["decode_compute_share"]),
        allreduce_latency_s=float(chosen["allreduce_latency_us"]) * 1e-6,
        memory_utilization=float(engine["memory_utilization"]),
        block_fp8_expert_read=float(chosen.get("block_fp8_expert_read", 1.0)),
        token_budget=int(engine["token_budget"]), max_batch=int(engine["max_batch"]),
        calibrated=gpu_id in chosen.get("calibrated_gpus", ()),
        source=chosen["source"],
    )


def mla_moe_layer_overhead_s() -> float:
    """Seconds of kernels' fixed costs per decoder layer of an MLA + MoE model in every
    forward pass (data/serving.json engine.mla_moe_layer_overhead_us, docs/serving.md
    "Kernel floor")."""
    return float(_serving_data()["engine"]["mla_moe_layer_overhead_us"]) * 1e-6


# The step model (pure arithmetic; inputs are plain numbers) ---------------------------------


@dataclass(frozen=True, slots=True)
class Hardware:
    """One GPU as the serving model sees it, and the link its TP group uses."""

    id: str
    memory_bytes: float
    peak_flops: float  # dense, at the compute precision
    hbm_bw: float  # bytes/s
    link_bw: float  # bytes/s, unidirectional, inside the TP group
    calibration: Calibration
    # An attention-DP group larger than a node (or NVLink domain) of `node_gpus` GPUs: the
    # all-to-all's traffic to other nodes runs at `net_bw` bytes/s per GPU (the cluster
    # network at nccl-tests busbw); 0: the group stays inside one domain.
    node_gpus: int = 0
    net_bw: float = 0.0
    # Dense peak of attention's own matmuls (scores and values), at the KV cache's precision
    # (`replica.attention_peak`); 0: peak_flops.
    attention_flops: float = 0.0
    # The BF16 dense peak: the GEMMs whose weights a checkpoint keeps in 16 bits
    # (`Shape.wide_params`) and MLA's absorbed decode attention, which multiplies in BF16
    # whatever the KV cache's dtype (docs/serving.md "Attention precision"); 0: peak_flops.
    bf16_flops: float = 0.0
    # Dense peak of the routed experts' grouped GEMMs when their activations are wider than
    # the weights (MXFP4 experts with MXFP8 activations, W4A8, at the FP8 peak); 0: peak_flops.
    expert_flops: float = 0.0


@dataclass(frozen=True, slots=True)
class Shape:
    """A model and a request shape reduced to what the step model needs."""

    active_params: float
    layers: float
    hidden: float
    attn_width: float  # heads × head_dim
    weights_bytes: float
    expert_bytes_share: float  # share of the weight bytes in routed experts (0 for dense)
    experts: int
    experts_per_token: int
    kv_bytes_per_token: float  # one GPU of the TP group (attention_dp: the whole model's)
    prompt: int
    output: int
    moe_layers: float = 0.0  # layers whose MLP is routed experts (the all-to-alls of EP)
    expert_active_share: float = 0.0  # share of the active parameters in routed experts
    # Attention data parallel with expert parallelism (TensorRT-LLM's enable_attention_dp,
    # SGLang's --enable-dp-attention, DeepSeek-V3's serving): each GPU of the group keeps the
    # whole non-expert model and its own sequences' KV; the routed experts are spread over
    # the group, reached by an all-to-all dispatch and combine per MoE layer.
    attention_dp: bool = False
    # The width a decode token's attention reads each cached token with, when it is not
    # attn_width: MLA decodes weights-absorbed, as multi-query attention over the cached
    # latent (`mla_decode_width`); 0: attn_width.
    decode_attn_width: float = 0.0
    # Active parameters a checkpoint keeps in 16 bits beside quantised ones, whose GEMMs run
    # at the BF16 peak (`ModelSpec.sixteen_bit_params`: attention of DeepSeek's NVFP4
    # exports); their bytes are in weights_bytes.
    wide_params: float = 0.0
    # Routed experts stored in FP8 with per-block scales and served at FP8 (DeepSeek's own
    # checkpoints, `weight_block_size` 128 × 128): their decode reads run at the class's
    # `block_fp8_expert_read` of the dense GEMMs' speed.
    block_fp8_experts: bool = False
    # Seconds every forward pass (a decode step, a prompt's prefill) spends on its kernels'
    # fixed costs beyond their bytes and FLOPs: the many small kernels of an MLA + MoE decoder
    # layer (`replica.layer_overhead_seconds`, docs/serving.md "Kernel floor"); 0: none.
    pass_overhead: float = 0.0
    # Sliding-window (or chunked) attention: `window_layers` of the layers attend to at most
    # `window` cached tokens, so a token reads and multiplies no more of their KV (gpt-oss:
    # every other layer, 128; Llama 4: 36 of 48 layers in chunks of 8,192, of which a token
    # attends to its own chunk, at most 8,192). 0: every layer attends to the whole context.
    # The KV capacity still holds every layer's whole context (docs/serving.md "Windows").
    window: float = 0.0
    window_layers: float = 0.0

    @property
    def resident_context(self) -> float:
        """Average KV tokens of a decoding sequence: prompt + output/2."""
        return self.prompt + self.output / 2.0

    def attended(self, context: float) -> float:
        """Cached tokens a decode token at `context` reads, averaged over the layers: the
        whole context on full layers, at most the window on windowed ones."""
        if not (self.window and self.window_layers):
            return context
        return context - self.window_layers / self.layers * max(0.0, context - self.window)

    @property
    def prompt_attended(self) -> float:
        """Cached tokens a prompt token attends to, averaged over the prompt's positions and
        the layers: s/2 on full layers, W - W^2/(2s) on windowed layers when s > W."""
        s = float(self.prompt)
        if not (self.window and self.window_layers) or s <= self.window:
            return s / 2.0
        w = self.window
        windowed = w - w * w / (2.0 * s)
        return s / 2.0 - self.window_layers / self.layers * (s / 2.0 - windowed)

    @property
    def prefill_per_decode(self) -> float:
        return self.prompt / self.output


def link_bandwidth(info: Any, node_link_gbps: float | None = None) -> float:
    """The bytes/s per GPU a TP group's all-reduce runs on: the offer's link inside the
    instance where the request carries it (tracker.core.fabric via `node_link_gbps`, GB/s), else
    the GPU's typical NVLink/PCIe figure."""
    if node_link_gbps:
        return node_link_gbps * 1e9
    return float(info.intra_bw)


# Bytes of one token's hidden state in the EP dispatch and combine: BF16 both ways (DeepEP's
# normal kernels; its FP8 dispatch would halve one of the two, not modelled).
A2A_BYTES = 2.0


def all_to_all_seconds_per_token(shape: Shape, t: int, hw: Hardware) -> float:
    """Seconds of EP all-to-all per token of a group of `t` GPUs (attention_dp), beyond the
    latencies: every MoE layer dispatches each token to its k experts and combines the k
    results, hidden × A2A_BYTES each way, of which (t − 1)/t leaves the GPU; the group's
    tokens are spread over its t GPUs, which send in parallel at the link's busbw
    (docs/serving.md "Expert parallelism")."""
    if t <= 1 or not shape.moe_layers:
        return 0.0
    per_gpu = 2.0 * shape.moe_layers * shape.experts_per_token * shape.hidden * A2A_BYTES
    g = hw.node_gpus
    if g and t > g and hw.net_bw:
        # of a token's k copies, (g − 1)/t stay in its node, (t − g)/t cross the network
        seconds = per_gpu * ((g - 1) / t / (hw.link_bw * BUSBW_EFFICIENCY)
                             + (t - g) / t / hw.net_bw)
    else:
        seconds = per_gpu * (t - 1) / t / (hw.link_bw * BUSBW_EFFICIENCY)
    return seconds / t


def _allreduce(nbytes: float, t: int, hw: Hardware) -> float:
    if t <= 1:
        return 0.0
    return hw.calibration.allreduce_latency_s + nbytes * 2.0 * (t - 1) / t / (
        hw.link_bw * BUSBW_EFFICIENCY)


def _gemm_params(shape: Shape, hw: Hardware) -> float:
    """The active parameters in the time of the GEMMs' peak: those kept in 16 bits count
    peak/BF16-peak times, routed experts with wider activations peak/expert-peak times."""
    params = shape.active_params
    if shape.wide_params and hw.bf16_flops:
        params += shape.wide_params * (hw.peak_flops / hw.bf16_flops - 1.0)
    if hw.expert_flops and shape.expert_active_share:
        params += shape.expert_active_share * shape.active_params * (
            hw.peak_flops / hw.expert_flops - 1.0)
    return params


def prefill_seconds(shape: Shape, t: int, hw: Hardware) -> float:
    """Compute-bound prefill of one prompt: (2·N·s + 2·L·s²·width)/(t·F·η) + its all-reduces.

    With attention_dp one GPU runs the prompt's attention and non-expert layers alone; only
    its routed-expert FLOPs spread over the group, reached by two all-to-alls per MoE layer."""
    s = shape.prompt
    if shape.attention_dp:
        routed = shape.expert_active_share * shape.active_params
        flops = 2.0 * s * (_gemm_params(shape, hw) - routed + routed / t) \
            + 4.0 * shape.layers * s * shape.prompt_attended * shape.attn_width
        comm = 2.0 * shape.moe_layers * hw.calibration.allreduce_latency_s if t > 1 else 0.0
        return flops / (hw.peak_flops * hw.calibration.prefill_compute_share) + comm \
            + s * t * all_to_all_seconds_per_token(shape, t, hw) + shape.pass_overhead
    flops = 2.0 * _gemm_params(shape, hw) * s \
        + 4.0 * shape.layers * s * shape.prompt_attended * shape.attn_width
    compute = flops / (t * hw.peak_flops * hw.calibration.prefill_compute_share)
    return compute + 2.0 * shape.layers * _allreduce(s * shape.hidden * 2.0, t, hw) \
        + shape.pass_overhead


@dataclass(frozen=True, slots=True)
class Step:
    seconds: float
    memory: float
    compute: float
    communication: float
    overhead: float = 0.0  # Shape.pass_overhead: kernels' fixed costs, in seconds


def experts_touched(experts: int, per_token: int, tokens: float) -> float:
    """Expected distinct experts a layer reads for `tokens` tokens each routed to `per_token`
    of `experts` (uniform, independent routing: the occupancy formula E·(1 − (1 − k/E)^B),
    docs/serving.md "Step"). Between k (one token) and E; real routing is skewed, so this is
    the figure for a balanced router."""
    if experts <= 1 or tokens <= 0:
        return float(min(experts, per_token)) if tokens > 0 else 0.0
    return experts * (1.0 - (1.0 - per_token / experts) ** tokens)


def _expert_read_factor(shape: Shape, hw: Hardware) -> float:
    """Time per routed-expert byte relative to the other weights' bytes: 1 / the class's
    `block_fp8_expert_read` for block-scaled FP8 experts, else 1."""
    if shape.block_fp8_experts:
        return 1.0 / hw.calibration.block_fp8_expert_read
    return 1.0


def _step_terms(shape: Shape, t: int, batch: int, hw: Hardware
                ) -> tuple[float, float, float, float, float]:
    """(memory, decode compute, compute per prompt token, all-reduce latency part, all-reduce
    seconds per token) of one step of a replica with `batch` sequences decoding."""
    cal = hw.calibration
    if shape.attention_dp:
        return _dp_step_terms(shape, t, batch, hw)
    weights = shape.weights_bytes / t
    if shape.expert_bytes_share and shape.experts > 1:
        # experts_touched(E, k, batch) / E, written in the form whose float rounding the
        # pinned serving figures (bench/size_equivalence.py) were computed with.
        touched = 1.0 - (1.0 - shape.experts_per_token / shape.experts) ** batch
        weights *= (1.0 - shape.expert_bytes_share) \
            + shape.expert_bytes_share * touched * _expert_read_factor(shape, hw)
    resident = shape.attended(shape.resident_context)
    memory = (weights + batch * resident * shape.kv_bytes_per_token) / (
        hw.hbm_bw * cal.bandwidth_share)
    decode, per_prompt = _compute_terms(shape, t, batch, resident, hw)
    if t <= 1:
        return memory, decode, per_prompt, 0.0, 0.0
    syncs = 2.0 * shape.layers
    per_token = syncs * shape.hidden * 2.0 * 2.0 * (t - 1) / t / (hw.link_bw * BUSBW_EFFICIENCY)
    return memory, decode, per_prompt, syncs * cal.allreduce_latency_s, per_token


def _compute_terms(shape: Shape, t: int, batch: int, resident: float, hw: Hardware
                   ) -> tuple[float, float]:
    """(decode step, prefill per prompt) compute seconds on one GPU of a group of `t`: the
    same FLOPs whether the group splits them by tensor parallelism or attention DP."""
    cal = hw.calibration
    dense = 2.0 * _gemm_params(shape, hw) / t
    # attention's FLOPs in the time of the GEMMs' peak
    speed = hw.peak_flops / hw.attention_flops if hw.attention_flops else 1.0
    attention = 4.0 * shape.layers * shape.attn_width / t * speed
    # MLA's absorbed decode at the BF16 peak, an FP8 cache or not: FlashMLA dequantises it
    # into BF16 matmuls, and TensorRT-LLM measured +6 % from FP8 KV at equal concurrency
    # (the model: +8 %, +22 % with decode at the FP8 peak)
    decode_attention = 4.0 * shape.layers * shape.decode_attn_width / t * (
        hw.peak_flops / hw.bf16_flops if hw.bf16_flops else speed) \
        if shape.decode_attn_width else attention
    decode = batch * (dense + decode_attention * resident) / (
        hw.peak_flops * cal.decode_compute_share)
    per_prompt = (dense + attention * shape.prompt_attended) / (
        hw.peak_flops * cal.prefill_compute_share)
    return decode, per_prompt


def mla_decode_width(heads: float, kv_lora_rank: float, rope_dim: float) -> float:
    """`Shape.decode_attn_width` of multi-head latent attention. Decoding, MLA runs
    weights-absorbed: W_UK folded into the query and W_UV into the output, it is multi-query
    attention over the cached latent, so each head scores every cached token over
    kv_lora_rank + rope dims (2·(r + rope) FLOPs) and sums the latent values over r (2·r):
    4·width with width = heads·(2r + rope)/2; DeepSeek-V3 (128 heads, r 512, rope 64):
    69,632, 2.8 times heads × head_dim (24,576), the non-absorbed form prefill keeps
    (DeepSeek-V2, arXiv 2405.04434 §2.1.2; TensorRT-LLM tech blog 3, "Weights absorb and
    MQA": absorbed for decode, not for prompts of 256 tokens or more)."""
    return heads * (2.0 * kv_lora_rank + rope_dim) / 2.0


def _dp_step_terms(shape: Shape, t: int, batch: int, hw: Hardware
                   ) -> tuple[float, float, float, float, float]:
    """`_step_terms` of attention_dp: each GPU reads the whole non-expert model, its 1/t of
    the routed experts the group's batch touches, and the KV of its batch/t sequences; the
    FLOPs are those of a TP group (the same work, spread the same); two all-to-alls per MoE
    layer replace the two all-reduces per layer."""
    cal = hw.calibration
    share = shape.expert_bytes_share
    touched = 1.0 - (1.0 - shape.experts_per_token / shape.experts) ** batch \
        if shape.experts > 1 else 1.0
    weights = shape.weights_bytes * ((1.0 - share)
                                     + share * touched / t * _expert_read_factor(shape, hw))
    resident = shape.attended(shape.resident_context)
    memory = (weights + batch / t * resident * shape.kv_bytes_per_token) / (
        hw.hbm_bw * cal.bandwidth_share)
    decode, per_prompt = _compute_terms(shape, t, batch, resident, hw)
    if t <= 1:
        return memory, decode, per_prompt, 0.0, 0.0
    return (memory, decode, per_prompt, 2.0 * shape.moe_layers * cal.allreduce_latency_s,
            all_to_all_seconds_per_token(shape, t, hw))


def decode_step_seconds(shape: Shape, t: int, batch: int, hw: Hardware,
                        prefill_tokens: float) -> Step:
    """One continuous-batching step of a replica: `batch` sequences decode one token each
    and `prefill_tokens` prompt tokens of joining requests ride along (chunked prefill)."""
    memory, decode, per_prompt, latency, per_token = _step_terms(shape, t, batch, hw)
    compute = decode + prefill_tokens * per_prompt
    comm = latency + (batch + prefill_tokens) * per_token
    fixed = shape.pass_overhead
    return Step(memory + compute + comm + fixed, memory, compute, comm, fixed)


def prefill_wait_ttft(prefill: float, tpot: float, batch: int, output: int) -> float:
    """TTFT = queueing for the prefill + the prefill + the first step.

    A request waits behind the prompts of the other `batch − 1` users of a closed loop, who
    start λ = (batch − 1) / E2E requests/s, E2E = W + S + TPOT + (output − 1)·TPOT; prompts
    queue for prefill compute as an M/D/1 queue: W = ρ·S / (2(1 − ρ)), ρ = λ·S, S the prefill
    time. With k = (batch − 1)·S and D = S + output·TPOT that is 2W² + 2(D − k)·W − k·S = 0,
    whose positive root keeps ρ below 1. It is what makes TTFT grow with the load at a steady
    TPOT (NIM 70B TP2 5000/500: 0.41 s at concurrency 1, 0.83 s at 50; docs/serving.md).
    """
    k = (batch - 1) * prefill
    spread = prefill + output * tpot - k
    wait = (math.sqrt(spread * spread + 2.0 * k * prefill) - spread) / 2.0
    return wait + prefill + tpot


@dataclass(frozen=True, slots=True)
class Point:
    """One replica at one concurrency."""

    concurrency: int
    ttft_s: float
    tpot_s: float
    output_tokens_per_s: float  # one replica
    bound: str
    step: Step  # the wall-clock step (every prompt of the steady state included)


def operating_point(shape: Shape, t: int, batch: int, hw: Hardware, *,
                    kv_limited: bool = False) -> Point:
    """TPOT, TTFT and throughput of one replica at `batch` concurrent requests.

    In steady state every finished request is replaced, so the replica prefills
    batch · in/out prompt tokens per step: all of them count for throughput; a request's own
    TPOT sees the other batch - 1 requests' prompts (its own prefill is in its TTFT).
    """
    ratio = shape.prefill_per_decode
    memory, decode, per_prompt, latency, per_token = _step_terms(shape, t, batch, hw)
    prompts = batch * ratio
    compute = decode + prompts * per_prompt
    comm = latency + (batch + prompts) * per_token
    fixed = shape.pass_overhead
    wall = Step(memory + compute + comm + fixed, memory, compute, comm, fixed)
    seen = wall.seconds - ratio * (per_prompt + per_token)  # without its own prompt
    # attention_dp: a GPU prefills only its own sequences' prompts
    queue = max(1, math.ceil(batch / t)) if shape.attention_dp else batch
    ttft = prefill_wait_ttft(prefill_seconds(shape, t, hw), seen, queue, shape.output)
    bound = "kv-capacity" if kv_limited else ("compute" if compute > memory else "memory")
    return Point(batch, ttft, seen, batch / wall.seconds, bound, wall)


def largest_meeting(shape: Shape, t: int, limit: int, hw: Hardware, tpot: float | None,
                    ttft: float | None) -> int:
    """The largest concurrency in [1, limit] whose TPOT and TTFT meet the limits (0: none)."""
    return largest_meeting_at(lambda b: operating_point(shape, t, b, hw), limit, tpot, ttft)


def largest_meeting_at(point_at: Callable[[int], Any], limit: int, tpot: float | None,
                       ttft: float | None) -> int:
    """`largest_meeting` for any operating point of a concurrency (a replica across pipeline
    stages, say). Both TPOT and TTFT rise with concurrency, so a bisection finds it."""
    def ok(b: int) -> bool:
        p = point_at(b)
        return (tpot is None or p.tpot_s <= tpot) and (ttft is None or p.ttft_s <= ttft)

    if limit < 1 or not ok(1):
        return 0
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
