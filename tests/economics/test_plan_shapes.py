"""Issue 29: N GPUs are priced from offers that can hold them, and every comparator (spot, rent
vs buy, the invoice check in tests/market/test_focus.py) has the plan's shape: at least as many
GPUs in one instance, or instances a cluster network joins (data/fabric.json). The cheapest
GPU-hour on a 1-GPU community pod is never the price of a job that needs NVLink or a cluster.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs
from .test_cli import run, run_json

WHEN = at("2026-11-01")
SEED = ("--model", "llama-3.1-70b", "--prompt-tokens", "1000", "--output-tokens", "1000",
        "--max-tpot-ms", "50")


@pytest.fixture
def shaped_db(sqlite_url) -> str:
    """H200: a cheap 1-GPU RunPod pod and an 8-GPU Crusoe node (InfiniBand); H100: RunPod's
    1-GPU pod cheapest per GPU-hour, Lambda's 8-GPU node (no cluster network), AWS p5 (EFA)
    on-demand and spot."""
    db = open_database(sqlite_url)
    ingest_records(db, "test", [
        obs("3.00", WHEN, provider="runpod", instance_type="1x H200", gpu_name="H200",
            gpu_count=1, region=""),
        obs("34.32", WHEN, provider="crusoe", instance_type="8x H200-SXM-141GB",
            gpu_name="H200", gpu_count=8, region="us-east1"),
        obs("2.39", WHEN, provider="runpod", instance_type="1x H100", gpu_count=1, region=""),
        obs("23.92", WHEN, provider="lambda", instance_type="gpu_8x_h100_sxm5",
            region="us-east-1"),
        obs("55.04", WHEN),  # aws p5.48xlarge on-demand: 6.88 per GPU-hour
        obs("17.63", WHEN, category="spot", zone="us-east-1a"),
    ], started_at=WHEN)
    db.close()
    return sqlite_url


def test_the_seed_question_prices_two_h200_inside_an_8_gpu_node(shaped_db):
    # Landed main: the 1-GPU pod was the only offer that "tiles" 2 GPUs, and TP 2 cannot span
    # two pods: "no tensor-parallel group of up to 1 GPUs" (exit 1).
    data = run_json("cost", *SEED, "--gpu", "h200", "--count", "2", db=shaped_db)
    assert data["offer"]["instance_type"] == "8x H200-SXM-141GB"
    assert data["count"] == 2 and data["instances"] == 1 and data["billed_gpus"] == 8
    assert data["serving"]["tensor_parallel"] == 2
    assert data["instance_share"].startswith("2 of the 8 GPUs of one 8x H200-SXM-141GB")
    # Per-token figures at the node's price per GPU-hour (34.32 / 8 = 4.29).
    assert Decimal(data["price_per_gpu_hour"]) == Decimal("4.29")
    table = run("cost", *SEED, "--gpu", "h200", "--count", "2", db=shaped_db)
    assert table.exit_code == 0, table.output
    assert "2 of the 8 GPUs" in table.stdout


def test_spot_is_compared_with_on_demand_of_the_same_shape(shaped_db):
    args = ("spot", "--gpu", "h100-sxm", "--count", "16", "--work-hours", "100",
            "--checkpoint-minutes", "5", "--restart-minutes", "10", "--mtti-hours", "24")
    data = run_json(*args, db=shaped_db)
    # The plan is 2 x p5.48xlarge spot over EFA; the comparator is on-demand p5 x 2 (EFA),
    # not sixteen 1-GPU pods (2.39) or two Lambda hosts without a cluster network (2.99).
    assert data["spot_offer"]["instance_type"] == "p5.48xlarge" and data["nodes"] == 2
    assert data["on_demand_offer"]["instance_type"] == "p5.48xlarge"
    assert Decimal(data["on_demand_price_per_hour"]) == Decimal("55.04")
    assert "x 2" in data["on_demand_comparator"]
    table = run(*args, db=shaped_db)
    assert table.exit_code == 0, table.output
    assert "on-demand comparator" in table.stdout and "p5.48xlarge" in table.stdout


def test_breakeven_for_16_gpus_compares_with_a_joinable_cluster(shaped_db):
    data = run_json("breakeven", "--gpu", "h100-sxm", "--count", "16", "--utilization", "0.6",
                    db=shaped_db)
    # Two Lambda 8-GPU hosts are cheaper but have no cluster network: not a 16-GPU cluster.
    assert "p5.48xlarge" in data["comparator"] and "x 2" in data["comparator"]
    table = run("breakeven", "--gpu", "h100-sxm", "--count", "16", "--utilization", "0.6",
                db=shaped_db)
    assert "p5.48xlarge" in table.stdout


def test_plan_shaped_offer_pays_for_whole_instances(shaped_db):
    from tracker.answers.offers import plan_shaped_offer
    from tracker.store.queries import price_rows

    db = open_database(shaped_db)
    try:
        rows = price_rows(db, as_of=at("2026-11-02"), gpu="h100-sxm", category="on-demand")
    finally:
        db.close()
    # 1 GPU: the pod. 8 GPUs: Lambda's node in one instance. 12: two p5 (16 billed) --
    # the pods and Lambda's hosts cannot be joined.
    row, instances, per_gpu = plan_shaped_offer(rows, 1)
    assert (row.provider, instances, per_gpu) == ("runpod", 1, Decimal("2.39"))
    row, instances, per_gpu = plan_shaped_offer(rows, 8)
    assert (row.provider, instances, per_gpu) == ("lambda", 1, Decimal("2.99"))
    row, instances, per_gpu = plan_shaped_offer(rows, 12)
    assert (row.instance_type, instances) == ("p5.48xlarge", 2)
    assert per_gpu == Decimal("55.04") * 2 / 12
