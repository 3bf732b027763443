"""Rent vs buy: power, payback, NPV, IRR, breakeven utilization, sensitivity."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import numpy_financial as npf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import ownership
from tracker.economics.defaults import EconomicsSettings
from tracker.economics.ownership import OwnershipInputs, evaluate

D = Decimal


def inputs(**overrides) -> OwnershipInputs:
    base = dict(
        capex=D(300000), power_kw=D("10.2"), cloud_price_per_hour=D("55.04"),
        utilization=D("0.7"), horizon_months=36, gpus=D(8), pue=D("1.3"), kwh_price=D("0.08"),
        colo_per_kw_month=D(150), staff_per_month=D(1000), other_opex_per_month=D(0),
        residual_fraction=D("0.2"), discount_rate=D("0.10"), hours_per_month=D(730),
        power_factor=D(1))
    base.update(overrides)
    return OwnershipInputs(**base)


def test_power_cost_reference_case():
    # docs/economics.md §2 case 20: 10.2 kW × PUE 1.3 × $0.08 × 730 h = $774.38 (720 h: $763.78).
    assert ownership.monthly_power_cost(inputs()) == D("774.384")
    assert ownership.monthly_power_cost(inputs(hours_per_month=D(720))) == D("763.776")


def test_monthly_figures_and_payback():
    result = evaluate(inputs())
    assert result.monthly_onprem_opex == D("774.384") + D(1530) + D(1000)
    assert result.monthly_cloud_cost == D("0.7") * 730 * D("55.04")
    assert result.payback_months == D(300000) / (result.monthly_cloud_cost
                                                  - result.monthly_onprem_opex)


def test_npv_and_irr_match_numpy_financial_on_the_monthly_vector():
    i = inputs()
    result = evaluate(i)
    r_m = float(result.monthly_discount_rate)
    flows = [float(x) for x in result.cash_flows]
    assert len(flows) == 37 and flows[0] == -300000
    assert float(result.npv) == pytest.approx(npf.npv(r_m, flows), rel=1e-12)
    assert result.irr_monthly == pytest.approx(npf.irr(flows), rel=1e-9)
    assert result.irr_annual == pytest.approx((1 + npf.irr(flows)) ** 12 - 1, rel=1e-9)


def test_discounted_payback_is_the_first_month_covering_capex():
    result = evaluate(inputs())
    m = result.discounted_payback_month
    net = float(result.monthly_net_saving)
    r = float(result.monthly_discount_rate)

    def pv(months: int) -> float:
        return sum(net / (1 + r) ** t for t in range(1, months + 1))

    assert pv(m) >= 300000 > pv(m - 1)
    assert m >= result.payback_months


def test_no_payback_when_cloud_is_cheaper_than_running():
    result = evaluate(inputs(cloud_price_per_hour=D("0.5")))
    assert result.payback_months is None
    assert result.discounted_payback_month is None
    assert result.breakeven_utilization > 1
    assert result.warnings


def test_owned_cost_per_gpu_hour_undiscounted():
    i = inputs(discount_rate=D(0), utilization=D(1))
    result = evaluate(i)
    total = D(300000) - D(60000) + result.monthly_onprem_opex * 36
    assert result.owned_cost_per_gpu_hour == total / (730 * 8 * 36)


def test_validation_is_one_line():
    for bad, message in ((dict(utilization=D("1.5")), r"utilization must be in \(0, 1\]"),
                         (dict(utilization=D(0)), "utilization"),
                         (dict(horizon_months=0), "horizon"),
                         (dict(pue=D("0.9")), "PUE must be at least 1"),
                         (dict(capex=D(-1)), "capex must be 0 or more")):
        with pytest.raises(InvalidInput, match=message) as info:
            evaluate(inputs(**bad))
        assert "\n" not in str(info.value)


money = st.decimals(min_value=1, max_value=200, places=2)


@settings(max_examples=150, deadline=None)
@given(low=money, bump=st.decimals(min_value="0.01", max_value=100, places=2))
def test_payback_falls_as_the_cloud_price_rises(low, bump):
    a = evaluate(inputs(cloud_price_per_hour=low))
    b = evaluate(inputs(cloud_price_per_hour=low + bump))
    if a.payback_months is not None:
        assert b.payback_months is not None and b.payback_months < a.payback_months
    assert b.npv > a.npv


@settings(max_examples=150, deadline=None)
@given(capex=st.integers(10_000, 2_000_000), extra=st.integers(1, 500_000),
       rate=st.sampled_from([D(0), D("0.08"), D("0.15")]))
def test_breakeven_utilization_rises_with_capex(capex, extra, rate):
    a = ownership.breakeven_utilization(inputs(capex=D(capex), discount_rate=rate))
    b = ownership.breakeven_utilization(inputs(capex=D(capex + extra), discount_rate=rate))
    assert b > a


@settings(max_examples=150, deadline=None)
@given(capex=st.integers(50_000, 1_000_000), price=money,
       horizon=st.integers(6, 84), residual=st.decimals(0, "0.5", places=2))
def test_npv_at_breakeven_utilization_is_zero_undiscounted(capex, price, horizon, residual):
    i = inputs(capex=D(capex), cloud_price_per_hour=price, horizon_months=horizon,
               residual_fraction=residual, discount_rate=D(0), utilization=D(1))
    u = ownership.breakeven_utilization(i)
    # Undiscounted it is the textbook formula ...
    assert u == (D(capex) * (1 - residual) + ownership.monthly_opex(i) * horizon) / (
        price * 730 * horizon)
    # ... and at that utilization buying and renting are worth the same.
    at_breakeven = replace(i, utilization=u)
    npv = -at_breakeven.capex + (ownership.monthly_cloud_cost(at_breakeven)
                                 - ownership.monthly_opex(at_breakeven)) * horizon + (
        at_breakeven.capex * residual)
    assert abs(npv) < D("1e-15") * capex


def test_npv_at_breakeven_is_zero_discounted_too():
    i = inputs(capex=D(300000), discount_rate=D("0.10"), utilization=D(1))
    u = ownership.breakeven_utilization(i)
    assert u < 1
    assert abs(evaluate(replace(i, utilization=u)).npv) < D("1e-18")


def test_sensitivity_table_is_sorted_by_swing():
    settings_ = EconomicsSettings()
    rows = ownership.sensitivity(inputs(), settings_.sensitivity_ranges())
    swings = [r.swing for r in rows]
    assert swings == sorted(swings, reverse=True)
    by_name = {r.input: r for r in rows}
    assert set(by_name) == set(ownership.SENSITIVE_INPUTS)
    capex = by_name["capex"]
    assert (capex.low, capex.high) == (D(240000), D(360000))
    assert capex.breakeven_low < capex.breakeven_high
    cloud = by_name["cloud_price_per_hour"]
    assert cloud.breakeven_low > cloud.breakeven_high
    # Absolute ranges from data/economics.json, widened to include the base value.
    assert (by_name["pue"].low, by_name["pue"].high) == (D("1.1"), D("1.6"))
    wide = ownership.sensitivity(inputs(kwh_price=D("0.30")), settings_.sensitivity_ranges())
    kwh = next(r for r in wide if r.input == "kwh_price")
    assert (kwh.low, kwh.high) == (D("0.05"), D("0.30"))
