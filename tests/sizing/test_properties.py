"""Invariants of the sizing engine (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.sizing import SizingRequest, model_presets, size_workload

PRESETS = [m.id for m in model_presets()]
GPUS = ["h100-sxm", "h100-pcie", "h200", "b200", "a100-40gb", "a100-80gb", "l40s", "l4",
        "rtx-4090", "rtx-a6000", "mi300x", "gaudi3"]
TRAINING = ["pretrain", "full-finetune", "lora", "qlora"]
WORKLOADS = ["inference", *TRAINING]
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def per_gpu_states(res) -> int:
    return res.per_gpu["weights"] + res.per_gpu["gradients"] + res.per_gpu["optimizer"]


@FAST
@given(model=st.sampled_from(PRESETS), workload=st.sampled_from(TRAINING),
       batch=st.integers(1, 16), extra=st.integers(1, 8), seq=st.sampled_from([256, 512, 1024]),
       recompute=st.sampled_from(["none", "selective", "full"]),
       attention=st.sampled_from(["flash", "eager"]), gpu=st.sampled_from(GPUS))
def test_training_memory_never_decreases_with_batch_or_sequence(model, workload, batch, extra,
                                                                seq, recompute, attention, gpu):
    base = dict(model=model, workload=workload, recompute=recompute, attention=attention,
                gpu=gpu, count=8, tensor_parallel=1, pipeline_parallel=1, sharding="zero3")
    small = size_workload(SizingRequest(micro_batch=batch, seq_len=seq, **base))
    more_batch = size_workload(SizingRequest(micro_batch=batch + extra, seq_len=seq, **base))
    longer = size_workload(SizingRequest(micro_batch=batch, seq_len=2 * seq, **base))
    for bigger in (more_batch, longer):
        assert bigger.total_bytes >= small.total_bytes
        assert bigger.activations_bytes >= small.activations_bytes
        assert bigger.per_gpu_bytes >= small.per_gpu_bytes


@FAST
@given(model=st.sampled_from(PRESETS), context=st.integers(16, 1024), more=st.integers(1, 1024),
       concurrency=st.integers(1, 64), extra=st.integers(1, 64), gpu=st.sampled_from(GPUS),
       kv=st.sampled_from(["auto", "fp8"]), tp=st.sampled_from([1, 2, 4, 8]))
def test_serving_memory_never_decreases_with_context_or_concurrency(model, context, more,
                                                                  concurrency, extra, gpu, kv,
                                                                  tp):
    base = dict(model=model, gpu=gpu, kv_precision=kv, count=tp, tensor_parallel=tp)
    try:
        small = size_workload(SizingRequest(context=context, concurrency=concurrency, **base))
    except InvalidInput:
        assume(False)  # a TP degree this model cannot use
    longer = size_workload(SizingRequest(context=context + more, concurrency=concurrency,
                                         **base))
    busier = size_workload(SizingRequest(context=context, concurrency=concurrency + extra,
                                         **base))
    for bigger in (longer, busier):
        assert bigger.total_bytes >= small.total_bytes
        assert bigger.kv_cache_bytes >= small.kv_cache_bytes
        assert bigger.per_gpu_bytes >= small.per_gpu_bytes


@FAST
@given(params=st.floats(1e8, 1e12), factor=st.floats(1.0, 10.0),
       workload=st.sampled_from(WORKLOADS), gpu=st.sampled_from(GPUS))
def test_memory_never_decreases_with_parameters(params, factor, workload, gpu):
    base = dict(workload=workload, gpu=gpu, seq_len=2048 if workload != "inference" else None,
                context=2048 if workload == "inference" else None, count=8,
                tensor_parallel=8, pipeline_parallel=1, plan="smallest")  # same settings
    small = size_workload(SizingRequest(params=params, **base))
    big = size_workload(SizingRequest(params=params * factor, **base))
    assert big.total_bytes >= small.total_bytes
    assert big.per_gpu_bytes >= small.per_gpu_bytes
    assert big.weights_bytes >= small.weights_bytes


@FAST
@given(model=st.sampled_from(PRESETS), workload=st.sampled_from(["pretrain", "full-finetune",
                                                                 "lora"]),
       tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]),
       dp=st.integers(1, 64), extra=st.integers(1, 64))
def test_zero3_per_gpu_model_states_never_increase_with_more_gpus(model, workload, tp, pp, dp,
                                                                 extra):
    """With the layout held (TP, PP), more GPUs are more data-parallel ranks, over which ZeRO-3
    shards every model state: the per-GPU share never grows. A free plan may not keep this:
    the planner picks the fastest layout, and a deeper pipeline's stages each hold a larger
    share of the embeddings (405B pretrain: 106 GPUs as TP1xPP2xDP53 hold 75.76 GB of states
    per GPU, 108 as TP1xPP6xDP18 76.05 GB), so the invariant is stated for a fixed layout."""
    base = dict(model=model, workload=workload, gpu="h100-sxm", sharding="zero3",
                seq_len=1024, recompute="full", tensor_parallel=tp, pipeline_parallel=pp)
    try:
        fewer = size_workload(SizingRequest(count=tp * pp * dp, **base))
        more = size_workload(SizingRequest(count=tp * pp * (dp + extra), **base))
    except InvalidInput:
        assume(False)  # a layout the model cannot take (TP not dividing its heads, ...)
    assert per_gpu_states(more) <= per_gpu_states(fewer) * (1 + 1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(PRESETS), workload=st.sampled_from(WORKLOADS),
       gpu=st.sampled_from(GPUS), count=st.one_of(st.none(), st.integers(1, 512)),
       sharding=st.sampled_from(["none", "zero1", "zero2", "zero3"]),
       recompute=st.sampled_from(["none", "full"]), batch=st.integers(1, 8),
       seq=st.sampled_from([512, 2048, 4096]), concurrency=st.integers(1, 32),
       fraction=st.floats(0.5, 1.0))
def test_a_plan_reported_as_fitting_never_exceeds_usable_memory(model, workload, gpu, count,
                                                                 sharding, recompute, batch,
                                                                 seq, concurrency, fraction):
    training = workload != "inference"
    try:
        res = size_workload(SizingRequest(
            model=model, workload=workload, gpu=gpu, count=count, usable_fraction=fraction,
            sharding=sharding if training else "none", recompute=recompute,
            micro_batch=batch, seq_len=seq if training else None,
            context=None if training else seq, concurrency=concurrency))
    except InvalidInput:
        assume(False)  # e.g. a sequence longer than this model's maximum
    if res.fits:
        assert res.per_gpu_bytes <= res.usable_gpu_bytes
        assert sum(res.per_gpu.values()) == pytest.approx(res.per_gpu_bytes, abs=8)
        assert res.gpus_used <= (count or res.gpus_needed)
        assert res.gpus_needed is not None and res.gpus_needed <= res.gpus_used
    if res.fits_single_gpu:
        assert res.gpus_needed == 1


@FAST
@given(model=st.sampled_from(PRESETS), workload=st.sampled_from(WORKLOADS),
       gpu=st.sampled_from(GPUS), count=st.integers(1, 128), tokens=st.floats(1e3, 1e13),
       factor=st.floats(1.5, 1000), mfu=st.one_of(st.none(), st.floats(0.05, 0.6)))
def test_time_scales_linearly_with_tokens(model, workload, gpu, count, tokens, factor, mfu):
    training = workload != "inference"
    base = dict(model=model, workload=workload, gpu=gpu, count=count, mfu=mfu,
                sharding="zero3" if training else "none", recompute="full",
                seq_len=1024 if training else None, context=None if training else 1024)
    one = size_workload(SizingRequest(tokens=tokens, **base))
    many = size_workload(SizingRequest(tokens=tokens * factor, **base))
    assume(one.wall_hours is not None)
    assert many.wall_hours == pytest.approx(one.wall_hours * factor, rel=1e-9)
    assert many.gpu_hours == pytest.approx(one.gpu_hours * factor, rel=1e-9)
    assert many.flops == pytest.approx(one.flops * factor, rel=1e-12)
