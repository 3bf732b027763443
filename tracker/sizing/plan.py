"""Parallelism plans: per-GPU memory for (TP, PP, DP) and the search for the smallest that fits.

Plans follow docs/sizing.md §1.11 and llm-analysis ("tp and dp are preferred when sharding intra
node, pp is only applied across nodes"): tensor parallelism stays inside a node and divides the
attention heads (training: also the KV heads; serving: KV heads are replicated when TP exceeds
them, as vLLM does); pipeline stages (whole layers) are added only once TP is as wide as the
model and node allow; data parallelism (ZeRO degree) takes the rest. Among such plans the
smallest uses the fewest GPUs; ties go to fewer stages, then less TP. A given GPU count is
checked over the same family of plans, so "fits on N" and "needs M" never disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from tracker.sizing.architecture import ModelSpec

SHARD_NONE, SHARD_ZERO1, SHARD_ZERO2, SHARD_ZERO3 = 0, 1, 2, 3
# Expert parallelism in training stays inside one NVLink domain of 8 GPUs (an HGX node): the
# EP group is carved out of the data-parallel ranks of the node (Megatron's expert-model-
# parallel group, with tensor parallelism innermost), so its all-to-all runs on NVLink.
EP_DOMAIN = 8
# The domain of an EP group allowed to span nodes (`SizingRequest.ep_across_nodes`): no cap,
# so EP is the largest divisor of the experts that divides DP (docs/sizing.md §1.12).
EP_ACROSS_NODES = 1 << 30


@lru_cache(maxsize=4096)
def training_expert_parallel(experts: int, t: int, d: int, domain: int = EP_DOMAIN) -> int:
    """The expert-parallel degree of a training layout: the largest divisor of the experts
    that divides the DP degree, with TP × EP inside the NVLink domain of `domain` GPUs (one
    HGX board's 8, an NVL72 rack's 72; 1 for a dense model).
    Each EP rank holds experts/EP whole experts; the expert states are ZeRO-sharded over the
    d/EP ranks holding the same experts, so only their replicated part shrinks."""
    if experts <= 1 or d <= 1:
        return 1
    top = min(d, max(1, domain // t), experts)
    for e in range(top, 1, -1):
        if experts % e == 0 and d % e == 0:
            return e
    return 1
SHARD_CODES = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}


@dataclass(frozen=True, slots=True)
class Plan:
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel


@lru_cache(maxsize=4096)
def valid_tensor_parallel(model: ModelSpec, training: bool, gpus_per_node: int) -> tuple[int, ...]:
    """TP degrees allowed inside one node, ascending."""
    if model.rough:
        out, t = [], 1
        while t <= gpus_per_node:
            out.append(t)
            t *= 2
        return tuple(out)
    heads, kv = int(model.heads), int(model.kv_heads)
    out = []
    for t in range(1, gpus_per_node + 1):
        if heads % t:
            continue
        if training and kv % t:
            continue
        if not training and kv % t and t % kv:
            continue
        out.append(t)
    return tuple(out)


def tensor_parallel_problem(model: ModelSpec, t: int, training: bool) -> str | None:
    """Why a TP degree is impossible for this model, or None."""
    if model.rough:
        return None
    heads, kv = int(model.heads), int(model.kv_heads)
    if heads % t:
        return f"tensor parallelism {t} does not divide the {heads} attention heads of {model.id}"
    if training and kv % t:
        return f"tensor parallelism {t} does not divide the {kv} KV heads of {model.id}"
    if not training and kv % t and t % kv:
        return (f"tensor parallelism {t} neither divides nor is a multiple of the {kv} KV heads "
                f"of {model.id}")
    return None


@dataclass(frozen=True, slots=True)
class ServingLayout:
    """One way to serve on `gpus`: TP degree inside a node and the replicas it leaves."""

    tensor_parallel: int
    replicas: int
    idle: int  # GPUs left over


def serving_layouts(model: ModelSpec, gpus: int, gpus_per_node: int) -> tuple[ServingLayout, ...]:
    """Every TP degree allowed inside one node (vLLM's KV-head rule) with the replicas it
    leaves on `gpus`: the search space a serving objective ranks (with `Links` for the
    plan's all-reduce cost). TP never spans nodes; replicas are independent, so they need no
    cluster network."""
    out = []
    for t in valid_tensor_parallel(model, False, gpus_per_node):
        if t > gpus:
            break
        replicas = gpus // t
        out.append(ServingLayout(t, replicas, gpus - replicas * t))
    return tuple(out)


class Job:
    """Per-GPU memory of one job as a function of (t, p, d); totals are precomputed bytes.

    Training: weights/grads/optimizer are the GPU-resident totals (zero when offloaded), split
    over t·p by each stage's share of the parameters, then sharded over d per ZeRO stage
    (ZeRO paper: stage 1 shards the optimizer, 2 also the gradients, 3 also the weights).
    ZeRO-3/FSDP adds the gathered working set (one unit's weights twice for prefetch, and its
    gradients) when d > 1. Serving: weights and KV split over t·p (KV heads replicate beyond
    their count), one activation peak, fixed overhead.
    """

    __slots__ = (
        "_fcache",
        "_smallest",
        "act_peak",
        "ep_domain",
        "expert_share",
        "experts",
        "grads",
        "kept_layer",
        "kv",
        "kv_heads",
        "layer_params",
        "layers",
        "offload_all",
        "optim",
        "out",
        "overhead",
        "params",
        "shard",
        "stage_extra",
        "training",
        "usable",
        "weights",
        "working_layer",
        "working_set",
    )

    def __init__(self, *, training: bool, usable: float, model: ModelSpec, weights: float,
                 grads: float = 0.0, optim: float = 0.0, shard: int = 0,
                 offload_all: bool = False, working_set: float = 0.0, kept_layer: float = 0.0,
                 working_layer: float = 0.0, out: float = 0.0, overhead: float = 0.0,
                 kv: float = 0.0, act_peak: float = 0.0, ep_domain: int = EP_DOMAIN) -> None:
        self.training = training
        self.ep_domain = ep_domain
        self.usable = usable
        self.layers = model.layers
        self.layer_params = model.layer_params
        # The heavier end stage also holds an embedding matrix (and the final norm).
        self.stage_extra = (model.vocab * model.hidden + model.hidden) if not model.rough else 0.0
        self.params = model.params
        self.weights, self.grads, self.optim = weights, grads, optim
        self.shard, self.offload_all, self.working_set = shard, offload_all, working_set
        self.kept_layer, self.working_layer, self.out = kept_layer, working_layer, out
        self.overhead = overhead
        self.kv, self.kv_heads, self.act_peak = kv, model.kv_shards, act_peak
        # The routed experts' share of the states, which expert parallelism divides.
        self.experts = int(model.experts) if training and model.is_moe and not model.rough \
            else 1
        self.expert_share = model.routed_params / model.params if self.experts > 1 else 0.0
        self._fcache: dict[int, float] = {}
        self._smallest: dict[tuple[tuple[int, ...], int | None], Plan | None] = {}

    def replicated_factor(self, t: int, d: int) -> float:
        """What expert parallelism leaves of the replicated states at (t, d): the dense share
        whole, the experts' over EP (1.0 exactly for a dense model)."""
        if not self.expert_share:
            return 1.0
        ep = training_expert_parallel(self.experts, t, d, self.ep_domain)
        return 1.0 if ep == 1 else 1.0 - self.expert_share + self.expert_share / ep

    def stage_fraction(self, p: int) -> float:
        """Share of the parameters on the heaviest pipeline stage."""
        if p == 1:
            return 1.0
        cached = self._fcache.get(p)
        if cached is None:
            stage = math.ceil(self.layers / p) * self.layer_params + self.stage_extra
            share = stage / self.params
            cached = self._fcache[p] = min(1.0, share)
        return cached

    def activations(self, t: int, p: int, v: int = 1) -> float:
        """Per-GPU activations; interleaving v chunks per GPU keeps more micro-batches in
        flight on the first stage: × (1 + (p-1)/(p·v)) (Megatron's
        interleaved_schedule_memory_penalty in theoretical_memory_usage.py)."""
        if not self.training:
            return self.act_peak / t
        if p == 1:
            total = self.layers * self.kept_layer + self.out + self.working_layer
        else:
            per_stage = math.ceil(self.layers / p)
            kept = p * per_stage * self.kept_layer
            if v > 1:
                kept *= 1.0 + (p - 1) / (p * v)
            first = kept + self.working_layer
            last = per_stage * self.kept_layer + self.out + self.working_layer
            total = first if first > last else last
        return total / t

    def kv_per_gpu(self, t: int, p: int) -> float:
        if not self.kv:
            return 0.0
        share = 1.0 if p == 1 else math.ceil(self.layers / p) / self.layers
        per_head = 1.0 / t if t < self.kv_heads else 1.0 / self.kv_heads
        return self.kv * share * per_head

    def parts(self, t: int, p: int, d: int,
              v: int = 1) -> tuple[float, float, float, float, float, float]:
        """Per-GPU (weights, gradients, optimizer, activations, kv, overhead) bytes."""
        f = self.stage_fraction(p) / t
        w, g, o = self.weights * f, self.grads * f, self.optim * f
        overhead = self.overhead
        if self.training:
            s = self.shard
            if self.expert_share and s != SHARD_ZERO3:
                c = self.replicated_factor(t, d)
                w *= c
                if s != SHARD_ZERO2:
                    g *= c
                if s == SHARD_NONE:
                    o *= c
            if s == SHARD_ZERO1:
                o /= d
            elif s == SHARD_ZERO2:
                g /= d
                o /= d
            elif s == SHARD_ZERO3:
                w /= d
                g /= d
                o /= d
                if d > 1 or self.offload_all:
                    overhead += self.working_set / t
        return w, g, o, self.activations(t, p, v), self.kv_per_gpu(t, p), overhead

    def per_gpu(self, t: int, p: int, d: int, v: int = 1) -> float:
        if not self.training:
            f = (1.0 if p == 1 else self.stage_fraction(p)) / t
            return (self.weights * f + self.kv_per_gpu(t, p) + self.act_peak / t
                    + self.overhead)
        x, y, z, z1, act, overhead = self.profile(t, p, v)
        if self.expert_share:
            x *= self.replicated_factor(t, d)
        return x + y / d + (z if d > 1 else z1) + act + overhead

    def profile(self, t: int, p: int, v: int = 1) -> tuple[float, float, float, float, float,
                                                            float]:
        """Training bytes per GPU at (t, p, v) for any DP degree d, as (replicated, sharded,
        ZeRO-3 working set for d > 1, for d = 1, activations, overhead): per_gpu is
        replicated + sharded / d + working set + activations + overhead, summed in that
        order (the planner evaluates it over many d from one profile)."""
        f = (1.0 if p == 1 else (self._fcache.get(p) or self.stage_fraction(p))) / t
        w, g, o = self.weights * f, self.grads * f, self.optim * f
        s = self.shard
        gathered = gathered_one = 0.0
        if s == SHARD_NONE:
            replicated, sharded = w + g + o, 0.0
        elif s == SHARD_ZERO1:
            replicated, sharded = w + g, o
        elif s == SHARD_ZERO2:
            replicated, sharded = w, g + o
        else:
            replicated, sharded = 0.0, w + g + o
            gathered = self.working_set / t
            gathered_one = gathered if self.offload_all else 0.0
        return replicated, sharded, gathered, gathered_one, self.activations(t, p, v), \
            self.overhead

    def fits(self, t: int, p: int, d: int, v: int = 1) -> bool:
        return self.per_gpu(t, p, d, v) <= self.usable

    # Search ------------------------------------------------------------------------------------

    def _min_dp(self, t: int, p: int, usable: float) -> int | None:
        """Smallest data-parallel degree that fits at (t, p) in `usable` bytes, or None."""
        if not self.training:
            return 1 if self.per_gpu(t, p, 1) <= usable else None
        f = self.stage_fraction(p) / t
        w, g, o = self.weights * f, self.grads * f, self.optim * f
        fixed = self.activations(t, p) + self.overhead
        s = self.shard
        if s == SHARD_ZERO3:
            if fixed + w + g + o <= usable:
                return 1
            room = usable - fixed - self.working_set / t
            return math.ceil((w + g + o) / room) if room > 0 else None
        if s == SHARD_NONE:
            replicated, sharded = w + g + o, 0.0
        elif s == SHARD_ZERO1:
            replicated, sharded = w + g, o
        else:
            replicated, sharded = w, g + o
        if self.expert_share:
            return self._min_dp_experts(t, p, usable)
        room = usable - fixed - replicated
        if room < 0 or (sharded and room == 0):
            return None
        if not sharded:
            return 1
        return max(1, math.ceil(sharded / room))

    def _min_dp_experts(self, t: int, p: int, usable: float) -> int | None:
        """`_min_dp` for an MoE model outside ZeRO-3: expert parallelism shrinks the
        replicated states as d grows (in steps, with the divisors of the experts), so the
        smallest fitting d is searched between what the most EP would need and what no EP
        needs."""
        x, y, z, z1, act, ov = self.profile(t, p)
        top_ep = training_expert_parallel(self.experts, t, self.experts, self.ep_domain)
        floor = x * (1.0 - self.expert_share + self.expert_share / top_ep)
        room_floor = usable - floor - act - ov - (z if y else z1)
        if room_floor < 0 or (y and room_floor == 0):
            return None
        room = usable - x - act - ov
        upper = (max(1, math.ceil(y / room)) if y else 1) if room > 0 else 1 << 12
        d = max(1, math.ceil(y / room_floor)) if y else 1
        factor = self.replicated_factor
        while d <= upper:
            if x * factor(t, d) + y / d + (z if d > 1 else z1) + act + ov <= usable:
                return d
            d += 1
        return None

    def _first_pipeline(self, t: int, usable: float) -> int:
        """A lower bound for the pipeline degree at TP t (skips hopeless small ones).

        The heaviest stage holds at least 1/p of the parameters (and KV), and activations never
        drop below L layers' worth, so p < replicated / (t · room) cannot fit.
        """
        if self.training:
            floor_act = (self.layers * self.kept_layer + self.working_layer) / t
            s = self.shard
            replicated = self.weights + self.grads + self.optim if s == SHARD_NONE else (
                self.weights + self.grads if s == SHARD_ZERO1 else self.weights)
            replicated /= t
            if self.expert_share:  # the most EP could take off keeps this a lower bound
                top_ep = training_expert_parallel(self.experts, t, self.experts, self.ep_domain)
                replicated *= 1.0 - self.expert_share + self.expert_share / top_ep
        else:
            floor_act = self.act_peak / t
            replicated = self.weights / t + self.kv_per_gpu(t, 1)
        room = usable - self.overhead - floor_act
        if room <= 0:
            return 2
        return max(2, int(replicated / room))

    def smallest(self, tps: tuple[int, ...], pp: int | None = None,
                 usable: float | None = None) -> Plan | None:
        """The fitting plan with the fewest GPUs (ties: fewer stages, then less TP) in
        `usable` bytes per GPU (default: the job's; the planner asks one job of unbounded
        usable memory at each GPU's)."""
        if usable is not None:
            return self._smallest_in(tps, pp, usable)
        # At the job's own usable memory, kept: the job is shared by every GPU of that
        # memory size (prepare.memory_job), and the walk over pipeline depths is the
        # fixed path's largest cost.
        key = (tps, pp)
        if key not in self._smallest:
            self._smallest[key] = self._smallest_in(tps, pp, self.usable)
        return self._smallest[key]

    def _smallest_in(self, tps: tuple[int, ...], pp: int | None, usable: float) -> Plan | None:
        best: Plan | None = None
        best_key = (0, 0, 0)
        top_t = tps[-1]
        max_p = max(1, math.ceil(self.layers))
        # More pipeline stages never lower ZeRO-3 memory: activations and the gathered working
        # set do not shrink with pp, and DP shards the states just as well.
        pipeline_helps = not (self.training and self.shard == SHARD_ZERO3) and max_p > 1
        # Without DP sharding the first fitting p is the cheapest for a given t; with ZeRO-1/2
        # a deeper pipeline can still lower t·p·d, so keep looking while t·p ≤ best.
        stop_at_first = not self.training or self.shard == SHARD_NONE
        for t in tps:
            if best is not None and t > best_key[0]:
                break
            if pp is not None:
                p_values: list[int] | range = [pp]
            elif pipeline_helps and t == top_t:
                p_values = [1, *range(max(2, self._first_pipeline(t, usable)), max_p + 1)]
            else:
                p_values = [1]
            for p in p_values:
                if best is not None and t * p > best_key[0]:
                    break
                d = self._min_dp(t, p, usable)
                if d is None:
                    continue
                key = (t * p * d, p, t)
                if best is None or key < best_key:
                    best, best_key = Plan(t, p, d), key
                if stop_at_first:
                    break
        return best

    def on_count(self, count: int, tps: tuple[int, ...], pp: int | None = None,
                 v: int = 1) -> tuple[Plan | None, Plan]:
        """(fitting plan using exactly `count` GPUs or None, the lowest-memory plan tried).

        Candidates go in order of preference (least model parallelism t·p, then fewer
        stages), so the first that fits is the answer.
        """
        max_p = max(1, math.ceil(self.layers))
        candidates: list[tuple[int, int, int]] = []
        for t in tps:
            if count % t:
                continue
            rest = count // t
            if pp is not None:
                if rest % pp == 0:
                    candidates.append((t * pp, pp, t))
                continue
            # Pipeline stages only once TP is as wide as it can go (stages span nodes).
            for p in range(1, (min(rest, max_p) if t == tps[-1] else 1) + 1):
                if rest % p == 0:
                    candidates.append((t * p, p, t))
        candidates.sort()
        usable = self.usable
        for mp, p, t in candidates:
            if self.per_gpu(t, p, count // mp, v) <= usable:
                return Plan(t, p, count // mp), Plan(t, p, count // mp)
        if not candidates:
            t = tps[0]
            return None, Plan(t, 1, max(1, count // t))
        mp, p, t = min(candidates, key=lambda c: self.per_gpu(c[2], c[1], count // c[0], v))
        return None, Plan(t, p, count // mp)
