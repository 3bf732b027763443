"""FLOPs, MFU, communication and run time (docs/sizing.md §1.9-1.10).

Communication follows the NCCL conventions (nccl-tests doc/PERFORMANCE.md): a ring all-reduce
of S bytes over n ranks takes S/B · 2(n-1)/n, reduce-scatter and all-gather S/B · (n-1)/n,
with B the bottleneck link's unidirectional bandwidth (NVLink inside a node, the per-GPU NIC
share across nodes) at an achievable 80 % ("busbw = 0.8 × link rate", docs/sizing.md §1.10).
Scaling efficiency comes out of comm/compute, never from a fixed table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BUSBW_EFFICIENCY = 0.8
# llm-analysis' minimum latency per tensor-parallel message.
MESSAGE_LATENCY_S = 8e-6
# Achievable share of HBM bandwidth in the memory-bound decode (llm-analysis
# hbm_memory_efficiency, "0.9 aggressive").
HBM_EFFICIENCY = 0.9
# FP8 MFU relative to BF16 MFU: LLM Foundry's FP8 3B row gives 1.36× the BF16 throughput at
# 2× the peak, i.e. 0.68 of the BF16 utilisation (docs/sizing.md §6.5).
FP8_MFU_FACTOR = 0.68
# FP32 training runs on TF32 tensor cores at half the BF16 dense rate (A100, H100).
FP32_PEAK_FACTOR = 0.5
# The fraction of a micro-batch's compute that a data-parallel gradient all-reduce can hide
# behind: the backward pass, 4ND of 6ND (DDP overlaps bucketed all-reduces with backward).
BACKWARD_SHARE = 2.0 / 3.0


def allreduce_seconds(nbytes: float, n: int, bandwidth: float) -> float:
    """Ring all-reduce: S/B · 2(n-1)/n. `bandwidth` in bytes/s (use the unidirectional figure).

    15 GB over 8 NVLink4 GPUs at 450 GB/s: 58.3 ms (72.9 ms at 360 GB/s busbw), not 19 ms.
    """
    if n <= 1:
        return 0.0
    return nbytes * 2.0 * (n - 1) / n / bandwidth


def pipeline_bubble(stages: int, microbatches: float, virtual_stages: int = 1) -> float:
    """1F1B bubble time over ideal time: (p-1)/m, or (p-1)/(v·m) interleaved (Narayanan 2021)."""
    if stages <= 1:
        return 0.0
    return (stages - 1) / (virtual_stages * microbatches)


def flops_per_token_factor(workload: str, recompute: str) -> float:
    """k in FLOPs = k · N · D.

    Training 6 (forward 2 + backward 4; Kaplan 2020), 8 with full recompute (one more forward;
    llm-analysis, Narayanan). LoRA/QLoRA: forward 2 + input gradients 2, no weight gradients for
    the frozen base: about 4, plus 2 with full recompute [derived, docs/sizing.md §1.9]. Serving:
    2 per generated token.
    """
    if workload == "inference":
        return 2.0
    if workload in ("lora", "qlora"):
        return 6.0 if recompute == "full" else 4.0
    return 8.0 if recompute == "full" else 6.0


def foundry_mfu(tokens_per_s_per_gpu: float, *, params: float, layers: int, d_model: int,
                seq_len: int, peak_flops: float) -> float:
    """MFU as LLM Foundry computes it, attention FLOPs included.

    mfu = (3·flops_per_seq + 3·attn_flops_per_seq) · seq_per_sec / (n_gpus · peak), with
    flops_per_seq = 2·N·s and attn_flops_per_seq = L·2·2·d·s² (benchmarking README).
    """
    flops_per_seq = 2.0 * params * seq_len
    attn_flops_per_seq = layers * 2.0 * 2.0 * d_model * seq_len**2
    seq_per_s_per_gpu = tokens_per_s_per_gpu / seq_len
    return (3.0 * flops_per_seq + 3.0 * attn_flops_per_seq) * seq_per_s_per_gpu / peak_flops


@dataclass(frozen=True, slots=True)
class StepModel:
    """The pieces of one training step, in seconds per GPU (for inspection and tests)."""

    microbatches: float
    compute: float  # per micro-batch
    tensor_parallel: float  # per micro-batch, not overlapped
    pipeline_p2p: float  # per micro-batch
    zero3_exposed: float  # per micro-batch
    data_parallel_exposed: float  # per step
    bubble: float  # fraction
    step: float

    @property
    def efficiency(self) -> float:
        return self.microbatches * self.compute / self.step


def training_step(*, flops_per_token: float, micro_tokens: float, global_tokens: float,
                  t: int, p: int, d: int, virtual_stages: int, layers: float, hidden: float,
                  peak_flops: float, mfu_compute: float, grad_sync_bytes: float,
                  zero3_bytes: float, zero3: bool, recompute_full: bool, gpus_per_node: int,
                  intra_bw: float, inter_bw: float) -> StepModel:
    """step = m·(compute + TP + p2p + exposed ZeRO-3)·(1 + bubble) + exposed DP all-reduce.

    - compute per micro-batch: k·N·T/(t·p) FLOPs at peak × MFU (the single-node efficiency);
    - TP (Megatron): 2 all-reduces per layer forward, 2 backward (+2 with full recompute) of
      T·h·2 bytes each, on NVLink, not overlapped;
    - PP: activation send + gradient receive per micro-batch, and the 1F1B bubble (p-1)/(v·m);
    - ZeRO-3/FSDP: all-gather (fwd), all-gather (bwd), reduce-scatter per micro-batch (3Ψ, the
      ZeRO paper's 1.5× DDP), overlapped with that micro-batch's compute (prefetch);
    - DDP/ZeRO-1/2: one gradient all-reduce per step (2Ψ), overlapped with the last backward.
    A DP group spans nodes when t·d exceeds the GPUs in a node; then the NIC is the bottleneck.
    """
    tokens_per_replica_step = micro_tokens * d
    m = max(1.0, global_tokens / tokens_per_replica_step)
    compute = flops_per_token * micro_tokens / (t * p) / (peak_flops * mfu_compute)
    tp_time = 0.0
    if t > 1:
        collectives = (6 if recompute_full else 4) * math.ceil(layers / p)
        msg = micro_tokens * hidden * 2.0
        one = msg * 2.0 * (t - 1) / t / (intra_bw * BUSBW_EFFICIENCY)
        tp_time = collectives * max(one, MESSAGE_LATENCY_S)
    p2p = 0.0
    n = t * p * d
    if p > 1:
        bw = inter_bw if n > gpus_per_node else intra_bw
        msg = micro_tokens * hidden * 2.0 / t
        p2p = 2.0 * max(msg / (bw * BUSBW_EFFICIENCY), MESSAGE_LATENCY_S)
    z3_exposed = 0.0
    dp_exposed = 0.0
    if d > 1:
        dp_bw = (inter_bw if t * d > gpus_per_node else intra_bw) * BUSBW_EFFICIENCY
        if zero3:
            z3 = zero3_bytes * (d - 1) / d / dp_bw
            z3_exposed = max(0.0, z3 - compute)
        if grad_sync_bytes:
            ar = allreduce_seconds(grad_sync_bytes, d, dp_bw)
            dp_exposed = max(0.0, ar - BACKWARD_SHARE * compute)
    bubble = pipeline_bubble(p, m, virtual_stages)
    step = m * (compute + tp_time + p2p + z3_exposed) * (1.0 + bubble) + dp_exposed
    return StepModel(m, compute, tp_time, p2p, z3_exposed, dp_exposed, bubble, step)


@dataclass(frozen=True, slots=True)
class DecodeModel:
    step: float  # seconds per decode step of one replica
    compute_or_memory: float  # the part without TP communication
    memory_bound: bool

    @property
    def efficiency(self) -> float:
        return self.compute_or_memory / self.step


def decode_step(*, active_params: float, concurrency: float, weight_bytes_read: float,
                kv_bytes_read: float, t: int, p: int, layers: float, hidden: float,
                peak_flops: float, mfu_compute: float, hbm_bw: float,
                intra_bw: float) -> DecodeModel:
    """One decode step (one token for each of `concurrency` requests) of one replica.

    Roofline per stage (llm-analysis): max(FLOPs/(peak·eff), bytes/(HBM·0.9)), with the bytes
    being the stage's weight shard plus its KV; stages run one after another for one batch.
    TP adds 2 all-reduces per layer of concurrency·h·2 bytes, latency-bound (≥ 8 µs each):
    about 1.3 ms per token for 80 layers (docs/sizing.md §5; docs/claims.md B5).
    """
    flops_gpu = 2.0 * active_params * concurrency / (t * p)
    compute = flops_gpu / (peak_flops * mfu_compute)
    memory = (weight_bytes_read + kv_bytes_read) / (hbm_bw * HBM_EFFICIENCY)
    stage = max(compute, memory)
    tp_time = 0.0
    if t > 1:
        msg = concurrency * hidden * 2.0
        one = msg * 2.0 * (t - 1) / t / (intra_bw * BUSBW_EFFICIENCY)
        tp_time = 2.0 * layers * max(one, MESSAGE_LATENCY_S)
    base = p * stage
    return DecodeModel(base + tp_time, base, memory >= compute)
