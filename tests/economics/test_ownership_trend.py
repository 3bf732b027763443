"""Rent vs buy against a moving market: the cloud price along a yearly trend."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import numpy_financial as npf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import ownership
from tracker.economics.ownership import evaluate

from .test_cli import run, run_json
from .test_ownership import inputs

D = Decimal
CENT = D("0.01")


def test_the_trend_formulas_at_zero_reproduce_the_flat_ones_to_the_cent():
    # _evaluate_trend is the month-by-month path; with g = 0 it must agree with the closed
    # forms evaluate() uses for a flat price.
    for i in (inputs(), inputs(utilization=D("0.3")), inputs(discount_rate=D(0)),
              inputs(horizon_months=60, residual_fraction=D(0))):
        flat = evaluate(i)
        path = ownership._evaluate_trend(i)
        assert path.npv.quantize(CENT) == flat.npv.quantize(CENT)
        assert path.cash_flows == flat.cash_flows
        if flat.payback_months is not None and flat.payback_months <= 1200:
            assert path.payback_months is not None
            assert path.payback_months.quantize(CENT) == flat.payback_months.quantize(CENT)
        assert path.discounted_payback_month == flat.discounted_payback_month
        assert path.irr_monthly == pytest.approx(flat.irr_monthly, rel=1e-12)


def test_a_falling_market_prices_each_month_on_its_path():
    i = replace(inputs(), cloud_price_trend=D("-0.25"))
    result = evaluate(i)
    cloud = result.monthly_cloud_cost
    opex = result.monthly_onprem_opex
    # Month 13 is a year in: 75% of today's price; month 25, 56.25%.
    assert result.cash_flows[13] == pytest.approx(cloud * D("0.75") - opex, rel=D("1e-20"))
    assert result.cash_flows[25] == pytest.approx(cloud * D("0.5625") - opex, rel=D("1e-20"))
    r_m = float(result.monthly_discount_rate)
    assert float(result.npv) == pytest.approx(npf.npv(r_m, [float(x) for x in
                                                            result.cash_flows]), rel=1e-10)
    # Breakeven: NPV is 0 at u* (the cloud side scales with u).
    u = result.breakeven_utilization
    assert u is not None
    at_u = evaluate(replace(i, utilization=min(u, D(1))))
    if u <= 1:
        assert abs(at_u.npv) < D("0.01")
    flat = evaluate(inputs())
    assert result.npv < flat.npv
    assert u > flat.breakeven_utilization
    assert result.payback_months is None or result.payback_months > flat.payback_months


@settings(max_examples=25, deadline=None)
@given(a=st.integers(-90, 90), b=st.integers(-90, 90),
       utilization=st.sampled_from([D("0.3"), D("0.6"), D("0.9")]))
def test_npv_and_breakeven_are_monotone_in_the_trend(a, b, utilization):
    low, high = sorted((D(a) / 100, D(b) / 100))
    base = inputs(utilization=utilization)
    r_low = evaluate(replace(base, cloud_price_trend=low))
    r_high = evaluate(replace(base, cloud_price_trend=high))
    # A dearer rental future makes buying worth more and pay at a lower utilization.
    assert r_low.npv <= r_high.npv
    assert r_low.breakeven_utilization >= r_high.breakeven_utilization


@pytest.mark.parametrize("trend", [D(-1), D("-1.5"), D("1.01")])
def test_an_impossible_trend_is_refused(trend):
    with pytest.raises(InvalidInput, match="cloud price trend must be more than -100%"):
        evaluate(replace(inputs(), cloud_price_trend=trend))


GIVEN = ("breakeven", "--capex", "300000", "--power-kw", "10.2", "--cloud-price-per-hour",
         "55.04", "--utilization", "0.7")


def test_cli_trend_zero_equals_todays_output_exactly():
    today = run_json(*GIVEN)
    zero = run_json(*GIVEN, "--cloud-price-trend", "0")
    assert today["cloud_price_trend_pct_per_year"] == 0.0
    assert zero["cloud_price_trend_source"] == "given: +0% a year"
    del today["cloud_price_trend_source"], zero["cloud_price_trend_source"]
    assert today == zero
    assert run(*GIVEN).stdout == run(*GIVEN, "--cloud-price-trend", "0").stdout


def test_cli_trend_row_and_contract():
    data = run_json(*GIVEN, "--cloud-price-trend", "-25")
    assert data["cloud_price_trend_pct_per_year"] == -25.0
    assert data["cloud_price_trend_source"] == "given: -25% a year"
    row = next(r for r in data["sensitivity"] if r["input"] == "cloud_price_trend")
    assert D(row["low"]) == D("-0.40") and D(row["high"]) == D("0.1")
    trends = [r["trend_pct_per_year"] for r in data["trend_sensitivity"]]
    assert trends == [-40.0, -30.0, -25.0, -20.0, -10.0, 0.0, 10.0]
    npvs = [D(r["npv"]) for r in data["trend_sensitivity"]]
    assert npvs == sorted(npvs)
    today = run_json(*GIVEN)
    assert D(data["npv"]) < D(today["npv"])
    assert D(data["last_monthly_cloud_cost"]) < D(today["monthly_cloud_cost"])
    zero = next(r for r in data["trend_sensitivity"] if r["trend_pct_per_year"] == 0)
    assert zero["npv"] == today["npv"]
    table = run(*GIVEN, "--cloud-price-trend", "-25").stdout
    assert "cloud price trend             -25% a year" in table
    assert "by cloud price trend" in table


@pytest.mark.parametrize(("value", "message"), [
    ("abc", "is not a percentage a year"), ("-100", "must be more than -100"),
    ("250", "at most 100")])
def test_cli_bad_trend_is_one_usage_line(value, message):
    result = run(*GIVEN, "--cloud-price-trend", value)
    assert result.exit_code == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_cli_forecast_trend_needs_a_class():
    result = run(*GIVEN, "--cloud-price-trend", "forecast")
    assert result.exit_code == 2
    assert "--cloud-price-trend forecast needs --gpu" in result.stderr
