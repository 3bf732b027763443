"""The fixed-plan path: size a request whose plan choices are all made (by the request, the
defaults or the planner), with the smallest-plan walk, fit checks and the reasons."""

from __future__ import annotations

import math

from tracker.core.errors import InvalidInput
from tracker.sizing.architecture import ModelSpec
from tracker.sizing.parts import GpuInfo, Prepared
from tracker.sizing.plan import (
    SHARD_ZERO3,
    Job,
    Plan,
    tensor_parallel_problem,
    training_expert_parallel,
    valid_tensor_parallel,
)
from tracker.sizing.prepare import (
    GiB,
    gpu_info,
    host_size,
    memory_job,
    preparation,
    prepare_key,
    tp_domain,
)
from tracker.sizing.request import SizingRequest, SizingResult, result_of
from tracker.sizing.timing import LinkFacts, link_facts, plan_tuple, run_time, tokens_per_step


def size_fixed(req: SizingRequest, plan_kind: str) -> SizingResult:
    """Size with every plan choice but (t, p, d) fixed by the request: the smallest plan
    that fits, or the plan on `req.count` (the lowest-memory one when none fits)."""
    prep = preparation(prepare_key(req))
    warnings = list(prep.warnings)
    if req.gpu is None:
        if req.count is not None or req.tokens is not None:
            raise InvalidInput("--count and --tokens need --gpu")
        values = prep.base.copy()
        values["warnings"] = tuple(warnings)
        return result_of(values)
    info, usable, tps = _checked(req, prep)
    warnings.extend(info.warnings)
    job = memory_job(prep, usable)
    fits_single = job.per_gpu(1, 1, 1) <= usable
    pp = req.pipeline_parallel
    smallest = Plan(1, 1, 1) if fits_single and req.tensor_parallel in (None, 1) and \
        pp in (None, 1) else job.smallest(tps, pp)
    gpus_needed = smallest.gpus if smallest is not None else None
    plan, fits, reason = _plan_on_count(req, job, tps, smallest, gpus_needed, info, usable,
                                        warnings)
    if plan is None:
        reason = _nothing_fits_reason(job, tps, prep.model, info, usable, prep.training)
        warnings.append(reason)
    return sized_result(req, prep, info, usable, job, tps, plan_kind,
                        (plan, fits, fits_single, gpus_needed, reason), warnings)


def _checked(req: SizingRequest, prep: Prepared) -> tuple[GpuInfo, float, tuple[int, ...]]:
    """The request's GPU, usable bytes per GPU and TP degrees, its plan flags checked."""
    usable_fraction = req.usable_fraction
    if not 0 < usable_fraction <= 1:
        raise InvalidInput(f"--usable-fraction must be in (0, 1], got {usable_fraction}")
    gpn = req.gpus_per_node
    if gpn is not None and (not isinstance(gpn, int) or gpn < 1):
        raise InvalidInput(f"--gpus-per-node must be a positive integer, got {gpn!r}")
    count = req.count
    if count is not None and (not isinstance(count, int) or count < 1):
        raise InvalidInput(f"--count must be a positive integer, got {count!r}")
    assert req.gpu is not None  # size_fixed answers a request without a GPU itself
    info = gpu_info(req.gpu)
    model = prep.model
    domain = tp_domain(req, info)
    tps = valid_tensor_parallel(model, prep.training, domain)
    if req.tensor_parallel is not None:
        t = req.tensor_parallel
        if not isinstance(t, int) or t < 1:
            raise InvalidInput(f"--tp must be a positive integer, got {t!r}")
        problem = tensor_parallel_problem(model, t, prep.training)
        if problem:
            raise InvalidInput(problem)
        if t > domain:
            raise InvalidInput(f"--tp {t} is larger than --gpus-per-node "
                               f"{host_size(req, info)}; tensor "
                               "parallelism stays inside a node (or its NVLink domain: "
                               f"{domain} GPUs for {info.id})")
        tps = (t,)
    pp = req.pipeline_parallel
    if pp is not None and (not isinstance(pp, int) or not 1 <= pp <= model.layers):
        raise InvalidInput(f"--pp must be between 1 and the {model.layers:g} layers, got {pp!r}")
    if req.virtual_stages < 1:
        raise InvalidInput("--virtual-stages must be at least 1")
    return info, usable_fraction * info.memory_bytes, tps


