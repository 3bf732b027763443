"""Monte Carlo of a spot run with checkpoints: the spread of its wall time and cost (pure).

The run is the one Daly's model describes (tracker.economics.spot, docs/economics.md §1.2):
Ts hours of work cut into segments of τ compute + δ checkpoint (the last segment the work that
is left, also checkpointed: the run ends by saving its result); interruptions are a Poisson
process of rate 1/M_job over the whole wall time, restarts included. An interruption loses the
segment in progress (the work since the last completed checkpoint) and costs a restart of R
hours, which an interruption can itself cut short and start over (Daly's "complete" model).
With the notice window, the emergency checkpoint keeps the work: an interruption costs only
the restart.

Per replica and segment the number of failed attempts is geometric, P(success) = e^(−L/M)
for a segment of L = τ + δ hours; each failed attempt lasts an exponential time truncated to
[0, L), drawn by inverting its distribution; each restart the same with L = R. The expected
wall time of this model is exactly

    E[T_w] = M e^(R/M) [(n − 1)(e^((τ+δ)/M) − 1) + (e^((r+δ)/M) − 1)],   n = ⌈Ts/τ⌉, r = Ts − (n−1)τ

(`exact_expected_wall_hours`), which is Daly's T_w = M e^(R/M)(e^((τ+δ)/M) − 1) Ts/τ when τ
divides Ts; otherwise the whole last segment differs from Daly's fractional one by less than
one segment's expected time (`mean_vs_daly_pct` says by how much). Draws are vectorised over
replicas × segments with numpy's PCG64 generator, seeded: the same seed, the same answer.

Prices: a flat price per node-hour (the offer's), or a path of (hours from the start, price)
steps (the offer's stored history from a start date); cost = nodes × ∫ price over billed
hours. Money summaries come back as Decimal; the replicas' arithmetic is float (statistics).

Deadline choice (`choose_for_deadline`): spot alone, on-demand, or spot with a fallback to
on-demand at hour h (at h the run stops on spot, restarts on on-demand, R hours, and does the
work not yet checkpointed at on-demand's speed); the cheapest by expected cost whose share of
replicas meeting the deadline is at least the asked probability.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tracker.core.errors import InvalidInput
from tracker.economics.units import dec, money_out, positive

MAX_REPLICAS = 1_000_000
_CHUNK_CELLS = 2_000_000  # replicas × segments drawn at once: ~16 MB of float64 per array
MAX_INTERRUPTIONS = 50_000_000  # drawn over all replicas: beyond it, memory, not insight
FALLBACK_GRID = 64  # fallback hours tried between 0 and the deadline


@dataclass(frozen=True, slots=True)
class SimulationInputs:
    work_hours: float
    interval_hours: float  # τ: compute between checkpoints (the plan's)
    checkpoint_hours: float  # δ
    restart_hours: float  # R
    mtti_job_hours: float  # M of the whole job
    replicas: int
    seed: int = 0
    notice_window: bool = False  # the emergency checkpoint keeps the work
    unbilled_wait_hours: float = 0.0  # of each restart
    nodes: int = 1
    spot_price_per_node_hour: Decimal | None = None
    price_path: tuple[tuple[float, Decimal], ...] | None = None  # (hours from start, price)
    deadline_hours: float | None = None


@dataclass(frozen=True, slots=True)
class Summary:
    p10: float
    p50: float
    p90: float
    mean: float
    stderr: float

    @classmethod
    def of(cls, values: Any) -> Summary:
        import numpy as np

        p10, p50, p90 = (float(v) for v in np.percentile(values, [10, 50, 90]))
        n = len(values)
        stderr = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        return cls(p10, p50, p90, float(values.mean()), stderr)


@dataclass(frozen=True, slots=True)
class MoneySummary:
    p10: Decimal
    p50: Decimal
    p90: Decimal
    mean: Decimal
    stderr: Decimal


@dataclass(frozen=True)
class SimulationResult:
    replicas: int
    seed: int
    segments: int
    wall_hours: Summary
    billed_hours: Summary
    interruptions: Summary
    cost: MoneySummary | None
    deadline_hours: float | None
    deadline_probability: float | None
    exact_expected_wall_hours: float
    # per replica, kept for the deadline choice (numpy arrays)
    wall: Any = field(repr=False)
    billed: Any = field(repr=False)
    cost_values: Any = field(repr=False)
    completions: Any = field(repr=False, default=None)  # replicas × segments, or None
    warnings: tuple[str, ...] = ()


def segments_of(work_hours: float, interval_hours: float) -> tuple[int, float]:
    """(n, r): n segments of τ, the last one r ≤ τ hours of work."""
    if interval_hours <= 0 or interval_hours >= work_hours:
        return 1, work_hours
    n = math.ceil(work_hours / interval_hours - 1e-9)
    return n, work_hours - (n - 1) * interval_hours


def exact_expected_wall_hours(work_hours: float, interval_hours: float, checkpoint_hours: float,
                              restart_hours: float, mtti_job_hours: float,
                              notice_window: bool = False) -> float:
    """The simulated model's own expectation (module docstring)."""
    m = mtti_job_hours
    n, r = segments_of(work_hours, interval_hours)
    uptime = work_hours + n * checkpoint_hours
    if notice_window:
        # Poisson(uptime/M) interruptions, each a restart of expected M(e^(R/M) − 1).
        return uptime * math.exp(restart_hours / m)
    tau = min(interval_hours, work_hours) if interval_hours > 0 else work_hours
    return m * math.exp(restart_hours / m) * (
        (n - 1) * math.expm1((tau + checkpoint_hours) / m)
        + math.expm1((r + checkpoint_hours) / m))


