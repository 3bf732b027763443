"""Engine behaviour: plans, GPU resolution, input validation, time model, JSON contract."""

from __future__ import annotations

import pytest

from tracker.core.errors import InvalidInput, NotFound
from tracker.sizing import JSON_KEYS, TIME_KEYS, SizingRequest, size_workload, smallest_plan
from tracker.sizing.memory import GB, GiB


def run(**kw):
    return size_workload(SizingRequest(**kw))


def test_70b_128k_serving_needs_tp4_on_h100():
    res = run(model="llama-3.1-70b", workload="inference", context=131072, gpu="h100-sxm")
    assert res.fits_single_gpu is False
    assert (res.gpus_needed, res.tensor_parallel, res.pipeline_parallel) == (4, 4, 1)
    assert res.per_gpu["weights"] == pytest.approx(res.weights_bytes / 4, rel=1e-6)
    assert res.per_gpu["kv_cache"] == pytest.approx(res.kv_cache_bytes / 4, rel=1e-6)
    assert res.per_gpu_bytes <= res.usable_gpu_bytes


def test_405b_serving_adds_pipeline_stages_across_nodes():
    res = run(model="llama-3.1-405b", context=8192, gpu="h100-sxm")
    assert res.tensor_parallel == 8 and res.pipeline_parallel == 2
    assert res.gpus_needed == 16


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    kw = dict(model="llama-3.1-70b", context=32768, gpu="h100-sxm", gpus_per_node=16)
    tp8 = run(tensor_parallel=8, count=8, **kw)
    tp16 = run(tensor_parallel=16, count=16, **kw)
    assert tp16.per_gpu["kv_cache"] == tp8.per_gpu["kv_cache"]  # 8 KV heads: one per GPU
    assert tp16.per_gpu["weights"] < tp8.per_gpu["weights"]


def test_tp_must_divide_heads_and_kv_heads():
    with pytest.raises(InvalidInput, match="does not divide the 32 attention heads"):
        run(model="llama-3.1-8b", gpu="h100-sxm", tensor_parallel=3)
    with pytest.raises(InvalidInput, match="KV heads"):
        run(model="qwen2.5-7b", workload="full-finetune", gpu="h100-sxm", tensor_parallel=7)
    with pytest.raises(InvalidInput, match="inside a node"):
        run(model="llama-3.1-70b", gpu="h100-sxm", tensor_parallel=16)


def test_search_only_uses_tp_degrees_that_divide_the_heads():
    res = run(model="qwen2.5-72b", workload="inference", context=32768, concurrency=32,
              gpu="l40s")
    assert res.tensor_parallel == 8  # divides 64 heads and 8 KV heads
    # 145 GB of weights + 344 GB of KV need more than one node of 8 × 48 GB
    assert res.pipeline_parallel == 2 and res.gpus_needed == 16


def test_count_that_fits_and_count_that_does_not():
    ok = run(model="llama-3.1-70b", context=8192, gpu="h100-sxm", count=8)
    assert ok.fits is True and ok.gpus_used == 8
    assert (ok.tensor_parallel, ok.data_parallel) == (2, 4)  # four replicas of TP 2
    bad = run(model="llama-3.1-70b", context=8192, gpu="h100-sxm", count=1)
    assert bad.fits is False and bad.gpus_needed == 2
    assert any("does not fit on 1" in w for w in bad.warnings)


def test_a_count_that_does_not_factor_leaves_gpus_idle_with_a_warning():
    # 3 GPUs with no pipeline: TP must divide 32 heads, so TP 2 on two GPUs, one idle.
    res = run(model="llama-2-7b", workload="full-finetune", gpu="h100-sxm", count=3,
              pipeline_parallel=1, seq_len=2048, recompute="full", sharding="none")
    assert res.fits is True
    assert (res.tensor_parallel, res.data_parallel, res.gpus_used, res.count) == (2, 1, 2, 3)
    assert any("1 idle" in w for w in res.warnings)
    # Six GPUs for a model that needs TP 4: pipeline stages are only added once TP is at its
    # widest (8 here), so the plan is TP 4 with two GPUs idle.
    six = run(model="llama-3.1-70b", context=131072, gpu="h100-sxm", count=6)
    assert six.fits is True and six.gpus_used == 4 and six.tensor_parallel == 4
    assert any("2 idle" in w for w in six.warnings)


