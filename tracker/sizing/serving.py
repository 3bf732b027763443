"""Serving: throughput, latency and KV-bounded concurrency of an LLM deployment (pure).

The model (docs/serving.md has the formulas, their sources and the calibration cases):

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
data/serving.json per GPU class, fitted to published H100 measurements; other GPUs reuse a
class's shares through their spec-sheet peaks and carry a warning.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from tracker.errors import InvalidInput
from tracker.sizing.throughput import BUSBW_EFFICIENCY

DEFAULT_PROMPT_TOKENS = 1000
DEFAULT_OUTPUT_TOKENS = 1000
SECONDS_PER_DAY = 86400.0

# The documented keys of the `serving` object (README "JSON contracts"), in order.
SERVING_KEYS = (
    "prompt_tokens", "output_tokens", "concurrency", "replicas", "tensor_parallel",
    "kv_capacity_tokens", "max_concurrency_by_kv", "ttft_s", "tpot_s", "tokens_per_s_per_user",
    "output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s",
    "requests_per_s", "bound", "meets_slo",
)
SERVING_EXTRA_KEYS = ("gpus", "gpu", "slo", "load_output_tokens_per_s", "meets_load",
                      "calibration", "plans", "warnings")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingSpec:
    """The request shape, the operating point and the load of a serving question."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    concurrency: int | None = None
    max_tpot_ms: float | None = None
    min_tokens_per_s_per_user: float | None = None
    max_ttft_ms: float | None = None
    requests_per_day: float | None = None
    output_tokens_per_day: float | None = None

    @property
    def has_slo(self) -> bool:
        return any(v is not None for v in (self.max_tpot_ms, self.min_tokens_per_s_per_user,
                                           self.max_ttft_ms))

    @property
    def tpot_limit_s(self) -> float | None:
        """The tighter of --max-tpot-ms and 1/--min-tokens-per-s-per-user, in seconds."""
        limits = []
        if self.max_tpot_ms is not None:
            limits.append(self.max_tpot_ms / 1000.0)
        if self.min_tokens_per_s_per_user is not None:
            limits.append(1.0 / self.min_tokens_per_s_per_user)
        return min(limits) if limits else None

    @property
    def ttft_limit_s(self) -> float | None:
        return None if self.max_ttft_ms is None else self.max_ttft_ms / 1000.0

    def slo_json(self) -> dict[str, float | None]:
        return {"max_tpot_ms": self.max_tpot_ms,
                "min_tokens_per_s_per_user": self.min_tokens_per_s_per_user,
                "max_ttft_ms": self.max_ttft_ms}


