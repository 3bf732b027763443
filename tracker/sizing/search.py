"""The training planner's search: the fastest fitting plan over TP × PP × DP, interleaving,
micro-batch, recomputation and ZeRO stage (docs/sizing.md §1.11)."""

from __future__ import annotations

import bisect
import math
from functools import lru_cache
from typing import Any

from tracker.sizing import memory as mem
from tracker.sizing.fixed import sized_result
from tracker.sizing.parts import KEY_MICRO_BATCH, KEY_RECOMPUTE, KEY_SHARDING, Prepared
from tracker.sizing.plan import (
    EP_ACROSS_NODES,
    Job,
    Plan,
    training_expert_parallel,
    valid_tensor_parallel,
)
from tracker.sizing.prepare import (
    DEFAULT_FINETUNE_BATCH_TOKENS,
    DEFAULT_GLOBAL_BATCH_TOKENS,
    gpu_info,
    memory_job,
    preparation,
    prepare_key,
    tp_domain,
)
from tracker.sizing.request import SizingRequest, SizingResult, with_changes
from tracker.sizing.throughput import (
    flops_per_token_factor,
    pipeline_bubble,
    step_parts,
)
from tracker.sizing.timing import (
    StepVolumes,
    StepWork,
    link_facts,
    peak_and_mfu,
    step_inputs,
)

# What the training planner tries when the request leaves a choice open (docs/sizing.md §1.11):
# micro-batches within the global batch, recomputation, ZeRO stage. ZeRO-1 and ZeRO-2 move
# the same bytes as DDP (ZeRO paper), so among them the least sharding that fits is as fast.
SEARCH_MICRO_BATCHES = (1, 2, 4, 8, 16)
SEARCH_SHARDINGS = ("none", "zero1", "zero2", "zero3")
RUNNERS_UP = 3


def _virtual_options(virtual_stages: int, p: int, layers: int) -> tuple[int, ...]:
    """Interleaved chunks per GPU to try: the request's, or 1, 2, 4, ... while every chunk
    keeps at least one layer (Megatron's interleaved 1F1B)."""
    if p == 1:
        return (1,)
    if virtual_stages != 1:
        return (virtual_stages,)
    out, v = [], 1
    while v * p <= layers and v <= MAX_VIRTUAL_STAGES:
        out.append(v)
        v *= 2
    return tuple(out) or (1,)


@lru_cache(maxsize=4096)
def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


MAX_VIRTUAL_STAGES = 8
# Bounds of the search memo: requests (minus GPU) kept, and memory figures kept per request.
SEARCH_TABLES = 64
MEMORY_FIGURES = 4096
WALKS = 64  # the searches' GPU-independent sides kept per request (by count), and
# the resolutions kept per side (by usable memory)

Layout = tuple[int, int, int, int, tuple[int, ...]]  # (t·p, p, t, d, virtual stages tried)
Profile = tuple[float, float, float, float, float, float]  # Job.profile
# A candidate that fits: (sharding, micro-batch, step_parts inputs, tokens per step).
Candidate = tuple[str, int, StepWork, StepVolumes, float]
# Per recomputation and layout: (recompute rank, recompute, FLOPs factor, p, t, d,
# 1 + bubble, TP all-reduce volume, expert all-to-all volume and cross-node copies, GPUs
# the EP group spans, virtual stages tried).
WalkEntry = tuple[int, str, float, int, int, int, float, float, float, float, int,
                  tuple[int, ...]]


# Per interleaving tried, what fits: tuples of plain values only, which the garbage collector
# stops tracking (the memo keeps many).
Resolution = tuple[tuple[int, tuple[Candidate, ...]], ...]


