"""Mixture-of-experts serving and training against published measurements. No share is fitted
on them (the shares are the hopper class's, fitted to dense rows); one figure is, on one row:
the MLA + MoE kernel floor, on DeepSeek-R1's B200 batch-1 decode. docs/serving.md "Expert
parallelism" and docs/sizing.md §1.12 give the tables."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.sizing import SizingRequest, resolve_model, size_workload
from tracker.sizing.plan import Job, training_expert_parallel
from tracker.sizing.prepare import memory_job, preparation, prepare_key
from tracker.sizing.serving import ServingSpec, serve

TRT_V1 = ("TensorRT-LLM perf-overview.md @ 00f37686 (v1.0, trtllm-bench, FP8, max throughput; "
          "MoE models with --ep and enable_attention_dp)")

# The decode-bound rows are in data/serving-measurements.json (tests/sizing/test_serving_classes
# .py: H100 Llama 4 rows chose the BF16 KV cache, every other row held out at ±30 %). These
# short-output or long-prompt rows are a known overestimate of the attention-DP plan (a
# prompt's attention and non-expert layers run on one GPU, which the model does not queue
# across ranks; docs/serving.md "Expert parallelism"), pinned so a change shows up here.
# Where the layout is stated (LATER_DEP below: DEP 4 and DEP 8, 8,192/1,024 and 32,768/1,024)
# the long-prompt rows are not high (Qwen3 -29 ... -12 %, DeepSeek-R1 B200 -15 %), and under
# attention TP these v1.0 rows would land +7 ... +37 % (Qwen3, FP8 KV) or within -22 ... +11 %
# (Scout, BF16 KV): the bias goes with the layout v1.0's file does not establish.
# (id, gpu, model, tp, prompt, output, measured output tok/s, (low, high) model/measured).
PREFILL_BIAS = [
    ("scout-h200-128-128", "h200", "llama-4-scout", 4, 128, 128, 30354, (1.4, 1.9)),
    ("maverick-h200-128-128", "h200", "llama-4-maverick", 8, 128, 128, 63994, (1.3, 1.7)),
    ("qwen3-h200-128-128", "h200", "qwen3-235b-a22b", 8, 128, 128, 30429, (1.5, 2.0)),
    ("scout-h200-2048-128", "h200", "llama-4-scout", 4, 2048, 128, 3699, (1.1, 1.6)),
    ("maverick-h200-2048-128", "h200", "llama-4-maverick", 8, 2048, 128, 7307, (1.1, 1.5)),
    ("qwen3-h200-2048-128", "h200", "qwen3-235b-a22b", 8, 2048, 128, 3331, (1.4, 1.9)),
    ("scout-h100-2048-128", "h100-sxm", "llama-4-scout", 4, 2048, 128, 3253, (1.0, 1.5)),
    ("qwen3-h100-5000-500", "h100-sxm", "qwen3-235b-a22b", 8, 5000, 500, 3225, (1.2, 1.6)),
    ("qwen3-h200-5000-500", "h200", "qwen3-235b-a22b", 8, 5000, 500, 3623, (1.4, 1.9)),
    ("qwen3-h200-20000-2000", "h200", "qwen3-235b-a22b", 8, 20000, 2000, 1876, (1.2, 1.7)),
]


# Held out, and not explained (the later release's DEP 4 rows of the same model on B200,
# whose layout is stated, are not high: LATER_DEP below): the v1.0 file's B200 FP4 Qwen3 rows
# come out well above the attention-DP plan's (Llama 4 Maverick's B200 rows are within 17 %, in
# data/serving-measurements.json); under TP 8 with BF16 KV they would be -29 to -7 %, so the
# layout or KV dtype of these runs is not the one their file states for MoE models. Attention
# at the KV cache's precision moved them from +36…+68 % to +32…+62 %. Checked and not applied:
# attention kept in 16 bits, as NVIDIA's DeepSeek export does (ModelSpec.sixteen_bit_params),
# would take them to +10…+37 % (and Maverick's B200 rows to -24…-9 %), but the checkpoint these
# runs name, nvidia/Qwen3-235B-A22B-FP4, is ~125 GB on disk by its users' reports: 124.8 GiB with
# attention in NVFP4, 133.8 GiB with it in BF16. Its later 2507-NVFP4 export does keep q/k/v in
# BF16 (sgl-project/sglang PR #18189), and the dense Llama 3.3 70B FP4 export keeps only
# lm_head, so the rule stays with the DeepSeek export it is documented for.
QWEN3_B200 = [
    ("qwen3-b200-128-2048", 128, 2048, 66057, (1.2, 1.55)),
    ("qwen3-b200-1000-1000", 1000, 1000, 42391, (1.3, 1.7)),
    ("qwen3-b200-1000-2000", 1000, 2000, 34105, (1.45, 1.9)),
    ("qwen3-b200-2048-2048", 2048, 2048, 26854, (1.3, 1.7)),
]


# Held out, with the layout and the unit stated: TensorRT-LLM's later release of the same page,
# docs/source/developer-guide/perf-overview.md @ 03e27c7d, labels each MoE column DEP n
# (attention DP n with EP n; `enable_attention_dp: true` at the top of the Qwen3 / Maverick and
# DeepSeek-R1 option files), reports output tokens/s per GPU, and sets the KV dtype for
# DeepSeek-R1 (`kv_cache_config: dtype: fp8`); Qwen3 keeps the checkpoint's ("auto"; BF16 as
# the v1.0 rows above). The v1.0 file's MoE option file nests `enable_attention_dp` inside
# `cuda_graph_config` and heads its columns TP 8, so its layout is not established by that
# file (docs/serving.md "Expert parallelism"). On these rows the B200 Qwen3 excess of the v1.0
# rows is not there: B200 -31 ... +25 %, GB200 -13 / +20 %, H200 -23 ... -10 %, H100 -11 / +19 %;
# the model is high at 1,000/1,000 and low at long contexts on every GPU. DeepSeek-R1 on H200 at
# 1,000/1,000 (+91 %, at the ~3,900 sequences FP8 MLA KV leaves room for) is the largest miss;
# the engine's batch there is not stated (trtllm-bench sizes it itself, tensorrt_llm/bench/
# build/tuning.py @ a7e572fb, from a KV estimate of max(tp, kv heads) heads that does not
# model MLA). Its DeepSeek-R1 FP4 checkpoint is nvidia/DeepSeek-R1-0528-NVFP4-v2, whose
# exclude list was not read: the model keeps attention in BF16 as for the first exports.
# (model, gpu, weights, KV, n, prompt, output, measured per GPU, (low, high)).
LATER_DEP = [
    ("qwen3-235b-a22b", "b200", "fp4", "bf16", 4, 1000, 1000, 5764, (1.20, 1.35)),
    ("qwen3-235b-a22b", "b200", "fp4", "bf16", 4, 1024, 1024, 5756, (1.15, 1.30)),
    ("qwen3-235b-a22b", "b200", "fp4", "bf16", 4, 1024, 8192, 3389, (0.75, 0.90)),
    ("qwen3-235b-a22b", "b200", "fp4", "bf16", 4, 1024, 32768, 1255, (0.60, 0.75)),
    ("qwen3-235b-a22b", "b200", "fp4", "bf16", 4, 8192, 1024, 1410, (0.80, 0.95)),
    ("qwen3-235b-a22b", "b200", "fp4", "bf16", 4, 32768, 1024, 319, (0.65, 0.80)),
    ("qwen3-235b-a22b", "gb200", "fp4", "bf16", 4, 1000, 1000, 6172, (1.10, 1.25)),
    ("qwen3-235b-a22b", "gb200", "fp4", "bf16", 4, 8192, 1024, 1464, (0.80, 0.95)),
    ("qwen3-235b-a22b", "h200", "fp8", "bf16", 4, 1000, 1000, 3288, (0.85, 1.00)),
    ("qwen3-235b-a22b", "h200", "fp8", "bf16", 4, 1024, 8192, 1417, (0.70, 0.85)),
    ("qwen3-235b-a22b", "h200", "fp8", "bf16", 4, 8192, 1024, 627, (0.75, 0.90)),
    ("qwen3-235b-a22b", "h200", "fp8", "bf16", 4, 32768, 1024, 134, (0.70, 0.85)),
    ("qwen3-235b-a22b", "h100-sxm", "fp8", "bf16", 8, 1000, 1000, 1932, (1.10, 1.25)),
    ("qwen3-235b-a22b", "h100-sxm", "fp8", "bf16", 8, 1024, 8192, 873, (0.80, 0.95)),
    # Llama 4 Maverick, KV as Qwen3's (the NVFP4 / FP8 checkpoints' KV dtype was not read;
    # with FP8 KV the B200 rows would be -27 ... +22 %): low on B200 at every shape; the
    # chunked-attention layers' reads of at most 8,192 tokens moved 1,024/32,768 and
    # 32,768/1,024 from 0.42 / 0.45 (B200) and 0.68 (H200) to 0.56 / 0.72 and 0.84
    ("llama-4-maverick", "b200", "fp4", "bf16", 4, 1000, 1000, 11337, (0.65, 0.80)),
    ("llama-4-maverick", "b200", "fp4", "bf16", 4, 1024, 1024, 11227, (0.65, 0.80)),
    ("llama-4-maverick", "b200", "fp4", "bf16", 4, 1024, 8192, 5174, (0.40, 0.55)),
    ("llama-4-maverick", "b200", "fp4", "bf16", 4, 1024, 32768, 2204, (0.50, 0.65)),
    ("llama-4-maverick", "b200", "fp4", "bf16", 4, 8192, 1024, 3279, (0.40, 0.55)),
    ("llama-4-maverick", "b200", "fp4", "bf16", 4, 32768, 1024, 859, (0.65, 0.80)),
    ("llama-4-maverick", "gb200", "fp4", "bf16", 4, 1000, 1000, 11828, (0.60, 0.75)),
    ("llama-4-maverick", "gb200", "fp4", "bf16", 4, 8192, 1024, 3444, (0.40, 0.55)),
    ("llama-4-maverick", "h200", "fp8", "bf16", 8, 1000, 1000, 4146, (0.90, 1.05)),
    ("llama-4-maverick", "h200", "fp8", "bf16", 8, 1024, 1024, 4180, (0.85, 1.00)),
    ("llama-4-maverick", "h200", "fp8", "bf16", 8, 1024, 8192, 1157, (1.00, 1.15)),
    ("llama-4-maverick", "h200", "fp8", "bf16", 8, 1024, 32768, 679, (0.75, 0.90)),
    ("llama-4-maverick", "h200", "fp8", "bf16", 8, 8192, 1024, 1276, (0.50, 0.65)),
    ("deepseek-r1", "b200", "fp4", "fp8", 4, 1000, 1000, 6463, (0.75, 0.90)),
    ("deepseek-r1", "b200", "fp4", "fp8", 4, 1024, 8192, 3862, (0.60, 0.75)),
    ("deepseek-r1", "b200", "fp4", "fp8", 4, 8192, 1024, 1168, (0.80, 0.95)),
    ("deepseek-r1", "h200", "fp8", "fp8", 8, 1000, 1000, 1627, (1.85, 2.00)),
    ("deepseek-r1", "h200", "fp8", "fp8", 8, 1024, 8192, 1218, (1.20, 1.35)),
    ("deepseek-r1", "h200", "fp8", "fp8", 8, 1024, 32768, 438, (1.05, 1.20)),
]
LATER_SOURCE = ("TensorRT-LLM docs/source/developer-guide/perf-overview.md @ 03e27c7d "
                "(trtllm-bench max throughput, DEP n, output tok/s per GPU)")


def _throughput(model: str, gpu: str, tp: int, prompt: int, output: int, *,
                attention_parallel: str | None = "data", kv: str = "bf16",
                precision: str = "fp8", concurrency: int | None = None) -> float:
    result = serve(SizingRequest(model=model, gpu=gpu, count=tp, tensor_parallel=tp,
                                 precision=precision, kv_precision=kv),
                   ServingSpec(prompt_tokens=prompt, output_tokens=output,
                               attention_parallel=attention_parallel,
                               concurrency=concurrency))
    assert result.calibration.calibrated
    return result.output_tokens_per_s


@pytest.mark.parametrize("case", PREFILL_BIAS, ids=[c[0] for c in PREFILL_BIAS])
def test_moe_short_output_rows_known_overestimate(case):
    _id, gpu, model, tp, prompt, output, measured, (low, high) = case
    ratio = _throughput(model, gpu, tp, prompt, output) / measured
    assert low <= ratio <= high, f"{TRT_V1}: {model} {gpu} {prompt}/{output}: {ratio:.2f}x"


@pytest.mark.parametrize("case", QWEN3_B200, ids=[c[0] for c in QWEN3_B200])
def test_qwen3_b200_rows_known_overestimate(case):
    _id, prompt, output, measured, (low, high) = case
    ratio = _throughput("qwen3-235b-a22b", "b200", 8, prompt, output, precision="fp4") / measured
    assert low <= ratio <= high, f"{TRT_V1}: Qwen3-235B B200 {prompt}/{output}: {ratio:.2f}x"


@pytest.mark.parametrize("case", LATER_DEP,
                         ids=[f"{c[0]}-{c[1]}-dep{c[4]}-{c[5]}-{c[6]}" for c in LATER_DEP])
def test_later_release_dep_rows_held_out(case):
    model, gpu, weights, kv, n, prompt, output, measured, (low, high) = case
    result = serve(SizingRequest(model=model, gpu=gpu, count=n, tensor_parallel=n,
                                 precision=weights, kv_precision=kv),
                   ServingSpec(prompt_tokens=prompt, output_tokens=output,
                               attention_parallel="data"))
    assert result.calibration.calibrated
    assert (result.chosen.attention_data_parallel, result.chosen.tensor_parallel) == (n, 1)
    ratio = result.output_tokens_per_s / n / measured  # the page's unit is per GPU
    assert low <= ratio <= high, f"{LATER_SOURCE}: {model} {gpu} {prompt}/{output}: {ratio:.2f}x"


# gpt-oss on the same page @ 03e27c7d (sections "GPT-OSS 120B" / "GPT-OSS 20B", lines 117-145),
# held out. Weights as shipped (--precision native: MXFP4 experts, attention and embeddings
# BF16): the page lists no gpt-oss checkpoint under "FP4 Models" / "FP8 Models" (so OpenAI's
# MXFP4 one), and its GPT-OSS option file picks `moe_config: backend: CUTLASS  # Hopper: use
# TRITON`, which TensorRT-LLM's GPT-OSS deployment guide lists as MXFP4 expert weights with
# MXFP8 activations (Blackwell) or BF16 activations (TRITON, H200): the columns' "FP4" / "FP8"
# labels are not the weights (nor, on Hopper, the activations). KV as that option file states:
# `kv_cache_config: dtype: fp8  # Hopper: use auto` (BF16, the checkpoint's dtype, on H100 /
# H200), with `enable_attention_dp: true` (120B on B200 DEP 2, H100 DEP 4; every other column
# TP 1, one GPU). Output tok/s per GPU. With the windows (every other layer reads at most
# 128 tokens) and, on Blackwell, the experts at the FP8 peak (MXFP8 activations) and the BF16
# matrices at the BF16 peak: Blackwell -15 ... +29 % (was -40 ... +61 %), Hopper long contexts
# on one GPU -0 ... +16 % (was -31 ... -11 %); left: Hopper at ~1,000/1,000, +49 ... +66 % on
# one GPU (was +25 ... +34 %) and +122 / +126 % under H100 DEP 4 (was +79 / +83 %), a cost of
# large decode batches on Hopper the model lacks (docs/serving.md "Expert parallelism").
# (model, gpu, KV, n, prompt, output, measured per GPU, (low, high) model/measured).
GPT_OSS = [
    ("gpt-oss-120b", "b200", "fp8", 2, 1000, 1000, 25943, (1.20, 1.35)),
    ("gpt-oss-120b", "b200", "fp8", 2, 1024, 1024, 25870, (1.20, 1.35)),
    ("gpt-oss-120b", "b200", "fp8", 2, 1024, 8192, 17289, (1.10, 1.25)),
    ("gpt-oss-120b", "b200", "fp8", 2, 1024, 32768, 6279, (1.05, 1.20)),
    ("gpt-oss-120b", "b200", "fp8", 2, 8192, 1024, 6111, (1.05, 1.20)),
    ("gpt-oss-120b", "b200", "fp8", 2, 32768, 1024, 1392, (1.05, 1.20)),
    ("gpt-oss-120b", "gb200", "fp8", 1, 1000, 1000, 27198, (1.15, 1.30)),
    ("gpt-oss-120b", "gb200", "fp8", 1, 1024, 1024, 26609, (1.15, 1.30)),
    ("gpt-oss-120b", "gb200", "fp8", 1, 1024, 8192, 14800, (0.90, 1.05)),
    ("gpt-oss-120b", "gb200", "fp8", 1, 1024, 32768, 5556, (0.80, 0.95)),
    ("gpt-oss-120b", "gb200", "fp8", 1, 8192, 1024, 6835, (0.95, 1.10)),
    ("gpt-oss-120b", "gb200", "fp8", 1, 32768, 1024, 1645, (0.95, 1.10)),
    ("gpt-oss-120b", "h200", "bf16", 1, 1000, 1000, 6868, (1.40, 1.55)),
    ("gpt-oss-120b", "h200", "bf16", 1, 1024, 1024, 6798, (1.40, 1.55)),
    ("gpt-oss-120b", "h200", "bf16", 1, 1024, 8192, 3543, (1.00, 1.15)),
    ("gpt-oss-120b", "h200", "bf16", 1, 8192, 1024, 1828, (1.00, 1.15)),
    ("gpt-oss-120b", "h200", "bf16", 1, 32768, 1024, 519, (0.95, 1.10)),
    ("gpt-oss-120b", "h100-sxm", "bf16", 4, 1000, 1000, 4685, (2.20, 2.35)),
    ("gpt-oss-120b", "h100-sxm", "bf16", 4, 1024, 1024, 4715, (2.15, 2.30)),
    ("gpt-oss-120b", "h100-sxm", "bf16", 4, 1024, 32768, 1177, (1.15, 1.30)),
    ("gpt-oss-120b", "h100-sxm", "bf16", 4, 8192, 1024, 1169, (1.65, 1.80)),
    ("gpt-oss-120b", "h100-sxm", "bf16", 4, 32768, 1024, 333, (1.35, 1.50)),
    ("gpt-oss-20b", "b200", "fp8", 1, 1000, 1000, 53812, (0.90, 1.05)),
    ("gpt-oss-20b", "b200", "fp8", 1, 1024, 1024, 53491, (0.90, 1.05)),
    ("gpt-oss-20b", "b200", "fp8", 1, 1024, 8192, 34702, (1.10, 1.25)),
    ("gpt-oss-20b", "b200", "fp8", 1, 1024, 32768, 14589, (1.00, 1.15)),
    ("gpt-oss-20b", "b200", "fp8", 1, 8192, 1024, 11904, (0.85, 1.00)),
    ("gpt-oss-20b", "b200", "fp8", 1, 32768, 1024, 2645, (0.90, 1.05)),
    ("gpt-oss-20b", "gb200", "fp8", 1, 1000, 1000, 55823, (0.95, 1.10)),
    ("gpt-oss-20b", "gb200", "fp8", 1, 1024, 1024, 56528, (0.95, 1.10)),
    ("gpt-oss-20b", "gb200", "fp8", 1, 1024, 8192, 38100, (1.05, 1.20)),
    ("gpt-oss-20b", "gb200", "fp8", 1, 1024, 32768, 16463, (0.90, 1.05)),
    ("gpt-oss-20b", "gb200", "fp8", 1, 8192, 1024, 12941, (0.85, 1.00)),
    ("gpt-oss-20b", "gb200", "fp8", 1, 32768, 1024, 2905, (0.90, 1.05)),
    ("gpt-oss-20b", "h200", "bf16", 1, 1000, 1000, 13858, (1.60, 1.75)),
    ("gpt-oss-20b", "h200", "bf16", 1, 1024, 1024, 13890, (1.55, 1.70)),
    ("gpt-oss-20b", "h200", "bf16", 1, 1024, 8192, 12743, (1.10, 1.25)),
    ("gpt-oss-20b", "h200", "bf16", 1, 8192, 1024, 4015, (0.95, 1.10)),
    ("gpt-oss-20b", "h200", "bf16", 1, 32768, 1024, 915, (0.95, 1.10)),
    ("gpt-oss-20b", "h100-sxm", "bf16", 1, 1000, 1000, 11557, (1.50, 1.65)),
    ("gpt-oss-20b", "h100-sxm", "bf16", 1, 1024, 1024, 11403, (1.50, 1.65)),
    ("gpt-oss-20b", "h100-sxm", "bf16", 1, 1024, 8192, 8617, (0.95, 1.10)),
    ("gpt-oss-20b", "h100-sxm", "bf16", 1, 8192, 1024, 3366, (0.90, 1.05)),
    ("gpt-oss-20b", "h100-sxm", "bf16", 1, 32768, 1024, 785, (0.90, 1.05)),
]


@pytest.mark.parametrize("case", GPT_OSS,
                         ids=[f"{c[0]}-{c[1]}-{c[3]}-{c[4]}-{c[5]}" for c in GPT_OSS])
def test_gpt_oss_rows_held_out(case):
    model, gpu, kv, n, prompt, output, measured, (low, high) = case
    result = serve(SizingRequest(model=model, gpu=gpu, count=n, tensor_parallel=n,
                                 precision="native", kv_precision=kv),
                   ServingSpec(prompt_tokens=prompt, output_tokens=output,
                               attention_parallel="data" if n > 1 else None))
    assert result.calibration.calibrated
    assert (result.chosen.attention_data_parallel, result.chosen.tensor_parallel) == (n, 1)
    ratio = result.output_tokens_per_s / n / measured  # the page's unit is per GPU
    assert low <= ratio <= high, f"{LATER_SOURCE}: {model} {gpu} {prompt}/{output}: {ratio:.2f}x"


def test_windowed_layers_read_and_attend_within_the_window():
    """A sliding-window layer reads and multiplies at most its window of cached tokens (the
    KV capacity still holds every layer's whole context). gpt-oss-20b: 12 of 24 layers attend
    to the last 128 tokens. By hand at 1,024/8,192 (resident context 1,024 + 4,096 = 5,120):
    a decode token reads 5,120 - 12/24 x (5,120 - 128) = 2,624 tokens of KV a layer on
    average; a 32,768-token prompt attends to 16,384 tokens on full layers and
    128 - 128^2/(2 x 32,768) on windowed ones. Before, every layer read the whole context and
    gpt-oss's long-context Hopper rows came out -31 ... -11 % (GPT_OSS above: now +0 ... +16 %)."""
    from tracker.sizing.prepare import gpu_info
    from tracker.sizing.replica import expert_bytes_share, hardware_for, shape_for
    from tracker.sizing.serving_step import operating_point

    prep = preparation(prepare_key(SizingRequest(model="gpt-oss-20b", workload="inference",
                                                 precision="native", kv_precision="bf16")))
    model = prep.model
    assert (model.sliding_window, model.sliding_layers, model.layers) == (128, 12, 24)
    shape = shape_for(prep, 1, 1024, 8192, expert_bytes_share(model, prep.precision))
    assert shape.attended(5120.0) == pytest.approx(2624.0, rel=1e-12)
    hw = hardware_for(gpu_info("h200"), prep.precision, None, "bf16")[0]
    step = operating_point(shape, 1, 100, hw).step
    share, touched = shape.expert_bytes_share, 1 - (1 - 4 / 32) ** 100
    weights = prep.weights * ((1 - share) + share * touched)
    assert step.memory == pytest.approx(
        (weights + 100 * 2624.0 * prep.kv_per_token)
        / (hw.hbm_bw * hw.calibration.bandwidth_share), rel=1e-12)
    long = shape_for(prep, 1, 32768, 1024, expert_bytes_share(model, prep.precision))
    windowed = 128 - 128 ** 2 / (2 * 32768)
    assert long.prompt_attended == pytest.approx((16384 + windowed) / 2, rel=1e-12)
    # a model without windows attends to all of it
    dense = preparation(prepare_key(SizingRequest(model="llama-3.1-8b", workload="inference")))
    plain = shape_for(dense, 1, 32768, 1024, 0.0)
    assert plain.attended(33280.0) == 33280.0 and plain.prompt_attended == 16384.0


def test_gpt_oss_on_blackwell_multiplies_experts_at_fp8_and_the_rest_in_bf16():
    """gpt-oss ships only its routed experts in MXFP4 (attention, router and unembedding in
    BF16), and TensorRT-LLM's Blackwell MoE backends run them with MXFP8 activations (its
    GPT-OSS deployment guide; the FP4 rate needs both operands in FP4): the grouped GEMMs at
    the FP8 peak, the BF16 matrices at the BF16 peak, where both ran at the FP4 peak before
    (gpt-oss-20b on B200 at 1,000/1,000: +38 % before, -1 % now). On Hopper MXFP4 was already
    weight-only at the BF16 peak, so nothing moves there."""
    from tracker.sizing.prepare import gpu_info
    from tracker.sizing.replica import (
        expert_bytes_share,
        hardware_for,
        routed_active_params,
        shape_for,
    )
    from tracker.sizing.serving_step import _gemm_params

    prep = preparation(prepare_key(SizingRequest(model="gpt-oss-20b", workload="inference",
                                                 precision="native")))
    model = prep.model
    assert prep.precision == "mxfp4"
    b200, h200 = gpu_info("b200"), gpu_info("h200")
    hw = hardware_for(b200, "mxfp4", None, "fp8")[0]
    assert (hw.peak_flops, hw.expert_flops, hw.bf16_flops) == (
        b200.fp4_flops, b200.fp8_flops, b200.bf16_flops)
    hopper = hardware_for(h200, "mxfp4", None, "bf16")[0]
    assert hopper.peak_flops == h200.bf16_flops and hopper.expert_flops == 0.0
    shape = shape_for(prep, 1, 1000, 1000, expert_bytes_share(model, prep.precision))
    routed = routed_active_params(model)
    assert routed == pytest.approx(24 * 4 * model.mlp_params, rel=1e-12)
    assert shape.wide_params == pytest.approx(model.active_params - routed, rel=1e-12)
    # by hand: time at the FP4 peak of the experts at FP8 and the rest at BF16
    assert _gemm_params(shape, hw) == pytest.approx(
        routed * b200.fp4_flops / b200.fp8_flops
        + (model.active_params - routed) * b200.fp4_flops / b200.bf16_flops, rel=1e-12)
    assert _gemm_params(shape, hopper) == pytest.approx(model.active_params, rel=1e-12)
    # NVFP4 (W4A4) checkpoints keep the FP4 peak for their experts
    assert hardware_for(b200, "fp4", None, "fp8")[0].expert_flops == 0.0


def test_llama4_was_off_because_the_benchmark_ran_attention_dp():
    """The gap issue #25 left (+54…+81 % Scout, +91…+148 % Maverick on H100) was the layout,
    not the MoE arithmetic: under TensorRT-LLM's enable_attention_dp every GPU keeps Llama 4's
    attention, dense MLP layers and shared expert whole (modeling_llama.py @ 3a5901cd,
    overridden_tp_size=1), which leaves Maverick half the KV room of TP 8."""
    measured = 9677  # Maverick H100 TP8 1000/1000
    tp_fp8 = _throughput("llama-4-maverick", "h100-sxm", 8, 1000, 1000,
                         attention_parallel="tensor", kv="fp8")
    dp_bf16 = _throughput("llama-4-maverick", "h100-sxm", 8, 1000, 1000)
    assert tp_fp8 / measured > 2.0
    assert dp_bf16 == pytest.approx(measured, rel=0.15)


def test_deepseek_v3_pretraining_gpu_hours_within_15_percent():
    """DeepSeek-V3 pre-training: 14.8T tokens on 2,048 H800s in FP8, 2,664K GPU-hours
    (arXiv 2412.19437 Table 1; 8 x 400G InfiniBand per node, §3.1), on the H800 itself (NVLink
    400 GB/s, data/gpus.json) with the recipe's FP8 activation cache. Held out; the fastest
    plan (TP 2 × PP 16 × DP 64, EP 4) lands ~7 % low (2,469K; balanced routing). The planner
    also weighs EP across nodes (docs/sizing.md §1.12) and keeps EP inside the node: with the
    all-to-all over InfiniBand not overlapped (no DualPipe), its best cross-node plan (TP 2 ×
    PP 32 × DP 32, EP 32) takes 4,089K, and DeepSeek's own layout (TP 1 × PP 16 × DP 128)
    fits here only with full recompute, even at EP 128. Before the H800 row the H100 stood in
    and came out 23 % low: its NVLink is 900 GB/s."""
    res = size_workload(SizingRequest(
        model="deepseek-v3", workload="pretrain", precision="fp8", gpu="h800",
        count=2048, seq_len=4096, global_batch_tokens=15360 * 4096, tokens=14.8e12,
        cluster_gbps=3200.0))
    assert res.fits and res.mfu_source == "modeled"
    assert res.gpu_hours == pytest.approx(2_664_000, rel=0.15)
    assert res.gpu_hours < 2_664_000  # the known direction
    assert (res.tensor_parallel, res.pipeline_parallel, res.data_parallel,
            res.expert_parallel) == (2, 16, 64, 4)


def test_fp8_training_caches_activations_as_the_deepseek_recipe_keeps_them():
    """arXiv 2412.19437 §3.3.3: Linear inputs in FP8 (1×128 tiles, one FP32 scale each), the
    input of the Linear after attention in E5M6, the SwiGLU inputs in FP8 with its output
    recomputed; norms and attention's own inputs (Q, K, V) stay 16-bit. By hand for
    DeepSeek-V3 (h 7,168; 128 heads × 192; top-8 of 2,048-wide experts + one shared: I =
    18,432 per token)."""
    from tracker.sizing.memory import activation_bytes_per_token_layer

    model = resolve_model("deepseek-v3")
    h, qd, kvd, inter = 7168, 128 * 192, 128 * 192, 18432
    assert (model.hidden, model.heads * model.head_dim, model.kv_heads * model.head_dim,
            model.mlp_intermediate_per_token) == (h, qd, kvd, inter)
    fp8, e5m6 = 1 + 4 / 128, 1.5 + 4 / 128
    bf16_none = 2 * (4 * h + 2 * qd + 2 * kvd + 3 * inter)
    fp8_none = 2 * (2 * h + qd + 2 * kvd) + e5m6 * qd + fp8 * (2 * h + 2 * inter)
    fp8_selective = fp8_none - fp8 * 2 * h
    assert activation_bytes_per_token_layer(model, 4096, "flash", "none") == bf16_none
    assert activation_bytes_per_token_layer(model, 4096, "flash", "none", fp8_cache=True) == \
        pytest.approx(fp8_none, rel=1e-12)
    assert activation_bytes_per_token_layer(model, 4096, "flash", "selective",
                                            fp8_cache=True) == pytest.approx(fp8_selective,
                                                                             rel=1e-12)
    assert fp8_none / bf16_none == pytest.approx(0.731, abs=0.001)
    fields = dict(model="deepseek-v3", workload="pretrain", gpu="h800", seq_len=4096,
                  sharding="zero1", recompute="none", micro_batch=1, tensor_parallel=2,
                  pipeline_parallel=16, count=2048)
    fp8_run = size_workload(SizingRequest(precision="fp8", **fields))
    bf16_run = size_workload(SizingRequest(precision="bf16", **fields))
    assert fp8_run.per_gpu["activations"] < 0.8 * bf16_run.per_gpu["activations"]
    lora = [size_workload(SizingRequest(model="llama-3.1-8b", workload="lora", precision=p,
                                        seq_len=4096)).activations_bytes
            for p in ("fp8", "bf16")]
    assert lora[0] == lora[1]  # adapters on a frozen base keep 16-bit activations


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
    return memory_job(preparation(prepare_key(req)), float("inf"))


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
    prep = preparation(prepare_key(req))
    nbytes, count = _all_to_all(prep, 2, 16, 64, prep.micro_tokens)
    # EP 4 at TP 2: 4 all-to-alls per MoE layer; 58 MoE layers of 61 over 16 stages -> 4.
    assert count == 4 * 4
    per = prep.micro_tokens / 2 * 8 * 7168 * 2 * 3 / 4
    assert nbytes == pytest.approx(per * count)
    assert _all_to_all(prep, 2, 16, 1, prep.micro_tokens) == (0.0, 0)


def test_an_nvl72_rack_lets_training_ep_span_its_72_gpu_nvlink_domain():
    """On HGX boards TP × EP stays inside 8 GPUs; on a GB200 NVL72 rack the NVLink domain is
    72 GPUs (data/gpus.json), so DeepSeek-V3 at TP 1 × PP 16 × DP 64 takes EP 64, whose
    all-to-all runs at the rack's NVLink bandwidth, not the cluster network
    (docs/sizing.md §1.12). By hand: per MoE layer of a 4-layer stage (58 MoE of 61 layers
    over 16 stages), 4 all-to-alls of a GPU's 4,096 tokens × 8 × 7,168 × 2 bytes × 63/64."""
    from tracker.sizing.prepare import ep_domain
    from tracker.sizing.timing import _all_to_all

    fields = dict(model="deepseek-v3", workload="pretrain", precision="fp8", count=1024,
                  tensor_parallel=1, pipeline_parallel=16, sharding="zero1", recompute="none",
                  micro_batch=1, seq_len=4096)
    rack = size_workload(SizingRequest(gpu="gb200", **fields))
    board = size_workload(SizingRequest(gpu="b200", **fields))
    assert rack.fits and (rack.data_parallel, rack.expert_parallel) == (64, 64)
    assert board.expert_parallel == 8
    assert rack.per_gpu["weights"] < board.per_gpu["weights"]  # 1/64 of the experts, not 1/8
    req = SizingRequest(gpu="gb200", **fields)
    assert ep_domain(req) == 72 and ep_domain(SizingRequest(gpu="b200", **fields)) == 8
    assert ep_domain(SizingRequest(gpu="b200", scale_up_domain=72, **fields)) == 72
    prep = preparation(prepare_key(req))
    nbytes, count = _all_to_all(prep, 1, 16, 64, prep.micro_tokens)
    assert count == 4 * 4
    assert nbytes == pytest.approx(4096 * 8 * 7168 * 2 * 63 / 64 * count, rel=1e-12)
    links = rack.to_json()["links"]
    assert (links["scale_up_domain"], links["node_link_gbps"]) == (72, 900.0)


# DeepSeek-V3/R1 (MLA, 256 experts, top 8). No share is fitted on them; one figure is: the
# fixed kernel cost per MLA + MoE layer (data/serving.json engine.mla_moe_layer_overhead_us,
# 112 us), fitted on TensorRT-LLM tech blog 1's batch-1 decode without MTP (111 tok/s per user
# on 8 x B200, test_kernel_floor_reproduces_the_batch_1_row_it_was_fitted_on); every row below
# is held out. The steps of the physics, model / measured:
#   MLA absorb + attention at the KV cache's precision: +62 / +86 / +114 % (TensorRT-LLM rows),
#     +31 ... +69 % (SGLang) -> +49 / +42 / +80 %, +30 ... +69 %;
#   the NVFP4 export's BF16 attention and MLA decode attention in BF16: B200 +15 / +20 %;
#   block-scaled FP8 experts read at DeepGEMM's grouped-GEMM speed (Hopper, 0.917 of the
#     dense GEMMs'): H200 +44 %, SGLang +59 / +31 / +26 / +22 %;
#   the kernel floor (now): H200 +29 %, B200 +5 / +15 %, SGLang -12 / -13 / -5 / -1 %.
# What is left on H200 TensorRT-LLM (+29 %) is not in the published physics checked
# (docs/serving.md "Expert parallelism").
TRT_R1 = ("TensorRT-LLM docs/source/blogs/Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md "
          "@ 01c4ece9 (trtllm-bench throughput, synthetic 1,024 in / 2,048 out, no MTP, "
          "enable_attention_dp, --tp 8 --ep 8)")
INFERENCEX_R1 = ("SemiAnalysisAI/InferenceX issue #870 (2026-03-05 sweep: DeepSeek-R1-0528 FP8, "
                 "SGLang v0.5.7, TP 8, EP 1, H200, 1,024 in / 1,024 out; output tok/s per GPU "
                 "x 8)")
# (id, gpu, weights, KV, layout, prompt, output, concurrency, measured output tok/s,
#  (low, high) model/measured, source)
DEEPSEEK = [
    # H200 max-throughput: --max_batch_size 128 per rank, --concurrency 1024, BF16 KV (the
    # FP8 checkpoint's default); 11,489.27 output tok/s. 1.49x before the block-FP8 expert
    # reads and the kernel floor, 1.44x with the first, 1.30x with both.
    ("r1-h200-trt-dp8-c1024", "h200", "fp8", "bf16", "data", 1024, 2048, 1024, 11489.27,
     (1.15, 1.45), TRT_R1),
    # B200 max-throughput of nvidia/DeepSeek-R1-FP4 with FP16 KV: --concurrency 3072;
    # 36,384.08 output tok/s. 1.42x before attention's BF16 weights, 1.15x with them, 1.05x
    # with the kernel floor.
    ("r1-b200-trt-dp8-fp16kv-c3072", "b200", "fp4", "bf16", "data", 1024, 2048, 3072,
     36384.08, (0.9, 1.2), TRT_R1),
    # B200 of nvidia/DeepSeek-R1-0528-FP4 with FP8 KV (and FP8 attention): --concurrency
    # 7168; 43,146.20 output tok/s. 1.80x before, 1.37x with the BF16 attention weights,
    # 1.20x with the absorbed decode attention in BF16, 1.15x with the kernel floor.
    ("r1-b200-trt-dp8-fp8kv-c7168", "b200", "fp4", "fp8", "data", 1024, 2048, 7168,
     43146.20, (1.0, 1.3), TRT_R1),
    # SGLang's tensor-parallel layout at fixed concurrency (mean TPOT 12.8 / 17.2 / 25.6 /
    # 34.6 ms): 74.6, 111.9, 151.1 and 223.6 output tok/s per GPU. 1.69 / 1.40 / 1.35 / 1.30x
    # before, 0.88 / 0.87 / 0.95 / 0.99x now: the measured TPOT exceeded the model's by a
    # near-constant 4.5 to 7 ms, the kernel floor's 6.8 ms a step.
    ("r1-h200-sglang-tp8-c8", "h200", "fp8", "bf16", "tensor", 1024, 1024, 8, 74.6 * 8,
     (0.75, 1.0), INFERENCEX_R1),
    ("r1-h200-sglang-tp8-c16", "h200", "fp8", "bf16", "tensor", 1024, 1024, 16, 111.9 * 8,
     (0.75, 1.0), INFERENCEX_R1),
    ("r1-h200-sglang-tp8-c32", "h200", "fp8", "bf16", "tensor", 1024, 1024, 32, 151.1 * 8,
     (0.8, 1.1), INFERENCEX_R1),
    ("r1-h200-sglang-tp8-c64", "h200", "fp8", "bf16", "tensor", 1024, 1024, 64, 223.6 * 8,
     (0.85, 1.15), INFERENCEX_R1),
]


@pytest.mark.parametrize("case", DEEPSEEK, ids=[c[0] for c in DEEPSEEK])
def test_deepseek_r1_rows_held_out(case):
    _id, gpu, weights, kv, layout, prompt, output, concurrency, measured, (low, high), \
        source = case
    result = serve(SizingRequest(model="deepseek-r1", gpu=gpu, count=8, tensor_parallel=8,
                                 precision=weights, kv_precision=kv),
                   ServingSpec(prompt_tokens=prompt, output_tokens=output,
                               concurrency=concurrency, attention_parallel=layout))
    assert result.calibration.calibrated
    assert result.point.concurrency == concurrency
    assert (result.chosen.attention_data_parallel, result.chosen.tensor_parallel) == (
        (8, 1) if layout == "data" else (1, 8))
    ratio = result.output_tokens_per_s / measured
    assert low <= ratio <= high, f"{source}: {_id}: {ratio:.2f}x"


def test_kernel_floor_reproduces_the_batch_1_row_it_was_fitted_on():
    """The one fitted figure: NVIDIA/TensorRT-LLM docs/source/blogs/tech_blog/blog1_Pushing_
    Latency_Boundaries_Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md @ 01c4ece9,
    "Autoregressive MTP Layers" table: DeepSeek-R1 "Without MTP" 111 TPS/user on 8 x B200
    (attention TP 8 in BF16, NVFP4 experts, 1K/2K). The bytes take 2.17 ms a token; the
    measured 9.01 ms leaves 6.84 ms over 61 layers, 112 us each (a dozen small kernels per
    layer, its "Everything in One Diagram")."""
    from tracker.sizing.serving_step import mla_moe_layer_overhead_s

    assert mla_moe_layer_overhead_s() == pytest.approx(112e-6)
    result = serve(SizingRequest(model="deepseek-r1", gpu="b200", count=8, tensor_parallel=8,
                                 precision="fp4", kv_precision="bf16"),
                   ServingSpec(prompt_tokens=1024, output_tokens=2048, concurrency=1,
                               attention_parallel="tensor"))
    assert result.point.step.overhead == pytest.approx(61 * 112e-6, rel=1e-12)
    assert 1.0 / result.point.tpot_s == pytest.approx(111, rel=0.01)


def test_kernel_floor_only_for_mla_moe_models():
    """Dense and GQA MoE models' calibrated rows carry no floor: their few large GEMMs per
    layer are what the fitted shares measure (tests/sizing/test_serving_classes.py)."""
    from tracker.sizing.replica import layer_overhead_seconds

    assert layer_overhead_seconds(resolve_model("kimi-k2")) == pytest.approx(61 * 112e-6)
    for model in ("llama-3.3-70b", "qwen3-235b-a22b", "llama-4-maverick", "gpt-oss-120b"):
        assert layer_overhead_seconds(resolve_model(model)) == 0.0


def test_block_fp8_experts_read_at_deepgemm_grouped_gemm_speed_on_hopper():
    """deepseek-ai/DeepGEMM README as first published (H800): its masked grouped GEMM reads
    the DeepSeek-V3 expert shapes at 2,064 and 2,047 GB/s, its 12 dense decode shapes (M 64
    and 128) at a mean 2,242 GB/s: 0.917. Only experts shipped and served in block-scaled FP8
    (DeepSeek's weight_block_size 128 x 128), only on Hopper, where it was measured. By hand:
    the step's memory term reads the routed experts' bytes at 0.917 of the other bytes' speed."""
    from tracker.sizing.replica import block_fp8_experts
    from tracker.sizing.serving_step import calibration_for

    dense = [1688, 2455, 2143, 2668, 2320, 2470, 1509, 2448, 2103, 2604, 2221, 2277]
    ratio = (2064 + 2047) / 2 / (sum(dense) / len(dense))
    assert calibration_for("h200", "h200").block_fp8_expert_read == pytest.approx(ratio,
                                                                                  abs=5e-4)
    assert calibration_for("b200", "b200").block_fp8_expert_read == 1.0
    r1 = resolve_model("deepseek-r1")
    assert block_fp8_experts(r1, "fp8") and not block_fp8_experts(r1, "fp4")
    assert not block_fp8_experts(resolve_model("qwen3-235b-a22b"), "fp8")
    assert not block_fp8_experts(resolve_model("llama-4-maverick"), "fp8")
    # by hand, one GPU: 100 GB of weights, 80 % in experts that every token touches (k = E)
    from tracker.sizing.serving_step import Hardware, Shape, operating_point

    cal = calibration_for("h200", "h200")
    hw = Hardware("h200", 141e9, 989e12, 4.8e12, 450e9, cal)
    memory = {}
    for flag in (False, True):
        shape = Shape(1e9, 2, 1024, 1024, 100e9, 0.8, 8, 8, 0.0, 1, 1,
                      block_fp8_experts=flag)
        memory[flag] = operating_point(shape, 1, 1, hw).step.memory
    assert memory[False] == pytest.approx(100e9 / (4.8e12 * 0.7), rel=1e-12)
    assert memory[True] == pytest.approx((20e9 + 80e9 / cal.block_fp8_expert_read)
                                         / (4.8e12 * 0.7), rel=1e-12)


def test_mla_decodes_weights_absorbed():
    """DeepSeek-V3's decode attention by hand: 128 heads score each cached token over the
    576-wide latent (512 + 64 rope) and sum 512-wide latent values: 2 x 128 x (576 + 512) =
    278,528 FLOPs per cached token and layer, 4 x 69,632; the non-absorbed width the prompts
    use is 128 x 192 = 24,576 (arXiv 2405.04434 §2.1.2; TensorRT-LLM tech blog 3)."""
    from tracker.sizing.replica import dp_shape_for, shape_for
    from tracker.sizing.serving_step import mla_decode_width

    assert 4 * mla_decode_width(128, 512, 64) == 2 * 128 * (576 + 512) == 278_528
    prep = preparation(prepare_key(SizingRequest(model="deepseek-v3", workload="inference",
                                                 precision="fp8")))
    for shape in (shape_for(prep, 8, 1000, 1000, 0.9), dp_shape_for(prep, 1000, 1000, 0.9)):
        assert (shape.attn_width, shape.decode_attn_width) == (24_576, 69_632)
    dense = preparation(prepare_key(SizingRequest(model="qwen3-235b-a22b",
                                                  workload="inference", precision="fp8")))
    assert shape_for(dense, 8, 1000, 1000, 0.9).decode_attn_width == 0.0  # GQA: attn_width


def test_attention_runs_at_the_kv_cache_precision():
    """FP4 weights with FP8 KV attend at the FP8 peak, with BF16 KV at the BF16 peak
    (TensorRT-LLM tech blog 3: FP8 KV cache and FP8 attention, or BF16 for both); FP8 KV on a
    GPU without FP8 tensor cores attends in 16 bits."""
    from tracker.sizing.prepare import gpu_info
    from tracker.sizing.replica import hardware_for

    b200, a100 = gpu_info("b200"), gpu_info("a100-80gb")
    assert b200.fp4_flops > b200.fp8_flops > b200.bf16_flops
    for weights, kv, peak in (("fp4", "fp8", b200.fp8_flops), ("fp4", "bf16", b200.bf16_flops),
                              ("fp8", "auto", b200.bf16_flops), ("fp8", "fp8", b200.fp8_flops)):
        hw = hardware_for(b200, weights, None, kv)[0]
        assert hw.attention_flops == peak, (weights, kv)
    assert hardware_for(b200, "fp4", None, "fp8")[0].peak_flops == b200.fp4_flops
    assert hardware_for(a100, "fp8", None, "fp8")[0].attention_flops == a100.bf16_flops
    # The held-out row it moved most: Llama 3.3 70B FP4 TP1 32,768/1,024 on B200, 274 output
    # tok/s (data/serving-measurements.json), 1.18x before, 1.04x now
    result = serve(SizingRequest(model="llama-3.1-70b", gpu="b200", count=1,
                                 tensor_parallel=1, precision="fp4", kv_precision="fp8"),
                   ServingSpec(prompt_tokens=32768, output_tokens=1024))
    assert 1.0 <= result.output_tokens_per_s / 274 <= 1.08
def test_deepseek_nvfp4_export_keeps_attention_in_bf16():
    """ModelOpt's DeepSeek NVFP4 recipe leaves `*attn*` unquantised and writes it as BF16
    (TensorRT-Model-Optimizer examples/deepseek/ptq.py @ 1030a221, quantize_to_nvfp4.py
    @ 1ef1d72a). By hand, one MLA layer of DeepSeek-R1: q_a 7,168 x 1,536 + its norm 1,536 +
    q_b 1,536 x 128 x 192 + kv_a 7,168 x 576 + its norm 512 + kv_b 512 x 128 x 256 + o
    128 x 128 x 7,168 = 187,107,328; 61 layers, 11.41 B parameters at 2 bytes, not 0.5625:
    +16.4 GB, ~397 GB in all ("about 400 GB", TensorRT-LLM tech blog 3), and ~72 GB of weights
    per GPU under attention DP 8 (the blog: "about 80 GB" of weights and activations; 56 GB
    with attention in FP4). GQA models' exports (Llama 3.3 70B, Qwen3) and DeepSeek's own
    FP8 checkpoint keep none."""
    from tracker.sizing.replica import expert_bytes_share

    model = resolve_model("deepseek-r1")
    per_layer = (7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256
                 + 128 * 128 * 7168)
    assert model.attn_params == per_layer == 187_107_328
    assert model.sixteen_bit_params("fp4") == 61 * per_layer
    assert model.sixteen_bit_params("fp8") == 0.0
    for other in ("qwen3-235b-a22b", "llama-3.1-70b", "llama-4-maverick"):
        assert resolve_model(other).sixteen_bit_params("fp4") == 0.0
    prep = preparation(prepare_key(SizingRequest(model="deepseek-r1", workload="inference",
                                                 precision="fp4")))
    extra = 61 * per_layer * (2.0 - 4.5 / 8.0)
    # What `size` reports is what serving reads: the weights as the checkpoint stores them.
    assert prep.weights == pytest.approx(396.7e9, rel=1e-3)
    as_fp4 = (model.linear_params * 4.5 / 8 + (model.params - model.linear_params) * 2.0)
    assert prep.weights == pytest.approx(as_fp4 + extra, rel=1e-12)
    sized = size_workload(SizingRequest(model="deepseek-r1", workload="inference",
                                        precision="fp4"))
    assert sized.weights_bytes == pytest.approx(prep.weights, rel=1e-12)
    share = expert_bytes_share(model, "fp4")
    routed = as_fp4 * model.routed_params / model.params  # the experts' bytes, unchanged
    assert share * prep.weights == pytest.approx(routed, rel=1e-12)
    per_gpu = prep.weights * ((1.0 - share) + share / 8)
    assert 70e9 < per_gpu < 75e9


def test_fp8_kv_gain_at_equal_concurrency_matches_tensorrt_llm_ablation():
    """Held out: TensorRT-LLM tech blog 3 (@ 02643c1f, DeepSeek-R1 FP4 on 8 x B200, 1K/2K max
    throughput) measured FP8 KV cache + FP8 attention at "6% E2E throughput increase when
    assuming the concurrency was identical". MLA's absorbed decode attention multiplies in BF16
    whatever the cache's dtype (FlashMLA's FP8-KV kernel dequantises into BF16 matmuls, 410
    TFLOPS on H800 and up to 350 on B200, deepseek-ai/FlashMLA README @ 066b5ba6), so FP8 KV
    saves the KV bytes only: +8 % here; with decode attention at the FP8 peak it was +22 %."""
    out = {kv: _throughput("deepseek-r1", "b200", 8, 1024, 2048, kv=kv, precision="fp4",
                           concurrency=3072) for kv in ("bf16", "fp8")}
    assert 1.03 <= out["fp8"] / out["bf16"] <= 1.12


def test_mla_decode_attention_runs_at_the_bf16_peak():
    """The absorbed decode attention's FLOPs take the time of the BF16 peak with an FP8 KV
    cache (the prompts' attention keeps the cache's precision): DeepSeek-V3 FP8 on H200 with
    FP8 KV, 1,000 sequences of 2,000 cached tokens, by hand."""
    from tracker.sizing.prepare import gpu_info
    from tracker.sizing.replica import dp_shape_for, hardware_for
    from tracker.sizing.serving_step import _compute_terms

    h200 = gpu_info("h200")
    hw = hardware_for(h200, "fp8", None, "fp8")[0]
    assert hw.attention_flops == h200.fp8_flops and hw.bf16_flops == h200.bf16_flops
    prep = preparation(prepare_key(SizingRequest(model="deepseek-v3", workload="inference",
                                                 precision="fp8")))
    shape = dp_shape_for(prep, 1000, 2000, 0.9)
    decode, _ = _compute_terms(shape, 8, 1000, 2000.0, hw)
    peak, share = hw.peak_flops, hw.calibration.decode_compute_share
    dense = 1000 * 2.0 * shape.active_params / 8 / (peak * share)
    attention = 1000 * 2000.0 * 4 * 61 * 69_632 / 8 / (h200.bf16_flops * share)
    assert decode == pytest.approx(dense + attention, rel=1e-12)


def test_training_ep_spans_nodes_over_the_cluster_network_when_faster():
    """GLM-4.5 (160 experts) pre-training on the fewest H100s (80) with 3.2 Tb/s per node:
    EP 4 at TP 4 spans two 8-GPU nodes (its all-to-all's cross-node part on the NICs), which
    splits the experts enough for ZeRO-2 at PP 5; with EP held inside the node (EP 1 at TP 4
    × DP 5) only ZeRO-3 fits, ~2.8× slower (docs/sizing.md §1.12)."""
    from tracker.sizing.search import _size_searched

    req = SizingRequest(model="glm-4.5", workload="pretrain", precision="bf16", gpu="h100",
                        seq_len=4096, tokens=1e12, cluster_gbps=3200.0)
    res = size_workload(req)
    out = res.to_json()
    assert (res.gpus_needed, res.tensor_parallel, res.pipeline_parallel, res.data_parallel,
            res.expert_parallel, res.sharding) == (80, 4, 5, 4, 4, "zero2")
    assert out["expert_parallel"] * out["tensor_parallel"] > out["links"]["gpus_per_node"]
    assert out["links"]["cluster_gbps"] == 3200.0
    inside = _size_searched(req)
    assert inside is not None
    node = inside[0]
    assert (node.tensor_parallel, node.pipeline_parallel, node.data_parallel,
            node.expert_parallel, node.sharding) == (4, 4, 5, 1, "zero3")
    assert res.gpu_hours < node.gpu_hours / 2.5


def test_cross_node_all_to_all_time_by_hand_with_node_limited_routing():
    """DeepSeek-V3 at TP 1 × PP 16 × DP 128 on H800 with EP across nodes: EP 128 over 16
    nodes. Per micro-batch (4,096 tokens, 4 MoE layers per stage, 4 all-to-alls each): every
    copy crosses NVLink (4,096 × 8 × 7,168 × 2 × 127/128 bytes at the all-gather busbw), and
    each token crosses the NICs once per other node it reaches: top-8 from 4 of 8 groups,
    a group per 2 nodes here, so min(8, 16, 4/8 × 16) = 8 nodes, 15/16 of them remote, at a
    GPU's share of 3,200 Gb/s per node (node-limited routing, arXiv 2412.19437 §2.1.2)."""
    from tracker.sizing.timing import _step_parts_of, plan_links

    model = resolve_model("deepseek-v3")
    assert (model.routing_groups, model.groups_per_token) == (8, 4)
    req = SizingRequest(model="deepseek-v3", workload="pretrain", precision="fp8", gpu="h800",
                        count=2048, sharding="zero1", recompute="none", micro_batch=1,
                        seq_len=4096, cluster_gbps=3200.0, ep_across_nodes=True)
    prep = preparation(prepare_key(req))
    assert training_expert_parallel(256, 1, 128, prep.ep_domain) == 128
    links = plan_links(req)
    assert links.gpus_per_node == 8 and links.node_net_bw == 400e9
    parts = _step_parts_of(prep, 1, 16, 128, 1, 15360 * 4096, 1e15, 0.3, links)
    nvlink = 4096 * 8 * 7168 * 2 * 127 / 128 / (links.node_link_bw * links.gather_ratio)
    network = 4096 * 7168 * 2 * 8 * 15 / 16 / (400e9 * links.net_ratio / 8)
    assert parts[2] == pytest.approx(16 * (nvlink + network), rel=1e-12)  # TP 1: only EP
    held = preparation(prepare_key(SizingRequest(
        model="deepseek-v3", workload="pretrain", precision="fp8", gpu="h800", count=2048,
        sharding="zero1", recompute="none", micro_batch=1, seq_len=4096, cluster_gbps=3200.0)))
    assert training_expert_parallel(256, 1, 128, held.ep_domain) == 8  # inside the node
    nvlink8 = 4096 * 8 * 7168 * 2 * 7 / 8 / (links.node_link_bw * links.gather_ratio)
    assert _step_parts_of(held, 1, 16, 128, 1, 15360 * 4096, 1e15, 0.3, links)[2] == \
        pytest.approx(16 * nvlink8, rel=1e-12)
