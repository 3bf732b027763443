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