def test_nothing_fits_gives_a_reason():
    res = run(model="llama-3.1-405b", workload="full-finetune", gpu="l4", seq_len=8192,
              micro_batch=8)
    assert res.gpus_needed is None and res.fits is False
    assert res.reason and "nothing fits on l4" in res.reason
    assert res.reason in res.warnings
    assert res.per_gpu_bytes > res.usable_gpu_bytes


def test_smallest_plan_ignores_count():
    res = smallest_plan(SizingRequest(model="llama-3.1-70b", context=8192, gpu="h100-sxm",
                                      count=64))
    assert res.count is None and res.gpus_used == res.gpus_needed == 2


def test_ambiguous_gpu_warning_reaches_the_result():
    res = run(model="llama-3.1-8b", context=8192, gpu="h100")
    assert res.gpu == "h100-sxm"
    assert any("ambiguous" in w for w in res.warnings)
    assert not run(model="llama-3.1-8b", context=8192, gpu="h100-sxm").warnings


@pytest.mark.parametrize(("name", "gpu_id"), [("a100-80gb", "a100-80gb"), ("h200", "h200"),
                                              ("rtx4090", "rtx-4090"), ("RTX-4090", "rtx-4090")])
def test_gpu_aliases(name, gpu_id):
    assert run(model="llama-3.2-1b", context=4096, gpu=name).gpu == gpu_id


def test_unknown_gpu_names_the_closest():
    with pytest.raises(NotFound, match="h200"):
        run(model="llama-3.2-1b", gpu="h900")


def test_impossible_combinations_are_one_line_errors():
    cases = [
        dict(model="llama-3.1-8b", workload="pretrain", precision="int4"),
        dict(model="llama-3.1-8b", workload="full-finetune", precision="int8"),
        dict(model="llama-3.1-8b", context=131073),
        dict(model="llama-2-7b", workload="pretrain", seq_len=8192),
        dict(model="llama-3.1-8b", workload="full-finetune", offload="all"),
        dict(model="llama-3.1-8b", workload="qlora", precision="int8"),
        dict(model="llama-3.1-8b", params=8e9),
        dict(),
        dict(layers=32, hidden=4096),
        dict(model="llama-3.1-8b", gpu="h100-sxm", usable_fraction=1.5),
        dict(model="llama-3.1-8b", gpu="h100-sxm", tokens=1e9, mfu=40),
        dict(model="llama-3.1-8b", count=8),
        dict(model="llama-3.1-8b", workload="training"),
        dict(model="llama-3.1-8b", micro_batch=0, workload="pretrain"),
    ]
    for kw in cases:
        with pytest.raises(InvalidInput) as err:
            run(**kw)
        assert "\n" not in str(err.value), kw


def test_lora_int4_base_is_allowed_and_int4_full_training_is_not():
    res = run(model="llama-3.1-8b", workload="lora", precision="int4", seq_len=2048)
    assert res.weights_bytes < 8 * GB


def test_qwen_long_context_warns_about_yarn():
    res = run(model="qwen2.5-7b", context=65536)
    assert any("YaRN" in w for w in res.warnings)


def test_sliding_window_caps_kv_for_gemma2_and_mistral():
    gemma = run(model="gemma-2-9b", context=8192)
    # 21 global layers × 8192 tokens + 21 local layers × 4096, 8 KV heads × 256 × 2 × 2 bytes
    assert gemma.kv_cache_bytes == 8192 * (21 * 8192 + 21 * 4096)
    assert gemma.kv_cache_bytes_per_token == 42 * 8192
    mistral = run(model="mistral-7b", context=32768)
    assert mistral.kv_cache_bytes == 131072 * 4096  # every layer capped at 4096
    v03 = run(model="mistral-7b-v0.3", context=32768)
    assert v03.kv_cache_bytes == 131072 * 32768


