"""Discounting, NPV, IRR, PMT and depreciation, in Decimal, with numpy-financial's conventions.

Conventions follow numpy-financial 1.0.0 so results can be checked against it:
- `npv(rate, values)` = sum of values[t] / (1 + rate)**t for t = 0.. — values[0] is at t = 0 and
  is NOT discounted (Excel's NPV() discounts the first value; `excel_npv` does that).
- `irr(values)` returns the root closest to zero among the rates > -1, or None (numpy-financial
  returns NaN) when there is none.
- `pmt` is negative for a positive present value.

numpy is not imported at module level: the common case (one sign change in the cash flows,
which has exactly one IRR by Descartes' rule of signs) is solved here by bisection, and only
unusual flows with several sign changes go to numpy_financial.irr.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, localcontext
from itertools import pairwise

from tracker.core.errors import InvalidInput
from tracker.economics.units import dec, positive

ONE = Decimal(1)
TWELVE = Decimal(12)
MACRS_5_YEAR = (
    Decimal("0.20"), Decimal("0.32"), Decimal("0.192"),
    Decimal("0.1152"), Decimal("0.1152"), Decimal("0.0576"),
)
"""IRS Pub 946 Table A-1: 5-year property, 200% declining balance, half-year convention."""

DEPRECIATION_METHODS = ("sl", "ddb", "macrs5")


def monthly_rate(annual_rate: Decimal) -> Decimal:
    """The monthly rate equivalent to an annual one: (1 + r)^(1/12) − 1."""
    annual_rate = dec(annual_rate, "discount rate")
    if annual_rate <= -1:
        raise InvalidInput(f"discount rate must be more than -1, got {annual_rate}")
    if annual_rate == 0:
        return Decimal(0)
    with localcontext() as ctx:
        ctx.prec = 34
        return +((ONE + annual_rate) ** (ONE / TWELVE) - ONE)


def annualize(monthly: float | None) -> float | None:
    """(1 + monthly)^12 − 1; None stays None."""
    if monthly is None:
        return None
    return (1.0 + monthly) ** 12 - 1.0


def discount_factor(rate: Decimal, periods: int) -> Decimal:
    """1 / (1 + rate)^periods."""
    with localcontext() as ctx:
        ctx.prec = 34
        return +(ONE / (ONE + rate) ** periods)


def annuity_factor(rate: Decimal, periods: int) -> Decimal:
    """Present value of 1 paid at the end of each of `periods` periods (t = 1..periods)."""
    if periods <= 0:
        return Decimal(0)
    if rate == 0:
        return Decimal(periods)
    with localcontext() as ctx:
        ctx.prec = 34
        return +((ONE - ONE / (ONE + rate) ** periods) / rate)


def npv(rate: Decimal | float | str, values: Sequence[Decimal | int | str]) -> Decimal:
    """numpy-financial `npv`: values[0] at t = 0, undiscounted."""
    rate = dec(rate, "rate")
    with localcontext() as ctx:
        ctx.prec = 34
        total = Decimal(0)
        factor = ONE
        base = ONE + rate
        for value in values:
            total += dec(value, "cash flow") / factor
            factor *= base
        return +total


def excel_npv(rate: Decimal | float | str, values: Sequence[Decimal | int | str]) -> Decimal:
    """Excel's NPV(): the first value is already one period out (t = 1)."""
    return npv(rate, [Decimal(0), *values])


def pmt(
    rate: Decimal | float | str, nper: int, pv: Decimal | int | str,
    fv: Decimal | int | str = 0, when: str = "end",
) -> Decimal:
    """numpy-financial `pmt`: the level payment that amortizes `pv` to `fv` in `nper` periods."""
    rate, pv, fv = dec(rate, "rate"), dec(pv, "present value"), dec(fv, "future value")
    if when not in ("end", "begin"):
        raise InvalidInput(f"when must be 'end' or 'begin', got {when!r}")
    timing = ONE if when == "begin" else Decimal(0)
    with localcontext() as ctx:
        ctx.prec = 34
        if rate == 0:
            return +(-(fv + pv) / nper)
        growth = (ONE + rate) ** nper
        factor = (ONE + rate * timing) * (growth - ONE) / rate
        return +(-(fv + pv * growth) / factor)


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _npv_float(rate: float, flows: Sequence[float]) -> float:
    """Horner in v = 1/(1+rate); may be ±inf/nan near rate = −1 (callers handle that)."""
    v = 1.0 / (1.0 + rate)
    total = 0.0
    for flow in reversed(flows):
        total = total * v + flow
    return total


