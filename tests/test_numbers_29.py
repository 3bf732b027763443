"""Issue 29 (b): figures checked against their published definitions (Daly 2006 for spot,
the 6ND definition of MFU, the model-memory accounting, Korthikanti et al. 2022)."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from tracker.economics.spot import SpotInputs, plan_spot

# -- spot: Daly's δ ≥ 2M branch gives figures with the verdict ---------------------------------


def test_a_checkpoint_longer_than_twice_the_mtti_gets_figures_and_the_verdict() -> None:
    # Daly (2006), "A higher order estimate of the optimum checkpoint interval", eq. 37:
    # τ = M for δ ≥ 2M; complete model T_w = M e^(R/M) (e^((τ+δ)/M) − 1) Ts/τ.
    m, delta, restart, work = 0.2, 0.5, 5 / 60, 100.0
    plan = plan_spot(SpotInputs(work_hours=work, mtti_node_hours=m, checkpoint_hours=delta,
                                restart_hours=restart, nodes=1,
                                spot_price_per_node_hour=Decimal("20"),
                                on_demand_price_per_node_hour=Decimal("55")))
    expected = m * math.exp(restart / m) * math.expm1((m + delta) / m) * work / m
    assert plan.checkpoint_interval_hours == m
    assert plan.expected_wall_hours == pytest.approx(expected, rel=1e-12)
    assert plan.expected_wall_hours == pytest.approx(4871.58, rel=1e-5)
    assert plan.spot_cost is not None
    assert float(plan.spot_cost) == pytest.approx(20 * plan.billed_spot_hours, rel=1e-9)
    assert plan.savings_fraction is not None and plan.savings_fraction < 0
    assert plan.viable is False
    assert plan.not_viable_reason is not None
    assert plan.not_viable_reason.startswith("spot is not viable here: the job is interrupted "
                                             "every 12 min on average, less than a checkpoint")


# -- --mfu is applied to the model FLOPs (6ND), recompute or not -------------------------------


def test_a_given_mfu_gives_the_same_hours_with_full_recompute() -> None:
    from tracker.sizing import SizingRequest, size_workload

    def hours(recompute: str) -> tuple[float, float]:
        result = size_workload(SizingRequest(
            model="llama-3.1-8b", workload="pretrain", gpu="h100-sxm", count=8, tokens=1e11,
            mfu=0.4, recompute=recompute))
        assert result.recompute == recompute and result.mfu == 0.4
        return result.wall_hours, result.flops

    plain, plain_flops = hours("none")
    full, full_flops = hours("full")
    # 6·N·D / (8 GPUs · 989 TFLOPS · 0.4), N = 8.03e9 (docs/sizing.md §1.9)
    assert plain == pytest.approx(6 * 8_030_261_248 * 1e11 / (8 * 989e12 * 0.4) / 3600, rel=1e-9)
    assert full == pytest.approx(plain, rel=1e-12)
    assert full_flops == pytest.approx(plain_flops * 8 / 6, rel=1e-12)


# -- ZeRO-3: the property holds for a fixed layout; the free planner's case, pinned -----------


def _states(count: int, **layout) -> int:
    from tracker.sizing import SizingRequest, size_workload

    res = size_workload(SizingRequest(model="llama-3.1-405b", workload="pretrain",
                                      gpu="h100-sxm", sharding="zero3", seq_len=1024,
                                      recompute="full", count=count, **layout))
    return res.per_gpu["weights"] + res.per_gpu["gradients"] + res.per_gpu["optimizer"]


def test_the_case_hypothesis_found_is_a_layout_change_not_a_sharding_bug() -> None:
    # The free plans at 106 and 108 GPUs differ in depth (PP2 vs PP6): each PP6 stage holds a
    # larger share of the embeddings, so its per-GPU states are higher although it has more GPUs.
    free = (_states(106), _states(108))
    assert free[1] > free[0]
    same_layout = (_states(106, tensor_parallel=1, pipeline_parallel=2),
                   _states(108, tensor_parallel=1, pipeline_parallel=2))
    assert same_layout[1] < same_layout[0]
