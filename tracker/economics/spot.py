"""Spot and preemptible instances with checkpoint/restart (docs/economics.md §1.2).

Interruptions are Poisson events with mean time to interruption M (of the whole job):

    Young (1974)    τ = sqrt(2 δ M)
    Daly (2006)     τ = sqrt(2 δ M) · [1 + ⅓·sqrt(δ/2M) + (δ/2M)/9] − δ  (δ < 2M); τ = M otherwise
                    (eq. 37 of the paper, as coded in LLNL/scr scripts/common/scr_ckpt_interval.py)
    Daly's complete model of the expected wall time (failures possible during restart too):
                    T_w = M · e^(R/M) · (e^((τ+δ)/M) − 1) · Ts / τ,  → Ts (1 + δ/τ) as M → ∞
    Notice window   an emergency checkpoint that fits in the provider's notice loses no work:
                    T_w ≈ Ts (1 + δ/τ) / (1 − R/M)
    E[interruptions] ≈ T_w / M;  overhead = T_w / Ts − 1;  M_job = M_node / nodes

δ checkpoint time, R restart time (provision + boot + restore + warm-up, including any wait
for capacity), Ts failure-free work, τ compute between checkpoints. All times in hours.
M_node / nodes assumes independent preemptions; preemptions within a zone are correlated,
so for many nodes this is optimistic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from tracker.core.errors import InvalidInput
from tracker.economics.units import dec, positive

BAND_POINTS = ("lower", "mid", "upper")
BAND_CONVERSIONS = ("probability", "rate")


def young_interval(checkpoint_hours: float, mtti_hours: float) -> float:
    """Young's first-order optimum: sqrt(2 δ M)."""
    _check_times(checkpoint_hours, mtti_hours)
    return math.sqrt(2.0 * checkpoint_hours * mtti_hours)