def _plan_on_count(req: SizingRequest, job: Job, tps: tuple[int, ...], smallest: Plan | None,
                   gpus_needed: int | None, info: GpuInfo, usable: float,
                   warnings: list[str]) -> tuple[Plan | None, bool, str | None]:
    """(plan, fits, reason): the smallest plan, or the plan on `req.count`."""
    count = req.count
    if count is None:
        fits = smallest is not None and job.fits(*plan_tuple(smallest), req.virtual_stages)
        return smallest, fits, None
    exact, lowest = job.on_count(count, tps, req.pipeline_parallel, req.virtual_stages)
    if exact is not None:
        return exact, True, None
    if smallest is not None and smallest.gpus <= count:
        mp = smallest.tensor_parallel * smallest.pipeline_parallel
        plan = Plan(smallest.tensor_parallel, smallest.pipeline_parallel, count // mp)
        idle = count - plan.gpus
        warnings.append(f"{count} GPUs do not factor into a fitting TP×PP×DP plan; using "
                        f"{plan.gpus} ({idle} idle)")
        return plan, job.fits(*plan_tuple(plan)), None
    # About the plan whose memory is printed beside it, then the way out.
    w, g, o, a, kv, ov = job.parts(*plan_tuple(lowest), req.virtual_stages)
    reason = (f"does not fit on {count} × {info.id}: as TP {lowest.tensor_parallel} × "
              f"PP {lowest.pipeline_parallel} × DP {lowest.data_parallel} one GPU "
              f"needs {(w + g + o + a + kv + ov) / GiB:.1f} GiB (activations "
              f"{a / GiB:.1f}, model states and KV {(w + g + o + kv) / GiB:.1f}) > "
              f"usable {usable / GiB:.1f} GiB")
    if gpus_needed is not None:
        reason += f"; needs at least {gpus_needed} GPUs"
    elif job.training:
        reason += ("; try --recompute full, a smaller --micro-batch or --seq-len, "
                   "--sharding zero3 or offload, or a larger GPU")
    warnings.append(reason)
    return lowest, False, reason


def sized_result(req: SizingRequest, prep: Prepared, info: GpuInfo, usable: float, job: Job,
                 tps: tuple[int, ...], plan_kind: str,
                 outcome: tuple[Plan | None, bool, bool, int | None, str | None],
                 warnings: list[str], step_efficiency: float | None = None,
                 links: LinkFacts | None = None) -> SizingResult:
    """The result of `plan` (fits or not; None: nothing fits) with memory by part and, with
    `tokens`, the time (`step_efficiency`: the training step's when the caller timed it
    already, on `links`, the request's `link_facts`). `outcome` is (plan, fits, fits on one
    GPU, GPUs needed, reason)."""
    plan, fits, fits_single, gpus_needed, reason = outcome
    training = prep.training
    if links is None:
        links = link_facts(req, info)
    # Item by item into the preparation's template (a sweep builds one result per query).
    values = prep.base.copy()
    values["gpu"] = info.id
    values["count"] = req.count
    values["usable_gpu_bytes"] = int(usable)
    values["fits_single_gpu"] = fits_single
    values["gpus_needed"] = gpus_needed
    values["fits"] = fits
    values["reason"] = reason
    values["plan"] = plan_kind
    values["links"] = dict(links[1])
    if training:
        values["micro_batch"] = req.micro_batch or 1
        values["recompute"] = req.recompute or "none"
        values["sharding"] = req.sharding or "none"
        values["virtual_stages"] = req.virtual_stages
    if plan is not None:
        t, p, d = plan.tensor_parallel, plan.pipeline_parallel, plan.data_parallel
        w, g, o, a, kv, ov = job.parts(t, p, d, req.virtual_stages)
        per_gpu = w + g + o + a + kv + ov
        values["tensor_parallel"] = t
        values["pipeline_parallel"] = p
        values["data_parallel"] = d
        # Serving spreads whole experts over the replica's GPUs (the bytes per GPU are those
        # of TP-sliced experts); training takes EP from the DP ranks inside the NVLink
        # domain (plan.training_expert_parallel; docs/sizing.md §1.12).
        model = prep.model
        if not model.is_moe or model.rough:
            values["expert_parallel"] = 1
        elif training:
            values["expert_parallel"] = training_expert_parallel(int(model.experts), t, d,
                                                                 prep.ep_domain)
        else:
            values["expert_parallel"] = math.gcd(int(model.experts), t * p)
        values["gpus_used"] = t * p * d
        values["per_gpu_bytes"] = int(per_gpu)
        values["per_gpu"] = {"weights": int(w), "gradients": int(g), "optimizer": int(o),
                                  "activations": int(a), "kv_cache": int(kv),
                                  "overhead": int(ov)}
        if training:
            values["gradient_accumulation"] = math.ceil(
                tokens_per_step(req, prep, d) / (prep.micro_tokens * d) - 1e-9)
        elif prep.kv_per_token:
            values["kv_capacity_tokens"] = _kv_capacity(prep, plan, usable, per_gpu - kv)
    else:
        floor = _floor_plan(job, tps, prep.model)
        values["per_gpu_bytes"] = int(job.per_gpu(*floor))
    if req.tokens is not None:
        values.update(run_time(req, prep, info, plan, req.count, warnings, links[0],
                                   step_efficiency))
    values["warnings"] = tuple(warnings)
    return result_of(values)


def _kv_capacity(prep: Prepared, plan: Plan, usable: float, beside_kv: float) -> int:
    """Tokens of KV (summed over requests, full-attention layers) that fit beside the
    weights, activations and overhead on this plan: vLLM's "max concurrency × length"."""
    model = prep.model
    t, p = plan.tensor_parallel, plan.pipeline_parallel
    share = 1.0 if p == 1 else math.ceil(model.layers / p) / model.layers
    per_head = 1.0 / t if t < model.kv_shards else 1.0 / model.kv_shards
    room = usable - beside_kv
    per_token = prep.kv_per_token * share * per_head
    return int(room / per_token) if room > 0 else 0


def _floor_plan(job: Job, tps: tuple[int, ...], model: ModelSpec) -> tuple[int, int, int]:
    """The most split plan tried: top TP, one layer per stage (ZeRO-3: states sharded away)."""
    t = tps[-1]
    if job.training and job.shard == SHARD_ZERO3:
        return t, 1, 1 << 20
    p = max(1, math.ceil(model.layers))
    return t, p, (1 << 20) if job.training and job.shard else 1


def _nothing_fits_reason(job: Job, tps: tuple[int, ...], model: ModelSpec, info: GpuInfo,
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
