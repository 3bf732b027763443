"""The training planner's search: the fastest fitting plan over TP × PP × DP, interleaving,
micro-batch, recomputation and ZeRO stage (docs/sizing.md §1.11)."""

from __future__ import annotations

import bisect
import math
from functools import lru_cache
from typing import Any

from tracker.sizing import memory as mem
from tracker.sizing.fixed import _size_fixed
from tracker.sizing.plan import Job, Plan, valid_tensor_parallel
from tracker.sizing.prepare import (
    _KEY_MICRO_BATCH,
    _KEY_RECOMPUTE,
    _KEY_SHARDING,
    DEFAULT_FINETUNE_BATCH_TOKENS,
    DEFAULT_GLOBAL_BATCH_TOKENS,
    _gpu_info,
    _job,
    _prepare,
    _prepare_key,
    _Prepared,
)
from tracker.sizing.request import SizingRequest, SizingResult, _with
from tracker.sizing.throughput import flops_per_token_factor, pipeline_bubble
from tracker.sizing.timing import _links, _peak_and_mfu, _step_parts_of

# What the training planner tries when the request leaves a choice open (docs/sizing.md §1.11):
# micro-batches within the global batch, recomputation, ZeRO stage. ZeRO-1 and ZeRO-2 move
# the same bytes as DDP (ZeRO paper), so among them the least sharding that fits is as fast.
SEARCH_MICRO_BATCHES = (1, 2, 4, 8, 16)
SEARCH_SHARDINGS = ("none", "zero1", "zero2", "zero3")
RUNNERS_UP = 3


def _virtual_options(req: SizingRequest, p: int, layers: int) -> tuple[int, ...]:
    """Interleaved chunks per GPU to try: the request's, or 1, 2, 4, ... while every chunk
    keeps at least one layer (Megatron's interleaved 1F1B)."""
    if p == 1:
        return (1,)
    if req.virtual_stages != 1:
        return (req.virtual_stages,)
    out, v = [], 1
    while v * p <= layers and v <= MAX_VIRTUAL_STAGES:
        out.append(v)
        v *= 2
    return tuple(out) or (1,)


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})
MAX_VIRTUAL_STAGES = 8


