"""One path: every cost, saving, payback and breakeven in the report's recommendations equals
the CLI's JSON for the same question, to the cent, on SQLite and PostgreSQL.

The report is built from the fixture history of 2026-W48 (see conftest); then, workload by
workload, `cost`, `spot` and `breakeven` are asked the question the report answered (same GPU,
count, offer filters, as-of instant, prices and assumptions) and their JSON is compared.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from reports.build import build_report
from tracker.cli.main import cli
from tracker.config.schema import load_config
from tracker.store.db import open_database

from .conftest import NOW, WEEK, fill

D = Decimal

WORKLOADS = '''
[[report.workloads]]
name = "finetune 8b"
kind = "finetune"
model = "llama-3.1-8b"
tokens = 2000000000
runs_per_month = 4.33

[[report.workloads]]
name = "finetune 8b by morning"
kind = "finetune"
model = "llama-3.1-8b"
tokens = 2000000000
deadline_hours = 8
runs_per_month = 20

[[report.workloads]]
name = "pretrain 7b"
kind = "pretrain"
model = "llama-2-7b"
tokens = 1000000000000

[[report.workloads]]
name = "serve 70b"
kind = "serve"
model = "llama-3.1-70b"
context = 131072
hours_per_month = 730
'''


@pytest.fixture
def filled(any_db_url, tmp_path):
    import reports  # noqa: F401  (registers the [report] defaults)

    db = open_database(any_db_url)
    fill(db)
    path = tmp_path / "config.toml"
    path.write_text(f'[report]\nout_dir = "{tmp_path / "out"}"\n' + WORKLOADS, "utf-8")
    yield db, str(path)
    db.close()


def cli_json(db, config: str, *args: str) -> dict:
    result = CliRunner().invoke(cli, ["--db", db.url, "--config", config, *args,
                                      "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_report_figures_equal_the_cli(filled):
    db, config = filled
    doc = build_report(db, load_config(config, environ={}), WEEK, now=NOW)
    as_of = doc["period"]["as_of"]
    workloads = {w["name"]: w for w in doc["recommendations"]["workloads"]}
    assert set(workloads) == {"finetune 8b", "finetune 8b by morning", "pretrain 7b",
                              "serve 70b"}
    checked = {"cost": 0, "spot": 0, "spot_range": 0, "breakeven": 0}
    for name, w in workloads.items():
        assert "error" not in w, w
        best = w["best"]
        serving = w["workload"]["workload"] == "inference"
        if not serving:
            sizing = w["workload"]["sizing"]
            cost = cli_json(db, config, "cost", "--gpu", best["gpu"], "--count",
                            str(best["count"]), "--model", sizing["model"], "--tokens",
                            repr(float(sizing["tokens"])), "--workload", sizing["workload"],
                            "--provider", best["provider"], "--region", best["region"],
                            "--category", "on-demand", "--as-of", as_of)
            assert D(cost["cost"]) == D(best["cost"]), name
            assert cost["offer"]["offer_id"] == best["offer_id"], name
            checked["cost"] += 1

            spot = w["spot"]
            if spot["available"]:
                si = spot["inputs"]
                args = ["spot", "--work-hours", repr(si["work_hours"]),
                        "--checkpoint-minutes", repr(si["checkpoint_minutes"]),
                        "--restart-minutes", repr(si["restart_minutes"]),
                        "--nodes", str(si["nodes"]), "--spot-price",
                        si["spot_price_per_node_hour"], "--on-demand-price",
                        si["on_demand_price_per_node_hour"], "--provider", spot["provider"],
                        "--as-of", as_of]
                if si["deadline_hours"]:
                    args += ["--deadline-hours", repr(si["deadline_hours"])]
                if "interruption band" in si["mtti_source"]:
                    # The CLI converts the stored band itself, as the report did.
                    args += ["--instance", spot["instance_type"], "--region", spot["region"]]
                answer = cli_json(db, config, *args)
                assert answer["mtti_hours"] == pytest.approx(si["mtti_node_hours"], rel=1e-6)
                assert answer["spot_cost"] == spot["spot_cost"], name
                assert answer["on_demand_cost"] == spot["on_demand_cost"], name
                assert answer["viable"] == spot["viable"], name
                # The saving is the recommended run's cost minus the spot cost, both as printed.
                assert D(spot["savings"]) == D(cost["cost"]) - D(answer["spot_cost"]), name
                checked["spot"] += 1
                band = spot["range"]
                if band["available"]:
                    sim = cli_json(db, config, *args, "--simulate", str(band["replicas"]),
                                   "--seed", str(band["seed"]))["simulation"]
                    assert sim["cost"]["p50"] == band["cost_p50"], name
                    assert sim["cost"]["p90"] == band["cost_p90"], name
                    assert sim["deadline_probability"] == band["deadline_probability"], name
                    checked["spot_range"] += 1

        rvb = w["rent_vs_buy"]
        if rvb["available"]:
            args = ["breakeven", "--gpu", best["gpu"], "--count", str(best["count"]),
                    "--utilization", rvb["utilization"], "--as-of", as_of]
            if rvb["comparator_chosen_by"] == "recommended":
                args += ["--offer", str(rvb["offer_id"])]
            answer = cli_json(db, config, *args)
            for key in ("verdict", "npv", "payback_months", "payback_within_horizon",
                        "discounted_payback_month", "breakeven_utilization", "breakeven_bound",
                        "monthly_onprem_opex", "monthly_cloud_cost", "owned_cost_per_gpu_hour"):
                assert answer[key] == rvb[key], (name, key)
            assert answer["trend_sensitivity"] == rvb["trend_sensitivity"], name
            assert rvb["cloud_price_trend_pct_per_year"] == 0.0
            assert answer["offer"]["offer_id"] == rvb["offer_id"]
            if (not serving and best.get("monthly_cost")
                    and rvb["comparator_chosen_by"] == "recommended"):
                # Against the recommended offer itself, the month of cloud is the
                # recommendation's monthly cost to the cent.
                assert rvb["monthly_cloud_cost"] == best["monthly_cost"], name
            checked["breakeven"] += 1
    assert checked["cost"] == 3 and checked["spot"] >= 2 and checked["breakeven"] >= 3, checked
    assert checked["spot_range"] >= 2, checked


def test_deadline_aware_recommendation_names_the_cheaper_option_that_misses(filled):
    db, config = filled
    doc = build_report(db, load_config(config, environ={}), WEEK, now=NOW)
    lora = next(w for w in doc["recommendations"]["workloads"]
                if w["name"] == "finetune 8b by morning")
    assert lora["best"]["meets_deadline"] is True
    # The cheaper run that missed the deadline was four of Lambda's 1-GPU on-demand
    # instances joined into one job; those are independent hosts (issue 11,
    # docs/fabric.md), so no option misses it now, and the report says why they are absent.
    assert lora["cheapest_misses_deadline"] is None
    assert any(line.startswith("lambda gpu_1x_h100_sxm5: on-demand instances are "
                               "independent hosts") for line in lora["absent"])
    # The cheapest run, one 8-GPU CoreWeave node, takes more than half the deadline; eight
    # of those nodes cost within 1% of it and finish sooner: recommended, and said (issue 29).
    trade = lora["trade_off"]
    assert trade["switched"] is True
    assert (trade["cheapest"]["count"], trade["cheapest"]["provider"]) == (8, "coreweave")
    assert trade["cheapest"]["wall_hours"] > 0.5 * lora["workload"]["deadline_hours"]
    assert (lora["best"]["count"], lora["best"]["provider"], lora["best"]["instances"]) == (
        64, "coreweave", 8)
    assert Decimal(trade["extra_cost"]) <= Decimal(trade["cheapest"]["cost"]) / 100
    assert trade["hours_saved"] > 0


def test_fabric_override_joins_hosts_in_the_report_as_in_compare(filled, tmp_path):
    """`[fabric.overrides]` is one configuration for `compare` and the report: with Lambda's
    1-GPU hosts declared clustered, the deadline workload's 4-instance option exists in both,
    carries the override's text, and costs the same to the cent."""
    db, config = filled
    path = tmp_path / "override.toml"
    path.write_text(Path(config).read_text("utf-8") + (
        '\n[fabric.overrides.lambda]\ncluster_network = "infiniband"\ncluster_gbps = 400\n'),
        "utf-8")
    doc = build_report(db, load_config(str(path), environ={}), WEEK, now=NOW)
    lora = next(w for w in doc["recommendations"]["workloads"]
                if w["name"] == "finetune 8b by morning")
    assert not any(line.startswith("lambda ") for line in lora["absent"])
    joined = [o for o in (lora["best"], lora["fastest"], lora["fewest_gpus"],
                          lora["cheapest_misses_deadline"])
              if o and o["provider"] == "lambda" and o["instances"] > 1]
    assert joined, "the override must let Lambda's hosts form a multi-instance option"
    option = joined[0]
    assert option["override"] == "config override lambda: infiniband 400 Gb/s"
    assert option["cluster_network"] == "infiniband"
    answer = cli_json(db, str(path), "compare", "--model", "llama-3.1-8b", "-w",
                      "full-finetune", "--tokens", "2000000000", "--as-of",
                      doc["period"]["as_of"], "--limit", "500")
    rows = [r for r in answer if r["provider"] == "lambda"
            and r["count"] == option["count"] and r["instance_type"] == option["instance_type"]]
    assert rows and rows[0]["override"] == option["override"]
    assert Decimal(rows[0]["cost"]) == Decimal(option["cost"])
