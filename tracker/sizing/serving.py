"""Serving: throughput, latency and KV-bounded concurrency of an LLM deployment (pure).

The model (docs/serving.md has the formulas, their sources and the calibration cases; the
step model and the calibration shares live in `serving_step`):

- a request is `prompt_tokens` in and `output_tokens` out; a decoding sequence holds on
  average prompt + output/2 tokens of KV, which every decode step reads;
- continuous batching with chunked prefill: each step of a replica carries `B` decode tokens
  and, in steady state, the prompts of the requests that replace finished ones (B · in/out
  prefill tokens), within the engine's token budget;
- a step costs the HBM time (weights, or the MoE experts the step touches, plus resident KV)
  plus the compute time (every token of the step at 2·N_active FLOPs plus attention) plus two
  tensor-parallel all-reduces per layer over the plan's link (not overlapped: a fit choice,
  see docs/serving.md);
- TTFT is the wait for prefill (M/D/1 behind the other users' prompts), the prompt's prefill
  (compute-bound, plus its all-reduces) and one step;
- KV capacity (what weights, activations and overhead leave on the GPUs, from the sizing
  engine) bounds the concurrency; the operating point is a fixed concurrency, the largest
  one meeting a service level, or the largest the KV and token budget admit;
- a plan is a tensor-parallel degree inside a node and the replicas the GPUs leave; the one
  with the most output tokens/s at the operating point wins.

Achievable shares of peak bandwidth/compute and the all-reduce latency come from
data/serving.json per GPU class, each fitted to published measurements of one GPU; other GPUs
reuse a class's shares through their spec-sheet peaks and carry a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.sizing.replica import (
    dp_kv_capacity,
    dp_shape_for,
    expert_bytes_share,
    hardware_for,
    replica_expert_parallel,
    room_beside_kv,
    shape_for,
)
from tracker.sizing.serving_spec import (
    ServingSpec,
    check_layout,
    check_spec,
    load_output_tokens_per_s,
    request_shape,
)
from tracker.sizing.serving_step import (
    Calibration,
    Hardware,
    Point,
    Shape,
    largest_meeting,
    largest_meeting_at,
    operating_point,
)

# The documented keys of the `serving` object (README "JSON contracts"), in order.
SERVING_KEYS = (
    "prompt_tokens", "output_tokens", "concurrency", "replicas", "tensor_parallel",
    "kv_capacity_tokens", "max_concurrency_by_kv", "ttft_s", "tpot_s", "tokens_per_s_per_user",
    "output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s",
    "requests_per_s", "bound", "meets_slo",
)
SERVING_EXTRA_KEYS = ("gpus", "pipeline_parallel", "expert_parallel",
                      "attention_data_parallel", "gpu", "slo",
                      "load_output_tokens_per_s", "meets_load", "calibration", "plans",
                      "warnings")


# The plan search ---------------------------------------------------------------------------


@dataclass(slots=True)
class PlanResult:
    tensor_parallel: int
    replicas: int
    kv_capacity_tokens: int
    max_concurrency_by_kv: int
    point: Point | None  # None: nothing meets the service level
    meets_slo: bool
    best_tpot_s: float  # at concurrency 1
    best_ttft_s: float  # at concurrency 1
    pipeline_parallel: int = 1  # > 1: stages on separate nodes, over the cluster network
    expert_parallel: int = 1  # GPUs of a replica the routed experts are spread over
    # > 1: a replica's GPUs each keep the whole attention and non-expert layers and their own
    # sequences (tensor_parallel 1), the routed experts spread over them (serving_step.Shape)
    attention_data_parallel: int = 1

    @property
    def gpus(self) -> int:
        return self.replica_gpus * self.replicas

    @property
    def replica_gpus(self) -> int:
        """The GPUs of one replica, the smallest unit a deployment adds."""
        return self.tensor_parallel * self.attention_data_parallel * self.pipeline_parallel

    @property
    def output_tokens_per_s(self) -> float:
        return 0.0 if self.point is None else self.point.output_tokens_per_s * self.replicas

    def summary(self) -> dict[str, Any]:
        p = self.point
        return {"tensor_parallel": self.tensor_parallel,
                "pipeline_parallel": self.pipeline_parallel,
                "expert_parallel": self.expert_parallel,
                "attention_data_parallel": self.attention_data_parallel,
                "replicas": self.replicas, "concurrency": p.concurrency if p else None,
                "tpot_s": _r(p.tpot_s) if p else None, "ttft_s": _r(p.ttft_s) if p else None,
                "output_tokens_per_s": _r(self.output_tokens_per_s),
                "max_concurrency_by_kv": self.max_concurrency_by_kv,
                "meets_slo": self.meets_slo}


@dataclass(slots=True)
class ServingResult:
    """The chosen plan at its operating point, the other plans, and the load."""

    gpu: str
    prompt_tokens: int
    output_tokens: int
    chosen: PlanResult
    plans: list[PlanResult]
    spec: ServingSpec
    calibration: Calibration
    load_output_tokens_per_s: float | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def point(self) -> Point | None:
        return self.chosen.point

    @property
    def gpus(self) -> int:
        return self.chosen.gpus

    @property
    def output_tokens_per_s(self) -> float:
        return self.chosen.output_tokens_per_s

    @property
    def total_tokens_per_s(self) -> float:
        return self.output_tokens_per_s * (self.prompt_tokens + self.output_tokens) / \
            self.output_tokens

    @property
    def requests_per_s(self) -> float:
        return self.output_tokens_per_s / self.output_tokens

    @property
    def meets_load(self) -> bool | None:
        if self.load_output_tokens_per_s is None:
            return None
        return self.output_tokens_per_s >= self.load_output_tokens_per_s * (1 - 1e-9)

    def to_json(self) -> dict[str, Any]:
        c, p = self.chosen, self.point
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
            "concurrency": p.concurrency if p else None, "replicas": c.replicas,
            "tensor_parallel": c.tensor_parallel, "kv_capacity_tokens": c.kv_capacity_tokens,
            "max_concurrency_by_kv": c.max_concurrency_by_kv,
            "ttft_s": _r(p.ttft_s) if p else None, "tpot_s": _r(p.tpot_s) if p else None,
            "tokens_per_s_per_user": _r(1.0 / p.tpot_s) if p else None,
            "output_tokens_per_s": _r(self.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": _r(self.output_tokens_per_s / c.gpus),
            "total_tokens_per_s": _r(self.total_tokens_per_s),
            "requests_per_s": _r(self.requests_per_s),
            "bound": p.bound if p else None, "meets_slo": c.meets_slo,
            "gpus": c.gpus, "pipeline_parallel": c.pipeline_parallel,
            "expert_parallel": c.expert_parallel,
            "attention_data_parallel": c.attention_data_parallel, "gpu": self.gpu,
            "slo": self.spec.slo_json(),
            "load_output_tokens_per_s": _r(self.load_output_tokens_per_s),
            "meets_load": self.meets_load, "calibration": self.calibration.to_json(),
            "plans": [plan.summary() for plan in self.plans],
            "warnings": list(self.warnings),
        }
        return out


def _r(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


def serve(req: Any, spec: ServingSpec, *, cluster_network: bool = True) -> ServingResult:
    """Size a serving deployment of `req` (a SizingRequest with `gpu`) at `spec`.

    `req.count` GPUs are split into every TP degree inside a node and the replicas left; the
    plan with the most output tokens/s meeting the service level wins. Without a count, each
    TP degree gets the replicas the load needs and the fewest GPUs win; without a load either,
    one replica of the TP degree with the most output tokens/s per GPU.

    When no TP group inside a node holds a replica, its layers are split into pipeline
    stages on separate nodes over the cluster network (`cluster_network` False: the offer's
    instances cannot be joined, and the replica is refused with that reason).
    """
    from tracker.sizing.engine import size_workload
    from tracker.sizing.plan import valid_tensor_parallel
    from tracker.sizing.prepare import gpu_info, preparation, prepare_key, tp_domain
    from tracker.sizing.request import with_changes

    if req.gpu is None:
        raise InvalidInput("serving figures need --gpu")
    if req.workload != "inference":
        raise InvalidInput("serving figures are for --workload inference")
    check_spec(spec)
    prompt, output = request_shape(spec, req.context)
    context = prompt + output
    base = with_changes(req, context=context, concurrency=1, count=None, tokens=None)
    prep = preparation(prepare_key(base))
    model = prep.model
    check_layout(spec, model)
    info = gpu_info(req.gpu)
    hw, hw_warnings = hardware_for(info, prep.precision, req.node_link_gbps, req.kv_precision)
    cal = hw.calibration
    warnings: list[str] = list(hw_warnings)  # the sizing warnings stay in the sizing result
    if model.is_moe:
        warnings.append("MoE serving: held-out checks put this model within -27 to +24 % of "
                        "TensorRT-LLM's Llama 4 and Qwen3-235B max throughput (attention DP + "
                        "EP, H100/H200/B200), but +23 to +74 % high for short outputs or long "
                        "prompts and for Qwen3 on B200 in a release that does not state the "
                        "layout (-31 to +25 % where it does; Llama 4 Maverick there -53 to "
                        "+10 %), and -32 to +29 % for "
                        "DeepSeek-R1 (TensorRT-LLM and SGLang, H200/B200) with one H200 row "
                        "+91 %; gpt-oss (TensorRT-LLM) -15 to +29 % on B200/GB200 and -0 to "
                        "+16 % for long contexts on one H100/H200, but +49 to +66 % at "
                        "1,000/1,000 on Hopper (+126 % under H100 DEP 4) (docs/serving.md)")
    expert_share = expert_bytes_share(model, prep.precision)
    load = load_output_tokens_per_s(spec, output)
    count = req.count
    gpn = tp_domain(req, info)
    tps = valid_tensor_parallel(model, False, gpn)
    if req.tensor_parallel is not None:
        tps = tuple(t for t in tps if t == req.tensor_parallel) or (req.tensor_parallel,)
    if count is not None:
        tps = tuple(t for t in tps if t <= count)

    plans = _in_domain_plans(req, base, prep, hw, spec, tps, prompt, output, expert_share,
                             count, load)
    in_domain = bool(plans)
    # Across nodes: where one node holds no replica, or a GPU count lets a replica span nodes
    if model.is_moe and cluster_network and tps and spec.attention_parallel != "tensor" and \
            req.tensor_parallel is None and req.pipeline_parallel in (None, 1) and \
            (count is not None or not in_domain):
        plans.extend(_cross_node_dp_plans(req, base, prep, hw, info, spec, tps[-1], prompt,
                                          output, expert_share, count, load))
    # Pipeline stages of TP groups (not with --attention-parallel data)
    if not in_domain and tps and (count is None or count > tps[-1]) and \
            req.pipeline_parallel != 1 and req.tensor_parallel in (None, tps[-1]) and \
            spec.attention_parallel != "data":
        if not cluster_network:
            raise InvalidInput(
                f"{model.id} cannot be served on {info.id}" + (f" x{count}" if count else "")
                + f": no TP group of up to {tps[-1]} GPUs in one instance holds a replica, and "
                "these instances have no cluster network to join them into pipeline stages")
        staged = _pipeline_plan(req, base, prep, hw, info, spec, tps[-1], prompt, output,
                                expert_share, count, load)
        if staged is not None:
            plans.append(staged)

    if not plans and spec.attention_parallel == "data":
        raise InvalidInput(
            f"{model.id} cannot be served on {info.id}" + (f" x{count}" if count else "")
            + " with --attention-parallel data: no group of GPUs that each hold the attention "
            "and dense layers whole and a share of the experts"
            + ("" if cluster_network else " inside one instance")
            + f" leaves room for one {context}-token request (try --attention-parallel auto)")
    if not plans:
        sized = size_workload(replace(base, gpu=req.gpu, count=count))
        why = sized.reason or (
            f"no tensor-parallel group of up to {max(tps, default=1)} GPUs (TP stays inside "
            f"a node or NVLink domain of {gpn}) holds the weights and one {context}-token request")
        raise InvalidInput(f"{model.id} cannot be served on {info.id}"
                           + (f" x{count}" if count else "") + f": {why}")
    chosen = _chosen(plans, spec, count, load, info.id, context)
    warnings.extend(_layout_warnings(req, base, model, info, chosen, tps, count))
    result = ServingResult(info.id, prompt, output, chosen, plans, spec, cal, load,
                           tuple(warnings))
    if result.meets_load is False:
        result.warnings = (*result.warnings,
                           f"{chosen.gpus} GPUs give {result.output_tokens_per_s:,.0f} output "
                           f"tokens/s, below the load's {load:,.0f}")
    return result


def _in_domain_plans(req: Any, base: Any, prep: Any, hw: Hardware, spec: ServingSpec,
                     tps: tuple[int, ...], prompt: int, output: int, expert_share: float,
                     count: int | None, load: float | None) -> list[PlanResult]:
    """The plans whose replica is one group of t GPUs inside a node or NVLink domain, per TP
    degree: tensor parallel, and for a MoE model also attention data parallel with the
    experts spread over the group."""
    from tracker.sizing.engine import size_workload
    from tracker.sizing.request import with_changes

    model, cal = prep.model, hw.calibration
    plans: list[PlanResult] = []
    for t in tps:
        sized = size_workload(with_changes(base, gpu=req.gpu, count=t, tensor_parallel=t,
                                           pipeline_parallel=1,
                                           usable_fraction=min(req.usable_fraction,
                                                               cal.memory_utilization)))
        if not sized.fits or sized.kv_capacity_tokens is None:
            continue
        capacity = int(sized.kv_capacity_tokens)
        if spec.attention_parallel != "data":
            plan = _plan_at(shape_for(prep, t, prompt, output, expert_share), t, capacity,
                            hw, spec, count, load,
                            expert_parallel=replica_expert_parallel(model, t))
            if plan is not None:
                plans.append(plan)
        if model.is_moe and t > 1 and (spec.attention_parallel == "data" or (
                spec.attention_parallel is None and req.tensor_parallel is None)):
            room = room_beside_kv(prep, t, capacity)
            plan = _plan_at(dp_shape_for(prep, prompt, output, expert_share), t,
                            dp_kv_capacity(prep, t, room, expert_share), hw, spec, count,
                            load, expert_parallel=math.gcd(int(model.experts), t),
                            attention_data_parallel=t)
            if plan is not None:
                plans.append(plan)
    return plans


def _layout_warnings(req: Any, base: Any, model: Any, info: Any, chosen: PlanResult,
                     tps: tuple[int, ...], count: int | None) -> list[str]:
    """What the chosen layout costs beyond one node, and the GPUs it leaves idle."""
    out: list[str] = []
    if chosen.pipeline_parallel > 1:
        out.append(
            f"one replica spans {chosen.pipeline_parallel} nodes of {tps[-1]} GPUs: "
            f"pipeline stages over the cluster network (a hop per stage in every token); "
            + _fits_one_node_hint(req, base, model, info, tps[-1]))
    elif tps and chosen.attention_data_parallel > tps[-1]:
        out.append(
            f"one replica spans {chosen.attention_data_parallel // tps[-1]} nodes of "
            f"{tps[-1]} GPUs: attention data parallel with the experts spread over all of "
            "them, the all-to-all crossing the cluster network in every MoE layer")
    if count is not None and chosen.gpus < count:
        group = f"attention DP {chosen.attention_data_parallel}" \
            if chosen.attention_data_parallel > 1 else f"TP {chosen.tensor_parallel}"
        out.append(f"{count - chosen.gpus} of {count} GPUs idle: {group} leaves them out "
                   "of every replica")
    return out


def _plan_at(shape: Shape, t: int, capacity: int, hw: Hardware, spec: ServingSpec,
             count: int | None, load: float | None, **layout: int) -> PlanResult | None:
    """One plan of a group of `t` GPUs holding `capacity` KV tokens at the operating point the
    question asks for (None: not one request fits). `layout`: the PlanResult's parallelism
    (attention_data_parallel t: the group is one replica without tensor parallelism)."""
    cal = hw.calibration
    context = shape.prompt + shape.output
    by_kv = capacity // context
    if by_kv < 1:
        return None
    budget = max(1, int(cal.token_budget / (1.0 + shape.prefill_per_decode)))
    # attention_dp: each GPU schedules its own sequences, so the budgets are per GPU
    scale = t if shape.attention_dp else 1
    limit = min(by_kv, cal.max_batch * scale, max(budget, 1) * scale)
    tpot_limit, ttft_limit = spec.tpot_limit_s, spec.ttft_limit_s
    if spec.concurrency is not None:
        batch = spec.concurrency
        meets = batch <= by_kv
        point = operating_point(shape, t, batch, hw, kv_limited=batch == by_kv) \
            if meets else None
    elif spec.has_slo:
        batch = largest_meeting(shape, t, limit, hw, tpot_limit, ttft_limit)
        point = operating_point(shape, t, batch, hw, kv_limited=batch == by_kv) \
            if batch else None
        meets = batch > 0
    else:
        point = operating_point(shape, t, limit, hw, kv_limited=limit == by_kv)
        meets = True
    single = operating_point(shape, t, 1, hw)
    if count is not None:
        replicas = count // t
    elif load is not None and point is not None:
        replicas = max(1, math.ceil(load / point.output_tokens_per_s - 1e-9))
    else:
        replicas = 1
    dp = layout.get("attention_data_parallel", 1)
    return PlanResult(t // dp, replicas, capacity, by_kv, point, meets, single.tpot_s,
                      single.ttft_s, **layout)


# Nodes an attention-DP replica may span over the cluster network (DeepSeek's decode ran EP
# over 18 to 40 nodes; the plans here stop at 8, 64 GPUs of an HGX node).
MAX_DP_NODES = 8


def _cross_node_dp_plans(req: Any, base: Any, prep: Any, hw: Hardware, info: Any,
                         spec: ServingSpec, g: int, prompt: int, output: int,
                         expert_share: float, count: int | None,
                         load: float | None) -> list[PlanResult]:
    """Attention-DP replicas of n nodes of `g` GPUs (n = 2, 4, 8 where t = n·g divides the
    experts; without a GPU count, asked only where no node holds a replica, and then the
    fewest nodes that hold one): each GPU keeps the non-expert model and 1/t of the experts,
    and the all-to-all's traffic to other nodes crosses the cluster network (docs/serving.md
    "Expert parallelism"). The room for weights and KV per GPU is the sizing engine's for one
    node's TP group, which need not fit."""
    from tracker.sizing.engine import size_workload
    from tracker.sizing.timing import gpu_links

    model = prep.model
    links = gpu_links(replace(req, gpus_per_node=g), info)
    if links.node_net_bw is None:
        return []
    sized = size_workload(replace(base, gpu=req.gpu, count=g, tensor_parallel=g,
                                  pipeline_parallel=1,
                                  usable_fraction=min(req.usable_fraction,
                                                      hw.calibration.memory_utilization)))
    if sized.per_gpu is None or sized.usable_gpu_bytes is None:
        return []
    room = sized.usable_gpu_bytes - sized.per_gpu["activations"] - sized.per_gpu["overhead"]
    net = replace(hw, node_gpus=g, net_bw=links.node_net_bw * links.net_ratio / g)
    shape = dp_shape_for(prep, prompt, output, expert_share)
    plans = []
    for n in (2, 4, MAX_DP_NODES):
        t = n * g
        if (count is not None and t > count) or model.experts % t:
            continue
        plan = _plan_at(shape, t, dp_kv_capacity(prep, t, room, expert_share), net, spec,
                        count, load, expert_parallel=t, attention_data_parallel=t)
        if plan is not None:
            plans.append(plan)
            if count is None:  # without a GPU count, the fewest nodes (as pipeline stages)
                break
    return plans


