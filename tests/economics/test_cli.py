"""The economics commands through the CLI: JSON contract, formats, store prices, bad input."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
from click.testing import CliRunner

from tracker.answers.breakeven_documents import BREAKEVEN_KEYS
from tracker.answers.documents import COST_KEYS, SPOT_KEYS
from tracker.cli.main import cli

D = Decimal


def run(*args: str, db: str | None = None, config: str | None = None):
    argv = []
    if db:
        argv += ["--db", db]
    if config:
        argv += ["--config", config]
    return CliRunner().invoke(cli, [*argv, *args], catch_exceptions=False)


def run_json(*args: str, **kwargs):
    result = run(*args, "--format", "json", **kwargs)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    return lines[0]


# cost -----------------------------------------------------------------------------------------

def test_cost_with_given_price_and_hours():
    data = run_json("cost", "--hours", "6", "--price-per-gpu-hour", "4", "--count", "1",
                    "--success-rate", "0.5")
    assert set(COST_KEYS) <= set(data)
    assert data["cost"] == "24"
    assert data["cost_per_success"] == "48"
    assert data["price_per_gpu_hour"] == "4"
    assert data["currency"] == "USD"
    assert data["offer"] is None and data["flops"] is None
    assert data["wall_hours"] == 6 and data["gpu_hours"] == 6
    assert data["runs_per_day"] == 4


def test_cost_cluster_and_time_to_result():
    data = run_json("cost", "--hours", "0.75", "--price-per-gpu-hour", "4", "--count", "8",
                    "--experiments", "10", "--parallel", "1")
    assert data["cost"] == "24"
    assert data["gpu_hours"] == 6
    assert data["runs_per_day"] == 32
    assert data["time_to_result_hours"] == 7.5


def test_cost_priced_from_the_store_as_of(priced_db):
    now = run_json("cost", "--hours", "10", "--gpu", "h100", "--count", "8", "--provider",
                   "aws", db=priced_db)
    assert now["price_per_gpu_hour"] == "6.88"
    assert now["cost"] == "550.4"
    assert now["offer"]["instance_type"] == "p5.48xlarge"
    assert now["offer"]["price_per_hour"] == "55.04"
    assert now["billing_minimum_seconds"] == 60
    before = run_json("cost", "--hours", "10", "--gpu", "h100", "--count", "8", "--provider",
                      "aws", "--as-of", "2026-10-15", db=priced_db)
    assert before["price_per_gpu_hour"] == "12.29"
    assert before["cost"] == "983.2"


def test_cost_picks_the_cheapest_offer_that_tiles_the_count(priced_db):
    eight = run_json("cost", "--hours", "1", "--gpu", "h100", "--count", "8", db=priced_db)
    assert eight["offer"]["provider"] == "lambda"  # $3.99/GPU-h beats AWS $6.88
    assert eight["instances"] == 1
    one = run_json("cost", "--hours", "1", "--gpu", "h100", "--count", "1", db=priced_db)
    assert one["offer"]["instance_type"] == "gpu_1x_h100_sxm5"
    assert one["cost"] == "4.29"
    spot_price = run_json("cost", "--hours", "1", "--gpu", "h100", "--count", "16",
                          "--category", "spot", db=priced_db)
    assert spot_price["instances"] == 2
    assert spot_price["cost"] == "35.26"  # 2 x 17.63


def test_cost_no_matching_price_says_what_exists(priced_db):
    message = one_line_error(run("cost", "--hours", "1", "--gpu", "h100-sxm", "--count", "8",
                                 "--provider", "azure", db=priced_db))
    assert "no on-demand price for 8x h100-sxm from azure" in message
    assert "aws on-demand (8 GPUs)" in message and "lambda on-demand (1, 8 GPUs)" in message
    message = one_line_error(run("cost", "--hours", "1", "--gpu", "l4", db=priced_db))
    assert "GPUs with USD prices: a100-80gb, h100-sxm" in message
    message = one_line_error(run("cost", "--hours", "1", "--gpu", "a100-80gb", "--count", "4",
                                 "--category", "spot", db=priced_db))
    assert "no spot price for 4x a100-80gb" in message and "aws on-demand (8 GPUs)" in message


def test_cost_table_and_csv():
    table = run("cost", "--hours", "6", "--price-per-gpu-hour", "4")
    assert table.exit_code == 0
    assert "cost per run" in table.stdout and "24.00 USD" in table.stdout
    rows = list(csv.DictReader(io.StringIO(run("cost", "--hours", "6", "--price-per-gpu-hour",
                                               "4", "--format", "csv").stdout)))
    assert rows[0]["cost"] == "24" and rows[0]["currency"] == "USD"


# spot -----------------------------------------------------------------------------------------

SPOT_ARGS = ("spot", "--work-hours", "500", "--mtti-hours", "24", "--checkpoint-minutes", "5",
             "--restart-minutes", "10")


def test_spot_json_contract_and_daly_values():
    data = run_json(*SPOT_ARGS, "--spot-price", "17.63", "--on-demand-price", "55.04",
                    "--deadline-hours", "600")
    assert set(SPOT_KEYS) <= set(data)
    assert data["checkpoint_interval_hours"] == pytest.approx(116.690 / 60, abs=1e-5)
    assert data["young_interval_hours"] == pytest.approx(2.0)
    assert 540 < data["expected_wall_hours"] < 560
    assert data["expected_interruptions"] == pytest.approx(data["expected_wall_hours"] / 24,
                                                           rel=1e-5)
    assert data["on_demand_cost"] == "27520"
    assert D(data["spot_cost"]) == (D("17.63") * D(repr(data["expected_wall_hours"]))).quantize(
        D("0.01"))
    assert data["savings_fraction"] == pytest.approx(1 - float(data["spot_cost"]) / 27520,
                                                     abs=1e-6)
    assert data["meets_deadline"] is True
    assert data["mtti_source"] == "given"


def test_spot_deadline_missed_says_how_much_on_demand():
    data = run_json(*SPOT_ARGS, "--spot-price", "17.63", "--on-demand-price", "55.04",
                    "--deadline-hours", "520")
    assert data["meets_deadline"] is False
    assert data["deadline_reachable"] is True
    assert 0 < data["on_demand_hours_for_deadline"] < 520
    assert any("on on-demand" in w for w in data["warnings"])


def test_spot_notice_window_per_provider():
    aws = run_json(*SPOT_ARGS, "--notice-window", "--provider", "aws",
                   "--emergency-checkpoint-minutes", "1.5")
    assert aws["notice_window_used"] is True
    gcp = run_json(*SPOT_ARGS, "--notice-window", "--provider", "gcp",
                   "--emergency-checkpoint-minutes", "1.5")
    assert gcp["notice_window_used"] is False
    assert gcp["expected_wall_hours"] > aws["expected_wall_hours"]


def test_spot_priced_and_banded_from_the_store(priced_db):
    data = run_json("spot", "--work-hours", "100", "--instance", "p5.48xlarge", "--region",
                    "us-east-1", "--checkpoint-minutes", "5", "--restart-minutes", "10",
                    db=priced_db)
    assert data["spot_price_per_hour"] == "17.63"  # the cheaper AZ
    assert data["on_demand_price_per_hour"] == "55.04"
    assert data["spot_offer"]["zone"] == "us-east-1a"
    # '5-10%' at its midpoint as a monthly reclaim probability: λ = −ln(0.925)/720.
    assert data["mtti_hours"] == pytest.approx(720 / 0.0779615, rel=1e-5)
    assert "5-10%" in data["mtti_source"]
    assert data["on_demand_cost"] == "5504"


def test_spot_without_band_uses_the_provider_default(priced_db):
    data = run_json("spot", "--work-hours", "100", "--instance", "p4de.24xlarge", "--region",
                    "us-east-1", "--checkpoint-minutes", "5", "--restart-minutes", "10",
                    "--spot-price", "9", db=priced_db)
    assert data["mtti_hours"] == 24
    assert "assumption" in data["mtti_source"]
    assert data["on_demand_price_per_hour"] == "27.447"


def test_spot_store_without_that_price(priced_db):
    message = one_line_error(run(
        "spot", "--work-hours", "100", "--instance", "p4de.24xlarge", "--region", "us-east-1",
        "--checkpoint-minutes", "5", "--restart-minutes", "10", db=priced_db))
    assert message == ("Error: no spot price for p4de.24xlarge in aws us-east-1 as of now; "
                       "it has: on-demand")


def test_spot_table_output():
    result = run(*SPOT_ARGS, "--spot-price", "17.63", "--on-demand-price", "55.04")
    assert result.exit_code == 0
    assert "checkpoint interval" in result.stdout and "116.7 min (Daly)" in result.stdout


@pytest.mark.parametrize(("args", "fragment", "code"), [
    (("--work-hours", "-5"), "--work-hours must be 0 or more", 2),
    (("--checkpoint-minutes", "-1"), "--checkpoint-minutes must be 0 or more", 2),
    (("--checkpoint-minutes", "60000"), "longer than the work", 1),
    (("--mtti-hours", "0"), "--mtti-hours must be more than 0", 2),
    (("--work-hours", "abc"), "--work-hours must be a number", 2),
])
def test_spot_bad_input_is_one_line(args, fragment, code):
    base = dict(zip(SPOT_ARGS[1::2], SPOT_ARGS[2::2], strict=True))
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["spot", *[x for kv in base.items() for x in kv]]
    assert fragment in one_line_error(run(*argv), code)


# breakeven ------------------------------------------------------------------------------------

SEED_BREAKEVEN = ("breakeven", "--capex", "300000", "--power-kw", "0", "--other-opex-per-month",
                  "1000", "--colo-per-kw-month", "0", "--staff-per-month", "0",
                  "--cloud-price-per-hour", "29", "--hours-per-month", "720",
                  "--utilization", "1", "--residual-fraction", "0", "--discount-rate", "0")


def test_breakeven_seed_case():
    data = run_json(*SEED_BREAKEVEN, "--horizon-months", "24")
    assert set(BREAKEVEN_KEYS) <= set(data)
    assert data["monthly_onprem_opex"] == "1000"
    assert data["monthly_cloud_cost"] == "20880"
    assert data["payback_months"] == pytest.approx(15.0905, abs=1e-4)
    assert data["discounted_payback_month"] == 16
    assert data["breakeven_utilization"] == pytest.approx(0.646552, abs=1e-6)
    assert data["npv"] == "177120"  # 24 × 19,880 − 300,000
    assert data["irr_monthly"] == pytest.approx(0.0410, abs=1e-3)
    assert data["irr_annual"] == pytest.approx((1 + data["irr_monthly"]) ** 12 - 1, rel=1e-6)
    assert data["owned_cost_per_gpu_hour"] == "2.3438"  # (300k + 24k) / (720 × 8 × 24)
    inputs = [row["input"] for row in data["sensitivity"]]
    assert inputs[0] == "cloud_price_per_hour"
    swings = [row["swing"] for row in data["sensitivity"]]
    assert swings == sorted(swings, reverse=True)


def test_breakeven_never_pays_back():
    data = run_json(*SEED_BREAKEVEN[:-6], "--utilization", "0.01", "--residual-fraction", "0",
                    "--discount-rate", "0")
    assert data["payback_months"] is None
    assert data["discounted_payback_month"] is None
    assert data["warnings"]


def test_breakeven_defaults_from_the_gpu_and_the_store(priced_db):
    data = run_json("breakeven", "--gpu", "h100", "--count", "8", "--utilization", "0.8",
                    "--provider", "aws", db=priced_db)
    # Capex: 8 × $37,500 server share + 8 × $4,250 networking.
    assert data["capex"] == "334000"
    assert data["cloud_price_per_hour"] == "55.04"
    assert data["offer"]["provider"] == "aws"
    assert data["monthly_power"] == "774.38"  # 10.2 kW × 1.3 × 0.08 × 730
    names = {a["name"] for a in data["assumptions"]}
    assert {"capex_per_gpu", "networking_per_gpu", "power_kw", "pue", "kwh_price",
            "discount_rate", "residual_fraction", "staff_per_month"} <= names
    older = run_json("breakeven", "--gpu", "h100", "--count", "8", "--utilization", "0.8",
                     "--provider", "aws", "--as-of", "2026-10-02", db=priced_db)
    assert older["cloud_price_per_hour"] == "98.32"
    assert older["breakeven_utilization"] < data["breakeven_utilization"]


def test_breakeven_config_file_overrides_defaults(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[economics]\nkwh_price = 0.2\nhours_per_month = 720\n", "utf-8")
    data = run_json("breakeven", "--capex", "300000", "--power-kw", "10.2",
                    "--cloud-price-per-hour", "55.04", "--utilization", "0.7",
                    config=str(config))
    assert data["monthly_power"] == "1909.44"  # 10.2 × 1.3 × 0.2 × 720
    sources = {a["name"]: a["source"] for a in data["assumptions"]}
    assert sources["kwh_price"] == "config [economics]"
    flag = run_json("breakeven", "--capex", "300000", "--power-kw", "10.2", "--kwh-price", "0.1",
                    "--cloud-price-per-hour", "55.04", "--utilization", "0.7",
                    config=str(config))
    assert flag["monthly_power"] == "954.72"


def test_breakeven_environment_overrides_defaults(monkeypatch):
    monkeypatch.setenv("GPU_TRACKER_ECONOMICS_PUE", "1.5")
    data = run_json("breakeven", "--capex", "300000", "--power-kw", "10", "--kwh-price", "0.1",
                    "--cloud-price-per-hour", "55.04", "--utilization", "0.7")
    assert data["monthly_power"] == "1095"  # 10 × 1.5 × 0.1 × 730


def test_breakeven_depreciation_schedule():
    data = run_json("breakeven", "--capex", "300000", "--power-kw", "10.2",
                    "--cloud-price-per-hour", "55.04", "--utilization", "0.7",
                    "--horizon-months", "60", "--residual-fraction", "0.1",
                    "--depreciation", "ddb")
    assert data["depreciation"] == {"method": "ddb", "years": 5, "per_year": [
        "120000", "72000", "43200", "25920", "8880"]}


def test_breakeven_table_and_csv():
    table = run(*SEED_BREAKEVEN, "--horizon-months", "24")
    assert table.exit_code == 0
    assert "payback" in table.stdout and "15.09 months" in table.stdout
    assert "sensitivity of breakeven utilization" in table.stdout
    rows = list(csv.DictReader(io.StringIO(run(*SEED_BREAKEVEN, "--format", "csv").stdout)))
    assert rows[0]["monthly_cloud_cost"] == "20880"


@pytest.mark.parametrize(("args", "fragment"), [
    (("--utilization", "1.2"), r"utilization must be in (0, 1], got 1.2"),
    (("--utilization", "0"), r"utilization must be in (0, 1], got 0"),
    (("--utilization", "-0.5"), r"utilization must be in (0, 1]"),
    (("--utilization", "lots"), "--utilization is not a number"),
    (("--horizon-months", "0"), "--horizon-months must be 1 or more"),
    (("--discount-rate", "-2"), "--discount-rate must be in [0, 10], got -2"),
])
def test_breakeven_bad_input_is_one_line(args, fragment):
    # Option values out of range are usage errors (exit 2), checked by the shared param types.
    base = dict(zip(SEED_BREAKEVEN[1::2], SEED_BREAKEVEN[2::2], strict=True))
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = ["breakeven", *[x for kv in base.items() for x in kv]]
    assert fragment in one_line_error(run(*argv), 2)


def test_breakeven_needs_prices_or_a_gpu():
    message = one_line_error(run("breakeven", "--capex", "1", "--power-kw", "1",
                                 "--utilization", "1"))
    assert "--cloud-price-per-hour" in message
    message = one_line_error(run("breakeven", "--gpu", "l4", "--cloud-price-per-hour", "1",
                                 "--utilization", "1"))
    assert "no capex default for l4" in message and "h100-sxm" in message


def test_breakeven_no_store_price(priced_db):
    message = one_line_error(run("breakeven", "--gpu", "h200-sxm", "--utilization", "1",
                                 db=priced_db))
    assert "no on-demand price for 8x h200" in message
    assert "GPUs with USD prices: a100-80gb, h100-sxm" in message


def test_billing_granularity_from_the_config_file(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[economics.billing.hourly-cloud]\ngranularity_seconds = 3600\n", "utf-8")
    data = run_json("cost", "--hours", "1.01", "--price-per-gpu-hour", "2", "--provider",
                    "hourly-cloud", config=str(config))
    assert data["billed_hours"] == 2
    assert data["cost"] == "4"
    flag = run_json("cost", "--hours", "1.01", "--price-per-gpu-hour", "2",
                    "--billing-seconds", "60")
    assert flag["cost"] == "2.03"  # 3636 s -> 3660 s billed


# cost and compare with the sizing engine -----------------------------------------------------

def test_cost_from_the_sizing_engine():
    data = run_json("cost", "--workload", "pretrain", "--params", "7B", "--tokens", "1e9",
                    "--mfu", "0.4", "--gpu", "h100-sxm", "--count", "8",
                    "--price-per-gpu-hour", "4")
    assert data["flops"] == pytest.approx(6 * 7e9 * 1e9)
    # With a measured MFU: time = FLOPs / (GPUs × dense peak × MFU).
    wall = 6 * 7e9 * 1e9 / (8 * 989e12 * 0.4) / 3600
    assert data["wall_hours"] == pytest.approx(wall, rel=1e-5)
    assert data["gpu_hours"] == pytest.approx(8 * wall, rel=1e-5)
    assert float(data["cost"]) == pytest.approx(4 * 8 * wall, abs=0.01)


def test_cost_uses_the_same_time_as_size_workload():
    from tracker.sizing import SizingRequest, size_workload

    sized = size_workload(SizingRequest(model="llama-3.1-8b", workload="pretrain",
                                        gpu="h100-sxm", count=8, tokens=1e10))
    data = run_json("cost", "--workload", "pretrain", "--model", "llama-3.1-8b", "--tokens",
                    "1e10", "--gpu", "h100-sxm", "--count", "8", "--price-per-gpu-hour", "3.99")
    assert data["wall_hours"] == pytest.approx(sized.wall_hours, rel=1e-5)
    assert data["flops"] == pytest.approx(sized.flops, rel=1e-5)


def test_cost_rejects_a_count_that_does_not_fit():
    message = one_line_error(run("cost", "--workload", "pretrain", "--model", "llama-3.1-8b",
                                 "--tokens", "1e10", "--gpu", "h100-sxm", "--count", "1",
                                 "--price-per-gpu-hour", "4"))
    assert "does not fit on 1 x h100-sxm" in message and "at least" in message


def test_cost_needs_hours_or_a_workload():
    message = one_line_error(run("cost", "--price-per-gpu-hour", "4"))
    assert "give --hours, or --model" in message
    assert "--hours must be more than 0" in one_line_error(
        run("cost", "--hours", "-2", "--price-per-gpu-hour", "4"), 2)
    # A malformed number is a usage error (exit 2), the same on size, cost and compare.
    bad = run("cost", "--params", "seven", "--tokens", "1e9", "--gpu", "h100-sxm",
              "--price-per-gpu-hour", "4")
    assert bad.exit_code == 2 and "'seven' is not a number" in bad.stderr


def test_compare_ranks_every_fitting_count_and_offer(priced_db):
    from tracker.sizing import SizingRequest, size_workload

    rows = run_json("compare", "-w", "pretrain", "--model", "llama-3.1-8b", "--tokens", "1e9",
                    "--mfu", "0.4",
                    db=priced_db)
    assert rows and set(rows[0]) >= {"gpu", "count", "provider", "category", "wall_hours",
                                     "cost"}
    costs = [D(r["cost"]) for r in rows]
    assert costs == sorted(costs)
    combos = {(r["gpu"], r["count"], r["provider"], r["category"]) for r in rows}
    assert ("h100-sxm", 8, "lambda", "on-demand") in combos
    assert ("h100-sxm", 16, "aws", "spot") in combos
    assert ("a100-80gb", 8, "aws", "on-demand") in combos
    needed = {g: size_workload(SizingRequest(model="llama-3.1-8b", workload="pretrain", gpu=g,
                                             tokens=1e9, mfu=0.4)).gpus_needed
              for g in ("h100-sxm", "a100-80gb")}
    for r in rows:
        assert r["count"] >= needed[r["gpu"]]
        per_hour = D(r["price_per_gpu_hour"]) * r["count"]
        expected = per_hour * D(repr(r["wall_hours"]))
        # Up to one billed second (ceil) and half a cent of rounding apart.
        assert abs(D(r["cost"]) - expected) <= per_hour / 3600 + D("0.005") + expected / 10**5
    # The cheapest is the cheapest GPU-hour at equal work: AWS spot H100 at $2.20/GPU-h.
    assert (rows[0]["gpu"], rows[0]["provider"], rows[0]["category"]) == (
        "h100-sxm", "aws", "spot")


def test_compare_filters_and_formats(priced_db):
    table = run("compare", "-w", "pretrain", "--model", "llama-3.1-8b", "--tokens", "1e9",
                "--gpu", "h100-sxm",
                "--category", "on-demand", "--max-gpus", "8", db=priced_db)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split()[:7] == ["gpu", "count", "provider", "category", "ownership",
                                    "wall_hours", "cost"]
    assert all("spot" not in line for line in lines)
    rows = list(csv.DictReader(io.StringIO(run(
        "compare", "-w", "pretrain", "--model", "llama-3.1-8b", "--tokens", "1e9",
        "--gpu", "h100-sxm",
        "--category", "on-demand", "--max-gpus", "8", "--format", "csv", db=priced_db).stdout)))
    assert {int(r["count"]) for r in rows} <= {1, 2, 4, 8}
    assert rows[0]["provider"] == "lambda"


def test_compare_bad_input_and_nothing_priced(priced_db):
    assert "--tokens" in one_line_error(run("compare", "-w", "pretrain", "--model",
                                            "llama-3.1-8b", db=priced_db))
    message = one_line_error(run("compare", "-w", "pretrain", "--model", "llama-3.1-8b",
                                 "--tokens", "1e9",
                                 "--gpu", "b200", db=priced_db))
    assert "no USD prices match for b200" in message and "a100-80gb, h100-sxm" in message


def test_spot_legacy_preemptible_forced_stops():
    data = run_json("spot", "--work-hours", "100", "--mtti-hours", "1e9", "--checkpoint-minutes",
                    "5", "--restart-minutes", "10", "--legacy-preemptible")
    assert data["forced_restarts"] == 4
    assert data["expected_wall_hours"] == pytest.approx(100 + 5 / 60 * 100 / (
        data["checkpoint_interval_hours"]) + 4 * 0.25, rel=1e-4)