def test_kv_precision_fp8_halves_the_cache():
    bf16 = run(model="llama-3.1-8b", context=65536)
    fp8 = run(model="llama-3.1-8b", context=65536, kv_precision="fp8")
    assert fp8.kv_cache_bytes * 2 == bf16.kv_cache_bytes


def test_memory_only_without_a_gpu():
    res = run(model="llama-3.1-8b", context=8192)
    data = res.to_json()
    assert data["fits_single_gpu"] is None and data["gpus_needed"] is None
    assert data["total_bytes"] == sum(data[k] for k in (
        "weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes",
        "kv_cache_bytes", "overhead_bytes"))


def test_json_has_exactly_the_documented_keys_in_order():
    plain = run(model="llama-3.1-8b", context=8192, gpu="h100-sxm").to_json()
    assert list(plain)[: len(JSON_KEYS)] == list(JSON_KEYS)
    assert not set(TIME_KEYS) & set(plain)
    timed = run(model="llama-3.1-8b", workload="pretrain", gpu="h100-sxm", count=8,
                sharding="zero3", tokens=2e9).to_json()
    assert list(timed)[: len(JSON_KEYS) + len(TIME_KEYS)] == [*JSON_KEYS, *TIME_KEYS]
    assert isinstance(timed["warnings"], list)


def test_time_with_a_measured_mfu_has_no_further_penalty():
    res = run(model="llama-3.1-8b", workload="pretrain", gpu="h100-sxm", count=64,
              sharding="zero3", tokens=1e12, mfu=0.4)
    expected_s = 6 * res.active_params * 1e12 / (64 * 989e12 * 0.4)
    assert res.wall_hours * 3600 == pytest.approx(expected_s, rel=1e-9)
    assert res.gpu_hours == pytest.approx(res.wall_hours * 64)
    assert res.scaling_efficiency is None and res.mfu_source == "given"


def test_flops_rules():
    base = dict(model="llama-3.1-8b", gpu="h100-sxm", count=8, sharding="zero3", tokens=1e9)
    n = run(**base, workload="pretrain").active_params
    assert run(**base, workload="pretrain").flops == 6 * n * 1e9
    assert run(**base, workload="pretrain", recompute="full").flops == 8 * n * 1e9
    assert run(**base, workload="lora").flops == 4 * n * 1e9
    moe = run(model="mixtral-8x7b", workload="pretrain", gpu="h100-sxm", count=16,
              sharding="zero3", recompute="full", tokens=1e9)
    assert moe.flops == 8 * moe.active_params * 1e9
    assert moe.active_params < moe.params / 3


def test_modelled_time_includes_communication_and_pipeline_bubble():
    kw = dict(model="llama-3.1-70b", workload="pretrain", gpu="h100-sxm", sharding="zero1",
              seq_len=4096, recompute="full", tokens=1e10, count=64, tensor_parallel=8)
    no_pp = run(pipeline_parallel=1, **kw)
    pp4 = run(pipeline_parallel=4, global_batch_tokens=2**20, **kw)
    assert no_pp.scaling_efficiency < 1.0  # TP all-reduces are not hidden
    assert pp4.scaling_efficiency < no_pp.scaling_efficiency  # plus the bubble
    slow_net = run(pipeline_parallel=1, internode_gbps=1.0, **kw)
    assert slow_net.scaling_efficiency < no_pp.scaling_efficiency


