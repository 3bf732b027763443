"""The boundary between exact money (Decimal) and physics (float) for the economics engine.

Prices, costs and present values are Decimal from end to end. Hours, rates and probabilities
may be floats because the spot model needs exp/log; when a float meets money it crosses
here, through its shortest repr (the value a person would have typed), never through the
binary expansion. Outputs are rounded only at the edge (`money_out`, `ratio_out`).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import overload

from tracker.core.errors import InvalidInput
from tracker.core.money import CENT, round_money, to_decimal

__all__ = ["CENT", "RATE_PLACES", "dec", "fraction", "money_out", "positive", "ratio_out", "sig"]
RATE_PLACES = Decimal("0.0001")  # per-hour rates keep sub-cent digits ($/GPU-h of 0.3725)


def dec(value: object, what: str = "value") -> Decimal:
    """Any number (Decimal, int, str, float) as an exact Decimal; floats via their repr."""
    return to_decimal(value, what=what)


def positive(value: Decimal | float, what: str, *, allow_zero: bool = False) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{what} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "0 or more" if allow_zero else "more than 0"
        raise InvalidInput(f"{what} must be {bound}, got {_show(value)}")


def fraction(value: Decimal | float, what: str, *, allow_zero: bool = False) -> None:
    """A share in (0, 1] (or [0, 1] with allow_zero)."""
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value <= 1):
        interval = "[0, 1]" if allow_zero else "(0, 1]"
        raise InvalidInput(f"{what} must be in {interval}, got {_show(value)}")


def _show(value: Decimal | float) -> str:
    if isinstance(value, Decimal):
        from tracker.core.money import decimal_to_str

        return decimal_to_str(value)
    return f"{value:g}"


@overload
def money_out(value: Decimal, places: Decimal = CENT) -> Decimal: ...
@overload
def money_out(value: None, places: Decimal = CENT) -> None: ...
@overload
def money_out(value: Decimal | None, places: Decimal = CENT) -> Decimal | None: ...
def money_out(value: Decimal | None, places: Decimal = CENT) -> Decimal | None:
    """Round a computed amount for output with the one money rounding
    (`tracker.core.money.round_money`, half up); None stays None."""
    if value is None:
        return None
    return round_money(value, places)


def ratio_out(value: float | Decimal | None, digits: int = 6) -> float | None:
    """A dimensionless figure or a duration for output: a float rounded to `digits` decimals."""
    if value is None:
        return None
    number = float(value)
    if not math.isfinite(number):
        return None
    return round(number, digits)


def sig(value: float | None, digits: int = 6) -> float | None:
    """Round to significant digits (FLOPs, hours that span many orders of magnitude)."""
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    return float(f"{value:.{digits}g}")
