"""`breakeven` answers a finance reader can act on: a verdict with its reason, paybacks beyond
the horizon, an opex that adds up, sensitivity bounded to 0-100 %, a named comparable comparator.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs
from .seed import seed_prices
from .test_cli import SEED_BREAKEVEN, one_line_error, run, run_json

D = Decimal

# The seed case at 24 months: u* = (300,000 + 1,000 x 24) / (29 x 720 x 24) = 64.66 %.
SEED_24 = (*SEED_BREAKEVEN[:-6], "--residual-fraction", "0", "--discount-rate", "0",
           "--horizon-months", "24")


@pytest.mark.parametrize(("utilization", "verdict"), [("0.70", "buy"), ("0.60", "rent")])
def test_verdict_on_both_sides_of_the_breakeven_utilization(utilization, verdict):
    data = run_json(*SEED_24, "--utilization", utilization)
    assert data["breakeven_utilization"] == pytest.approx(0.646552, abs=1e-6)
    assert data["verdict"] == verdict
    # NPV = u x 29 x 720 x 24 - 1,000 x 24 - 300,000
    npv = D(utilization) * 29 * 720 * 24 - 24000 - 300000
    assert D(data["npv"]) == npv
    assert (npv > 0) == (verdict == "buy")
    assert "64.7%" in data["verdict_reason"]
    table = run(*SEED_24, "--utilization", utilization).stdout
    assert table.splitlines()[0].startswith(f"verdict: {verdict} -- ")


def test_payback_beyond_the_horizon_is_null_with_a_flag():
    # 36 months at 30 %: net = 0.3 x 29 x 720 - 1,000 = 5,264/month, payback 56.99 months.
    args = (*SEED_BREAKEVEN[:-6], "--residual-fraction", "0", "--discount-rate", "0",
            "--horizon-months", "36", "--utilization", "0.3")
    data = run_json(*args)
    assert data["payback_months"] is None and data["payback_within_horizon"] is False
    assert data["discounted_payback_month"] is None
    assert data["discounted_payback_within_horizon"] is False
    assert data["verdict"] == "rent"
    text = run(*args).stdout
    assert "payback                    not within 36 months" in text or \
        "not within 36 months" in text.split("discounted payback")[0]
    assert "month 57" not in text and "56.99" not in text
    inside = run_json(*SEED_24, "--utilization", "1")
    assert inside["payback_within_horizon"] is True
    assert inside["payback_months"] == pytest.approx(15.0905, abs=1e-4)


def test_opex_parts_add_up_to_the_total_staff_included():
    data = run_json("breakeven", "--capex", "300000", "--power-kw", "10.2",
                    "--cloud-price-per-hour", "55.04", "--utilization", "0.7",
                    "--staff-per-month", "1000", "--other-opex-per-month", "50")
    # 10.2 kW x 1 x 1.3 x 0.08 x 730 = 774.384; colo 10.2 x 150 = 1,530
    assert D(data["monthly_power"]) == D("774.38")
    assert D(data["monthly_colo"]) == 1530
    assert D(data["monthly_staff"]) == 1000
    assert D(data["monthly_other_opex"]) == 50
    parts = sum(D(data[k]) for k in ("monthly_power", "monthly_colo", "monthly_staff",
                                     "monthly_other_opex"))
    assert parts == D(data["monthly_onprem_opex"]) == D("3354.38")
    line = next(x for x in run("breakeven", "--capex", "300000", "--power-kw", "10.2",
                               "--cloud-price-per-hour", "55.04", "--utilization", "0.7",
                               "--staff-per-month", "1000", "--other-opex-per-month",
                               "50").stdout.splitlines() if x.startswith("on-prem opex"))
    assert "staff 1,000.00 USD" in line and "other 50.00 USD" in line


def test_sensitivity_is_bounded_to_0_100_with_never_and_always():
    # 12 months: u* = 312,000 / 250,560 = 124.5 % (docs/claims.md A21) -> never.
    args = (*SEED_BREAKEVEN[:-6], "--residual-fraction", "0", "--discount-rate", "0",
            "--horizon-months", "12", "--utilization", "0.5")
    data = run_json(*args)
    for row in data["sensitivity"]:
        for side in ("low", "high"):
            value, bound = row[f"breakeven_{side}"], row[f"breakeven_{side}_bound"]
            assert (value is None) != (bound is None) or (value is None and bound is None)
            if value is not None:
                assert 0 < value <= 1
            else:
                assert bound in ("never", "always", None)
    assert any(r["breakeven_high_bound"] == "never" or r["breakeven_low_bound"] == "never"
               for r in data["sensitivity"])
    assert data["breakeven_utilization"] is None and data["breakeven_bound"] == "never"
    assert "even at 100% utilization" in data["verdict_reason"]
    text = run(*args).stdout
    assert "never" in text and "%" in text
    for token in text.replace("->", " ").split():
        if token.endswith("%") and token[:-1].replace(".", "").lstrip("-").isdigit():
            assert 0 <= float(token[:-1]) <= 100, token


@pytest.fixture
def priced_db(sqlite_url) -> str:
    db = open_database(sqlite_url)
    seed_prices(db)
    # A community 1-GPU pod cheaper per GPU-hour than any 8-GPU node: eight of them are not a
    # comparable server (PCIe, no NVLink between them).
    when = at("2026-11-01")
    ingest_records(db, "runpod", [obs("1.99", when, provider="runpod", instance_type="1x H100",
                                      gpu_count=1, region="")], started_at=when)
    db.close()
    return sqlite_url


def test_cloud_comparator_is_one_node_with_the_same_gpus_and_named(priced_db):
    data = run_json("breakeven", "--gpu", "h100", "--count", "8", "--utilization", "0.8",
                    db=priced_db)
    assert data["offer"]["instance_type"] == "gpu_8x_h100_sxm5"  # lambda, 8 GPUs in one node
    assert data["cloud_price_per_hour"] == "31.92"
    assert data["comparator"].startswith("lambda gpu_8x_h100_sxm5")
    text = run("breakeven", "--gpu", "h100", "--count", "8", "--utilization", "0.8",
               db=priced_db).stdout
    assert "cloud comparator" in text and "gpu_8x_h100_sxm5" in text


def test_offer_and_given_price_choose_another_comparator(priced_db):
    from tracker.store.queries import price_rows

    db = open_database(priced_db)
    pod_id = str(next(r.offer_id for r in price_rows(db) if r.provider == "runpod"))
    db.close()
    data = run_json("breakeven", "--gpu", "h100", "--count", "8", "--utilization", "0.8",
                    "--offer", pod_id, db=priced_db)
    assert data["cloud_price_per_hour"] == "15.92"  # 8 x 1.99
    assert "chosen with --offer" in data["comparator"]
    given = run_json("breakeven", "--gpu", "h100", "--count", "8", "--utilization", "0.8",
                     "--cloud-price-per-hour", "40", db=priced_db)
    assert given["comparator"] == "given price" and given["offer"] is None
    line = one_line_error(run("breakeven", "--gpu", "h100-sxm", "--count", "8",
                              "--utilization", "0.8", "--offer", "999999", db=priced_db))
    assert "offer 999999" in line
    line = one_line_error(run("breakeven", "--gpu", "h100-sxm", "--count", "8",
                              "--utilization", "0.8", "--offer", pod_id, "--cloud-price-per-hour",
                              "1", db=priced_db))
    assert "not both" in line


def test_bound_utilization_reads_never_and_always():
    from tracker.economics.ownership import bound_utilization

    assert bound_utilization(D("1.58")) == (None, "never")
    assert bound_utilization(D("-0.097")) == (None, "always")
    assert bound_utilization(D(0)) == (None, "always")
    assert bound_utilization(D("0.45")) == (D("0.45"), None)
    assert bound_utilization(D(1)) == (D(1), None)
    assert bound_utilization(None) == (None, None)


def test_verdict_agrees_with_the_breakeven_utilization_property():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tracker.economics.defaults import EconomicsSettings
    from tracker.economics.ownership import bound_utilization, evaluate, verdict

    @settings(max_examples=60, deadline=None)
    @given(capex=st.integers(10_000, 1_000_000), price=st.decimals("1", "120", places=2),
           u=st.decimals("0.01", "1", places=2), horizon=st.integers(6, 72),
           rate=st.decimals("0", "0.2", places=2))
    def check(capex, price, u, horizon, rate):
        i = EconomicsSettings().ownership_inputs(
            capex=D(capex), power_kw=D("10.2"), cloud_price_per_hour=price, utilization=u,
            gpus=D(8), horizon_months=horizon, discount_rate=rate)
        result = evaluate(i)
        chosen = verdict(i, result)
        breakeven, bound = bound_utilization(result.breakeven_utilization)
        if bound == "never":
            assert chosen == "rent"
        elif breakeven is not None and abs(u - breakeven) > D("0.0001"):
            assert (chosen == "buy") == (u > breakeven)

    check()
