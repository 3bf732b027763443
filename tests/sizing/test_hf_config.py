"""Models from their Hugging Face config.json: the bundled presets against their model cards,
KV bytes per token by hand, the reader's one-line errors, and MoE invariants."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.cli.main import cli
from tracker.core.errors import InvalidInput
from tracker.sizing import SizingRequest, resolve_model, size_workload
from tracker.sizing.hf_config import SUPPORTED, load_model_config, spec_from_config
from tracker.sizing.memory import kv_bytes_per_token, kv_cache_bytes, weights_bytes
from tracker.sizing.serving_step import experts_touched

# (total, active, what the card's active figure leaves out, source). Totals are the
# language model's: "text" marks a card whose total includes a vision tower we do not count.
# The active convention differs by vendor: DeepSeek and OpenAI leave out the input embedding
# (a lookup, no FLOPs), Zhipu both embedding matrices; ours counts both, so the test takes
# them off as the card does.
CARDS = {
    # DeepSeek's README_WEIGHTS.md: 671B main model; 36.6B activated incl. the 0.9B head.
    "deepseek-v3": (671e9, 36.6e9, "input-embedding"),
    "deepseek-r1": (671e9, 36.6e9, "input-embedding"),
    # Kimi K2: the checkpoint's 1,026,470,731,056 tensor elements (the card rounds to 1T);
    # "32B activated" (arXiv 2507.20534), the input embedding left out.
    "kimi-k2": (1026.47e9, 32e9, "input-embedding"),
    # Qwen3 cards and arXiv 2505.09388: 235B / 22B, 30.5B / 3.3B, 32.8B.
    "qwen3-235b-a22b": (235e9, 22e9, "none"),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, "none"),
    "qwen3-32b": (32.8e9, 32.8e9, "none"),
    # gpt-oss model card (arXiv 2508.10925) Table 1: 116.83B / 5.13B, 20.91B / 3.61B active,
    # "active parameters per token" without the embedding.
    "gpt-oss-120b": (116.83e9, 5.13e9, "input-embedding"),
    "gpt-oss-20b": (20.91e9, 3.61e9, "input-embedding"),
    # Llama 4 cards: 17B active; 109B / 400B total with the vision encoder (~0.8B, not counted).
    "llama-4-scout": (109e9 - 0.85e9, 17e9, "none"),
    "llama-4-maverick": (400e9, 17e9, "none"),
    "llama-3.3-70b": (70.6e9, 70.6e9, "none"),
    # Gemma 3 report Table 1: 1,416M embedding + 25,600M non-embedding (vision 417M apart).
    "gemma-3-27b": (27.016e9, 27.016e9, "none"),
    # GLM-4.5 report: 355B total (the MTP layer included) / 32B active without embeddings.
    "glm-4.5": (355e9, 32e9, "embeddings"),
}
# A card's figure is rounded: it matches within 1% or half a unit of its last digit (the
# Qwen3-30B-A3B card truncates: 3.353B activated is printed 3.3B, so a whole unit there).
ROUNDING = {"qwen3-30b-a3b": 0.1e9, "llama-4-scout": 0.5e9, "llama-4-maverick": 0.5e9,
            "deepseek-v3": 0.05e9, "deepseek-r1": 0.05e9, "kimi-k2": 0.5e9,
            "qwen3-235b-a22b": 0.5e9, "glm-4.5": 0.5e9}


def _close(ours: float, card: float, model: str) -> bool:
    return abs(ours - card) <= max(0.01 * card, ROUNDING.get(model, 0.0))


@pytest.mark.parametrize("model", sorted(CARDS))
def test_bundled_parameter_counts_match_their_cards(model):
    spec = resolve_model(model)
    total, active, leaves_out = CARDS[model]
    embedding = spec.vocab * spec.hidden
    ours_active = spec.active_params - {"none": 0, "input-embedding": embedding,
                                        "embeddings": spec.embedding_params}[leaves_out]
    assert _close(spec.params, total, model), (spec.params, total)
    assert _close(ours_active, active, model), (ours_active, active)
    assert spec.active_params <= spec.params


def test_models_json_rows_carry_the_contract_keys():
    result = CliRunner().invoke(cli, ["models", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["id"]: row for row in json.loads(result.output)}
    assert set(CARDS) <= set(rows)
    for row in rows.values():
        for key in ("id", "params", "active_params", "experts", "experts_per_token",
                    "attention", "kv_cache_bytes_per_token_bf16", "source"):
            assert key in row
    ds = rows["deepseek-v3"]
    assert (ds["attention"], ds["experts"], ds["experts_per_token"]) == ("mla", 256, 8)
    assert ds["kv_cache_bytes_per_token_bf16"] == 70_272
    assert ds["source"] == "data/model-configs/deepseek-v3.json"
    assert rows["gpt-oss-120b"]["attention"] == "sliding+full"
    assert rows["qwen3-235b-a22b"]["attention"] == "gqa"


def test_kv_bytes_per_token_by_hand():
    # MLA: (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 bytes.
    assert kv_bytes_per_token(resolve_model("deepseek-v3"), 2.0) == 576 * 61 * 2
    # GQA: 2 (K, V) x 94 layers x 4 KV heads x 128 x 2 bytes.
    assert kv_bytes_per_token(resolve_model("qwen3-235b-a22b"), 2.0) == 2 * 94 * 4 * 128 * 2
    # Sliding + full (gpt-oss-120b): 36 layers of 2 x 8 x 64 elements; 18 of them hold at
    # most the 128-token window. 10,000 tokens: 18 x 10,000 + 18 x 128 layer-tokens.
    oss = resolve_model("gpt-oss-120b")
    assert kv_bytes_per_token(oss, 2.0) == 36 * 2 * 8 * 64 * 2
    assert kv_cache_bytes(oss, 2.0, 10_000, 1) == 2 * 8 * 64 * 2 * (18 * 10_000 + 18 * 128)
    # Gemma 3 27B: 62 layers, 52 local (window 1024), 10 global; 16 KV heads of 128.
    gemma = resolve_model("gemma-3-27b")
    assert (gemma.sliding_layers, gemma.sliding_window) == (52, 1024)
    assert kv_cache_bytes(gemma, 2.0, 4096, 1) == 2 * 16 * 128 * 2 * (10 * 4096 + 52 * 1024)


def test_mla_kv_is_not_split_by_tensor_parallelism():
    """vLLM and SGLang keep MLA's latent whole on every TP rank."""
    res = size_workload(SizingRequest(model="deepseek-v3", precision="native", context=8192,
                                      gpu="h200", count=8, tensor_parallel=8,
                                      pipeline_parallel=1))
    assert res.per_gpu["kv_cache"] == pytest.approx(res.kv_cache_bytes, rel=1e-9)
    dense = size_workload(SizingRequest(model="llama-3.3-70b", context=8192, gpu="h100",
                                        count=8, tensor_parallel=8, pipeline_parallel=1))
    assert dense.per_gpu["kv_cache"] == pytest.approx(dense.kv_cache_bytes / 8, rel=1e-9)