def _size_searched(req: SizingRequest) -> SizingResult | None:
    """The fastest fitting training plan, or None to let the fixed path answer (and raise
    the one-line error) when the request cannot be searched or nothing fits.

    Every candidate's step costs at least its compute (k·N per token over all GPUs at peak ×
    MFU), its pipeline bubble at the most micro-batches, and its TP all-reduces at bandwidth;
    candidates go from the least model parallelism up and stop being timed once that bound
    passes the best time found. Memory grows with the micro-batch, so the scan over
    micro-batches stops at the first that does not fit.
    """
    if not 0 < req.usable_fraction <= 1 or not isinstance(req.gpus_per_node, int) or \
            req.gpus_per_node < 1 or (req.count is not None and (
                not isinstance(req.count, int) or req.count < 1)) or req.virtual_stages < 1:
        return None
    info = _gpu_info(req.gpu)
    if info.bf16_flops is None:
        return None
    usable = req.usable_fraction * info.memory_bytes
    gpn = req.gpus_per_node
    if req.offload == "all" and req.sharding is None:
        shardings: tuple[str, ...] = ("zero3",)
    else:
        shardings = (req.sharding,) if req.sharding else SEARCH_SHARDINGS
    if req.recompute:
        recomputes: tuple[str, ...] = (req.recompute,)
    else:
        recomputes = ("none", "selective", "full") if req.attention == "eager" else \
            ("none", "full")
    mbs = (req.micro_batch,) if req.micro_batch else SEARCH_MICRO_BATCHES
    request_key = _prepare_key(req)
    base_key = list(request_key)
    # GPU-independent: shared by every GPU (and count) the same request is searched on.
    variants = _variant_table(request_key)

    def variant(sh: str, rc: str, mb: int) -> tuple[_Prepared, Job]:
        """The prepared variant and its memory function (usable-independent: compare
        `per_gpu` with `usable`, never call `fits`)."""
        found = variants.get((sh, rc, mb))
        if found is None:
            base_key[_KEY_SHARDING], base_key[_KEY_RECOMPUTE] = sh, rc
            base_key[_KEY_MICRO_BATCH] = mb
            prep = _prepare(tuple(base_key))
            found = variants[(sh, rc, mb)] = (prep, _job(prep, math.inf))
        return found

    first, _ = variant(shardings[0], recomputes[0], mbs[0])
    model = first.model
    tps = valid_tensor_parallel(model, True, gpn)
    if req.tensor_parallel is not None:
        if req.tensor_parallel not in tps:
            return None
        tps = (req.tensor_parallel,)
    pp = req.pipeline_parallel
    if pp is not None and (not isinstance(pp, int) or not 1 <= pp <= model.layers):
        return None

    # The fewest GPUs: the most frugal choice (most sharding, full recompute, the smallest
    # micro-batch) decides it; a search fit below it lowers it further.
    frugal_prep, _unbounded = variant(shardings[-1], recomputes[-1], mbs[0])
    frugal = _job(frugal_prep, usable)
    if frugal.per_gpu(1, 1, 1) <= usable and tps[0] == 1 and pp in (None, 1):
        smallest: Plan | None = Plan(1, 1, 1)
    else:
        smallest = frugal.smallest(tps, pp)
    gpus_needed = smallest.gpus if smallest is not None else None
    count = req.count if req.count is not None else gpus_needed
    if count is None:
        return None

    peak, _factor, mfu_compute = _peak_and_mfu(first, info)
    links = _links(req, info)
    global_batch = float(req.global_batch_tokens or DEFAULT_GLOBAL_BATCH_TOKENS.get(
        first.workload, DEFAULT_FINETUNE_BATCH_TOKENS))
    layers = math.ceil(model.layers)
    seq = first.micro_tokens / (mbs[0] if req.micro_batch else 1)
    params = model.active_params
    per_token_compute = params / (count * peak * mfu_compute)

    def search(limit: float) -> list[tuple]:
        found: list[tuple] = []
        # Candidates are timed while their bound beats the best few (the plan and its
        # runners-up); `tops` holds those times, ascending.
        tops: list[float] = []
        best = math.inf
        layouts = []
        for t in tps:
            if count % t:
                continue
            rest = count // t
            for p in ([pp] if pp is not None else _divisors(rest)):
                if p <= layers and rest % p == 0:
                    options = _virtual_options(req, p, layers)
                    tried = options if len(options) <= 2 else (options[0], options[-1])
                    layouts.append((t * p, p, t, rest // p, tried))
        layouts.sort()
        base_jobs = {(sh, rc): variant(sh, rc, mbs[0])[1]
                     for sh in shardings for rc in recomputes}
        for rc in recomputes:
            frugal_job = base_jobs[(shardings[-1], rc)]
            factor = flops_per_token_factor(first.workload, rc)
            colls = 6 if rc == "full" else 4
            for _mp, p, t, d, tried in layouts:
                if seq * mbs[0] * d > limit:
                    continue  # even the smallest micro-batch overfills the global batch
                v_top = tried[-1]
                m_max = max(1.0, limit / (seq * mbs[0] * d))
                bound = factor * per_token_compute * (1.0 + pipeline_bubble(p, m_max, v_top))
                if t > 1:
                    bound += (colls * math.ceil(model.layers / p) * model.hidden * 4.0
                              * (t - 1) / t / links.intra_allreduce(t) / d)
                if bound >= best:
                    continue
                # Nothing fits this layout if its most frugal choice fits at no chunk count
                # tried (interleaving adds activations: the fewest chunks may fit where the
                # most do not).
                if all(frugal_job.per_gpu(t, p, d, v) > usable for v in tried):
                    continue
                for v in tried:
                    dense_done = False
                    for sh in shardings:
                        zero3 = sh in ("zero3", "fsdp")
                        if dense_done and (not zero3 or d == 1):
                            # ZeRO-1/2 time as DDP does, and with one replica every stage
                            # is DDP: the first that fits counts.
                            continue
                        # Activations scale with the micro-batch and nothing else does,
                        # so one sizing gives the largest micro-batch that fits.
                        job1 = base_jobs[(sh, rc)]
                        per1 = job1.per_gpu(t, p, d, v)
                        if per1 > usable or seq * mbs[0] * d > limit:
                            continue
                        act1 = job1.activations(t, p, v)
                        cap = (mbs[0] * (usable - per1 + act1) / act1 if act1 > 0
                               else math.inf)
                        sizes = [mb for mb in mbs if mb <= cap * (1 + 1e-12)
                                 and seq * mb * d <= limit]
                        dense_done = True if d == 1 else (dense_done or not zero3)
                        if p == 1:
                            # Without a pipeline a larger micro-batch is never slower (the
                            # same compute per token, fewer messages and gathers, more
                            # backward to hide the all-reduce behind): time the largest.
                            sizes = sizes[-1:]
                        elif len(sizes) > 2:
                            # With one, the bubble favours the smallest and message latency
                            # the largest; the ends bracket the choice.
                            sizes = [sizes[0], sizes[-1]]
                        fitting = []
                        for mb in sizes:
                            prep, job = variant(sh, rc, mb)
                            if job.per_gpu(t, p, d, v) <= usable:  # the estimate, checked
                                fitting.append((mb, prep))
                        for mb, prep in fitting:
                            # `limit` only filters; a step holds the global batch or, when
                            # one micro-batch per replica exceeds it, that many tokens.
                            step = _step_parts_of(prep, t, p, d, v, global_batch, peak,
                                                  mfu_compute, links)[-1]
                            per_token = step / max(global_batch, prep.micro_tokens * d)
                            bisect.insort(tops, per_token)
                            if len(tops) > RUNNERS_UP + 1:
                                tops.pop()
                            if len(tops) == RUNNERS_UP + 1:
                                best = tops[-1]
                            found.append((per_token, _SHARDING_RANK.get(sh, 9),
                                          recomputes.index(rc), t * p, p, v, mb, sh, rc, t, d))
        return found

    # Micro-batch × DP stays within the global batch; only when one sequence per replica
    # already exceeds it on this many GPUs does the step grow past it.
    found = search(global_batch) or search(math.inf)
    if not found:
        return None
    found.sort()
    _pt, _r, _c, _tp, p, v, mb, sh, rc, t, _d = found[0]
    chosen = _with(req, sharding=sh, recompute=rc, micro_batch=mb, tensor_parallel=t,
                     pipeline_parallel=p, count=count, virtual_stages=v)
    # The search covers more layouts than the smallest-plan walk (any PP at any TP), so a
    # fit it finds below that count lowers it: "fits on N" and "needs M" never disagree.
    result = _size_fixed(chosen, "fastest",
                         count if gpus_needed is None else min(gpus_needed, count))
    if req.count is None:
        result.count = None
    runners: list[dict[str, Any]] = []
    for per_token, _r, _c, _tp, p2, v2, mb2, sh2, rc2, t2, d2 in found[1:]:
        if len(runners) == RUNNERS_UP:
            break
        entry: dict[str, Any] = {
            "tensor_parallel": t2, "pipeline_parallel": p2, "virtual_stages": v2,
            "data_parallel": d2, "micro_batch": mb2, "recompute": rc2, "sharding": sh2,
            "seconds_per_million_tokens": per_token * 1e6,
        }
        if req.tokens is not None:
            entry["wall_hours"] = per_token * float(req.tokens) / 3600.0
        runners.append(entry)
    result.runners_up = runners
    return result


_SHARDING_RANK = {name: i for i, name in enumerate((*SEARCH_SHARDINGS, "fsdp"))}


@lru_cache(maxsize=4096)
def _variant_table(request_key: tuple) -> dict[tuple[str, str, int], tuple[_Prepared, Job]]:
    """(sharding, recompute, micro-batch) -> (prepared variant, its memory function at
    unbounded usable memory), filled by the search: pure in the request's GPU-independent
    key, so the GPUs a request is compared on share it (at most 4 × 3 × 5 entries)."""
    return {}


def _searches(req: SizingRequest) -> bool:
    if req.plan != "fastest" or req.gpu is None or req.workload not in mem.TRAINING_WORKLOADS:
        return False
    return any(v is None for v in (req.tensor_parallel, req.pipeline_parallel, req.micro_batch,
                                    req.recompute, req.sharding))
