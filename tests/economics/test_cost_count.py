"""`cost --count N` prices N GPUs from an offer that can hold them (issue 29): one instance with
at least N GPUs, or instances a cluster network joins, and says which.

On the bundled prices (real list prices) H200 comes in 8-GPU nodes and 1-GPU pods that no
cluster network joins, so no offer tiles 2 GPUs exactly; before, `cost --gpu h200 --count 2`
said "no on-demand price for 2x h200".
"""

from __future__ import annotations

import json
from decimal import ROUND_HALF_EVEN, Decimal

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli

JOB = ["-w", "full-finetune", "--model", "llama-3.1-8b", "--tokens", "2e9"]


def cost(db: str, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["--db", db, "cost", *args, "--as-of", "2026-11-30",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("how", [JOB, ["--hours", "10"]], ids=["sized", "hours"])
def test_two_gpus_are_priced_from_one_larger_instance_at_its_bill(bundled_db, how):
    doc = cost(bundled_db, *how, "--gpu", "h200-sxm", "--count", "2")
    offer = doc["offer"]
    assert doc["count"] == 2 and doc["instances"] == 1
    assert offer["gpu"] == "h200" and offer["gpu_count"] == 8.0
    assert doc["billed_gpus"] == 8
    # The instance bills all eight GPUs for the billed time, whatever the run uses.
    bill = (Decimal(offer["price_per_hour"]) * Decimal(str(doc["billed_hours"])))
    assert Decimal(doc["cost"]) == bill.quantize(Decimal("0.01"), ROUND_HALF_EVEN)
    assert doc["instance_share"].startswith(
        f"2 of the 8 GPUs of {offer['provider']} {offer['instance_type']}")
    assert f"(offer {offer['offer_id']})" in doc["instance_share"]
    # The cheapest 8-GPU H200 on-demand bill is the one chosen.
    result = CliRunner().invoke(cli, ["--db", bundled_db, "prices", "--gpu", "h200-sxm",
                                      "--category", "on-demand", "--as-of", "2026-11-30",
                                      "--format", "json"])
    eights = [r for r in json.loads(result.stdout) if r["gpu_count"] == 8.0]
    assert offer["price_per_hour"] == min((r["price_per_hour"] for r in eights), key=Decimal)


def test_a_count_the_instances_tile_is_priced_as_before(bundled_db):
    doc = cost(bundled_db, *JOB, "--gpu", "h200-sxm", "--count", "8")
    assert doc["billed_gpus"] is None and doc["instance_share"] is None
    assert doc["offer"]["gpu_count"] == 8.0 and doc["instances"] == 1