def _check(i: SimulationInputs) -> None:
    if not 1 <= i.replicas <= MAX_REPLICAS:
        raise InvalidInput(f"--simulate takes 1 to {MAX_REPLICAS:,} replicas, got {i.replicas}")
    if i.seed < 0:
        raise InvalidInput(f"--seed must be 0 or more, got {i.seed}")
    positive(i.work_hours, "work hours")
    positive(i.interval_hours, "checkpoint interval", allow_zero=True)
    positive(i.checkpoint_hours, "checkpoint time", allow_zero=True)
    positive(i.restart_hours, "restart time", allow_zero=True)
    positive(i.mtti_job_hours, "MTTI")
    if i.deadline_hours is not None:
        positive(i.deadline_hours, "deadline")
    if i.interval_hours == 0 and i.checkpoint_hours > 0:
        raise InvalidInput("a checkpoint interval of 0 needs a checkpoint time of 0")


def _truncated_exponential_sum(rng: Any, counts: Any, limit: float, mean: float) -> Any:
    """For each cell, the sum of `counts` exponential(mean) times each truncated to [0, limit)."""
    import numpy as np

    total = int(counts.sum())
    out = np.zeros(counts.shape, dtype=float)
    if total == 0 or limit <= 0:
        return out
    u = rng.random(total)
    # Inverse CDF of Exp(1/mean) conditioned on < limit; -expm1 keeps tiny limit/mean exact.
    times = -mean * np.log1p(u * np.expm1(-limit / mean))
    out.ravel()[:] = np.bincount(_owners(counts), weights=times, minlength=counts.size)
    return out


def _owners(counts: Any) -> Any:
    """The flat cell index of each of the `counts.sum()` events (only cells with events)."""
    import numpy as np

    flat = counts.ravel()
    cells = np.flatnonzero(flat)
    return np.repeat(cells, flat[cells])


def _restart_phases(rng: Any, counts: Any, restart: float, m: float) -> tuple[Any, Any]:
    """(hours, failed restarts) of `counts` restart phases per cell: each R plus the failed
    attempts before one lasts R uninterrupted."""
    import numpy as np

    hours = counts * restart
    failed = np.zeros(counts.shape, dtype=np.int64)
    if restart <= 0 or not counts.any():
        return hours, failed
    total = int(counts.sum())
    extra = rng.geometric(math.exp(-restart / m), size=total) - 1  # failures before success
    failed.ravel()[:] = np.bincount(_owners(counts), weights=extra,
                                    minlength=counts.size).astype(np.int64)
    hours = hours + _truncated_exponential_sum(rng, failed, restart, m)
    return hours, failed


