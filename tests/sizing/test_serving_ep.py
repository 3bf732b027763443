"""Expert parallelism in serving: attention data parallel replicas whose routed experts are
spread over the group and reached by an all-to-all dispatch and combine per MoE layer
(docs/serving.md "Expert parallelism"). The hand-computed case below writes every term out;
the plan tests check that the serving answer names the layout."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.sizing import SizingRequest
from tracker.sizing.replica import dp_kv_capacity
from tracker.sizing.serving import ServingSpec, serve
from tracker.sizing.serving_step import (
    Calibration,
    Hardware,
    Shape,
    all_to_all_seconds_per_token,
    operating_point,
)

CAL = Calibration(gpu_class="test", bandwidth_share=0.5, prefill_compute_share=0.5,
                  decode_compute_share=0.8, allreduce_latency_s=10e-6,
                  memory_utilization=0.9, token_budget=8192, max_batch=2048,
                  calibrated=True, source="test")
HW = Hardware("test", 80e9, 1e15, 2e12, 400e9, CAL)


def _shape(**changes) -> Shape:
    fields = dict(active_params=20e9, layers=40, hidden=5000, attn_width=5000,
                  weights_bytes=200e9, expert_bytes_share=0.9, experts=64, experts_per_token=2,
                  kv_bytes_per_token=100_000.0, prompt=1000, output=1000, moe_layers=30,
                  expert_active_share=0.25, attention_dp=True)
    fields.update(changes)
    return Shape(**fields)


def test_all_to_all_by_hand():
    """8 GPUs, 30 MoE layers, k = 2, h = 5,000: per token of the group, each GPU sends and
    receives 2 (dispatch, combine) × 30 × 2 × 5,000 × 2 bytes × 7/8 = 1.05 MB for its 1/8 of
    the tokens, at 400 GB/s × 0.8 (nccl-tests busbw share): 1.05e6 / 8 / 320e9 s."""
    per_token = 2 * 30 * 2 * 5000 * 2 * 7 / 8
    assert per_token == 1_050_000
    assert all_to_all_seconds_per_token(_shape(), 8, HW) == pytest.approx(
        per_token / 8 / (400e9 * 0.8), rel=1e-12)
    assert all_to_all_seconds_per_token(_shape(), 1, HW) == 0.0
    assert all_to_all_seconds_per_token(_shape(moe_layers=0), 8, HW) == 0.0


def test_attention_dp_step_by_hand():
    """One decode step of 64 sequences (1,000 in / 1,000 out, so 64 prompts ride along) on 8
    GPUs, every term written out (docs/serving.md "Expert parallelism")."""
    t, batch = 8, 64
    shape = _shape()
    touched = 1 - (1 - 2 / 64) ** 64  # share of the 64 experts the 64 tokens reach
    weights = 200e9 * (0.1 + 0.9 * touched / t)  # non-expert whole, 1/8 of the experts
    kv = batch / t * 1500 * 100_000  # its 8 sequences, 1,000 + 1,000/2 tokens resident
    memory = (weights + kv) / (2e12 * 0.5)
    dense = 2 * 20e9 / t
    attention = 4 * 40 * 5000 / t
    decode = batch * (dense + attention * 1500) / (1e15 * 0.8)
    per_prompt = (dense + attention * 500) / (1e15 * 0.5)
    compute = decode + batch * per_prompt  # in/out = 1: one prompt per decoding sequence
    a2a = 2 * 30 * 2 * 5000 * 2 * (t - 1) / t / t / (400e9 * 0.8)
    comm = 2 * 30 * 10e-6 + (batch + batch) * a2a
    point = operating_point(shape, t, batch, HW)
    assert point.step.memory == pytest.approx(memory, rel=1e-12)
    assert point.step.compute == pytest.approx(compute, rel=1e-12)
    assert point.step.communication == pytest.approx(comm, rel=1e-12)
    assert point.output_tokens_per_s == pytest.approx(batch / (memory + compute + comm),
                                                      rel=1e-12)
    # TPOT: the step without the request's own prompt (its prefill is in its TTFT)
    assert point.tpot_s == pytest.approx(memory + compute + comm - per_prompt - a2a,
                                         rel=1e-12)
    # TTFT's prefill runs the prompt's non-expert FLOPs on one GPU and 1/8 of its expert FLOPs
    flops = 2 * 20e9 * 1000 * (0.75 + 0.25 / t) + 2 * 40 * 1000 ** 2 * 5000
    prefill = flops / (1e15 * 0.5) + 2 * 30 * 10e-6 + 1000 * t * a2a
    tpot = point.tpot_s
    k = (batch / t - 1) * prefill  # it waits behind the prompts of its GPU's 7 others
    spread = prefill + 1000 * tpot - k
    wait = ((spread * spread + 2 * k * prefill) ** 0.5 - spread) / 2
    assert point.ttft_s == pytest.approx(wait + prefill + tpot, rel=1e-12)


def test_attention_dp_reads_less_than_tp_when_the_experts_dominate():
    """The same group as TP reads 1/8 of every weight; attention DP reads the whole non-expert
    part but nothing else more, and no all-reduce: its communication is the all-to-all only."""
    dp = operating_point(_shape(), 8, 64, HW)
    tp = operating_point(_shape(attention_dp=False, kv_bytes_per_token=100_000 / 8), 8, 64, HW)
    assert dp.step.communication < tp.step.communication
    assert dp.step.compute == pytest.approx(tp.step.compute, rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(t=st.sampled_from([2, 4, 8, 16, 64]), batch=st.integers(1, 4096),
       share=st.floats(0.0, 0.99))
def test_attention_dp_reads_at_least_its_experts_and_at_most_everything(t, batch, share):
    """Each GPU reads at least its 1/t of the touched experts and the non-expert weights, at
    most the whole model, plus its own sequences' KV."""
    shape = _shape(expert_bytes_share=share, kv_bytes_per_token=0.0)
    memory = operating_point(shape, t, batch, HW).step.memory * 2e12 * 0.5
    assert 200e9 * (1 - share) * (1 - 1e-12) <= memory <= 200e9 * (1 + 1e-12)


