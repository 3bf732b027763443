"""`spot --simulate` through the CLI: the `simulation` contract, store prices, price history."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tracker.answers.spot_ranges import SIMULATION_JSON_KEYS
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs
from .test_cli import one_line_error, run, run_json

GIVEN = ("spot", "--work-hours", "250", "--mtti-hours", "24", "--checkpoint-minutes", "5",
         "--restart-minutes", "10", "--spot-price", "30", "--on-demand-price", "98")


def test_simulation_contract_and_agreement_with_daly():
    data = run_json(*GIVEN, "--deadline-hours", "280", "--simulate", "10000", "--seed", "3")
    sim = data["simulation"]
    assert set(SIMULATION_JSON_KEYS) <= set(sim)
    assert sim["replicas"] == 10000 and sim["seed"] == 3
    for key in ("wall_hours", "cost"):
        assert set(sim[key]) == {"p10", "p50", "p90", "mean", "stderr"}
    cost = {k: Decimal(v) for k, v in sim["cost"].items()}
    assert cost["p10"] <= cost["p50"] <= cost["p90"]
    assert sim["daly_expected_cost"] == data["spot_cost"]
    # The simulated mean within 3 standard errors (plus the whole-last-segment difference,
    # < 0.01% here) of Daly's expected cost.
    daly = Decimal(data["spot_cost"])
    assert abs(cost["mean"] - daly) <= 3 * cost["stderr"] + Decimal("1")
    assert abs(sim["mean_vs_daly_pct"]) < 0.1
    assert sim["deadline_hours"] == 280
    assert 0.8 < sim["deadline_probability"] < 1.0  # Daly says "meets"; one run in ten misses
    assert data["meets_deadline"] is True
    assert sim["on_demand_cost"] == data["on_demand_cost"]
    again = run_json(*GIVEN, "--deadline-hours", "280", "--simulate", "10000", "--seed", "3")
    assert again["simulation"] == sim


def test_simulation_table_and_deadline_choice():
    result = run(*GIVEN, "--deadline-hours", "280", "--simulate", "4000",
                 "--min-probability", "0.95")
    assert result.exit_code == 0, result.output
    assert "wall time P10/P50/P90" in result.stdout
    assert "P(meets deadline)" in result.stdout
    assert "deadline choice         spot, then on-demand after" in result.stdout
    data = run_json(*GIVEN, "--deadline-hours", "280", "--simulate", "4000",
                    "--min-probability", "0.95")
    choice = data["simulation"]["choice"]
    assert choice["option"] == "spot-then-on-demand"
    assert choice["probability"] >= 0.95
    assert Decimal(choice["expected_cost"]) < Decimal(data["on_demand_cost"])


def test_without_simulate_the_document_is_unchanged():
    assert "simulation" not in run_json(*GIVEN)


@pytest.mark.parametrize(("args", "message"), [
    (("--min-probability", "0.9"), "--min-probability needs --simulate N"),
    (("--simulate", "100", "--min-probability", "0.9"),
     "--min-probability needs --deadline-hours"),
    (("--simulate", "100", "--price-path", "history"), "--price-path history needs --start"),
    (("--simulate", "0",), "--simulate"),
    (("--simulate", "100", "--price-path", "history", "--start", "2026-10-01"),
     "--price-path history needs a stored spot offer"),
    (("--simulate", "100", "--max-runtime-hours", "24"),
     "--simulate does not model forced stops"),
])
def test_bad_simulation_flags_are_one_line(args, message):
    result = run(*GIVEN, *args)
    line = one_line_error(result, 1 if "forced stops" in message else 2)
    assert message in line


def test_simulation_on_a_stored_offer_and_its_price_history(sqlite_url):
    db = open_database(sqlite_url)
    # AWS cut the p5 spot price on 2026-10-05 (a made-up path, for the integral).
    for day, price in (("2026-10-01", "40.00"), ("2026-10-03", "40.00"),
                       ("2026-10-05", "20.00"), ("2026-11-01", "20.00")):
        when = at(day)
        ingest_records(db, "catalog", [
            obs("98.32", when), obs(price, when, category="spot", zone="us-east-1a")],
            started_at=when)
    db.close()
    base = ("spot", "--work-hours", "200", "--instance", "p5.48xlarge", "--region",
            "us-east-1", "--checkpoint-minutes", "5", "--restart-minutes", "10",
            "--mtti-hours", "24", "--simulate", "4000")
    flat = run_json(*base, "--as-of", "2026-10-02", db=sqlite_url)
    assert Decimal(flat["spot_price_per_hour"]) == 40
    path = run_json(*base, "--price-path", "history", "--start", "2026-10-02",
                    db=sqlite_url)
    sim = path["simulation"]
    assert sim["price_path"] == "history"
    # 2026-10-02 00:00 → the cut on 10-05 00:00 is 72 h in: 72 h at 40, the rest at 20.
    wall = sim["wall_hours"]["p50"]
    assert Decimal(sim["cost"]["p50"]) == pytest.approx(
        Decimal(str(72 * 40 + (wall - 72) * 20)), rel=Decimal("0.002"))
    assert Decimal(sim["cost"]["mean"]) < Decimal(flat["simulation"]["cost"]["mean"])
    assert any("pay its last price" in w for w in sim["warnings"])
    missing = run(*base, "--price-path", "history", "--start", "2026-09-01", db=sqlite_url)
    assert "no spot prices from aws us-east-1 as of 2026-09-01" in one_line_error(missing)
    before = run(*base, "--price-path", "history", "--start", "2026-09-01", "--as-of",
                 "2026-11-01", db=sqlite_url)
    assert "has no stored price at --start 2026-09-01" in one_line_error(before)


def test_json_is_plain_data():
    data = run_json(*GIVEN, "--simulate", "50")
    json.dumps(data)  # every value serializable
    assert data["simulation"]["deadline_probability"] is None


def test_simulation_of_the_best_plan_for_a_gpu_count(priced_db):
    data = run_json("spot", "--work-hours", "100", "--gpu", "h100-sxm", "--count", "8",
                    "--checkpoint-minutes", "5", "--restart-minutes", "10",
                    "--deadline-hours", "110", "--simulate", "2000", db=priced_db)
    sim = data["simulation"]
    assert data["plan_gpus"] == 8
    assert sim["replicas"] == 2000
    assert sim["daly_expected_cost"] == data["spot_cost"]
    assert 0 <= sim["deadline_probability"] <= 1
    assert abs(sim["mean_vs_daly_pct"]) < 1.0
