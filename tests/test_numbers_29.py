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


# -- selective recompute keeps less than none, and the published plans fit without full ------


def _meta_405b(recompute: str):
    from tracker.sizing import SizingRequest, size_workload

    # Llama 3 paper Table 4 (docs/sizing.md reference case 15): TP8 x PP16 x DP64 on 8,192 H100,
    # seq 8192, 16M-token batches, 4 interleaved chunks, ZeRO-1-style data parallelism.
    return size_workload(SizingRequest(
        model="llama-3.1-405b", workload="pretrain", gpu="h100-sxm", count=8192,
        tensor_parallel=8, pipeline_parallel=16, sharding="zero1", seq_len=8192,
        micro_batch=1, recompute=recompute, tokens=15.6e12, global_batch_tokens=16 * 2**20,
        virtual_stages=4))


def test_selective_recompute_keeps_the_residuals_qkv_and_matmul_outputs() -> None:
    from tracker.sizing.memory import activation_bytes_per_token_layer
    from tracker.sizing.models import resolve_model

    model = resolve_model("llama-3.1-405b")  # h 16384, 128 heads of 128, 8 KV heads, I 53248
    h, qd, kvd, inter = 16384, 128 * 128, 8 * 128, 53248
    none = activation_bytes_per_token_layer(model, 8192, "flash", "none")
    selective = activation_bytes_per_token_layer(model, 8192, "flash", "selective")
    assert none == 2 * (4 * h + 2 * qd + 2 * kvd + 3 * inter)
    assert selective == 2 * (2 * h + 2 * qd + 2 * kvd + 2 * inter)
    assert selective / none == pytest.approx(0.669, abs=0.001)


def test_meta_405b_plan_fits_with_selective_recompute_not_only_full() -> None:
    none, selective, full = (_meta_405b(r) for r in ("none", "selective", "full"))
    assert none.fits is False
    assert selective.fits is True and selective.per_gpu_bytes <= selective.usable_gpu_bytes
    assert full.fits is True
    # Selective is timed at 6ND (no counted extra FLOPs), full at 8ND: Meta reports 0.43.
    assert selective.flops == pytest.approx(full.flops * 6 / 8, rel=1e-12)
    assert 0.35 <= selective.mfu <= 0.46 and full.mfu < selective.mfu


def test_the_free_planner_picks_selective_for_405b_on_16k_gpus() -> None:
    from tracker.sizing import SizingRequest, size_workload

    res = size_workload(SizingRequest(model="llama-3.1-405b", workload="pretrain",
                                      gpu="h100-sxm", count=16384, seq_len=8192,
                                      tokens=15.6e12, global_batch_tokens=16 * 2**20))
    assert res.recompute == "selective" and res.fits
    # Llama 3 paper Table 4: 41 % MFU at 16,384 GPUs; the model lands within 0.06 of it.
    assert res.mfu == pytest.approx(0.41, abs=0.06)


def test_gpt3_175b_megatron_plan_fits_without_full_recompute() -> None:
    from tracker.sizing import SizingRequest, size_workload

    # GPT-3 175B as Megatron-LM (Narayanan et al. 2021, arXiv 2104.04473 Table 1) and Korthikanti
    # (selective recompute + SP): 96 layers, h 12288, 96 heads, s 2048, TP8 x PP8 on 80 GB A100.
    arch = dict(layers=96, hidden=12288, heads=96, kv_heads=96, head_dim=128,
                intermediate=49152, vocab=51200, max_context=2048)
    res = size_workload(SizingRequest(workload="pretrain", gpu="a100-80gb", count=1024,
                                      tensor_parallel=8, pipeline_parallel=8, seq_len=2048,
                                      micro_batch=1, recompute="selective", sharding="zero1",
                                      **arch))
    assert res.fits is True


# -- optimizer states: 8-bit Adam and SGD with fp32 gradients (HF model memory anatomy) --------


@pytest.mark.parametrize(("optimizer", "per_param"), [
    ("adam-8bit", (2.0, 4.0, 6.0)),  # weights 2, fp32 grads 4, fp32 master 4 + 8-bit m,v 2
    ("sgd", (2.0, 4.0, 8.0)),  # weights 2, fp32 grads 4, fp32 master 4 + momentum 4
    ("adamw-fp32grad", (2.0, 4.0, 12.0)),  # HF's 18 bytes
])
def test_optimizer_states_count_fp32_gradients(optimizer: str,
                                               per_param: tuple[float, ...]) -> None:
    from tracker.sizing.memory import state_bytes

    # huggingface/transformers docs/source/en/model_memory_anatomy.md@249ef81: "gradients are
    # always kept in fp32"; 8-bit AdamW 2 bytes, SGD with momentum 4 bytes of states.
    assert state_bytes("bf16", optimizer) == per_param


# -- chunked cross-entropy (torchtune) keeps no full fp32 logits -------------------------------


def test_chunked_cross_entropy_keeps_16_bit_logits_and_one_fp32_chunk() -> None:
    from tracker.sizing import SizingRequest, size_workload

    def activations(cross_entropy: str) -> int:
        return size_workload(SizingRequest(
            model="llama-3.1-8b", workload="full-finetune", gpu="h100-sxm", seq_len=8192,
            micro_batch=4, recompute="full", cross_entropy=cross_entropy)).activations_bytes

    tokens, vocab = 4 * 8192, 128256
    full, chunked = activations("full"), activations("chunked")
    # Megatron: 4·(h + V) per token; torchtune (num_output_chunks 8): 4h + 2V + 4V/8.
    assert full - chunked == pytest.approx(tokens * (4 * vocab - 2 * vocab - vocab / 2), abs=1)
    assert SizingRequest().cross_entropy == "full"  # as Megatron and the HF Trainer compute it


def test_a_bad_cross_entropy_is_refused() -> None:
    from tracker.core.errors import InvalidInput
    from tracker.sizing import SizingRequest, size_workload

    with pytest.raises(InvalidInput, match="cross entropy"):
        size_workload(SizingRequest(model="llama-3.1-8b", workload="pretrain",
                                    cross_entropy="partial"))