def _deepseek_v3(gpu: str, count: int):
    res = serve(SizingRequest(model="deepseek-v3", gpu=gpu, count=count, precision="native"),
                ServingSpec())
    return res, res.to_json()


def test_deepseek_v3_on_8_h200_serves_attention_dp_with_ep_8():
    """MLA's latent is kept whole by every TP rank (vLLM, SGLang), so TP 8 holds 1/8 of the
    KV an attention-DP replica holds on the same GPUs: DeepSeek-V3 picks attention DP 8 ×
    EP 8, as SGLang's DeepSeek deployment (--enable-dp-attention) and TensorRT-LLM's MoE
    benchmarks (enable_attention_dp) run it."""
    res, data = _deepseek_v3("h200-sxm", 8)
    assert (data["tensor_parallel"], data["attention_data_parallel"], data["expert_parallel"],
            data["gpus"]) == (1, 8, 8, 8)
    tp = next(p for p in res.plans if p.tensor_parallel == 8)
    assert res.output_tokens_per_s > 2 * tp.output_tokens_per_s
    assert any(p["attention_data_parallel"] == 8 and p["expert_parallel"] == 8
               for p in data["plans"])
    # without a GPU count, a replica that one node holds is not offered across nodes
    alone = serve(SizingRequest(model="deepseek-v3", gpu="h200-sxm", precision="native"),
                  ServingSpec())
    assert alone.chosen.attention_data_parallel == 8
    assert max(p.gpus for p in alone.plans) == 8


def test_dense_models_and_fixed_tp_have_no_attention_dp_plan():
    dense = serve(SizingRequest(model="llama-3.3-70b", gpu="h100-sxm", count=8,
                                precision="fp8"), ServingSpec())
    assert all(p.attention_data_parallel == 1 for p in dense.plans)
    fixed = serve(SizingRequest(model="qwen3-235b-a22b", gpu="h100-sxm", count=8,
                                tensor_parallel=8, precision="fp8"), ServingSpec())
    assert all(p.attention_data_parallel == 1 for p in fixed.plans)
    forced = serve(SizingRequest(model="qwen3-235b-a22b", gpu="h100-sxm", count=8,
                                 precision="fp8"), ServingSpec(attention_parallel="data"))
    assert forced.chosen.attention_data_parallel == 8