class _Walk:
    """A search's GPU-independent side (see `_Search.walk`): per recomputation and layout
    (an entry, numbered recomputation-major), the most frugal choice's bytes per GPU at its
    best interleaving (where even that exceeds a GPU's usable memory, nothing on the layout
    fits), also sorted, so that a GPU finds the entries that may fit by bisection rather
    than testing each; the entries' bound terms, built when a GPU first reaches them; and
    per usable memory, the entries that may fit and the candidates that fit on each once
    resolved (None: not yet). GPUs of other memory sizes that need as many GPUs share it."""

    __slots__ = ("by_usable", "entries", "hidden", "layouts", "moe", "order", "recomputes",
                 "sorted_least", "widening")

    def __init__(self, layouts: list[tuple[int, int, int, tuple[int, ...], float, int]],
                 recomputes: list[tuple[int, str, float, int]], least: list[float],
                 hidden: float, moe: tuple[int, float, float, float, int, float] | None
                 ) -> None:
        self.layouts, self.recomputes, self.hidden = layouts, recomputes, hidden
        # (experts, experts per token, MoE layers, layers, EP domain, the share of routing
        # groups a token may reach or 0)
        self.moe = moe
        self.entries: list[WalkEntry | None] = [None] * len(least)
        self.order = sorted(range(len(least)), key=least.__getitem__)
        self.sorted_least = [least[i] for i in self.order]
        self.by_usable: dict[float, tuple[list[int], list[Resolution | None]]] = {}
        self.widening: bool | None = None

    def widens(self) -> bool:
        """Whether EP groups spanning nodes change the EP of any layout of this (MoE) walk:
        else the search across nodes on the same count and limit times nothing (its walk
        keeps only such layouts, of the ones within a limit no larger than this one's), and
        a GPU need not build it (GPU-independent, so asked once per walk)."""
        if self.widening is None:
            assert self.moe is not None
            experts, domain = self.moe[0], self.moe[4]
            self.widening = any(
                training_expert_parallel(experts, t, d, EP_ACROSS_NODES)
                != training_expert_parallel(experts, t, d, domain)
                for _p, t, d, _tried, _bubble, _layers in self.layouts)
        return self.widening

    def entry(self, i: int) -> WalkEntry:
        """Entry i: (recompute rank, recompute, FLOPs factor, p, t, d, 1 + bubble, TP
        all-reduce volume, expert all-to-all volumes, the EP group's span, virtual stages
        tried)."""
        found = self.entries[i]
        if found is None:
            rc_index, rc, factor, colls = self.recomputes[i // len(self.layouts)]
            p, t, d, tried, one_plus_bubble, stage_layers = self.layouts[i % len(self.layouts)]
            tp_volume = (colls * stage_layers * self.hidden * 4.0 * (t - 1) / t) \
                if t > 1 else 0.0
            # The expert all-to-alls' bytes per token of a GPU's share on the node link
            # (`timing._all_to_all` over the micro-batch's tokens) and per node a token
            # reaches across nodes (`throughput.step_parts`' a2a_nodes), and the GPUs the
            # EP group spans: terms of a lower bound (the message latency only adds).
            a2a_volume = a2a_copies = 0.0
            span = 0
            if self.moe is not None:
                experts, k, moe_layers, layers, domain, _limit = self.moe
                ep = training_expert_parallel(experts, t, d, domain)
                if ep > 1:
                    collectives = colls * math.ceil(moe_layers * stage_layers / layers)
                    a2a_volume = collectives * k * self.hidden * 2.0 * (ep - 1) / ep / t
                    a2a_copies = collectives * self.hidden * 2.0 / t
                    span = t * ep
            found = self.entries[i] = (rc_index, rc, factor, p, t, d, one_plus_bubble,
                                       tp_volume, a2a_volume, a2a_copies, span, tried)
        return found

    def resolved(self, usable: float) -> tuple[list[int], list[Resolution | None]]:
        """At `usable` bytes per GPU: the entries whose most frugal choice fits, in walk
        order, and the candidates resolved per entry."""
        found = self.by_usable.get(usable)
        if found is None:
            if len(self.by_usable) >= WALKS:
                self.by_usable.clear()
            k = bisect.bisect_right(self.sorted_least, usable)
            found = self.by_usable[usable] = (sorted(self.order[:k]),
                                              [None] * len(self.entries))
        return found


@lru_cache(maxsize=4096)
def _layouts(tps: tuple[int, ...], count: int, pp: int | None, layers: int,
             virtual_stages: int) -> tuple[Layout, ...]:
    """Every TP × PP × DP layout of `count` GPUs, least model parallelism first, with the
    interleaving choices to time: the ends of the range (the bubble favours the most chunks,
    messages and memory the fewest)."""
    layouts = []
    for t in tps:
        if count % t:
            continue
        rest = count // t
        for p in ([pp] if pp is not None else _divisors(rest)):
            if p <= layers and rest % p == 0:
                options = _virtual_options(virtual_stages, p, layers)
                tried = options if len(options) <= 2 else (options[0], options[-1])
                layouts.append((t * p, p, t, rest // p, tried))
    layouts.sort()
    return tuple(layouts)


class _SearchTable:
    """The GPU-independent side of one request's search (its `prepare_key`): the prepared
    (sharding, recompute, micro-batch) variants with their memory functions at unbounded
    usable memory, their per-GPU bytes by layout, and the fewest GPUs by usable memory. A
    sweep asks the same request on many GPUs, and GPUs of one memory size share counts and
    so layouts; only the fit checks (comparisons) and the timing are per GPU."""

    __slots__ = ("fewest", "key", "memory", "variants", "walks")

    def __init__(self, request_key: tuple) -> None:
        self.key = list(request_key)
        self.variants: dict[tuple[str, str, int], tuple[Prepared, Job]] = {}
        self.memory: dict[tuple, Profile] = {}
        self.fewest: dict[tuple, Plan | None] = {}
        self.walks: dict[tuple, _Walk] = {}

    def variant(self, sh: str, rc: str, mb: int) -> tuple[Prepared, Job]:
        """The prepared variant and its memory function (usable-independent: compare
        `per_gpu` with `usable`, never call `fits`)."""
        found = self.variants.get((sh, rc, mb))
        if found is None:
            # A copy, not the table's own list: a table may be shared by threads (the
            # report and the alerts size in a worker thread), and a miss is rare.
            key = list(self.key)
            key[KEY_SHARDING], key[KEY_RECOMPUTE], key[KEY_MICRO_BATCH] = sh, rc, mb
            prep = preparation(tuple(key))
            found = self.variants[(sh, rc, mb)] = (prep, memory_job(prep, math.inf))
        return found

    def profile(self, sh: str, rc: str, mb: int, t: int, p: int, v: int) -> Profile:
        """The variant's `Job.profile` at (t, p, v): its bytes per GPU at any DP degree."""
        key = (sh, rc, mb, t, p, v)
        found = self.memory.get(key)
        if found is None:
            if len(self.memory) >= MEMORY_FIGURES:
                self.memory.clear()
            found = self.memory[key] = self.variant(sh, rc, mb)[1].profile(t, p, v)
        return found

    def one_gpu(self, sh: str, rc: str, mb: int) -> float:
        """The variant's bytes on one GPU (`Job.per_gpu(1, 1, 1)`, summed in its order),
        from the profile memo: asked per GPU and per result."""
        x, y, _z, z1, act, ov = self.profile(sh, rc, mb, 1, 1, 1)
        return x + y + z1 + act + ov  # per_gpu's sum at d = 1 (y / 1 is y exactly)

    def smallest(self, sh: str, rc: str, mb: int, usable: float, tps: tuple[int, ...],
                 pp: int | None) -> Plan | None:
        """The fewest GPUs for the variant at `usable` bytes per GPU."""
        key = (sh, rc, mb, usable, tps, pp)
        if key not in self.fewest:
            if len(self.fewest) >= MEMORY_FIGURES:
                self.fewest.clear()
            job = self.variant(sh, rc, mb)[1]  # its fit checks take `usable` as given
            if self.one_gpu(sh, rc, mb) <= usable and tps[0] == 1 and pp in (None, 1):
                self.fewest[key] = Plan(1, 1, 1)
            else:
                self.fewest[key] = job.smallest(tps, pp, usable)
        return self.fewest[key]


@lru_cache(maxsize=SEARCH_TABLES)
def _search_table(request_key: tuple) -> _SearchTable:
    return _SearchTable(request_key)


def _choices(req: SizingRequest) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
    """The shardings, recomputations and micro-batches the search tries (the request's where
    it fixes one)."""
    if req.offload == "all" and req.sharding is None:
        shardings: tuple[str, ...] = ("zero3",)
    else:
        shardings = (req.sharding,) if req.sharding else SEARCH_SHARDINGS
    if req.recompute:
        recomputes: tuple[str, ...] = (req.recompute,)
    else:
        recomputes = ("none", "selective", "full")
    mbs = (req.micro_batch,) if req.micro_batch else SEARCH_MICRO_BATCHES
    return shardings, recomputes, mbs


def _searchable(req: SizingRequest) -> bool:
    gpn = req.gpus_per_node
    return 0 < req.usable_fraction <= 1 and (gpn is None or (isinstance(gpn, int) and gpn >= 1)) \
        and (req.count is None or (
            isinstance(req.count, int) and req.count >= 1)) and req.virtual_stages >= 1


def size_searched(req: SizingRequest) -> SizingResult | None:
    """The fastest fitting training plan, or None to let the fixed path answer (and raise
    the one-line error) when the request cannot be searched or nothing fits.

    For an MoE model the search runs twice when the GPUs exceed the NVLink domain: with EP
    inside it, and with EP groups spanning nodes (`ep_across_nodes`: more experts split,
    less memory, the all-to-all partly on the cluster network); the faster plan wins, on
    the GPU count the first needs (docs/sizing.md §1.12)."""
    found = _size_searched(req)
    if found is None:
        if req.ep_across_nodes:
            return None
        # Nothing fits with EP inside the domain: EP across nodes may (on its own count).
        wide = _size_searched(with_changes(req, ep_across_nodes=True))
        return None if wide is None else wide[0]
    result, per_token, model, count, domain, limit, walk = found
    # Most MoE queries past the domain have no layout whose EP grows when it may span nodes
    # (the walk knows, once per count): then the wide search has nothing to time.
    if req.ep_across_nodes or not model.is_moe or model.rough or count <= domain \
            or not walk.widens():
        return result
    # The wide search only matters where it beats `per_token` (in a few percent of a sweep's
    # queries): first it times only the layouts whose EP group grows past the domain (the
    # others are the first search's own candidates, none faster) and only what may beat
    # it; only a plan that does is searched in full, for its runners-up.
    wide = _size_searched(with_changes(req, ep_across_nodes=True, count=count),
                          (per_token, limit, domain))
    if wide is None or not wide[1] < per_token:
        return result
    chosen = wide[0]
    if req.count is None:
        chosen.count = None
    return chosen


def _size_searched(req: SizingRequest, beat: tuple[float, float, int] | None = None
                   ) -> tuple[SizingResult, float, Any, int, int, float, _Walk] | None:
    """`size_searched` at the request's EP span: (the result, its seconds per token, the
    model, the GPU count searched, the prepared EP domain, the batch limit searched, the
    walk searched), or None: nothing fits, or nothing fits faster than `beat`.

    `beat`: a search with EP inside a smaller domain on the same count, as (its seconds per
    token, its batch limit, that domain). Its layouts whose EP is the same at this span
    are its own candidates (the same memory, the same time), so only the others can beat
    it. Those use no more memory than it did (EP splits the experts further), so where it
    fitted within the global batch this search does too."""
    if not _searchable(req):
        return None
    info = gpu_info(req.gpu)
    if info.bf16_flops is None:
        return None
    usable = req.usable_fraction * info.memory_bytes
    shardings, recomputes, mbs = _choices(req)
    # GPU-independent: shared by every GPU (and count) the same request is searched on.
    table = _search_table(prepare_key(req))
    first, _ = table.variant(shardings[0], recomputes[0], mbs[0])
    model = first.model
    tps = valid_tensor_parallel(model, True, tp_domain(req, info))
    if req.tensor_parallel is not None:
        if req.tensor_parallel not in tps:
            return None
        tps = (req.tensor_parallel,)
    pp = req.pipeline_parallel
    if pp is not None and (not isinstance(pp, int) or not 1 <= pp <= model.layers):
        return None

    # The fewest GPUs: the most frugal choice (most sharding, full recompute, the smallest
    # micro-batch) decides it; a search fit below it lowers it further.
    smallest = table.smallest(shardings[-1], recomputes[-1], mbs[0], usable, tps, pp)
    gpus_needed = smallest.gpus if smallest is not None else None
    count = req.count if req.count is not None else gpus_needed
    if count is None:
        return None
    layouts = _layouts(tps, count, pp, math.ceil(model.layers), req.virtual_stages)
    choices = (shardings, recomputes, mbs)
    if beat is not None:
        ceiling, beat_limit, beat_domain = beat
        wider = _Search(req, table, first, info, usable, count, choices, layouts, beat_domain)
        if beat_limit < math.inf or wider.fits_within(wider.global_batch):
            limit = wider.global_batch
        else:
            limit = math.inf
        if not any(f[0] < ceiling for f in wider.candidates(limit, ceiling)):
            return None
        # A plan beats it: the whole search, for its runners-up too.
        search = _Search(req, table, first, info, usable, count, choices, layouts)
        found = search.candidates(limit)
    else:
        search = _Search(req, table, first, info, usable, count, choices, layouts)
        # Micro-batch × DP stays within the global batch; only when one sequence per
        # replica already exceeds it on this many GPUs does the step grow past it.
        limit = search.global_batch if search.fits_within(search.global_batch) else math.inf
        found = search.candidates(limit)
    if not found:
        return None
    found.sort()
    _pt, _r, _c, _tp, p, v, mb, sh, rc, t, d, parts = found[0]
    chosen = with_changes(req, sharding=sh, recompute=rc, micro_batch=mb, tensor_parallel=t,
                          pipeline_parallel=p, count=count, virtual_stages=v)
    # The variant's memory function at any usable memory: the result needs its bytes by
    # part, not its fit checks.
    prep, job = table.variant(sh, rc, mb)
    # The search covers more layouts than the smallest-plan walk (any PP at any TP), so a
    # fit it finds below that count lowers it: "fits on N" and "needs M" never disagree.
    outcome = (Plan(t, p, d), True, table.one_gpu(sh, rc, mb) <= usable,
               count if gpus_needed is None else min(gpus_needed, count), None)
    # The chosen plan's result as the fixed path gives it, with the step already timed.
    m, compute, step = parts[0], parts[1], parts[-1]  # StepModel.efficiency, from the parts
    result = sized_result(chosen, prep, info, usable, job, tps, "fastest", outcome,
                          [*prep.warnings, *info.warnings], m * compute / step, search.link_facts)
    if req.count is None:
        result.count = None
    result.runners_up = _runners_up(found[1:1 + RUNNERS_UP], req.tokens)
    return result, found[0][0], model, count, prep.ep_domain, limit, search.walk(limit)


def _runners_up(found: list[tuple], tokens: float | None) -> list[dict[str, Any]]:
    runners: list[dict[str, Any]] = []
    for per_token, _r, _c, _tp, p, v, mb, sh, rc, t, d, _parts in found:
        entry: dict[str, Any] = {
            "tensor_parallel": t, "pipeline_parallel": p, "virtual_stages": v,
            "data_parallel": d, "micro_batch": mb, "recompute": rc, "sharding": sh,
            "seconds_per_million_tokens": per_token * 1e6,
        }
        if tokens is not None:
            entry["wall_hours"] = per_token * float(tokens) / 3600.0
        runners.append(entry)
    return runners


class _Search:
    """One request's search on one GPU and count: the candidates that fit, timed.

    Every candidate's step costs at least its compute (k·N per token over all GPUs at peak ×
    MFU), its pipeline bubble at the most micro-batches, and its TP all-reduces at bandwidth;
    candidates go from the least model parallelism up and are timed only while that bound
    beats the best few times found. Memory grows with the micro-batch, so one sizing at the
    smallest gives the largest that fits.
    """

    def __init__(self, req: SizingRequest, table: _SearchTable, first: Prepared,
                 info: Any, usable: float, count: int,
                 choices: tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]],
                 layouts: tuple[Layout, ...], beyond: int | None = None) -> None:
        self.table, self.usable, self.layouts = table, usable, layouts
        # `beyond`: only the layouts whose EP group is larger than in a domain of this
        # many GPUs (see `_size_searched`'s `beat`).
        self.beyond = beyond
        # What the layouts and fit checks depend on besides the table's request key.
        self.walk_key = (count, req.tensor_parallel, req.pipeline_parallel,
                         req.virtual_stages, req.gpus_per_node, req.global_batch_tokens,
                         tp_domain(req, info), beyond)
        self.shardings, self.recomputes, self.mbs = choices
        # Expert parallelism's share of the replicated states (1.0 for a dense model).
        self.replicated_factor = table.variant(self.shardings[0], self.recomputes[0],
                                               self.mbs[0])[1].replicated_factor
        self.workload, self.model = first.workload, first.model
        self.ep_domain = first.ep_domain
        self.peak, _factor, self.mfu_compute = peak_and_mfu(first, info)
        # The links and their JSON items, for the result.
        self.link_facts = link_facts(req, info)
        self.links = self.link_facts[0]
        self.global_batch = float(req.global_batch_tokens or DEFAULT_GLOBAL_BATCH_TOKENS.get(
            first.workload, DEFAULT_FINETUNE_BATCH_TOKENS))
        self.seq = first.micro_tokens / (self.mbs[0] if req.micro_batch else 1)
        self.per_token_compute = first.model.active_params / (count * self.peak
                                                              * self.mfu_compute)

    def fits_within(self, limit: float) -> bool:
        """Whether any candidate fits within the batch limit: an entry whose most frugal
        choice fits holds at least that choice at the smallest micro-batch (`_fitting`
        checks the same bytes, and the walk keeps only layouts where that micro-batch is
        within the limit)."""
        return bool(self.walk(limit).resolved(self.usable)[0])

    def candidates(self, limit: float, ceiling: float = math.inf) -> list[tuple]:
        """(time per token, ranks..., plan) of every candidate timed, unsorted; with a
        `ceiling`, only candidates whose bound is below it are timed."""
        found: list[tuple] = []
        # Candidates are timed while their bound beats the best few (the plan and its
        # runners-up) and the ceiling; `tops` holds those times, ascending.
        tops: list[float] = []
        best = ceiling
        links = self.links
        per_token_compute, peak, mfu_compute = self.per_token_compute, self.peak, \
            self.mfu_compute
        walk = self.walk(limit)
        entries, entry = walk.entries, walk.entry
        # Only the entries whose most frugal choice fits can hold a candidate.
        within, resolved = walk.resolved(self.usable)
        gather_bw = links.node_link_bw * links.gather_ratio
        gpn = links.gpus_per_node
        for i in within:
            rc_index, rc, factor, p, t, d, one_plus_bubble, tp_volume, a2a_volume, \
                a2a_copies, span, tried = entries[i] or entry(i)
            if best < math.inf:  # the bound prunes only once the best few are known
                bound = factor * per_token_compute * one_plus_bubble
                if bound >= best:
                    continue  # adding the communication terms (never negative) cannot
                    # lower it
                # The TP and expert collectives per token, stretched by the bubble as the
                # compute is (a step is m·(compute + collectives + ...)·(1 + bubble)).
                comm = tp_volume / links.intra_allreduce(t) / d if t > 1 else 0.0
                if a2a_volume:
                    comm += a2a_volume / d / gather_bw
                    if span > gpn:
                        moe = walk.moe
                        assert moe is not None  # only an MoE walk has all-to-all volumes
                        comm += links.cross_node_copies(a2a_copies, span, moe[1], moe[5]) / d
                # Strictly above (with a margin for rounding): the bound can equal a
                # candidate's time, and a tie is decided by the ranks after it.
                if comm and bound + comm * one_plus_bubble > best * (1.0 + 1e-9):
                    continue
            per_v = resolved[i]
            if per_v is None:
                per_v = resolved[i] = self._resolve(rc, t, p, d, tried, limit)
            for v, fitting in per_v:
                for sh, mb, work, volumes, step_tokens in fitting:
                    parts = step_parts(*work, peak, mfu_compute, *volumes, links)
                    per_token = parts[-1] / step_tokens
                    bisect.insort(tops, per_token)
                    if len(tops) > RUNNERS_UP + 1:
                        tops.pop()
                    if len(tops) == RUNNERS_UP + 1 and tops[-1] < best:
                        best = tops[-1]
                    found.append((per_token, _SHARDING_RANK.get(sh, 9), rc_index, t * p, p, v,
                                  mb, sh, rc, t, d, parts))
        return found

    def walk(self, limit: float) -> _Walk:
        """The GPU-independent side of `candidates` at this count, memoised
        in the table: per recomputation and layout within the batch limit (least model
        parallelism first), the bound's GPU-independent terms; what fits on each is
        resolved when a GPU's bound first lets it through."""
        key = (*self.walk_key, limit)
        walks = self.table.walks
        found = walks.get(key)
        if found is not None:
            return found
        if len(walks) >= WALKS:
            walks.clear()
        seq, mb0, model = self.seq, self.mbs[0], self.model
        # Per layout within the batch limit, the bound's terms (the compute over the bubble
        # at the most micro-batches and chunks; the layers per stage, for the TP volume):
        # (p, t, d, virtual stages tried, 1 + bubble, layers per stage).
        layouts = []
        beyond = self.beyond
        experts = int(model.experts) if beyond is not None else 0
        for _mp, p, t, d, tried in self.layouts:
            if seq * mb0 * d > limit:
                continue  # even the smallest micro-batch overfills the global batch
            if beyond is not None and training_expert_parallel(experts, t, d, self.ep_domain) \
                    == training_expert_parallel(experts, t, d, beyond):
                continue
            m_max = max(1.0, limit / (seq * mb0 * d))
            layouts.append((p, t, d, tried, 1.0 + pipeline_bubble(p, m_max, tried[-1]),
                            math.ceil(model.layers / p)))
        recomputes = []
        least: list[float] = []
        memory, profile = self.table.memory, self.table.profile
        frugal, factor_of = self.shardings[-1], self.replicated_factor
        for rc_index, rc in enumerate(self.recomputes):
            recomputes.append((rc_index, rc, flops_per_token_factor(self.workload, rc),
                               6 if rc == "full" else 4))
            for p, t, d, tried, _bubble, _layers in layouts:
                # The most frugal choice's bytes per GPU on the layout at its best
                # interleaving: the fewest chunks tried. Only activations depend on the
                # chunks, and `tried` either starts at one chunk per GPU, which carries no
                # interleaving penalty (the least activations, so the least total), or is
                # the request's single count.
                x, y, z, z1, act, ov = memory.get((frugal, rc, mb0, t, p, tried[0])) or \
                    profile(frugal, rc, mb0, t, p, tried[0])
                if x:
                    x *= factor_of(t, d)
                least.append(x + y / d + (z if d > 1 else z1) + act + ov)
        moe = None
        if model.is_moe and not model.rough:
            moe = (int(model.experts), float(model.experts_per_token), float(model.moe_layers),
                   float(model.layers), self.ep_domain,
                   model.groups_per_token / model.routing_groups if model.routing_groups
                   else 0.0)
        found = walks[key] = _Walk(layouts, recomputes, least, model.hidden, moe)
        return found

    def _resolve(self, rc: str, t: int, p: int, d: int, tried: tuple[int, ...],
                 limit: float) -> Resolution:
        """Per interleaving tried, the candidates that fit on one layout: (sharding,
        micro-batch, `step_parts` inputs, tokens per step). The caller resolves only layouts
        where the most frugal choice fits at some chunk count tried (interleaving adds
        activations: the fewest chunks may fit where the most do not)."""
        per_v = []
        global_batch = self.global_batch
        for v in tried:
            fitting: list[Candidate] = []
            for sh, mb, prep, micro_tokens in self._fitting(rc, t, p, d, v, limit):
                work, volumes = step_inputs(prep, t, p, d, v, global_batch, micro_tokens)
                # `limit` only filters; a step holds the global batch or, when one
                # micro-batch per replica exceeds it, that many tokens.
                fitting.append((sh, mb, work, volumes, max(global_batch, micro_tokens * d)))
            per_v.append((v, tuple(fitting)))
        return tuple(per_v)

    def _fitting(self, rc: str, t: int, p: int, d: int, v: int,
                 limit: float) -> list[tuple[str, int, Prepared, float]]:
        """(sharding, micro-batch, the variant prepared at the smallest micro-batch, tokens
        per micro-batch) to time on one layout and interleaving: the first dense ZeRO stage
        that fits (ZeRO-1/2 time as DDP does, and with one replica every stage is DDP),
        ZeRO-3, and the micro-batches worth timing.

        Only the activations and the tokens per micro-batch depend on the micro-batch, in
        proportion, and the micro-batches tried are powers of two (asserted below `_Search`):
        scaling the smallest's figures by a power of two is exact in floating point, so the
        larger micro-batches need neither a preparation nor a memory profile of their own."""
        table, usable, seq, mbs = self.table, self.usable, self.seq, self.mbs
        profile, variants = table.profile, table.variants
        mb0 = mbs[0]
        out = []
        dense_done = False
        for sh in self.shardings:
            zero3 = sh in ("zero3", "fsdp")
            if dense_done and (not zero3 or d == 1):
                continue
            # Activations scale with the micro-batch and nothing else does, so one sizing
            # gives the largest micro-batch that fits.
            x, y, z, z1, act1, ov = profile(sh, rc, mb0, t, p, v)
            if x:
                x *= self.replicated_factor(t, d)
            per1 = x + y / d + (z if d > 1 else z1) + act1 + ov
            if per1 > usable:
                continue
            cap = (mb0 * (usable - per1 + act1) / act1 if act1 > 0 else math.inf) * (1 + 1e-12)
            # Both bounds grow with the micro-batch, so the sizes within them are a prefix.
            within = 0
            for mb in mbs:
                if not (mb <= cap and seq * mb * d <= limit):
                    break
                within += 1
            dense_done = True if d == 1 else (dense_done or not zero3)
            if not within:
                continue
            if p == 1:
                # Without a pipeline a larger micro-batch is never slower (the same compute
                # per token, fewer messages and gathers, more backward to hide the
                # all-reduce behind): time the largest.
                sizes: tuple[int, ...] = (mbs[within - 1],)
            elif within > 2:
                # With one, the bubble favours the smallest and message latency the
                # largest; the ends bracket the choice.
                sizes = (mb0, mbs[within - 1])
            else:
                sizes = mbs[:within]
            prep = variants[(sh, rc, mb0)][0]
            for mb in sizes:
                if mb == mb0:
                    total = per1  # the smallest micro-batch, sized above
                else:
                    # mb0 is 1 here (several sizes: SEARCH_MICRO_BATCHES).
                    total = x + y / d + (z if d > 1 else z1) + act1 * mb + ov
                if total <= usable:  # the estimate
                    out.append((sh, mb, prep, prep.micro_tokens * (mb // mb0)))
        return out


# The micro-batches searched start at one and are powers of two: see `_Search._fitting`.
assert SEARCH_MICRO_BATCHES[0] == 1 and all(mb & (mb - 1) == 0 for mb in SEARCH_MICRO_BATCHES)

_SHARDING_RANK = {name: i for i, name in enumerate((*SEARCH_SHARDINGS, "fsdp"))}


def searches(req: SizingRequest) -> bool:
    if req.plan != "fastest" or req.gpu is None or req.workload not in mem.TRAINING_WORKLOADS:
        return False
    return (req.tensor_parallel is None or req.pipeline_parallel is None
            or req.micro_batch is None or req.recompute is None or req.sharding is None)
