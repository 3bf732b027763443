"""Mixture-of-experts serving and training against published measurements, none of them
fitted (the shares are the hopper class's, fitted to dense rows; docs/serving.md and
docs/sizing.md §1.12 give the table)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.sizing import SizingRequest, resolve_model, size_workload
from tracker.sizing.plan import Job, training_expert_parallel
from tracker.sizing.prepare import _job, _prepare, _prepare_key
from tracker.sizing.serving import ServingSpec, serve

TRT_V1 = "TensorRT-LLM perf-overview.md @ 00f37686 (v1.0, trtllm-bench, FP8, max throughput)"

# (id, source, model, tp, prompt, output, measured output tok/s). Held out: within ±30 %, the
# tolerance of the dense check rows (tests/sizing/test_serving.py).
QWEN3 = [
    ("qwen3-235b-128-2048", 128, 2048, 19658),
    ("qwen3-235b-500-2000", 500, 2000, 18351),
    ("qwen3-235b-1000-1000", 1000, 1000, 14898),
    ("qwen3-235b-1000-2000", 1000, 2000, 15136),
    ("qwen3-235b-2048-2048", 2048, 2048, 9924),
    ("qwen3-235b-5000-500", 5000, 500, 3225),
]
# Known bias: Llama 4's max throughput is 1.5-2.5x below the model's (the engine's top-1
# grouped GEMMs over 16 or 128 experts run far below the dense shares; not modelled). These
# rows pin the direction and the size of the gap, so a change to it shows up here.
LLAMA4 = [
    ("scout-1000-1000", "llama-4-scout", 4, 1000, 1000, 12129, (1.3, 2.0)),
    ("scout-2048-2048", "llama-4-scout", 4, 2048, 2048, 7972, (1.3, 2.0)),
    ("maverick-1000-1000", "llama-4-maverick", 8, 1000, 1000, 9677, (1.8, 2.7)),
    ("maverick-2048-2048", "llama-4-maverick", 8, 2048, 2048, 6916, (1.6, 2.4)),
]


def _throughput(model: str, tp: int, prompt: int, output: int) -> float:
    result = serve(SizingRequest(model=model, gpu="h100-sxm", count=tp, tensor_parallel=tp,
                                 precision="fp8", kv_precision="fp8"),
                   ServingSpec(prompt_tokens=prompt, output_tokens=output))
    assert result.calibration.calibrated
    return result.output_tokens_per_s


@pytest.mark.parametrize("case", QWEN3, ids=[c[0] for c in QWEN3])
def test_qwen3_235b_max_throughput_within_30_percent(case):
    _id, prompt, output, measured = case
    value = _throughput("qwen3-235b-a22b", 8, prompt, output)
    assert value == pytest.approx(measured, rel=0.30), f"{TRT_V1}: Qwen3-235B-A22B TP8"


@pytest.mark.parametrize("case", LLAMA4, ids=[c[0] for c in LLAMA4])
def test_llama4_max_throughput_known_overestimate(case):
    _id, model, tp, prompt, output, measured, (low, high) = case
    ratio = _throughput(model, tp, prompt, output) / measured
    assert low <= ratio <= high, f"{TRT_V1}: {model} TP{tp} {prompt}/{output}: {ratio:.2f}x"


def test_deepseek_v3_pretraining_gpu_hours_within_35_percent():
    """DeepSeek-V3 pre-training: 14.8T tokens on 2,048 H800s in FP8, 2,664K GPU-hours
    (arXiv 2412.19437 Table 1; 8 x 400G InfiniBand per node, §3.1). data/gpus.json has no
    H800: the H100 SXM stands in (the same compute and HBM; H800's NVLink is 400 GB/s, not
    900). Held out, at the training calibration's ±35 % (tests/sizing/test_calibration.py);
    the model is ~23 % optimistic (balanced routing, the all-to-all not overlapped but on
    H100's NVLink)."""
    res = size_workload(SizingRequest(
        model="deepseek-v3", workload="pretrain", precision="fp8", gpu="h100-sxm",
        count=2048, seq_len=4096, global_batch_tokens=15360 * 4096, tokens=14.8e12,
        cluster_gbps=3200.0))
    assert res.fits and res.mfu_source == "modeled"
    assert res.gpu_hours == pytest.approx(2_664_000, rel=0.35)
    assert res.gpu_hours < 2_664_000  # the known direction


def test_deepseek_fp8_recipe_states_are_14_bytes_per_parameter():
    """arXiv 2412.19437 §3.3.2: FP32 master weights and gradients, BF16 moments; BF16
    working weights: 2 + 4 + 8 bytes, against 16 for the default mixed-precision AdamW."""
    fields = dict(model="deepseek-v3", workload="pretrain", precision="fp8", seq_len=4096)
    recipe = size_workload(SizingRequest(optimizer="adamw-deepseek", **fields))
    default = size_workload(SizingRequest(**fields))
    per_param = (recipe.weights_bytes + recipe.gradients_bytes + recipe.optimizer_bytes) / \
        recipe.params
    assert per_param == pytest.approx(14.0)
    assert (default.weights_bytes + default.gradients_bytes + default.optimizer_bytes) / \
        default.params == pytest.approx(16.0)


# Expert parallelism in training --------------------------------------------------------------


def _training_job(model: str, sharding: str) -> Job:
    req = SizingRequest(model=model, workload="pretrain", gpu="h100-sxm", sharding=sharding,
                        recompute="full", micro_batch=1, seq_len=4096)
    return _job(_prepare(_prepare_key(req)), float("inf"))


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(["deepseek-v3", "qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b"]),
       sharding=st.sampled_from(["none", "zero1", "zero2", "zero3"]),
       t=st.sampled_from([1, 2, 4, 8]), p=st.sampled_from([1, 2, 4]),
       d=st.integers(1, 512))