def test_shipped_weights_bytes():
    # DeepSeek-V3 FP8 with one fp32 scale per 128x128 block; embeddings, norms, router bf16.
    ds = resolve_model("deepseek-v3")
    assert ds.quant_method == "fp8" and ds.quant_bits == 8 + 32 / 128**2
    expected = ds.linear_params * (8 + 32 / 128**2) / 8 + (ds.params - ds.linear_params) * 2
    assert weights_bytes(ds, "native") == pytest.approx(expected)
    assert weights_bytes(ds, "native") / 1e9 == pytest.approx(673.2, abs=0.5)
    # gpt-oss-120b: MXFP4 experts (4.25 bits), attention, router and embeddings in bf16:
    # ~65 GB, the card's "fits a single 80 GB GPU".
    oss = resolve_model("gpt-oss-120b")
    assert oss.quant_params == oss.routed_params
    assert weights_bytes(oss, "native") / 1e9 == pytest.approx(65.2, abs=0.3)
    # No quantization_config: native is the checkpoint's dtype (bf16).
    llama = resolve_model("llama-3.3-70b")
    assert weights_bytes(llama, "native") == weights_bytes(llama, "bf16")


def _write(tmp_path, body, name="config.json"):
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def test_model_config_file_or_directory_reads_like_the_preset(tmp_path):
    from tracker.core.data_files import read_json

    raw = read_json("model-configs/qwen3-30b-a3b.json")
    folder = tmp_path / "Qwen3-30B-A3B"
    folder.mkdir()
    _write(folder, raw)
    spec = load_model_config(str(folder))
    preset = resolve_model("qwen3-30b-a3b")
    assert (spec.params, spec.active_params) == (preset.params, preset.active_params)
    assert spec.id == "qwen3-30b-a3b"
    res = size_workload(SizingRequest(model_config=str(folder / "config.json"),
                                      gpu="h100", context=4096))
    assert res.active_params == round(preset.active_params)


def test_unknown_extra_keys_are_ignored():
    from tracker.core.data_files import read_json

    raw = {**read_json("model-configs/llama-3.3-70b.json"), "some_future_key": [1, 2]}
    assert spec_from_config(raw).params == resolve_model("llama-3.3-70b").params