def test_dp_kv_capacity_by_hand():
    """Qwen3-235B-A22B on 8 H100 at FP8 (4 KV heads: TP 8 keeps each head twice): a GPU's
    room for weights and KV is its TP KV room plus its weight shard; under attention DP it
    keeps the non-expert weights whole and 1/8 of the experts, and whole tokens' KV."""
    from tracker.sizing.prepare import preparation, prepare_key
    from tracker.sizing.replica import expert_bytes_share, room_beside_kv

    req = SizingRequest(model="qwen3-235b-a22b", workload="inference", gpu="h100-sxm",
                        precision="fp8", kv_precision="fp8", context=2000)
    prep = preparation(prepare_key(req))
    share = expert_bytes_share(prep.model, "fp8")
    kv, w = prep.kv_per_token, prep.weights
    room = room_beside_kv(prep, 8, 1_000_000)
    assert room == pytest.approx(1_000_000 * kv / 4 + w / 8, rel=1e-12)
    left = room - w * (1 - share) - w * share / 8
    assert dp_kv_capacity(prep, 8, room, share) == int(8 * left / kv)
    assert dp_kv_capacity(prep, 8, w / 8, share) == 0  # the non-expert weights leave no room


def test_bad_attention_choice_is_one_line():
    from tracker.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="--attention-parallel must be one of auto, tensor, "
                                           "data, got 'pipeline'"):
        serve(SizingRequest(model="qwen3-235b-a22b", gpu="h100-sxm", count=8, precision="fp8"),
              ServingSpec(attention_parallel="pipeline"))


def test_all_to_all_across_nodes_by_hand():
    """16 GPUs in 2 nodes of 8: of a token's copies, 7/16 stay on the node's links (400 GB/s
    × 0.8), 8/16 cross the network (50 GB/s per GPU, already at busbw)."""
    hw = Hardware("test", 80e9, 1e15, 2e12, 400e9, CAL, node_gpus=8, net_bw=50e9)
    per_gpu = 2 * 30 * 2 * 5000 * 2
    expected = per_gpu * (7 / 16 / (400e9 * 0.8) + 8 / 16 / 50e9) / 16
    assert all_to_all_seconds_per_token(_shape(), 16, hw) == pytest.approx(expected, rel=1e-12)
    # inside one node the network is not used
    assert all_to_all_seconds_per_token(_shape(), 8, hw) == pytest.approx(
        per_gpu * 7 / 8 / (400e9 * 0.8) / 8, rel=1e-12)


def test_deepseek_v3_on_two_h100_nodes_spreads_its_experts_over_both():
    """DeepSeek-V3 FP8 (673 GB) does not fit one 8 × H100 node. Pipeline stages over the
    cluster network (TP 8 × PP 2) or attention DP 16 × EP 16 across both nodes, as
    DeepSeek's own serving spreads experts over nodes: each GPU keeps the 17 B non-expert
    parameters and 1/16 of the experts, and the latent KV of its own sequences."""
    res, data = _deepseek_v3("h100-sxm", 16)
    assert (data["attention_data_parallel"], data["expert_parallel"], data["gpus"],
            data["pipeline_parallel"]) == (16, 16, 16, 1)
    staged = next(p for p in res.plans if p.pipeline_parallel == 2)
    assert res.output_tokens_per_s > 2 * staged.output_tokens_per_s
    assert any("2 nodes" in w and "all-to-all" in w for w in res.warnings)
    assert not any("pipeline stages" in w for w in res.warnings)
    # without a cluster network the instances cannot be joined either way
    from tracker.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="no cluster network"):
        serve(SizingRequest(model="deepseek-v3", gpu="h100-sxm", count=16,
                            precision="native"), ServingSpec(), cluster_network=False)


def test_an_nvl72_rack_serves_deepseek_v3_with_ep_64_inside_its_nvlink_domain():
    res = serve(SizingRequest(model="deepseek-v3", gpu="gb200", count=72, precision="native"),
                ServingSpec())
    assert (res.chosen.attention_data_parallel, res.chosen.expert_parallel) == (64, 64)
    assert any("8 of 72 GPUs idle: attention DP 64" in w for w in res.warnings)
    assert not any("nodes" in w for w in res.warnings)  # one NVLink domain, no network