def split_context(context: int) -> tuple[int, int]:
    """--context alone: min(1,000, context/2) output tokens, the rest prompt."""
    output = min(DEFAULT_OUTPUT_TOKENS, max(1, context // 2))
    return context - output, output


def request_shape(spec: ServingSpec, context: int | None) -> tuple[int, int]:
    """(prompt, output) tokens: given ones, the rest of --context, or 1,000 / 1,000.

    With only --context, the output is min(1,000, context/2) and the prompt the rest, so
    --context stays the sum of the two.
    """
    prompt, output = spec.prompt_tokens, spec.output_tokens
    for label, value in (("--prompt-tokens", prompt), ("--output-tokens", output)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise InvalidInput(f"{label} must be a positive integer, got {value!r}")
    if context is not None:
        if prompt is not None and output is not None:
            if prompt + output != context:
                raise InvalidInput(f"--context {context} is not --prompt-tokens {prompt} + "
                                   f"--output-tokens {output}; give two of the three")
        elif prompt is not None:
            output = context - prompt
        elif output is not None:
            prompt = context - output
        else:
            prompt, output = split_context(context)
        if prompt < 1 or output < 1:
            raise InvalidInput(f"--context {context} leaves no room for both a prompt and an "
                               "output token")
    return (prompt or DEFAULT_PROMPT_TOKENS, output or DEFAULT_OUTPUT_TOKENS)


def check_spec(spec: ServingSpec) -> None:
    """One line for each impossible operating point or load."""
    if spec.concurrency is not None and (not isinstance(spec.concurrency, int)
                                         or spec.concurrency < 1):
        raise InvalidInput(f"--concurrency must be a positive integer, got {spec.concurrency!r}")
    for label, value in (("--max-tpot-ms", spec.max_tpot_ms),
                         ("--min-tokens-per-s-per-user", spec.min_tokens_per_s_per_user),
                         ("--max-ttft-ms", spec.max_ttft_ms),
                         ("--requests-per-day", spec.requests_per_day),
                         ("--output-tokens-per-day", spec.output_tokens_per_day)):
        if value is not None and (not math.isfinite(value) or value <= 0):
            raise InvalidInput(f"{label} must be more than 0, got {value:g}")
    if spec.requests_per_day is not None and spec.output_tokens_per_day is not None:
        raise InvalidInput("give --requests-per-day or --output-tokens-per-day, not both")
    if spec.concurrency is not None and spec.has_slo:
        raise InvalidInput("give --concurrency or a service level (--max-tpot-ms, "
                           "--min-tokens-per-s-per-user, --max-ttft-ms), not both")


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

    def to_json(self) -> dict[str, Any]:
        return {"gpu_class": self.gpu_class, "calibrated": self.calibrated,
                "bandwidth_share": self.bandwidth_share,
                "prefill_compute_share": self.prefill_compute_share,
                "decode_compute_share": self.decode_compute_share,
                "allreduce_latency_us": round(self.allreduce_latency_s * 1e6, 3),
                "source": self.source}


@lru_cache(maxsize=1)
def _serving_data() -> dict[str, Any]:
    text = resources.files("data").joinpath("serving.json").read_text(encoding="utf-8")
    return json.loads(text)


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
        token_budget=int(engine["token_budget"]), max_batch=int(engine["max_batch"]),
        calibrated=gpu_id in chosen.get("calibrated_gpus", ()),
        source=chosen["source"],
    )


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
    kv_bytes_per_token: float  # one GPU of the TP group
    prompt: int
    output: int

    @property
    def resident_context(self) -> float:
        """Average KV tokens of a decoding sequence: prompt + output/2."""
        return self.prompt + self.output / 2.0

    @property
    def prefill_per_decode(self) -> float:
        return self.prompt / self.output


def link_bandwidth(info: Any, node_link_gbps: float | None = None) -> float:
    """The bytes/s per GPU a TP group's all-reduce runs on: the offer's link inside the
    instance where the request carries it (tracker.fabric via `node_link_gbps`, GB/s), else
    the GPU's typical NVLink/PCIe figure."""
    if node_link_gbps:
        return node_link_gbps * 1e9
    return float(info.intra_bw)


def _allreduce(nbytes: float, t: int, hw: Hardware) -> float:
    if t <= 1:
        return 0.0
    return hw.calibration.allreduce_latency_s + nbytes * 2.0 * (t - 1) / t / (
        hw.link_bw * BUSBW_EFFICIENCY)


def prefill_seconds(shape: Shape, t: int, hw: Hardware) -> float:
    """Compute-bound prefill of one prompt: (2·N·s + 2·L·s²·width)/(t·F·η) + its all-reduces."""
    s = shape.prompt
    flops = 2.0 * shape.active_params * s + 2.0 * shape.layers * s * s * shape.attn_width
    compute = flops / (t * hw.peak_flops * hw.calibration.prefill_compute_share)
    return compute + 2.0 * shape.layers * _allreduce(s * shape.hidden * 2.0, t, hw)


@dataclass(frozen=True, slots=True)
class Step:
    seconds: float
    memory: float
    compute: float
    communication: float


def _step_terms(shape: Shape, t: int, batch: int, hw: Hardware
                ) -> tuple[float, float, float, float, float]:
    """(memory, decode compute, compute per prompt token, all-reduce latency part, all-reduce
    seconds per token) of one step of a replica with `batch` sequences decoding."""
    cal = hw.calibration
    weights = shape.weights_bytes / t
    if shape.expert_bytes_share and shape.experts > 1:
        touched = 1.0 - (1.0 - shape.experts_per_token / shape.experts) ** batch
        weights *= (1.0 - shape.expert_bytes_share) + shape.expert_bytes_share * touched
    resident = shape.resident_context
    memory = (weights + batch * resident * shape.kv_bytes_per_token) / (
        hw.hbm_bw * cal.bandwidth_share)
    dense = 2.0 * shape.active_params / t
    attention = 4.0 * shape.layers * shape.attn_width / t
    decode = batch * (dense + attention * resident) / (hw.peak_flops * cal.decode_compute_share)
    per_prompt = (dense + attention * shape.prompt / 2.0) / (
        hw.peak_flops * cal.prefill_compute_share)
    if t <= 1:
        return memory, decode, per_prompt, 0.0, 0.0
    syncs = 2.0 * shape.layers
    per_token = syncs * shape.hidden * 2.0 * 2.0 * (t - 1) / t / (hw.link_bw * BUSBW_EFFICIENCY)
    return memory, decode, per_prompt, syncs * cal.allreduce_latency_s, per_token


def decode_step_seconds(shape: Shape, t: int, batch: int, hw: Hardware,
                        prefill_tokens: float) -> Step:
    """One continuous-batching step of a replica: `batch` sequences decode one token each
    and `prefill_tokens` prompt tokens of joining requests ride along (chunked prefill)."""
    memory, decode, per_prompt, latency, per_token = _step_terms(shape, t, batch, hw)
    compute = decode + prefill_tokens * per_prompt
    comm = latency + (batch + prefill_tokens) * per_token
    return Step(memory + compute + comm, memory, compute, comm)


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
    wall = Step(memory + compute + comm, memory, compute, comm)
    seen = wall.seconds - ratio * (per_prompt + per_token)  # without its own prompt
    ttft = prefill_wait_ttft(prefill_seconds(shape, t, hw), seen, batch, shape.output)
    bound = "kv-capacity" if kv_limited else ("compute" if compute > memory else "memory")
    return Point(batch, ttft, seen, batch / wall.seconds, bound, wall)


def largest_meeting(shape: Shape, t: int, limit: int, hw: Hardware, tpot: float | None,
                    ttft: float | None) -> int:
    """The largest concurrency in [1, limit] whose TPOT and TTFT meet the limits (0: none).

    Both rise with concurrency, so a bisection finds it.
    """
    def ok(b: int) -> bool:
        p = operating_point(shape, t, b, hw)
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

    @property
    def gpus(self) -> int:
        return self.tensor_parallel * self.replicas

    @property
    def output_tokens_per_s(self) -> float:
        return 0.0 if self.point is None else self.point.output_tokens_per_s * self.replicas

    def summary(self) -> dict[str, Any]:
        p = self.point
        return {"tensor_parallel": self.tensor_parallel, "replicas": self.replicas,
                "concurrency": p.concurrency if p else None,
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
            "gpus": c.gpus, "gpu": self.gpu, "slo": self.spec.slo_json(),
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


@lru_cache(maxsize=1024)
def _family(gpu_id: str) -> str:
    from tracker.gpus import resolve_gpu

    return resolve_gpu(gpu_id).gpu.family or ""


@lru_cache(maxsize=1024)
def hardware_for(info: Any, precision: str, node_link_gbps: float | None = None,
                 ) -> tuple[Hardware, tuple[str, ...]]:
    """The GPU as the serving model sees it at this weight precision, and its warnings.

    FP8 computes at the FP8 peak only with FP8 tensor cores; FP8/INT8/INT4 weights elsewhere
    run weight-only (W8A16/W4A16) at the BF16 peak.
    """
    if info.bf16_flops is None or info.hbm_bw is None:
        raise InvalidInput(f"no compute or memory-bandwidth specs for {info.id}; serving "
                           "throughput cannot be estimated")
    cal = calibration_for(info.id, _family(info.id))
    warnings = []
    peak = info.bf16_flops
    if precision == "fp8" and info.fp8_flops:
        peak = info.fp8_flops
    elif precision in ("fp8", "int8", "int4", "nf4"):
        warnings.append(f"{precision} weights run weight-only on {info.id} (W8A16/W4A16): they "
                        "save memory and bandwidth, not compute")
    elif precision == "fp32":
        peak = info.bf16_flops * 0.5
    if not cal.calibrated:
        warnings.append(f"serving shares for {info.id} are extrapolated from the "
                        f"{cal.gpu_class} class calibration through its spec-sheet peaks; no "
                        "measurement of this GPU was fitted")
    hw = Hardware(info.id, info.memory_bytes, peak, info.hbm_bw,
                  link_bandwidth(info, node_link_gbps), cal)
    return hw, tuple(warnings)


def expert_bytes_share(model: Any) -> float:
    """Share of the weight bytes in routed experts (0 for a dense model)."""
    if not model.is_moe:
        return 0.0
    return model.layers * model.experts * model.mlp_params / model.params


def shape_for(prep: Any, t: int, prompt: int, output: int, expert_share: float) -> Shape:
    """The step model's view of a prepared sizing request on a TP group of `t`."""
    model = prep.model
    kv_gpu = prep.kv_per_token / (t if t < model.kv_heads else model.kv_heads)
    return Shape(model.active_params, model.layers, model.hidden,
                 model.heads * model.head_dim, prep.weights, expert_share, model.experts,
                 model.experts_per_token, kv_gpu, prompt, output)


def replica_point(prep: Any, info: Any, t: int, node_link_gbps: float | None = None,
                  ) -> tuple[Point, Step, tuple[str, ...]]:
    """One replica of a sized inference plan at the request's concurrency and context
    (prompt and output split as --context alone splits them): what `size -w inference
    --tokens` times. A pipeline runs its stages one after another for one batch, so its
    step is that of the TP group holding every layer."""
    prompt, output = split_context(int(prep.context))
    hw, warnings = hardware_for(info, prep.precision, node_link_gbps)
    shape = shape_for(prep, t, prompt, output, expert_bytes_share(prep.model))
    point = operating_point(shape, t, prep.concurrency, hw)
    return point, point.step, warnings


def load_output_tokens_per_s(spec: ServingSpec, output_tokens: int) -> float | None:
    if spec.output_tokens_per_day is not None:
        return spec.output_tokens_per_day / SECONDS_PER_DAY
    if spec.requests_per_day is not None:
        return spec.requests_per_day * output_tokens / SECONDS_PER_DAY
    return None


def serve(req: Any, spec: ServingSpec) -> ServingResult:
    """Size a serving deployment of `req` (a SizingRequest with `gpu`) at `spec`.

    `req.count` GPUs are split into every TP degree inside a node and the replicas left; the
    plan with the most output tokens/s meeting the service level wins. Without a count, each
    TP degree gets the replicas the load needs and the fewest GPUs win; without a load either,
    one replica of the TP degree with the most output tokens/s per GPU.
    """
    from tracker.sizing.engine import size_workload
    from tracker.sizing.plan import valid_tensor_parallel
    from tracker.sizing.prepare import _gpu_info, _prepare, _prepare_key

    if req.gpu is None:
        raise InvalidInput("serving figures need --gpu")
    if req.workload != "inference":
        raise InvalidInput("serving figures are for --workload inference")
    check_spec(spec)
    prompt, output = request_shape(spec, req.context)
    context = prompt + output
    base = replace(req, context=context, concurrency=1, count=None, tokens=None)
    prep = _prepare(_prepare_key(base))
    model = prep.model
    info = _gpu_info(req.gpu)
    hw, hw_warnings = hardware_for(info, prep.precision, req.node_link_gbps)
    cal = hw.calibration
    warnings: list[str] = list(hw_warnings)  # the sizing warnings stay in the sizing result
    expert_share = expert_bytes_share(model)
    load = load_output_tokens_per_s(spec, output)
    count = req.count
    gpn = req.gpus_per_node
    tps = valid_tensor_parallel(model, False, gpn)
    if req.tensor_parallel is not None:
        tps = tuple(t for t in tps if t == req.tensor_parallel) or (req.tensor_parallel,)
    if count is not None:
        tps = tuple(t for t in tps if t <= count)
    tpot_limit, ttft_limit = spec.tpot_limit_s, spec.ttft_limit_s

    plans: list[PlanResult] = []
    for t in tps:
        sized = size_workload(replace(base, gpu=req.gpu, count=t, tensor_parallel=t,
                                      pipeline_parallel=1,
                                      usable_fraction=min(req.usable_fraction,
                                                          cal.memory_utilization)))
        if not sized.fits or sized.kv_capacity_tokens is None:
            continue
        capacity = int(sized.kv_capacity_tokens)
        by_kv = capacity // context
        if by_kv < 1:
            continue
        shape = shape_for(prep, t, prompt, output, expert_share)
        budget = max(1, int(cal.token_budget / (1.0 + shape.prefill_per_decode)))
        limit = min(by_kv, cal.max_batch, max(budget, 1))
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
        plans.append(PlanResult(t, replicas, capacity, by_kv, point, meets, single.tpot_s,
                                 single.ttft_s))

    if not plans:
        sized = size_workload(replace(base, gpu=req.gpu, count=count))
        why = sized.reason or (
            f"no tensor-parallel group of up to {max(tps, default=1)} GPUs (TP stays inside "
            f"a node of {gpn}) holds the weights and one {context}-token request")
        raise InvalidInput(f"{model.id} cannot be served on {info.id}"
                           + (f" x{count}" if count else "") + f": {why}")
    if spec.concurrency is not None and not any(p.meets_slo for p in plans):
        most = max(p.max_concurrency_by_kv for p in plans)
        raise InvalidInput(f"--concurrency {spec.concurrency} does not fit the KV cache on "
                           f"{info.id}: at most {most} requests of {context} tokens")
    meeting = [p for p in plans if p.meets_slo]
    if not meeting:
        best = min(plans, key=lambda p: p.best_tpot_s)
        raise InvalidInput(
            f"no plan on {info.id} meets the service level: the best TPOT reachable is "
            f"{best.best_tpot_s * 1000:.1f} ms (TTFT "
            f"{best.best_ttft_s * 1000:.0f} ms) with TP "
            f"{best.tensor_parallel} at concurrency 1")
    if count is not None:  # the GPUs are given: the most throughput from them
        chosen = max(meeting, key=lambda p: (p.output_tokens_per_s, -p.tensor_parallel))
    elif load is not None:  # the load is given: the fewest GPUs that carry it
        chosen = min(meeting, key=lambda p: (p.gpus, -p.output_tokens_per_s))
    else:  # one replica: the TP degree with the most throughput per GPU
        chosen = max(meeting, key=lambda p: (p.output_tokens_per_s / p.gpus,
                                             -p.tensor_parallel))
    if count is not None and chosen.gpus < count:
        warnings.append(f"{count - chosen.gpus} of {count} GPUs idle: TP "
                        f"{chosen.tensor_parallel} leaves them out of every replica")
    result = ServingResult(info.id, prompt, output, chosen, plans, spec, cal, load,
                           tuple(warnings))
    if result.meets_load is False:
        result.warnings = (*result.warnings,
                           f"{chosen.gpus} GPUs give {result.output_tokens_per_s:,.0f} output "
                           f"tokens/s, below the load's {load:,.0f}")
    return result


__all__ = ["SERVING_KEYS", "ServingResult", "ServingSpec", "request_shape", "serve"]
