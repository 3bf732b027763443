"""`spot` says when spot is not viable and why, and what to pass when it has no prices."""

from __future__ import annotations

import pytest

from .test_cli import run, run_json

BASE = ("spot", "--checkpoint-minutes", "10", "--restart-minutes", "15")


def test_an_mtti_of_36_seconds_is_not_viable_not_a_huge_wall_time():
    data = run_json(*BASE, "--work-hours", "100", "--mtti-hours", "0.01",
                    "--spot-price", "20", "--on-demand-price", "55")
    assert data["viable"] is False
    assert "36 s" in data["not_viable_reason"] and "15 min" in data["not_viable_reason"]
    assert data["expected_wall_hours"] is None and data["spot_cost"] is None
    assert data["on_demand_cost"] == "5500"
    text = run(*BASE, "--work-hours", "100", "--mtti-hours", "0.01").stdout
    assert text.splitlines()[0].startswith("spot is not viable here")
    assert "e+" not in text


def test_spot_dearer_than_on_demand_after_restarts_is_not_viable():
    # MTTI 2 h: Daly's wall time is ~128 h for 100 h of work; 40 x 128 > 55 x 100.
    data = run_json(*BASE, "--work-hours", "100", "--mtti-hours", "2",
                    "--spot-price", "40", "--on-demand-price", "55")
    assert data["viable"] is False and "dearer than on-demand" in data["not_viable_reason"]
    assert float(data["spot_cost"]) > float(data["on_demand_cost"])
    dear = run_json(*BASE, "--work-hours", "100", "--mtti-hours", "20",
                    "--spot-price", "60", "--on-demand-price", "55")
    assert dear["viable"] is False and "is not below on-demand" in dear["not_viable_reason"]
    cheap = run_json(*BASE, "--work-hours", "100", "--mtti-hours", "20",
                     "--spot-price", "20", "--on-demand-price", "55")
    assert cheap["viable"] is True and cheap["not_viable_reason"] is None


def test_missing_the_deadline_is_not_viable_with_the_reason():
    data = run_json(*BASE, "--work-hours", "100", "--mtti-hours", "20", "--deadline-hours",
                    "105", "--spot-price", "20", "--on-demand-price", "55")
    assert data["meets_deadline"] is False and data["viable"] is False
    assert "105 h deadline" in data["not_viable_reason"]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_no_prices_given_or_stored_says_what_to_pass(fmt):
    result = run(*BASE, "--work-hours", "100", "--mtti-hours", "20", "--format", fmt)
    assert result.exit_code == 0
    assert "--spot-price" in result.stdout and "--instance" in result.stdout
    if fmt == "table":
        assert "spot cost" not in result.stdout and " - " not in result.stdout


def test_a_plan_considers_any_instance_size_that_makes_it_up(priced_db):
    # A 2-GPU H100 plan: the only spot offer is AWS p5.48xlarge with 8 GPUs; one instance
    # makes up the plan (the W48 report said "no spot offer for 2x" while listing it).
    data = run_json(*BASE, "--work-hours", "10", "--gpu", "h100-sxm", "--count", "2",
                    db=priced_db)
    assert data["spot_offer"]["instance_type"] == "p5.48xlarge"
    assert data["spot_offer"]["zone"] == "us-east-1a"  # the cheaper zone
    assert (data["nodes"], data["gpus"], data["plan_gpus"]) == (1, 8, 2)
    # The stored Spot Advisor band, not the provider default, sets the MTTI.
    assert "interruption band '5-10%'" in data["mtti_source"]
    # On-demand: the cheapest offer of the plan's shape -- 2 GPUs in one instance: Lambda's
    # 8x at 31.92/h, billed whole (two Lambda 1x pods at 4.29 have no network to join them)
    # -- over the same 10 h.
    assert data["on_demand_price_per_hour"] == "31.92"
    assert data["on_demand_cost"] == "319.2"
    assert data["on_demand_comparator"].startswith("lambda gpu_8x_h100_sxm5")
    assert "8 GPUs billed for 2" in data["on_demand_comparator"]
    assert data["spot_price_per_hour"] == "17.63"
    text = run(*BASE, "--work-hours", "10", "--gpu", "h100-sxm", "--count", "2",
               db=priced_db).stdout
    assert "8 GPUs for a 2-GPU plan" in text


def test_a_plan_without_spot_offers_is_one_line(priced_db):
    result = run(*BASE, "--work-hours", "10", "--gpu", "a100-80gb", "--count", "8",
                 db=priced_db)
    assert result.exit_code == 1
    assert "no spot price for 8x a100-80gb" in result.stderr
