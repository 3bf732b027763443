"""Model presets: parameter counts computed from the architecture, and name resolution."""

from __future__ import annotations

import pytest

from tracker.core.errors import InvalidInput, NotFound
from tracker.sizing import model_presets, resolve_model
from tracker.sizing.architecture import build_model, rough_model
from tracker.sizing.models import parse_lora_targets

# docs/sizing.md §1.1: derived counts that match the published sizes to within rounding.
DERIVED_PARAMS = {
    "llama-2-7b": 6.738e9,
    "llama-3.1-8b": 8.030e9,
    "llama-3.1-70b": 70.554e9,
    "llama-3.1-405b": 405.85e9,
    "mistral-7b": 7.242e9,
    "mixtral-8x7b": 46.70e9,
    "qwen2.5-7b": 7.615e9,
    "qwen2.5-72b": 72.71e9,
    "gemma-2-9b": 9.24e9,
    "gemma-2-27b": 27.23e9,
    "llama-3.2-1b": 1.236e9,
    "llama-3.2-3b": 3.213e9,
    "llama-2-70b": 68.98e9,
}

REQUIRED = ("llama-2-7b", "llama-2-70b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
            "llama-3.2-1b", "llama-3.2-3b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b",
            "qwen2.5-72b", "gemma-2-9b", "gemma-2-27b")


def test_every_required_preset_is_bundled():
    ids = {m.id for m in model_presets()}
    assert set(REQUIRED) <= ids


@pytest.mark.parametrize(("model", "expected"), sorted(DERIVED_PARAMS.items()))
def test_parameter_count_matches_published_size(model, expected):
    assert resolve_model(model).params == pytest.approx(expected, rel=1e-3)


def test_llama2_7b_exact_count():
    # docs/sizing.md §2 case 1 uses P = 6,738,415,616.
    assert resolve_model("llama-2-7b").params == 6_738_415_616


def test_mixtral_active_parameters_use_top2_of_8_experts():
    mixtral = resolve_model("mixtral-8x7b")
    assert mixtral.active_params == pytest.approx(12.88e9, rel=1e-3)
    assert mixtral.is_moe and mixtral.experts == 8 and mixtral.experts_per_token == 2


def test_gemma2_honours_head_dim_not_hidden_over_heads():
    gemma = resolve_model("gemma-2-9b")
    assert gemma.head_dim == 256
    assert gemma.heads * gemma.head_dim != gemma.hidden  # 4096 vs 3584


def test_qwen_biases_are_counted():
    with_bias = resolve_model("qwen2.5-7b")
    no_bias = build_model(id="x", layers=28, hidden=3584, heads=28, kv_heads=4, head_dim=128,
                          intermediate=18944, vocab=152064)
    # q/k/v biases: 28 layers × (3584 + 2·512)
    assert with_bias.params - no_bias.params == 28 * (3584 + 2 * 512)


@pytest.mark.parametrize("name", ["llama-3.1-70b", "Llama-3.1-70B", "meta-llama/Llama-3.1-70B",
                                  "meta-llama/Meta-Llama-3.1-70B", "LLAMA 3.1 70B",
                                  "meta-llama/Meta-Llama-3.1-70B-Instruct"])
def test_model_names_resolve_case_insensitively_with_aliases(name):
    assert resolve_model(name).id == "llama-3.1-70b"


def test_unknown_model_names_the_closest_presets():
    with pytest.raises(NotFound) as err:
        resolve_model("llama-3.1-7b")
    message = str(err.value)
    assert "llama-3.1-" in message and "closest presets" in message
    assert "\n" not in message


def test_lora_params_all_linear_llama2_7b_rank_64():
    # docs/sizing.md §1.8: 64·(4·8192 + 3·15104)·32 = 159.9 M
    targets = parse_lora_targets("all-linear")
    assert resolve_model("llama-2-7b").lora_params(64, targets) == 159_907_840


def test_lora_targets_parse_names_and_groups():
    assert parse_lora_targets("q_proj,v_proj") == ("q", "v")
    assert parse_lora_targets("attention") == ("q", "k", "v", "o")
    with pytest.raises(InvalidInput):
        parse_lora_targets("lm_head")


def test_rough_model_keeps_the_given_parameter_count_and_grows_smoothly():
    small, large = rough_model(7e9), rough_model(7.1e9)
    assert small.params == 7e9
    assert large.hidden > small.hidden and large.layers > small.layers
    assert 4000 < small.hidden < 4400  # a 7B-like shape


def test_architecture_validation():
    with pytest.raises(InvalidInput):
        build_model(id="x", layers=4, hidden=100, heads=3)  # hidden not divisible by heads
    with pytest.raises(InvalidInput):
        build_model(id="x", layers=4, hidden=128, heads=4, kv_heads=3)