@pytest.mark.parametrize(("body", "message"), [
    ('{"model_type": "llama", "hidden_size": 4096', "not valid JSON"),
    ("this is not json", "not valid JSON"),
    ({"model_type": "falcon_mamba", "hidden_size": 4096}, "unknown model_type 'falcon_mamba'"),
    ({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
      "intermediate_size": 11008, "vocab_size": 32000}, "lacks 'num_hidden_layers'"),
    ({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": -4096,
      "num_attention_heads": 32, "intermediate_size": 11008, "vocab_size": 32000},
     "hidden_size must be at least 1"),
    ({"model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100,
      "num_local_experts": 8, "num_experts_per_tok": 9},
     "experts_per_token must be between 1"),
    ([1, 2, 3], "a config.json is a JSON object"),
])
def test_bad_config_is_one_line_and_exit_2(tmp_path, body, message):
    path = _write(tmp_path, body)
    result = CliRunner().invoke(cli, ["size", "--model-config", str(path), "--gpu", "h100"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    with pytest.raises(InvalidInput, match=message.split("'")[0]):
        load_model_config(str(path))


def test_missing_config_file_is_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["size", "--model-config", str(tmp_path / "nope.json")])
    assert result.exit_code == 2 and "no such file" in result.output


def test_every_supported_model_type_reads_a_minimal_config():
    base = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
            "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000}
    moe = {"num_local_experts": 8, "num_experts": 8, "n_routed_experts": 8,
           "num_experts_per_tok": 2, "moe_intermediate_size": 128}
    mla = {"kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
           "v_head_dim": 32}
    for model_type in SUPPORTED:
        raw = {"model_type": model_type, **base, **moe, **mla}
        if model_type in ("gemma3", "llama4"):
            raw = {"model_type": model_type, "text_config": {**base, **moe}}
        spec = spec_from_config(raw)
        assert 0 < spec.active_params <= spec.params, model_type


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 64), hidden=st.sampled_from([256, 512, 1024]),
       experts=st.integers(2, 64), k=st.integers(1, 8), first_dense=st.integers(0, 4),
       shared=st.integers(0, 2), moe_width=st.sampled_from([64, 128, 384]))
def test_active_never_exceeds_total(layers, hidden, experts, k, first_dense, shared,
                                    moe_width):
    raw = {"model_type": "deepseek_v3", "num_hidden_layers": layers, "hidden_size": hidden,
           "num_attention_heads": 8, "intermediate_size": 4 * hidden, "vocab_size": 1000,
           "n_routed_experts": experts, "num_experts_per_tok": min(k, experts),
           "n_shared_experts": shared, "moe_intermediate_size": moe_width,
           "first_k_dense_replace": min(first_dense, layers), "kv_lora_rank": 64,
           "q_lora_rank": None, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
           "v_head_dim": 32}
    spec = spec_from_config(raw)
    assert spec.active_params <= spec.params
    assert spec.routed_params <= spec.params


@settings(max_examples=80, deadline=None)
@given(experts=st.integers(1, 512), k=st.integers(1, 16), tokens=st.integers(1, 10_000))
def test_decode_expert_reads_stay_between_k_and_all_experts(experts, k, tokens):
    k = min(k, experts)
    touched = experts_touched(experts, k, tokens)
    assert touched <= experts * (1 + 1e-12)
    assert touched >= k * (1 - 1e-12)
    assert touched >= experts_touched(experts, k, max(1, tokens - 1)) - 1e-9


def test_experts_touched_reference_values():
    # The occupancy formula's values worked by hand, E·(1 − (1 − k/E)^B):
    # Mixtral (8, top-2) B=8 -> 7.2; DeepSeek-V3 (256, top-8) B=32 -> ~163, B=128 -> ~252.
    assert experts_touched(8, 2, 8) == pytest.approx(7.2, abs=0.05)
    assert experts_touched(256, 8, 32) == pytest.approx(163, abs=1)
    assert experts_touched(256, 8, 1) == pytest.approx(8)
    assert math.isclose(experts_touched(256, 8, 128), 252, abs_tol=1)


def test_model_id_from_the_hugging_face_cache_layout(tmp_path):
    from tracker.core.data_files import read_json

    snapshot = tmp_path / "models--Qwen--Qwen3-32B" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    _write(snapshot, read_json("model-configs/qwen3-32b.json"))
    assert load_model_config(str(snapshot)).id == "qwen3-32b"


def test_report_workload_takes_model_config(tmp_path):
    from tracker.answers.workloads import Workload
    from tracker.core.data_files import read_json

    path = _write(tmp_path, read_json("model-configs/gpt-oss-20b.json"), "gpt-oss-20b.json")
    workload = Workload.parse({"name": "oss", "kind": "serve", "model_config": str(path),
                               "precision": "native", "max_tpot_ms": 50})
    assert workload.sizing["model_config"] == str(path)
    res = size_workload(SizingRequest(gpu="h100-sxm", **workload.sizing))
    assert res.model == "gpt-oss-20b" and res.precision == "mxfp4" and res.fits
    with pytest.raises(InvalidInput, match="workload bad"):
        Workload.parse({"name": "bad", "kind": "serve",
                        "model_config": str(tmp_path / "missing.json")})
