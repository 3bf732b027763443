"""FLOPs, MFU, communication and run time (docs/sizing.md §1.9-1.10).

Communication follows the NCCL conventions (nccl-tests doc/PERFORMANCE.md): a ring all-reduce
of S bytes over n ranks takes S/B · 2(n-1)/n, reduce-scatter and all-gather S/B · (n-1)/n,
with B the bus bandwidth measured by nccl-tests on the link the collective runs on (`Links`:
the offer's node link inside an instance, the instance's NIC aggregate across instances;
docs/fabric.md §3).
Scaling efficiency comes out of comm/compute, never from a fixed table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BUSBW_EFFICIENCY = 0.8
# llm-analysis' minimum latency per tensor-parallel message.
MESSAGE_LATENCY_S = 8e-6
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
class Links:
    """The links one plan's collectives run on, with their achievable bus bandwidths.

    `node_link_bw`: bytes/s per GPU one direction inside an instance (the offer's NVLink,
    Infinity Fabric or PCIe); `node_net_bw`: bytes/s per instance, all NICs, between
    instances (None: instances cannot be joined). Ratios are nccl-tests busbw over the link
    rate (data/fabric.json "collectives", docs/fabric.md §3).
    """

    gpus_per_node: int
    node_link_bw: float
    allreduce_ratio: float
    gather_ratio: float
    nvls: bool
    node_net_bw: float | None
    net_ratio: float

    def intra_allreduce(self, n: int) -> float:
        """busbw of an all-reduce over n GPUs of one node. NVLS (in-switch reduction) needs
        enough GPUs to pay off: measured 420 GB/s at 5 H100s up to 480 at 8, ring below
        (NVIDIA/nccl#1455)."""
        if self.nvls and n >= 5:
            return self.node_link_bw * self.allreduce_ratio
        if self.nvls:
            return self.node_link_bw * self.gather_ratio
        return self.node_link_bw * self.allreduce_ratio

    def intra_gather(self) -> float:
        return self.node_link_bw * self.gather_ratio

    def group_busbw(self, group: int, inner: int, allreduce: bool) -> float:
        """busbw of a collective over `group` ranks spaced `inner` GPUs apart (TP inside).

        Inside one node: the node link. Across nodes (rail-optimised: GPU i on NIC i), the
        group's k = gpn/inner ranks in a node share the node's NICs with the node's other
        groups, so it gets k/gpn of the aggregate: the whole aggregate when inner = 1 (a ring
        across nodes runs on every rail), aggregate/t under TP t (hierarchical: each TP
        rank's shard crosses on its own rail). Capped by the node link.
        """
        gpn = self.gpus_per_node
        if group * inner <= gpn:
            return self.intra_allreduce(group) if allreduce else self.intra_gather()
        net = (self.node_net_bw or 0.0) * self.net_ratio
        # max(1, min(group, gpn // max(1, inner))), without the calls (the planner asks
        # this per candidate).
        per_node = gpn // inner if inner > 1 else gpn
        if group < per_node:
            per_node = group
        if per_node < 1:
            per_node = 1
        cross = net * per_node / gpn
        inside = self.intra_allreduce(per_node) if allreduce else self.intra_gather()
        return min(cross, inside) if per_node > 1 else cross

    def cross_node_copies(self, copy_bytes: float, span: int, k: float, limit: float) -> float:
        """Seconds of an EP group's cross-node copies (`step_parts`' a2a_nodes): over n =
        span / gpus-per-node nodes, one copy of `copy_bytes` per other node a token reaches,
        min(k, n) or under group-limited routing min(k, n, max(1, limit · n)), at a GPU's
        share of the node's NICs."""
        nodes = span / self.gpus_per_node
        reach = k if k < nodes else nodes
        if limit:
            limited = limit * nodes
            if limited < 1.0:
                limited = 1.0
            if limited < reach:
                reach = limited
        return copy_bytes * reach * (nodes - 1.0) / nodes / self.p2p(True)

    def p2p(self, spans_nodes: bool) -> float:
        """Point-to-point bandwidth of one GPU: its NVLink, or its rail's share of the NICs."""
        if not spans_nodes:
            return self.intra_gather()
        return (self.node_net_bw or 0.0) * self.net_ratio / self.gpus_per_node


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
                  zero3_bytes: float, zero3: bool, recompute_full: bool,
                  links: Links) -> StepModel:
    """step = m·(compute + TP + p2p + exposed ZeRO-3)·(1 + bubble) + exposed DP all-reduce.

    - compute per micro-batch: k·N·T/(t·p) FLOPs at peak × MFU (the single-node efficiency);
    - TP (Megatron): 2 all-reduces per layer forward, 2 backward (+2 with full recompute) of
      T·h·2 bytes each, on the node link (NVLS where the switch has it), not overlapped;
    - PP: activation send + gradient receive per micro-batch, and the 1F1B bubble (p-1)/(v·m);
    - ZeRO-3/FSDP: all-gather (fwd), all-gather (bwd), reduce-scatter per micro-batch (3Ψ, the
      ZeRO paper's 1.5× DDP), overlapped with that micro-batch's compute (prefetch);
    - DDP/ZeRO-1/2: one gradient all-reduce per step (2Ψ), overlapped with the last backward.
    Placement is Megatron's (TP innermost, then DP, then PP): a DP group spans nodes when
    t·d exceeds the node, and then runs at its share of the node's NICs (`Links`).
    """
    return StepModel(*step_parts(flops_per_token, micro_tokens, global_tokens, t, p, d,
                                 virtual_stages, layers, hidden, peak_flops, mfu_compute,
                                 grad_sync_bytes, zero3_bytes, zero3, recompute_full, 0.0, 0,
                                 None, links))