def test_expert_parallelism_never_increases_per_gpu_memory(model, sharding, t, p, d):
    job = _training_job(model, sharding)
    assert job.replicated_factor(t, d) <= 1.0
    with_ep = job.per_gpu(t, p, d)
    share, job.expert_share = job.expert_share, 0.0  # the same job without EP
    try:
        without = job.per_gpu(t, p, d)
    finally:
        job.expert_share = share
    assert with_ep <= without * (1 + 1e-12)
    ep = training_expert_parallel(int(resolve_model(model).experts), t, d)
    assert ep == 1 or (d % ep == 0 and resolve_model(model).experts % ep == 0 and t * ep <= 8)


def test_training_plan_names_its_expert_parallelism():
    res = size_workload(SizingRequest(model="qwen3-30b-a3b", workload="pretrain",
                                      gpu="h100-sxm", count=64, tensor_parallel=1,
                                      pipeline_parallel=1, sharding="zero1", recompute="full",
                                      micro_batch=1, tokens=1e9))
    assert res.expert_parallel == 8 and res.data_parallel == 64
    dense = size_workload(SizingRequest(model="qwen3-32b", workload="pretrain",
                                        gpu="h100-sxm", count=64, tokens=1e9))
    assert dense.expert_parallel == 1


def test_all_to_all_costs_time():
    from tracker.sizing.timing import _all_to_all

    req = SizingRequest(model="deepseek-v3", workload="pretrain", gpu="h100-sxm",
                        sharding="zero1", recompute="none", micro_batch=1, seq_len=4096)
    prep = _prepare(_prepare_key(req))
    nbytes, count = _all_to_all(prep, 2, 16, 64, prep.micro_tokens)
    # EP 4 at TP 2: 4 all-to-alls per MoE layer; 58 MoE layers of 61 over 16 stages -> 4.
    assert count == 4 * 4
    per = prep.micro_tokens / 2 * 8 * 7168 * 2 * 3 / 4
    assert nbytes == pytest.approx(per * count)
    assert _all_to_all(prep, 2, 16, 1, prep.micro_tokens) == (0.0, 0)
