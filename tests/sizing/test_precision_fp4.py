"""4-bit float precisions: NVFP4 (`fp4`) and OCP MXFP4 (`mxfp4`).

Bits per weight include the block scales: NVFP4 has an FP8 E4M3 scale per 16 E2M1 values
(4 + 8/16 = 4.5 bits; NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision
Inference", June 2025), MXFP4 an E8M0 scale per 32 (4 + 8/32 = 4.25; OCP Microscaling Formats
v1.0 §5). The GEMMs run at the FP4 peak only with FP4 tensor cores (Blackwell).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.sizing import SizingRequest, size_workload
from tracker.sizing.memory import compute_peak, weight_bits, weights_bytes
from tracker.sizing.models import model_presets, resolve_model
from tracker.sizing.serving import ServingSpec, serve


def test_bits_per_weight_include_the_block_scales():
    assert weight_bits("fp4") == pytest.approx(4.5)
    assert weight_bits("mxfp4") == pytest.approx(4.25)


def test_fp4_weights_of_llama_70b():
    model = resolve_model("llama-3.1-70b")
    linear, rest = model.linear_params, model.params - model.linear_params
    assert weights_bytes(model, "fp4") == pytest.approx(linear * 4.5 / 8 + rest * 2)
    assert weights_bytes(model, "mxfp4") == pytest.approx(linear * 4.25 / 8 + rest * 2)
    # int4 group-128 costs 4.125 bits, NVFP4 4.5: between int4 and fp8.
    assert weights_bytes(model, "int4") < weights_bytes(model, "fp4") < \
        weights_bytes(model, "fp8") / 1.7


def test_compute_peak_uses_fp4_tensor_cores_only_where_they_exist():
    peak, warning = compute_peak("fp4", "b200", 2250e12, 4500e12, 9000e12)
    assert (peak, warning) == (9000e12, None)
    peak, warning = compute_peak("mxfp4", "h100-sxm", 989e12, 1979e12, None)
    assert peak == 989e12
    assert warning is not None and "weight-only" in warning and "h100-sxm" in warning


def test_fp4_serving_on_b200_is_faster_than_fp8_and_h100_warns():
    spec = ServingSpec(prompt_tokens=1000, output_tokens=1000)
    kw = dict(model="llama-3.1-70b", count=1, tensor_parallel=1, kv_precision="fp8")
    fp4 = serve(SizingRequest(gpu="b200", precision="fp4", **kw), spec)
    fp8 = serve(SizingRequest(gpu="b200", precision="fp8", **kw), spec)
    assert fp4.output_tokens_per_s > fp8.output_tokens_per_s
    assert not any("weight-only" in w for w in fp4.warnings)
    h100 = serve(SizingRequest(gpu="h100-sxm", precision="fp4", **kw), spec)
    assert any("weight-only" in w and "FP4" in w for w in h100.warnings)


@pytest.mark.parametrize("precision", ["fp4", "mxfp4"])
def test_fp4_cannot_be_trained_directly(precision):
    with pytest.raises(InvalidInput, match="cannot be trained directly"):
        size_workload(SizingRequest(model="llama-3.1-8b", workload="full-finetune",
                                    precision=precision, gpu="b200"))


def test_an_mx_only_gpu_runs_nvfp4_weight_only():
    peak, warning = compute_peak("fp4", "mi355x", 2500e12, 5000e12, 10000e12,
                                 frozenset({"mxfp4"}))
    assert peak == 2500e12 and warning is not None and "no fp4 tensor-core path" in warning
    assert "its FP4 tensor cores take mxfp4: --precision mxfp4" in warning
    assert compute_peak("mxfp4", "mi355x", 2500e12, 5000e12, 10000e12,
                        frozenset({"mxfp4"})) == (10000e12, None)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from([m.id for m in model_presets()]))
def test_block_scaled_4_bit_weights_sit_between_int4_and_fp8(model):
    spec = resolve_model(model)
    # 4.125 (int4, g128) < 4.25 (mxfp4) < 4.5 (fp4) < 8 bits per decoder weight
    assert weights_bytes(spec, "int4") < weights_bytes(spec, "mxfp4") < \
        weights_bytes(spec, "fp4") < weights_bytes(spec, "fp8")


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b"]),
       prompt=st.integers(min_value=64, max_value=4096),
       output=st.integers(min_value=64, max_value=2048))
def test_native_fp4_never_serves_slower_than_fp8_on_blackwell(model, prompt, output):
    spec = ServingSpec(prompt_tokens=prompt, output_tokens=output)
    kw = dict(model=model, gpu="b200", count=1, tensor_parallel=1, kv_precision="fp8")
    fp4 = serve(SizingRequest(precision="fp4", **kw), spec)
    fp8 = serve(SizingRequest(precision="fp8", **kw), spec)
    assert fp4.output_tokens_per_s >= fp8.output_tokens_per_s * 0.999
