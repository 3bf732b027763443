"""Serve workloads in `[report] workloads`: shape, service level and load, checked as the CLI
checks the same flags (tracker.cli.commands.workload)."""

from __future__ import annotations

import pytest

from tracker.answers.workloads import Workload
from tracker.core.errors import InvalidInput


def test_a_serve_workload_carries_shape_service_level_and_load():
    w = Workload.parse({"name": "chat", "kind": "serve", "model": "llama-3.1-70b",
                        "prompt_tokens": 1000, "output_tokens": 1000, "max_tpot_ms": 50,
                        "output_tokens_per_day": 50_000_000})
    assert w.serve == {"prompt_tokens": 1000, "output_tokens": 1000, "max_tpot_ms": 50,
                       "output_tokens_per_day": 50_000_000}
    # The memory figures hold a request of the serving shape, not the model's 128K maximum.
    assert w.sizing["context"] == 2000 and "tokens" not in w.sizing
    assert w.describe()["serve"]["max_tpot_ms"] == 50


@pytest.mark.parametrize(("raw", "message"), [
    ({"kind": "finetune", "model": "llama-3.1-8b", "tokens": 1e9, "max_tpot_ms": 50},
     "--max-tpot-ms is a serving option"),
    ({"kind": "serve", "model": "llama-3.1-8b", "output_tokens_per_day": -1},
     "--output-tokens-per-day must be more than 0"),
    ({"kind": "serve", "model": "llama-3.1-8b", "context": 3000, "prompt_tokens": 1000,
      "output_tokens": 1000}, r"is not --prompt-tokens 1000 \+ --output-tokens 1000"),
    ({"kind": "serve", "model": "llama-3.1-8b", "concurrency": 8, "max_tpot_ms": 50},
     "not both"),
])
def test_bad_serve_settings_are_the_workloads_error(raw, message):
    with pytest.raises(InvalidInput, match=message):
        Workload.parse({"name": "w", **raw})


def test_a_serve_workload_can_force_the_attention_layout():
    """`attention_parallel` is --attention-parallel in a workload: checked at parse (a bad
    word, or data on a dense model, is the workload's one-line error) and planned alone."""
    from tests.economics.test_candidates import row
    from tracker.answers.recommend_serving import evaluate_serving
    from tracker.economics.defaults import EconomicsSettings

    base = {"name": "moe", "kind": "serve", "model": "qwen3-235b-a22b", "precision": "fp8",
            "prompt_tokens": 1000, "output_tokens": 1000, "max_gpus": 8}
    assert Workload.parse({**base, "attention_parallel": "Tensor"}).serve["attention_parallel"] \
        == "tensor"
    assert "attention_parallel" not in Workload.parse({**base, "attention_parallel": "auto"}
                                                      ).serve
    rows = [row(1, "lab", "h100-sxm", 8, "20")]
    layouts = {}
    for layout in ("tensor", "data", "auto"):
        found = evaluate_serving(Workload.parse({**base, "attention_parallel": layout}), rows,
                                 EconomicsSettings(), best_only=True)["best"]["serving"]
        layouts[layout] = (found["tensor_parallel"], found["attention_data_parallel"],
                           found["output_tokens_per_s"])
    assert layouts["tensor"][:2] == (8, 1) and layouts["data"][:2] == (1, 8)
    assert layouts["auto"] == layouts["data"] != layouts["tensor"]
    with pytest.raises(InvalidInput, match="--attention-parallel must be one of auto, tensor, "
                                           "data, got 'dp'"):
        Workload.parse({**base, "attention_parallel": "dp"})
    with pytest.raises(InvalidInput, match=r"llama-3\.1-8b is dense"):
        Workload.parse({"name": "w", "kind": "serve", "model": "llama-3.1-8b",
                        "attention_parallel": "data"})


def test_the_reports_serving_plan_names_the_replicas_layout():
    """The report's `plan` of a serving option is the replica's layout, not TP x replicas with
    a pipeline of 1: an attention-DP replica says so (TP 1, attention DP 8, EP 8)."""
    from tests.economics.test_candidates import row
    from tracker.answers.recommend_serving import evaluate_serving
    from tracker.economics.defaults import EconomicsSettings

    workload = Workload.parse({"name": "moe", "kind": "serve", "model": "qwen3-235b-a22b",
                               "precision": "fp8", "prompt_tokens": 1000,
                               "output_tokens": 1000, "max_gpus": 8,
                               "attention_parallel": "data"})
    best = evaluate_serving(workload, [row(1, "lab", "h100-sxm", 8, "20")], EconomicsSettings(),
                            best_only=True)["best"]
    serving = best["serving"]
    assert best["plan"] == {"tensor_parallel": 1, "pipeline_parallel": 1,
                            "data_parallel": serving["replicas"],
                            "attention_data_parallel": 8, "expert_parallel": 8}
    assert serving["attention_data_parallel"] == 8 and serving["expert_parallel"] == 8