def irr(values: Sequence[Decimal | float | int]) -> float | None:
    """Internal rate of return per period (numpy-financial semantics), None when none exists.

    One sign change in the flows means exactly one rate > −1 (Descartes), found by bisection
    in pure Python; several sign changes defer to numpy_financial.irr, which picks the root
    closest to zero.
    """
    flows = [float(v) for v in values]
    nonzero = [f for f in flows if f != 0]
    changes = sum(1 for a, b in pairwise(nonzero) if _sign(a) != _sign(b))
    if changes == 0:
        return None
    if changes > 1:
        import numpy_financial as npf

        result = float(npf.irr(flows))
        return None if math.isnan(result) else result
    while flows and flows[-1] == 0:  # trailing zeros do not move the root
        flows.pop()
    first_sign = _sign(next(f for f in flows if f != 0))
    last_sign = _sign(flows[-1])

    def sign_at(rate: float) -> int:
        value = _npv_float(rate, flows)
        if math.isnan(value) or math.isinf(value):
            return last_sign  # near rate = −1 the last flow dominates
        return _sign(value)

    # NPV(r) has the sign of the first flow as r → ∞ and of the last flow as r → −1.
    high = 1.0
    while sign_at(high) != first_sign:
        high = high * 2.0 + 1.0
        if high > 1e12:
            return None
    low = 0.0 if sign_at(0.0) == last_sign else -0.5
    while sign_at(low) != last_sign:
        low = -1.0 + (1.0 + low) / 16.0
        if 1.0 + low < 1e-300:
            return None
    if sign_at(low) == 0:
        return low
    for _ in range(300):
        mid = (low + high) / 2.0
        if mid in (low, high):
            break
        side = sign_at(mid)
        if side == 0:
            return mid
        if side == last_sign:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


# Depreciation ---------------------------------------------------------------------------------

def depreciation_straight_line(capex: Decimal, residual: Decimal, years: int) -> list[Decimal]:
    """(capex − residual) / years, every year."""
    _check_depreciation(capex, residual, years)
    per_year = (capex - residual) / years
    return [per_year] * years


def depreciation_ddb(capex: Decimal, residual: Decimal, years: int) -> list[Decimal]:
    """Double declining balance at 2/years of book value, floored so book value ≥ residual."""
    _check_depreciation(capex, residual, years)
    rate = Decimal(2) / years
    book = capex
    schedule = []
    for _ in range(years):
        charge = min(book * rate, book - residual)
        schedule.append(charge)
        book -= charge
    return schedule


def depreciation_macrs5(capex: Decimal) -> list[Decimal]:
    """US tax MACRS 5-year (computers): six charges, half-year convention, residual ignored."""
    positive(capex, "capex")
    return [capex * share for share in MACRS_5_YEAR]


def depreciation_schedule(
    method: str, capex: Decimal, residual: Decimal, years: int,
) -> list[Decimal]:
    if method == "sl":
        return depreciation_straight_line(capex, residual, years)
    if method == "ddb":
        return depreciation_ddb(capex, residual, years)
    if method == "macrs5":
        return depreciation_macrs5(capex)
    raise InvalidInput(
        f"unknown depreciation method {method!r}; known: {', '.join(DEPRECIATION_METHODS)}")


def _check_depreciation(capex: Decimal, residual: Decimal, years: int) -> None:
    positive(capex, "capex")
    positive(residual, "residual value", allow_zero=True)
    if residual > capex:
        raise InvalidInput("residual value cannot exceed capex")
    if years < 1:
        raise InvalidInput(f"depreciation life must be at least 1 year, got {years}")