def _pipeline_plan(req: Any, base: Any, prep: Any, hw: Hardware, info: Any,
                   spec: ServingSpec, t: int, prompt: int, output: int, expert_share: float,
                   count: int | None, load: float | None) -> PlanResult | None:
    """The fewest nodes of `t` GPUs whose pipeline stages hold one replica, at its operating
    point (docs/serving.md, "Serving across nodes").

    vLLM and SGLang keep one micro-batch per stage in flight: a concurrency C is p
    micro-batches of C/p. Each token passes every stage, whose layers take 1/p of the step
    of a TP group holding all layers, plus p − 1 hops between nodes (the micro-batch's
    hidden states, B·h·2 bytes, over the cluster network at nccl-tests busbw, and a
    collective's latency): TPOT = step(C/p) + (p − 1)·hop, and the C sequences make C
    tokens per TPOT. TTFT adds the prompt's hops."""
    from tracker.sizing.engine import size_workload
    from tracker.sizing.timing import gpu_links

    model = prep.model
    links = gpu_links(replace(req, gpus_per_node=t), info)
    if links.node_net_bw is None:
        return None
    net = links.node_net_bw * links.net_ratio
    latency = hw.calibration.allreduce_latency_s
    cal = hw.calibration
    context = prompt + output
    top = max(2, math.ceil(model.layers))
    limit_p = min(top, count // t) if count is not None else top
    stages = range(2, limit_p + 1)
    if req.pipeline_parallel is not None:  # --pp fixes the stages
        stages = range(req.pipeline_parallel, req.pipeline_parallel + 1)
    for p in stages:
        sized = size_workload(replace(base, gpu=req.gpu, count=t * p, tensor_parallel=t,
                                      pipeline_parallel=p,
                                      usable_fraction=min(req.usable_fraction,
                                                          cal.memory_utilization)))
        if not sized.fits or not sized.kv_capacity_tokens:
            continue
        capacity = int(sized.kv_capacity_tokens)
        by_kv = capacity // context
        if by_kv < 1:
            continue
        shape = shape_for(prep, t, prompt, output, expert_share)

        def hop(tokens: float) -> float:
            return latency + tokens * model.hidden * 2.0 / net

        def at(c: int, kv_limited: bool = False, p: int = p, shape: Shape = shape) -> Point:
            b = max(1, math.ceil(c / p))
            one = operating_point(shape, t, b, hw)
            tpot = one.tpot_s + (p - 1) * hop(b)
            ttft = one.ttft_s + (p - 1) * hop(prompt)
            wall = one.step.seconds + (p - 1) * hop(b)
            bound = "kv-capacity" if kv_limited else one.bound
            return Point(c, ttft, tpot, c / wall, bound, one.step)

        budget = max(1, int(cal.token_budget / (1.0 + shape.prefill_per_decode)))
        limit = min(by_kv, cal.max_batch * p, budget * p)
        tpot_limit, ttft_limit = spec.tpot_limit_s, spec.ttft_limit_s
        if spec.concurrency is not None:
            meets = spec.concurrency <= by_kv
            point = at(spec.concurrency, spec.concurrency == by_kv) if meets else None
        elif spec.has_slo:
            batch = largest_meeting_at(at, limit, tpot_limit, ttft_limit)
            point = at(batch, batch == by_kv) if batch else None
            meets = batch > 0
        else:
            point = at(limit, limit == by_kv)
            meets = True
        single = at(1)
        if count is not None:
            replicas = count // (t * p)
        elif load is not None and point is not None:
            replicas = max(1, math.ceil(load / point.output_tokens_per_s - 1e-9))
        else:
            replicas = 1
        return PlanResult(t, replicas, capacity, by_kv, point, meets, single.tpot_s,
                          single.ttft_s, pipeline_parallel=p,
                          expert_parallel=replica_expert_parallel(model, t * p))
    return None


def _fits_one_node_hint(req: Any, base: Any, model: Any, info: Any, t: int) -> str:
    """Which narrower weight precision would hold a replica in one node, if any."""
    from tracker.sizing.engine import size_workload

    for precision in ("fp8", "int4"):
        if precision == req.precision:
            continue
        try:
            sized = size_workload(replace(base, gpu=req.gpu, count=t, tensor_parallel=t,
                                          pipeline_parallel=1, precision=precision))
        except InvalidInput:
            continue
        if sized.fits:
            return f"--precision {precision} would fit one node of {t} {info.id}"
    return f"no precision fits {model.id} in one node of {t} {info.id}"


def _chosen(plans: list[PlanResult], spec: ServingSpec, count: int | None, load: float | None,
            gpu_id: str, context: int) -> PlanResult:
    """The plan that wins among those tried (or the one-line reason none can)."""
    if spec.concurrency is not None and not any(p.meets_slo for p in plans):
        most = max(p.max_concurrency_by_kv for p in plans)
        raise InvalidInput(f"--concurrency {spec.concurrency} does not fit the KV cache on "
                           f"{gpu_id}: at most {most} requests of {context} tokens")
    meeting = [p for p in plans if p.meets_slo]
    if not meeting:
        best = min(plans, key=lambda p: p.best_tpot_s)
        raise InvalidInput(
            f"no plan on {gpu_id} meets the service level: the best TPOT reachable is "
            f"{best.best_tpot_s * 1000:.1f} ms (TTFT "
            f"{best.best_ttft_s * 1000:.0f} ms) with TP "
            f"{best.tensor_parallel} at concurrency 1")
    if count is not None:  # the GPUs are given: the most throughput from them
        return max(meeting, key=lambda p: (p.output_tokens_per_s, -p.tensor_parallel))
    if load is not None:  # the load is given: the fewest GPUs that carry it
        return min(meeting, key=lambda p: (p.gpus, -p.output_tokens_per_s))
    # One replica: the TP degree with the most throughput per GPU.
    return max(meeting, key=lambda p: (p.output_tokens_per_s / p.gpus, -p.tensor_parallel))


__all__ = ["SERVING_KEYS", "ServingResult", "ServingSpec", "request_shape", "serve"]