def simulate(i: SimulationInputs, *, keep_completions: bool = False) -> SimulationResult:
    """N replicas of the run (module docstring): wall and billed hours, interruptions, cost."""
    import numpy as np

    _check(i)
    m = i.mtti_job_hours
    n, r = segments_of(i.work_hours, i.interval_hours)
    tau = i.work_hours if n == 1 else i.interval_hours
    lengths = np.full(n, tau + i.checkpoint_hours)
    lengths[-1] = r + i.checkpoint_hours
    expected_failures = float(np.expm1(np.minimum(lengths / m, 700.0)).sum()) * i.replicas
    if expected_failures > MAX_INTERRUPTIONS:
        raise InvalidInput(
            f"the run is not expected to finish: about {expected_failures / i.replicas:,.3g} "
            f"interruptions per run (segments of {lengths.max():g} h against an MTTI of "
            f"{m:g} h); shorten the checkpoint interval")
    rng = np.random.Generator(np.random.PCG64(i.seed))
    wall = np.empty(i.replicas)
    interrupts = np.empty(i.replicas)
    completions = np.empty((i.replicas, n)) if keep_completions else None
    rows = max(1, _CHUNK_CELLS // n)
    for start in range(0, i.replicas, rows):
        stop = min(start + rows, i.replicas)
        shape = (stop - start, n)
        if i.notice_window:
            failures = rng.poisson(lengths / m, size=shape)
            lost = np.zeros(shape)
        else:
            failures = rng.geometric(np.exp(-lengths / m), size=shape) - 1
            lost = np.zeros(shape)
            for k in np.unique(lengths):  # at most two lengths: τ + δ and r + δ
                cols = lengths == k
                lost[:, cols] = _truncated_exponential_sum(rng, failures[:, cols], float(k), m)
        restart_hours, failed_restarts = _restart_phases(rng, failures, i.restart_hours, m)
        per_segment = lengths + lost + restart_hours
        if completions is not None:
            completions[start:stop] = np.cumsum(per_segment, axis=1)
        wall[start:stop] = per_segment.sum(axis=1)
        interrupts[start:stop] = (failures + failed_restarts).sum(axis=1)
    billed = wall - interrupts * i.unbilled_wait_hours
    warnings: list[str] = []
    cost_values = None
    cost = None
    if i.price_path is not None:
        cost_values = path_cost(i.price_path, wall) * (billed / wall) * i.nodes
    elif i.spot_price_per_node_hour is not None:
        cost_values = billed * float(i.spot_price_per_node_hour) * i.nodes
    if cost_values is not None:
        cost = _money_summary(i, billed, cost_values)
    probability = None
    if i.deadline_hours is not None:
        probability = float((wall <= i.deadline_hours).mean())
    return SimulationResult(
        replicas=i.replicas, seed=i.seed, segments=n, wall_hours=Summary.of(wall),
        billed_hours=Summary.of(billed), interruptions=Summary.of(interrupts), cost=cost,
        deadline_hours=i.deadline_hours, deadline_probability=probability,
        exact_expected_wall_hours=exact_expected_wall_hours(
            i.work_hours, i.interval_hours, i.checkpoint_hours, i.restart_hours, m,
            i.notice_window),
        wall=wall, billed=billed, cost_values=cost_values, completions=completions,
        warnings=tuple(warnings))


def _money_summary(i: SimulationInputs, billed: Any, cost_values: Any) -> MoneySummary:
    if i.price_path is None and i.spot_price_per_node_hour is not None:
        # A flat price: the cost is a fixed multiple of the billed hours, so its quantiles are
        # the hours' quantiles times the price, exactly in Decimal.
        hours = Summary.of(billed)
        per = i.spot_price_per_node_hour * i.nodes
        return MoneySummary(*(money_out(per * dec(v, "hours")) for v in (
            hours.p10, hours.p50, hours.p90, hours.mean, hours.stderr)))
    s = Summary.of(cost_values)
    return MoneySummary(*(money_out(dec(v, "cost")) for v in (s.p10, s.p50, s.p90, s.mean,
                                                               s.stderr)))


def path_cost(path: Sequence[tuple[float, Decimal]], hours: Any) -> Any:
    """∫_0^hours price(t) dt per node for a step path [(from hour, price), ...] whose first
    step starts at 0; the last price holds on."""
    import numpy as np

    starts = np.array([float(s) for s, _ in path])
    prices = np.array([float(p) for _, p in path])
    if len(starts) == 0 or starts[0] != 0 or (np.diff(starts) <= 0).any():
        raise InvalidInput("a price path must start at hour 0 and rise")
    cumulative = np.concatenate([[0.0], np.cumsum(prices[:-1] * np.diff(starts))])
    k = np.searchsorted(starts, hours, side="right") - 1
    return cumulative[k] + prices[k] * (hours - starts[k])


# An option weighed against the deadline: (option, fallback hour, probability, expected cost).
_Option = tuple[str, float | None, float, Decimal | None]


@dataclass(frozen=True, slots=True)
class DeadlineChoice:
    option: str | None  # "spot", "on-demand", "spot-then-on-demand"; None: nothing meets it
    min_probability: float
    probability: float | None
    expected_cost: Decimal | None
    fallback_after_hours: float | None
    options: tuple[tuple[str, float | None, float, Decimal | None], ...]
    # (option, fallback hour, probability, expected cost) of every option weighed
    reason: str


def choose_for_deadline(
    i: SimulationInputs, result: SimulationResult, *, min_probability: float,
    on_demand_hours: float, on_demand_price_per_node_hour: Decimal | None,
) -> DeadlineChoice:
    """The cheapest of spot, on-demand and spot with an on-demand fallback at hour h (h on a
    grid over the deadline) that meets the deadline with at least `min_probability`.

    `on_demand_hours` is the whole run on on-demand (the plan's: the work, or Daly's
    expectation with --on-demand-mtti-hours); the work left at the fallback runs at that pace
    after a restart of R hours. Needs `simulate(..., keep_completions=True)`."""
    import numpy as np

    if i.deadline_hours is None:
        raise InvalidInput("--min-probability needs --deadline-hours")
    if not 0 < min_probability <= 1:
        raise InvalidInput(f"--min-probability must be in (0, 1], got {min_probability:g}")
    if result.completions is None:
        raise InvalidInput("the deadline choice needs the replicas' checkpoint times")
    deadline = i.deadline_hours
    od_price = on_demand_price_per_node_hour
    spot_costs = result.cost_values
    options: list[_Option] = []

    spot_p = float((result.wall <= deadline).mean())
    options.append(("spot", None, spot_p, None if result.cost is None else result.cost.mean))
    od_p = 1.0 if on_demand_hours <= deadline else 0.0
    od_cost = None if od_price is None else money_out(
        od_price * i.nodes * dec(on_demand_hours, "hours"))
    options.append(("on-demand", None, od_p, od_cost))

    n, _ = segments_of(i.work_hours, i.interval_hours)
    tau = i.work_hours if n == 1 else i.interval_hours
    done = np.minimum(np.arange(1, n + 1) * tau, i.work_hours)  # work checkpointed per segment
    od_pace = on_demand_hours / i.work_hours
    comparable = spot_costs is not None and od_price is not None
    share = result.billed / result.wall
    # Each replica's checkpoint times rise; shifted by a row offset they rise across rows too,
    # so one searchsorted counts every replica's checkpoints before h at once.
    rows = len(result.wall)
    stride = float(result.wall.max()) + 1.0
    offsets = np.arange(rows) * stride
    flat = (result.completions + offsets[:, None]).ravel()
    firsts = np.arange(rows) * n

    def fallback(h: float) -> _Option:
        finished = result.wall <= h
        reached = np.searchsorted(flat, offsets + h, side="right") - firsts
        saved = np.where(reached > 0, done[np.maximum(reached - 1, 0)], 0.0)
        left = i.work_hours - saved
        finish = np.where(finished, result.wall, h + i.restart_hours + left * od_pace)
        p = float((finish <= deadline).mean())
        cost = None
        if comparable:
            assert od_price is not None
            # Spot is billed up to h at the replica's own billed share; then on-demand for
            # the restart and the work left.
            if i.price_path is not None:
                spot_part = path_cost(i.price_path, np.minimum(result.wall, h)) * share * i.nodes
            else:
                assert i.spot_price_per_node_hour is not None
                spot_part = (np.minimum(result.wall, h) * share
                             * float(i.spot_price_per_node_hour) * i.nodes)
            od_part = np.where(finished, 0.0, (i.restart_hours + left * od_pace)
                               * float(od_price) * i.nodes)
            cost = money_out(dec(float((spot_part + od_part).mean()), "cost"))
        return ("spot-then-on-demand", float(h), p, cost)

    options.extend(_fallback_grid(fallback, deadline, min_probability))
    return _deadline_choice(options, min_probability, deadline, result.replicas)


def _fallback_grid(fallback: Callable[[float], _Option], deadline: float,
                   min_probability: float) -> list[_Option]:
    """The fallback at each grid hour over the deadline, and the latest hour that still meets
    `min_probability`: a later fallback keeps more of the run on spot (cheaper) and leaves less
    time for on-demand, so between the last grid hour that meets the probability and the
    next, bisect for the latest one that still does."""
    import numpy as np

    grid = [fallback(float(h)) for h in np.linspace(deadline / FALLBACK_GRID, deadline,
                                                    FALLBACK_GRID, endpoint=False)]
    feasible = [k for k, o in enumerate(grid) if o[2] >= min_probability]
    if feasible and feasible[-1] + 1 < len(grid):
        low, high = grid[feasible[-1]][1], grid[feasible[-1] + 1][1]
        assert low is not None and high is not None
        for _ in range(20):
            middle = (low + high) / 2.0
            if fallback(middle)[2] >= min_probability:
                low = middle
            else:
                high = middle
        grid.append(fallback(low))
    return grid


def _deadline_choice(options: list[_Option], min_probability: float, deadline: float,
                     replicas: int) -> DeadlineChoice:
    """The cheapest option that meets `min_probability` (unpriced: spot first, then the
    likeliest); when none does, no choice, and the likeliest named in the reason."""
    meeting = [o for o in options if o[2] >= min_probability]
    priced = [o for o in meeting if o[3] is not None]
    if priced:
        best = min(priced, key=lambda o: (o[3], -o[2]))
    elif meeting:
        best = max(meeting, key=lambda o: (o[0] == "spot", o[2]))  # no prices: prefer spot
    else:
        top = max(options, key=lambda o: o[2])
        return DeadlineChoice(
            option=None, min_probability=min_probability, probability=None,
            expected_cost=None, fallback_after_hours=None, options=tuple(options),
            reason=(f"nothing meets the {deadline:g} h deadline with {min_probability:.0%}: "
                    f"the best is {_label(top)} at {top[2]:.1%}"))
    reason = (f"{_label(best)} meets the {deadline:g} h deadline in {best[2]:.1%} of "
              f"{replicas:,} simulated runs (asked: {min_probability:.0%})")
    return DeadlineChoice(option=best[0], min_probability=min_probability,
                          probability=best[2], expected_cost=best[3],
                          fallback_after_hours=best[1], options=tuple(options), reason=reason)


def _label(option: _Option) -> str:
    if option[0] == "spot-then-on-demand":
        return f"spot, then on-demand after {option[1]:.3g} h"
    return option[0]


__all__ = ["DeadlineChoice", "MoneySummary", "SimulationInputs", "SimulationResult", "Summary",
           "choose_for_deadline", "exact_expected_wall_hours", "path_cost", "segments_of",
           "simulate"]
