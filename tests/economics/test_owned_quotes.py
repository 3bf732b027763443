"""Hardware quotes are priced as owned cost per used GPU-hour, labelled apart from rentals.

The hand-worked example is the README's own DGX H100 quote (data/quotes-example.csv): capex
$270,000, 10.2 kW, 48-month life, 8 GPUs, with the economics defaults PUE 1.3, $0.08/kWh,
colo $150/kW-month, staff $1,000 per 8-GPU node per month, 730 h/month, power factor 1,
at a stated 50 % utilization (2,920 used GPU-hours a month):

    capex  270,000 / (48 x 2,920)                 = 1.926370 per GPU-hour
    power  10.2 x 1.3 x 0.08 x 730 = 774.384/2,920 = 0.265200
    colo   10.2 x 150 = 1,530 / 2,920             = 0.523973
    staff  1,000 / 2,920                           = 0.342466
    total (the sum of the parts as shown)          = 3.058009   (stored rental-style: 0.963185)
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.cli.main import cli
from tracker.economics.defaults import EconomicsSettings
from tracker.economics.ownership import evaluate, owned_cost
from tracker.store.db import open_database

from .seed import seed_prices
from .test_cli import run, run_json

D = Decimal
EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "quotes-example.csv"
EXACT_TOTAL = D(270000) / (48 * 2920) + D("774.384") / 2920 + D(1530) / 2920 + D(1000) / 2920
HAND_TOTAL = D("1.926370") + D("0.265200") + D("0.523973") + D("0.342466")  # 3.058009
# The other example quote, an HGX H100 server: $310,000 over 60 months, same power and opex.
HGX_TOTAL = D("1.769406") + D("0.265200") + D("0.523973") + D("0.342466")  # 2.901045


@pytest.fixture
def quotes_db(sqlite_url) -> str:
    db = open_database(sqlite_url)
    seed_prices(db)
    db.close()
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "import", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    return sqlite_url


def test_hand_worked_owned_cost():
    i = EconomicsSettings().ownership_inputs(
        capex=D(270000), power_kw=D("10.2"), cloud_price_per_hour=D(0),
        utilization=D("0.5"), gpus=D(8))
    cost = owned_cost(i, 48)
    assert round(cost.capex, 6) == D("1.926370")
    assert round(cost.power, 6) == D("0.265200")
    assert round(cost.colo, 6) == D("0.523973")
    assert round(cost.staff, 6) == D("0.342466")
    assert cost.total == EXACT_TOTAL
    assert round(cost.total, 6) == D("3.058008")


def test_prices_cheapest_lists_rentals_unless_quotes_are_asked_for(quotes_db):
    rentals = run_json("prices", "--gpu", "h100-sxm", "--cheapest", db=quotes_db)
    assert {r["ownership"] for r in rentals} == {"rental"}
    assert all(r["category"] != "quote" for r in rentals)
    both = run_json("prices", "--gpu", "h100-sxm", "--cheapest", "--include-quotes",
                    "--owned-utilization", "0.5", db=quotes_db)
    # The cheapest owned option is the HGX quote ($310k over 60 months): 1.7694 + 1.1316 = 2.9010.
    cheapest_quote = next(r for r in both if r["category"] == "quote")
    assert cheapest_quote["instance_type"] == "HGX H100 8-GPU server"
    assert cheapest_quote["owned_cost"]["per_gpu_hour"]["total"] == "2.901045"
    quotes = run_json("prices", "--gpu", "h100-sxm", "--category", "quote",
                      "--owned-utilization", "0.5", db=quotes_db)
    owned = next(r for r in quotes if r["instance_type"] == "DGX H100")
    assert owned["ownership"] == "owned"
    assert D(owned["price_per_gpu_hour"]) == HAND_TOTAL
    parts = owned["owned_cost"]["per_gpu_hour"]
    assert (parts["capex"], parts["power"], parts["colo"], parts["staff"], parts["total"]) == (
        "1.92637", "0.2652", "0.523973", "0.342466", "3.058009")
    # At 50 % the owned HGX is still below Lambda's 8x H100 at 3.99/GPU-h...
    lam = next(r for r in both if r["provider"] == "lambda" and r["category"] == "on-demand")
    assert D(cheapest_quote["price_per_gpu_hour"]) < D(lam["price_per_gpu_hour"])
    # ...but at 30 % utilization owning costs more per used GPU-hour than renting.
    low = run_json("prices", "--gpu", "h100-sxm", "--cheapest", "--include-quotes",
                   "--owned-utilization", "0.3", db=quotes_db)
    low_quote = next(r for r in low if r["category"] == "quote")
    assert D(low_quote["price_per_gpu_hour"]) > D("3.99")
    table = run("prices", "--gpu", "h100-sxm", "--cheapest", "--include-quotes",
                "--owned-utilization", "0.5", db=quotes_db).stdout
    assert "owned" in table and "rental" in table
    # Each part shown, adding up to the price.
    assert ("owned onprem HGX H100 8-GPU server: capex 1.769406 + power 0.2652 + colo "
            "0.523973 + staff 0.342466 = 2.901045 USD per GPU-hour at 50% utilization over "
            "60 months") in table


def test_compare_labels_owned_and_rental_with_the_owned_cost(quotes_db):
    rows = run_json("compare", "--model", "llama-3.1-8b", "--tokens", "1e9", "--gpu",
                    "h100-sxm", "--max-gpus", "8", "--owned-utilization", "0.5", db=quotes_db)
    kinds = {(r["category"], r["ownership"]) for r in rows}
    assert ("quote", "owned") in kinds and ("on-demand", "rental") in kinds
    assert all((r["category"] == "quote") == (r["ownership"] == "owned") for r in rows)
    # compare keeps the cheapest run per provider and category: the HGX quote.
    hgx = next(r for r in rows if r["category"] == "quote")
    assert hgx["instance_type"] == "HGX H100 8-GPU server"
    assert D(hgx["price_per_gpu_hour"]) == HGX_TOTAL
    assert hgx["owned_cost"]["per_gpu_hour"]["total"] == "2.901045"
    # The run on owned GPUs costs the owned rate x its GPU-hours (to the cent; per-second).
    assert abs(D(hgx["cost"]) - HGX_TOTAL * D(repr(hgx["gpu_hours"]))) < D("0.02")
    text = run("compare", "--model", "llama-3.1-8b", "--tokens", "1e9", "--gpu", "h100-sxm",
               "--max-gpus", "8", db=quotes_db).stdout
    assert "owned" in text and "rental" in text


@settings(max_examples=40, deadline=None)
@given(capex=st.integers(1000, 10**6), kw=st.decimals("0", "20", places=2),
       u=st.decimals("0.05", "1", places=2), life=st.integers(1, 96),
       gpus=st.sampled_from([1, 2, 4, 8]))
def test_owned_cost_equals_the_ownership_model_without_discounting(capex, kw, u, life, gpus):
    i = EconomicsSettings().ownership_inputs(
        capex=D(capex), power_kw=kw, cloud_price_per_hour=D(1), utilization=u, gpus=D(gpus),
        discount_rate=D(0), residual_fraction=D(0), horizon_months=life)
    cost = owned_cost(i, life)
    assert cost.total == pytest.approx(evaluate(i).owned_cost_per_gpu_hour, rel=D("1e-20"))
    assert cost.total == cost.capex + cost.power + cost.colo + cost.staff + cost.other


def test_cost_on_a_quote_uses_the_owned_rate(quotes_db):
    data = run_json("cost", "--hours", "10", "--gpu", "h100-sxm", "--count", "8",
                    "--category", "quote", db=quotes_db)
    # Default owned utilization 0.6: 2,920 -> 3,504 used GPU-hours a month for the HGX.
    parts = (D(310000) / (60 * 3504), D("774.384") / 3504, D(1530) / 3504, D(1000) / 3504)
    rate = sum((p.quantize(D("0.000001")) for p in parts), D(0))
    assert D(data["price_per_gpu_hour"]) == rate
    assert D(data["cost"]) == (rate * 8 * 10).quantize(D("0.01"))