def daly_interval(checkpoint_hours: float, mtti_hours: float) -> float:
    """Daly's higher-order optimum (eq. 37); τ = M when δ ≥ 2M."""
    _check_times(checkpoint_hours, mtti_hours)
    delta, m = checkpoint_hours, mtti_hours
    if delta >= 2.0 * m:
        return m
    x = delta / (2.0 * m)
    return math.sqrt(2.0 * delta * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta


def checkpoint_overhead_percent(checkpoint_hours: float, interval_hours: float) -> float:
    """What LLNL/scr prints: δ · 100 / τ."""
    if interval_hours <= 0:
        raise InvalidInput("checkpoint interval must be more than 0")
    return checkpoint_hours * 100.0 / interval_hours


def expected_wall_hours(
    work_hours: float, interval_hours: float, checkpoint_hours: float, restart_hours: float,
    mtti_hours: float,
) -> float:
    """Daly's complete model T_w = M e^(R/M) (e^((τ+δ)/M) − 1) Ts/τ.

    τ = 0 (checkpointing free and continuous) is the limit Ts · e^(R/M).
    """
    _check_times(checkpoint_hours, mtti_hours)
    positive(work_hours, "work hours")
    positive(restart_hours, "restart time", allow_zero=True)
    positive(interval_hours, "checkpoint interval", allow_zero=True)
    m = mtti_hours
    try:
        restart_factor = math.exp(restart_hours / m)
        if interval_hours == 0:
            result = work_hours * restart_factor
        else:
            # expm1 keeps precision when M is huge ((τ+δ)/M ≈ 1e-12).
            growth = math.expm1((interval_hours + checkpoint_hours) / m)
            result = m * restart_factor * growth * work_hours / interval_hours
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        raise InvalidInput(
            f"the job is not expected to finish: restart ({restart_hours:g} h) and checkpoint "
            f"({checkpoint_hours:g} h) times are far longer than the MTTI ({m:g} h)")
    return result


def expected_wall_hours_notice(
    work_hours: float, interval_hours: float, checkpoint_hours: float, restart_hours: float,
    mtti_hours: float,
) -> float:
    """Emergency checkpoint inside the notice window: T_w ≈ Ts (1 + δ/τ) / (1 − R/M)."""
    _check_times(checkpoint_hours, mtti_hours)
    positive(work_hours, "work hours")
    positive(restart_hours, "restart time", allow_zero=True)
    if restart_hours >= mtti_hours:
        raise InvalidInput(
            f"the job is not expected to finish: restart time ({restart_hours:g} h) is not "
            f"shorter than the MTTI ({mtti_hours:g} h)")
    overhead = checkpoint_hours / interval_hours if interval_hours > 0 else 0.0
    return work_hours * (1.0 + overhead) / (1.0 - restart_hours / mtti_hours)


def job_mtti(node_mtti_hours: float, nodes: int) -> float:
    """M_job = M_node / N for independent preemptions (optimistic when they are correlated)."""
    positive(node_mtti_hours, "MTTI")
    if nodes < 1:
        raise InvalidInput(f"nodes must be at least 1, got {nodes}")
    return node_mtti_hours / nodes


def band_probability(
    min_pct: float, max_pct: float | None, point: str = "mid", open_top_pct: float = 30.0,
) -> float:
    """The monthly reclaim share a Spot Advisor band stands for, as a fraction.

    The top band (">20%", max missing or 100) has no upper bound; `open_top_pct` stands in.
    """
    if point not in BAND_POINTS:
        raise InvalidInput(f"band point must be one of {', '.join(BAND_POINTS)}, got {point!r}")
    open_top = max_pct is None or max_pct >= 100
    upper = open_top_pct if max_pct is None or max_pct >= 100 else max_pct  # i.e. open_top
    if point == "lower":
        pct = min_pct
    elif point == "upper":
        pct = upper
    else:
        pct = open_top_pct if open_top else (min_pct + upper) / 2.0
    if not 0 < pct < 100:
        raise InvalidInput(
            f"interruption band {min_pct:g}-{max_pct}% gives a share of {pct:g}%, "
            "which is not a usable rate; choose another band point or pass --mtti-hours")
    return pct / 100.0


def mtti_from_probability(
    share: float, conversion: str = "probability", window_hours: float = 720.0,
) -> float:
    """MTTI in hours from a reclaim share over a window (AWS: trailing month).

    'probability': the share is the chance an instance is reclaimed within the window,
    λ = −ln(1 − p)/window. 'rate': the share is events per instance-window, λ = p/window.
    """
    if conversion not in BAND_CONVERSIONS:
        raise InvalidInput(
            f"band conversion must be one of {', '.join(BAND_CONVERSIONS)}, got {conversion!r}")
    if not 0 < share < 1:
        raise InvalidInput(f"reclaim share must be in (0, 1), got {share:g}")
    positive(window_hours, "band window hours")
    hazard = -math.log1p(-share) / window_hours if conversion == "probability" else (
        share / window_hours)
    return 1.0 / hazard


@dataclass(frozen=True, slots=True)
class SpotInputs:
    work_hours: float
    mtti_node_hours: float
    checkpoint_hours: float
    restart_hours: float
    nodes: int = 1
    spot_price_per_node_hour: Decimal | None = None
    on_demand_price_per_node_hour: Decimal | None = None
    deadline_hours: float | None = None
    unbilled_wait_hours: float = 0.0
    notice_window_hours: float | None = None  # set to use the notice-window variant
    emergency_checkpoint_hours: float | None = None  # defaults to checkpoint_hours
    on_demand_mtti_node_hours: float | None = None  # None: on-demand runs without checkpoints
    max_runtime_hours: float | None = None  # forced stops (GCP legacy preemptible: 24 h)
    interval_hours: float | None = None  # None: Daly's optimum


@dataclass(frozen=True, slots=True)
class SpotPlan:
    mtti_job_hours: float
    checkpoint_interval_hours: float
    young_interval_hours: float
    expected_wall_hours: float
    expected_interruptions: float
    forced_restarts: int
    overhead_fraction: float
    billed_spot_hours: float
    on_demand_hours: float
    spot_cost: Decimal | None
    on_demand_cost: Decimal | None
    savings_fraction: Decimal | None
    meets_deadline: bool | None
    deadline_reachable: bool | None
    on_demand_hours_for_deadline: float | None
    mixed_cost: Decimal | None
    notice_window_used: bool
    warnings: tuple[str, ...] = field(default=())
    viable: bool = True  # False: spot is dearer, misses the deadline, or never finishes
    not_viable_reason: str | None = None


# Beyond this expected wall time / work, spot "works" only on paper: the job mostly restarts.
HOPELESS_OVERHEAD = 10.0
# A plan that is not viable because a checkpoint or restart outlasts the time between
# interruptions still gets its figures (Daly's τ = M branch is finite) up to this stretch of
# the work; beyond it (a 36 s MTTI against a 15 min restart: e^25) the number means nothing.
FIGURES_UP_TO_OVERHEAD = 1e4


def _hours_text(hours: float) -> str:
    return f"{hours * 3600:g} s" if hours < 1 / 60 else (
        f"{hours * 60:.3g} min" if hours < 1 else f"{hours:.3g} h")


def hopeless_reason(checkpoint_hours: float, restart_hours: float, mtti_job_hours: float
                    ) -> str | None:
    """Why interruptions leave no time for work, or None: a restart or a checkpoint that
    takes at least the job's mean time to interruption."""
    slow = max((restart_hours, "a restart"), (checkpoint_hours, "a checkpoint"))
    if slow[0] >= mtti_job_hours:
        return (f"spot is not viable here: the job is interrupted every "
                f"{_hours_text(mtti_job_hours)} on average, less than {slow[1]} takes "
                f"({_hours_text(slow[0])}); it would spend its time restarting")
    return None


def plan_spot(inputs: SpotInputs) -> SpotPlan:
    """Expected time, interruptions and cost of a job on spot against on-demand."""
    i = inputs
    _check_inputs(i)
    warnings: list[str] = []
    m_job = job_mtti(i.mtti_node_hours, i.nodes)
    delta = i.checkpoint_hours
    hopeless = hopeless_reason(delta, i.restart_hours, m_job)
    if i.notice_window_hours is not None:
        hopeless = None  # an emergency checkpoint in the notice may still save the work
    young = young_interval(delta, m_job) if delta > 0 else 0.0
    tau = daly_interval(delta, m_job) if i.interval_hours is None else i.interval_hours
    if i.interval_hours is not None:
        positive(i.interval_hours, "checkpoint interval")
    if delta >= 2.0 * m_job:
        warnings.append(
            f"checkpoint time {delta:g} h is at least twice the job MTTI {m_job:g} h: "
            "Daly's δ ≥ 2M branch (τ = M); expect heavy overhead")

    notice_used = False
    if i.notice_window_hours is not None:
        emergency = delta if i.emergency_checkpoint_hours is None else i.emergency_checkpoint_hours
        positive(emergency, "emergency checkpoint time", allow_zero=True)
        if emergency <= i.notice_window_hours:
            notice_used = True
        else:
            warnings.append(
                f"an emergency checkpoint of {emergency * 3600:g} s does not fit the "
                f"{i.notice_window_hours * 3600:g} s notice window; using periodic checkpoints")
    try:
        if notice_used:
            wall = expected_wall_hours_notice(i.work_hours, tau, delta, i.restart_hours, m_job)
        else:
            wall = expected_wall_hours(i.work_hours, tau, delta, i.restart_hours, m_job)
    except InvalidInput:
        if hopeless is None:
            raise
        return _not_viable(i, m_job, hopeless)  # beyond a float: no figure to give
    if hopeless is not None and wall > FIGURES_UP_TO_OVERHEAD * i.work_hours:
        return _not_viable(i, m_job, hopeless)
    interruptions = wall / m_job

    forced = 0
    if i.max_runtime_hours is not None:
        wall, forced = _with_forced_stops(wall, delta + i.restart_hours, i.max_runtime_hours)

    billed = wall - (interruptions + forced) * i.unbilled_wait_hours
    overhead = wall / i.work_hours - 1.0

    if i.on_demand_mtti_node_hours is None:
        od_hours = i.work_hours
    else:
        m_od = job_mtti(i.on_demand_mtti_node_hours, i.nodes)
        od_hours = expected_wall_hours(
            i.work_hours, daly_interval(delta, m_od) if delta > 0 else 0.0, delta,
            i.restart_hours, m_od)

    spot_cost = od_cost = savings = None
    if i.spot_price_per_node_hour is not None:
        positive(i.spot_price_per_node_hour, "spot price", allow_zero=True)
        spot_cost = i.spot_price_per_node_hour * i.nodes * dec(billed, "billed hours")
    if i.on_demand_price_per_node_hour is not None:
        positive(i.on_demand_price_per_node_hour, "on-demand price", allow_zero=True)
        od_cost = i.on_demand_price_per_node_hour * i.nodes * dec(od_hours, "on-demand hours")
    if spot_cost is not None and od_cost:
        savings = 1 - spot_cost / od_cost

    meets = reachable = od_for_deadline = mixed = None
    if i.deadline_hours is not None:
        meets, reachable, od_for_deadline, mixed = _deadline_split(
            i, i.deadline_hours, wall, od_hours, billed, warnings)
    # A checkpoint or restart as long as the time between interruptions: Daly's model still
    # gives a finite expected time (τ = M when δ ≥ 2M), shown with the verdict.
    reason = hopeless or _not_viable_reason(i, wall, overhead, spot_cost, od_cost, meets)
    if hopeless is not None:
        warnings.insert(0, hopeless)
    return SpotPlan(
        viable=reason is None, not_viable_reason=reason,
        mtti_job_hours=m_job, checkpoint_interval_hours=tau, young_interval_hours=young,
        expected_wall_hours=wall, expected_interruptions=interruptions, forced_restarts=forced,
        overhead_fraction=overhead, billed_spot_hours=billed, on_demand_hours=od_hours,
        spot_cost=spot_cost, on_demand_cost=od_cost, savings_fraction=savings,
        meets_deadline=meets, deadline_reachable=reachable,
        on_demand_hours_for_deadline=od_for_deadline, mixed_cost=mixed,
        notice_window_used=notice_used, warnings=tuple(warnings),
    )


def _check_inputs(i: SpotInputs) -> None:
    positive(i.work_hours, "work hours")
    positive(i.checkpoint_hours, "checkpoint time", allow_zero=True)
    positive(i.restart_hours, "restart time", allow_zero=True)
    positive(i.unbilled_wait_hours, "unbilled wait", allow_zero=True)
    positive(i.mtti_node_hours, "MTTI")
    if i.checkpoint_hours > i.work_hours:
        raise InvalidInput(
            f"checkpoint time ({i.checkpoint_hours:g} h) is longer than the work "
            f"({i.work_hours:g} h); checkpointing cannot pay off")
    if i.unbilled_wait_hours > i.restart_hours:
        raise InvalidInput(
            f"unbilled wait ({i.unbilled_wait_hours:g} h) cannot exceed the restart time "
            f"({i.restart_hours:g} h) it is part of")
    if i.deadline_hours is not None:
        positive(i.deadline_hours, "deadline")


def _with_forced_stops(wall: float, per_stop: float, max_runtime: float) -> tuple[float, int]:
    """(wall hours, forced stops) when a run is stopped every `max_runtime` hours, each stop
    costing a checkpoint and a restart (`per_stop`)."""
    positive(max_runtime, "maximum runtime")
    if per_stop >= max_runtime:
        raise InvalidInput(
            f"checkpoint + restart ({per_stop:g} h) do not fit in the maximum runtime "
            f"({max_runtime:g} h)")
    base = wall
    forced = 0
    for _ in range(100):  # a fixed point: forced stops lengthen the run, adding stops
        new_forced = math.floor(wall / max_runtime)
        if new_forced == forced:
            break
        forced = new_forced
        wall = base + forced * per_stop
    return wall, forced


def _deadline_split(i: SpotInputs, deadline: float, wall: float, od_hours: float, billed: float,
                    warnings: list[str]) -> tuple[bool, bool, float, Decimal | None]:
    """(meets, reachable, on-demand hours to keep the deadline, the mixed cost) of spot then
    on-demand against the deadline; a warning when spot alone misses it."""
    meets = wall <= deadline
    mixed = None
    reachable = od_hours <= deadline
    if meets:
        od_for_deadline = 0.0
    elif reachable:
        # Run on spot first, then switch to on-demand: spot progresses Ts/T_w of work per
        # wall hour, on-demand Ts/T_od; fill the deadline exactly.
        spot_rate = i.work_hours / wall
        od_rate = i.work_hours / od_hours
        od_for_deadline = (i.work_hours - deadline * spot_rate) / (
            od_rate - spot_rate)
        od_for_deadline = min(max(od_for_deadline, 0.0), deadline)
        spot_part = deadline - od_for_deadline
        if i.spot_price_per_node_hour is not None and (
                i.on_demand_price_per_node_hour is not None):
            billed_share = billed / wall
            mixed = (
                i.spot_price_per_node_hour * i.nodes * dec(spot_part * billed_share, "hours")
                + i.on_demand_price_per_node_hour * i.nodes * dec(od_for_deadline, "hours"))
        warnings.append(
            f"spot alone misses the {deadline:g} h deadline (expected {wall:.2f} h); "
            f"{od_for_deadline:.2f} h on on-demand after {spot_part:.2f} h on spot keeps it")
    else:
        od_for_deadline = od_hours
        warnings.append(
            f"the {deadline:g} h deadline cannot be met even on on-demand "
            f"({od_hours:.2f} h)")
    return meets, reachable, od_for_deadline, mixed


def _not_viable_reason(i: SpotInputs, wall: float, overhead: float, spot_cost: Decimal | None,
                       od_cost: Decimal | None, meets: bool | None) -> str | None:
    """Why spot is not viable here (its overhead, its price or cost, the deadline); None when
    it is."""
    if overhead + 1 > HOPELESS_OVERHEAD:
        return (f"spot is not viable here: interruptions stretch {i.work_hours:g} h of work "
                f"to {wall:,.4g} h ({overhead + 1:,.3g}x)")
    if spot_cost is not None and od_cost is not None and spot_cost >= od_cost:
        # Both costs are computed from these prices (plan_spot), so both are given here.
        assert i.spot_price_per_node_hour is not None
        assert i.on_demand_price_per_node_hour is not None
        if i.spot_price_per_node_hour >= i.on_demand_price_per_node_hour:
            return (f"spot is not viable here: its price ({i.spot_price_per_node_hour:,.2f} "
                    f"per node-hour) is not below on-demand "
                    f"({i.on_demand_price_per_node_hour:,.2f})")
        return (f"spot is not viable here: checkpoints and restarts make it dearer than "
                f"on-demand ({spot_cost:,.2f} vs {od_cost:,.2f})")
    if meets is False:
        return (f"spot alone is not viable for the {i.deadline_hours:g} h deadline: "
                f"expected {wall:,.4g} h")
    return None


def _check_times(checkpoint_hours: float, mtti_hours: float) -> None:
    positive(checkpoint_hours, "checkpoint time", allow_zero=True)
    positive(mtti_hours, "MTTI")


def _not_viable(i: SpotInputs, m_job: float, reason: str) -> SpotPlan:
    """The plan when interruptions leave no time for work: no wall time, no spot cost."""
    od_cost = None
    if i.on_demand_price_per_node_hour is not None:
        positive(i.on_demand_price_per_node_hour, "on-demand price", allow_zero=True)
        od_cost = i.on_demand_price_per_node_hour * i.nodes * dec(i.work_hours, "hours")
    reachable = None if i.deadline_hours is None else i.work_hours <= i.deadline_hours
    return SpotPlan(
        mtti_job_hours=m_job, checkpoint_interval_hours=math.nan,
        young_interval_hours=math.nan, expected_wall_hours=math.inf,
        expected_interruptions=math.inf, forced_restarts=0, overhead_fraction=math.inf,
        billed_spot_hours=math.inf, on_demand_hours=i.work_hours, spot_cost=None,
        on_demand_cost=od_cost, savings_fraction=None,
        meets_deadline=None if i.deadline_hours is None else False,
        deadline_reachable=reachable, on_demand_hours_for_deadline=None, mixed_cost=None,
        notice_window_used=False, warnings=(reason,), viable=False, not_viable_reason=reason)