def step_parts(flops_per_token: float, micro_tokens: float, global_tokens: float, t: int,
               p: int, d: int, virtual_stages: int, layers: float, hidden: float,
               peak_flops: float, mfu_compute: float, grad_sync_bytes: float,
               zero3_bytes: float, zero3: bool, recompute_full: bool, a2a_bytes: float,
               a2a_count: int, a2a_nodes: tuple[int, float, float, float] | None,
               links: Links) -> tuple[float, float, float, float, float, float, float, float]:
    """`training_step` as a plain tuple in `StepModel`'s field order, positional arguments:
    the planner times every candidate with it (no keyword or object cost per candidate).

    `a2a_bytes`, `a2a_count`: an MoE micro-batch's expert-parallel all-to-alls (dispatch and
    combine, forward and backward) per GPU, on the node link at its all-gather bus bandwidth;
    not overlapped, and counted with the TP collectives in `tp_time`.

    `a2a_nodes`: (t·EP, a2a_copy, a2a_k, a2a_limit), `timing._all_to_all_span`. An EP group
    wider than a node (span t·EP GPUs > the links' node) also sends each
    token once to every other node its experts are on (arXiv 2412.19437 §3.2.2: one copy per
    destination node over the NICs, forwarded inside it on NVLink, so the NVLink volume
    stays): `a2a_copy` bytes per token copy (micro-batch tokens/t × h × 2) times the nodes
    a token reaches, min(k, nodes) or with group-limited routing min(k, nodes,
    max(1, `a2a_limit` · nodes)) (DeepSeek-V3's node-limited routing: 4 of 8 groups, one
    group per node at EP 64), times the share of them not its own, (nodes − 1)/nodes, at the
    GPU's share of the node's NICs (`Links.p2p`). Not overlapped with the NVLink part or
    with compute (DeepSeek's DualPipe hides both)."""
    # Conditional expressions where max() was: the planner times every candidate, and the
    # calls were a tenth of this function (`b if a < b else a` is `max(a, b)`).
    tokens_per_replica_step = micro_tokens * d
    m = global_tokens / tokens_per_replica_step
    if not m > 1.0:
        m = 1.0
    compute = flops_per_token * micro_tokens / (t * p) / (peak_flops * mfu_compute)
    tp_time = 0.0
    if t > 1:
        collectives = (6 if recompute_full else 4) * math.ceil(layers / p)
        msg = micro_tokens * hidden * 2.0
        one = msg * 2.0 * (t - 1) / t / links.intra_allreduce(t)
        tp_time = collectives * (MESSAGE_LATENCY_S if one < MESSAGE_LATENCY_S else one)
    if a2a_count:
        one = a2a_bytes / a2a_count / (links.node_link_bw * links.gather_ratio)
        gpn = links.gpus_per_node
        if a2a_nodes is not None and a2a_nodes[0] > gpn:
            a2a_span, a2a_copy, a2a_k, a2a_limit = a2a_nodes
            one += links.cross_node_copies(a2a_copy, a2a_span, a2a_k, a2a_limit)
        tp_time += a2a_count * (MESSAGE_LATENCY_S if one < MESSAGE_LATENCY_S else one)
    p2p = 0.0
    n = t * p * d
    if p > 1:
        msg = micro_tokens * hidden * 2.0 / t
        # Interleaving sends each micro-batch across v times as many stage boundaries.
        send = msg / links.p2p(n > links.gpus_per_node)
        p2p = 2.0 * virtual_stages * (MESSAGE_LATENCY_S if send < MESSAGE_LATENCY_S else send)
    z3_exposed = 0.0
    dp_exposed = 0.0
    if d > 1:
        if zero3:
            bw = links.group_busbw(d, t, False)
            z3 = zero3_bytes * (d - 1) / d / bw
            exposed = z3 - compute
            if exposed > 0.0:
                z3_exposed = exposed
        if grad_sync_bytes:
            # allreduce_seconds, inline (d > 1 here).
            ar = grad_sync_bytes * 2.0 * (d - 1) / d / links.group_busbw(d, t, True)
            exposed = ar - BACKWARD_SHARE * compute
            if exposed > 0.0:
                dp_exposed = exposed
    bubble = (p - 1) / (virtual_stages * m) if p > 1 else 0.0  # pipeline_bubble, inline
    step = m * (compute + tp_time + p2p + z3_exposed) * (1.0 + bubble) + dp_exposed
    return m, compute, tp_time, p2p, z3_exposed, dp_exposed, bubble, step
