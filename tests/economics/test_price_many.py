"""Size once, price many: the answers equal the per-offer path's, every figure, to the cent.

The per-offer path is main's `priced_options` / `serving_options` before the change, kept in
tests/economics/per_offer_reference.py. Each question is asked through the CLI twice on the
same store, once as shipped and once with the reference patched in, and the JSON documents
must be identical: on the bundled store (real list prices, clustered and unclustered offers)
and on a random 2,000-offer store drawn from the bundled offers' shapes (providers, instance
types, networks) with seeded regions, categories and prices, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from click.testing import CliRunner

from tests.economics import per_offer_reference as reference
from tracker.cli.main import cli
from tracker.collect.refresh import refresh_sources
from tracker.config.schema import load_config
from tracker.store.db import open_database

AS_OF = ["--as-of", "2026-11-30"]
FINETUNE_8B = ["-w", "full-finetune", "--model", "llama-3.1-8b", "--tokens", "2e9"]
QUESTIONS = {
    "compare training": ["compare", *FINETUNE_8B],
    "compare lora 70b, unclustered allowed": [
        "compare", "-w", "lora", "--model", "llama-3.1-70b", "--tokens", "1e9",
        "--allow-unclustered", "--max-gpus", "32"],
    "compare inference, service level and load": [
        "compare", "-w", "inference", "--model", "llama-3.1-8b", "--prompt-tokens", "1000",
        "--output-tokens", "1000", "--max-tpot-ms", "50", "--output-tokens-per-day", "50M"],
    "compare inference 70b": [
        "compare", "-w", "inference", "--model", "llama-3.1-70b", "--prompt-tokens", "2000",
        "--output-tokens", "500", "--max-tpot-ms", "40", "--output-tokens-per-day", "200M"],
    "cost cheapest stored offer": ["cost", *FINETUNE_8B, "--gpu", "h100-sxm", "--count", "8"],
    "cost 16 GPUs": ["cost", *FINETUNE_8B, "--gpu", "a100-80gb", "--count", "16"],
}


def load_bundled(url: str) -> None:
    db = open_database(url)
    refresh_sources(db, load_config(environ={}), ["bundled"], environ={})
    db.close()


def load_random(url: str, offers: int = 2000, seed: int = 26) -> None:
    """A seeded store shaped like the real market (tools/synthetic_market.py: 40 providers,
    every GPU class, their instance sizes, regions, spot and bid shares, clustered and
    unclustered offers), two daily refreshes up to the question's date."""
    from tools.synthetic_market import build_market_store

    build_market_store(url, offers=offers, days=2, seed=seed, end=date(2026, 11, 30))


def per_offer_training(*args: Any, larger_instances: bool = False, **kwargs: Any) -> Any:
    """The reference for the questions above, whose counts no larger instance holds (the
    cost questions' counts are whole multiples of every stored instance size of the GPU)."""
    return reference.per_offer_priced_options(*args, **kwargs)


def report_workloads(url: str) -> object:
    """The weekly report's workload recommendations (the default workloads: training runs,
    their spot plans, serving) for the week before the questions' date, as JSON."""
    from datetime import UTC, datetime

    from reports.build import build_report
    from tracker.core.serialization import dumps

    db = open_database(url)
    try:
        doc = build_report(db, load_config(environ={}), "2026-W48",
                           now=datetime(2026, 12, 1, tzinfo=UTC))
    finally:
        db.close()
    return json.loads(dumps(doc["recommendations"]))


def answers(url: str, patched: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    with monkeypatch.context() as patch:
        if patched:
            from tracker.answers import candidates, pricing
            from tracker.store.queries import price_rows

            # Every stored row, not only the first of each shape group.
            patch.setattr(pricing, "price_rows_per_shape",
                          lambda db, *, currency, by_instance, named_unclustered, **filters:
                          price_rows(db, **filters))
            patch.setattr(pricing, "priced_options", per_offer_training)
            patch.setattr(candidates, "priced_options", per_offer_training)
            patch.setattr(candidates, "serving_options", reference.per_offer_serving_options)
        out: dict[str, object] = {"report": report_workloads(url)}
        for name, argv in QUESTIONS.items():
            # -v: the skipped GPUs and the instances no cluster network joins, one a line.
            result = CliRunner().invoke(cli, ["--db", url, "-v", *argv, *AS_OF, "--format",
                                              "json"])
            out[name] = (result.exit_code, result.stderr,
                         json.loads(result.stdout) if result.exit_code == 0 else None)
        return out


@pytest.mark.parametrize("store", ["bundled", "random-2000"])
def test_size_once_answers_equal_the_per_offer_path(any_db_url, store, monkeypatch):
    (load_bundled if store == "bundled" else load_random)(any_db_url)
    shipped = answers(any_db_url, False, monkeypatch)
    per_offer = answers(any_db_url, True, monkeypatch)
    for name in ("report", *QUESTIONS):
        assert shipped[name] == per_offer[name], name
    # The questions are answered, not refused alike: the equality is over real rankings.
    ranked = [name for name, (code, _notes, doc) in shipped.items()
              if code == 0 and name.startswith("compare") and doc]
    assert len(ranked) == 4
