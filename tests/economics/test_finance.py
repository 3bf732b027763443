"""NPV, IRR, PMT and depreciation against numpy-financial 1.0.0 and IRS Pub 946."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy_financial as npf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import finance


def test_npv_docstring_case_t0_undiscounted():
    # docs/economics.md §2 case 14: numpy_financial.npv docstring.
    values = [-40000, 5000, 8000, 12000, 30000]
    result = finance.npv(Decimal("0.08"), values)
    assert result == pytest.approx(Decimal("3065.22267"), abs=Decimal("1e-5"))
    assert float(result) == pytest.approx(npf.npv(0.08, values), rel=1e-12)


def test_excel_npv_discounts_the_first_value():
    values = [-40000, 5000, 8000, 12000, 30000]
    excel = finance.excel_npv(Decimal("0.08"), values)
    assert excel == pytest.approx(finance.npv(Decimal("0.08"), values) / Decimal("1.08"),
                                  abs=Decimal("1e-20"))
    # Excel users put the t=0 flow outside: -40000 + NPV(0.08, rest) == numpy-financial npv.
    assert -40000 + finance.excel_npv(Decimal("0.08"), values[1:]) == pytest.approx(
        finance.npv(Decimal("0.08"), values), abs=Decimal("1e-20"))


def test_irr_docstring_cases():
    # docs/economics.md §2 case 15 and the other examples of the numpy_financial.irr docstring.
    assert finance.irr([-100, 39, 59, 55, 20]) == pytest.approx(0.2809484212, abs=1e-9)
    assert round(finance.irr([-100, 0, 0, 74]), 5) == -0.0955
    assert round(finance.irr([-100, 100, 0, -7]), 5) == -0.0833
    assert round(finance.irr([-100, 100, 0, 7]), 5) == 0.06206
    assert round(finance.irr([-5, 10.5, 1, -8, 1]), 5) == 0.0886


def test_irr_none_without_sign_change():
    assert finance.irr([100, 10, 10]) is None
    assert finance.irr([-100, -10]) is None
    assert finance.irr([0, 0]) is None


def test_pmt_docstring_case():
    # docs/economics.md §2 case 16: a $200,000 mortgage at 7.5%/yr over 15 years.
    result = finance.pmt(Decimal("0.075") / 12, 180, 200000)
    assert result == pytest.approx(Decimal("-1854.0247200054619"), rel=Decimal("1e-9"))
    assert float(result) == pytest.approx(npf.pmt(0.075 / 12, 180, 200000), rel=1e-12)


def test_pmt_zero_rate_and_begin():
    assert finance.pmt(0, 10, 1000) == Decimal(-100)
    assert float(finance.pmt(Decimal("0.01"), 12, 1000, when="begin")) == pytest.approx(
        npf.pmt(0.01, 12, 1000, when="begin"), rel=1e-12)


def test_monthly_rate_compounds_to_the_annual_rate():
    r_m = finance.monthly_rate(Decimal("0.10"))
    assert (1 + r_m) ** 12 == pytest.approx(Decimal("1.10"), abs=Decimal("1e-25"))
    assert finance.monthly_rate(Decimal(0)) == 0


@settings(max_examples=200, deadline=None)
@given(
    capex=st.integers(1_000, 1_000_000),
    flows=st.lists(st.integers(1, 100_000), min_size=1, max_size=60),
)
def test_irr_matches_numpy_financial_for_one_sign_change(capex, flows):
    values = [-capex, *flows]
    ours = finance.irr(values)
    theirs = npf.irr(values)
    assert ours is not None and not math.isnan(theirs)
    assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-9)
    # The NPV at our IRR is zero, relative to the size of the flows.
    assert abs(float(finance.npv(Decimal(repr(ours)), values))) <= 1e-6 * capex


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.integers(-1000, 1000), min_size=2, max_size=8))
def test_irr_agrees_with_numpy_financial_on_any_flows(values):
    theirs = npf.irr(values)
    ours = finance.irr(values)
    if math.isnan(theirs):
        # numpy finds no root; we may find one only where np.roots drops it numerically.
        if ours is not None:
            assert abs(float(finance.npv(Decimal(repr(ours)), values))) < 1e-6
        return
    assert ours is not None
    assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-8)


def test_depreciation_reference_case():
    # docs/economics.md §2 case 17: capex $300,000, residual $30,000, 5 years.
    capex, residual = Decimal(300000), Decimal(30000)
    assert finance.depreciation_straight_line(capex, residual, 5) == [Decimal(54000)] * 5
    ddb = finance.depreciation_ddb(capex, residual, 5)
    assert ddb == [Decimal(120000), Decimal(72000), Decimal(43200), Decimal(25920),
                   Decimal(8880)]
    assert sum(ddb) == capex - residual
    macrs = finance.depreciation_macrs5(capex)
    assert macrs == [Decimal(60000), Decimal(96000), Decimal(57600), Decimal(34560),
                     Decimal(34560), Decimal(17280)]
    assert sum(macrs) == capex


def test_ddb_never_goes_below_residual():
    schedule = finance.depreciation_ddb(Decimal(1000), Decimal(400), 4)
    assert schedule == [Decimal(500), Decimal(100), Decimal(0), Decimal(0)]


def test_depreciation_rejects_bad_input():
    with pytest.raises(InvalidInput, match="residual"):
        finance.depreciation_straight_line(Decimal(100), Decimal(200), 3)
    with pytest.raises(InvalidInput, match="at least 1 year"):
        finance.depreciation_ddb(Decimal(100), Decimal(0), 0)
    with pytest.raises(InvalidInput, match="unknown depreciation method"):
        finance.depreciation_schedule("sum-of-years", Decimal(100), Decimal(0), 3)