def test_fp8_uses_the_fp8_peak_and_warns_on_a100():
    h100 = run(model="llama-3.1-8b", workload="pretrain", precision="fp8", gpu="h100-sxm",
               count=8, sharding="zero3", recompute="full", tokens=1e9)
    assert h100.peak_tflops == 1979
    a100 = run(model="llama-3.1-8b", workload="pretrain", precision="fp8", gpu="a100-80gb",
               count=16, sharding="zero3", recompute="full", tokens=1e9)
    assert a100.peak_tflops == 312
    assert any("FP8" in w for w in a100.warnings)


def test_uncalibrated_mfu_is_flagged():
    res = run(model="llama-3.2-1b", workload="pretrain", gpu="rtx-4090", count=2,
              sharding="zero3", recompute="full", seq_len=1024, tokens=1e9)
    assert any("uncalibrated" in w for w in res.warnings)


def test_serving_time_uses_the_serving_model():
    """--tokens on a serve job: chunked-prefill steps at the resident context (docs/serving.md).

    --context 4096 alone is 3,096 in / 1,000 out; at concurrency 1 a step reads the weights and
    3,096 + 500 tokens of KV at 70 % of 3.35 TB/s, computes one token at 80 % of the BF16 peak
    and 3.096 prompt tokens (the next request's prompt, spread over the steps) at 50 %.
    """
    res = run(model="llama-3.1-8b", gpu="h100-sxm", context=4096, concurrency=1, tokens=1000)
    per_token = res.wall_hours * 3600 / 1000
    n_active, layers, width = res.active_params, 32, 32 * 128
    resident = 3096 + 500
    memory = (res.weights_bytes + resident * res.kv_cache_bytes_per_token) / (3350e9 * 0.7)
    decode = (2 * n_active + 4 * layers * width * resident) / (989e12 * 0.8)
    prefill = 3.096 * (2 * n_active + 2 * layers * width * 3096) / (989e12 * 0.5)
    assert per_token == pytest.approx(memory + decode + prefill, rel=1e-9)
    assert res.mfu < 0.02
    assert not any("decode-only" in w for w in res.warnings)


def test_offload_moves_states_to_cpu():
    res = run(model="llama-3.1-8b", workload="full-finetune", gpu="h100-sxm",
              sharding="zero3", offload="all", count=8, seq_len=2048, recompute="full")
    assert res.per_gpu["weights"] == res.per_gpu["optimizer"] == res.per_gpu["gradients"] == 0
    assert res.offloaded_bytes == res.weights_bytes + res.gradients_bytes + res.optimizer_bytes
    assert any("CPU memory" in w for w in res.warnings)


def test_usable_fraction_scales_usable_memory():
    res = run(model="llama-3.2-1b", context=4096, gpu="h100-sxm", usable_fraction=0.5)
    assert res.usable_gpu_bytes == int(0.5 * 81559 * 2**20)
    assert res.usable_gpu_bytes / GiB == pytest.approx(39.82, abs=0.01)


def test_custom_architecture_flags():
    res = run(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab=128256,
              context=8192)
    assert res.params == run(model="llama-3.1-8b", context=8192).params
    assert res.kv_cache_bytes_per_token == 131072


def test_rough_params_path_warns():
    res = run(params=7e9, context=4096, gpu="h100-sxm")
    assert res.params == 7_000_000_000
    assert any("rough path" in w for w in res.warnings)


def test_result_template_builds_every_field_by_name_and_refuses_a_wrong_key():
    from dataclasses import fields

    from tracker.sizing.request import SizingResult, result_of, result_template

    result = size_workload(SizingRequest(model="llama-3.1-8b", workload="pretrain",
                                         gpu="h100-sxm", seq_len=4096, tokens=1e9))
    values = {f.name: getattr(result, f.name) for f in fields(SizingResult)}
    # Filled in another order than the fields': positional building must still map by name.
    rebuilt = result_of(result_template(dict(reversed(list(values.items())))))
    assert rebuilt == result
    with pytest.raises(TypeError, match="no_such_field"):
        result_of({**result_template(values), "no_such_field": 1})
    short = result_template(values)
    del short["warnings"]
    with pytest.raises(TypeError, match="warnings"):
        result_of(short)
