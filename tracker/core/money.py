"""Money is a Decimal amount with an ISO 4217 currency code; floats never touch a price.

Amounts travel as a plain `Decimal` beside their currency code (offer rows, documents),
so there is no wrapper type.

Formatting for people happens only at the edge, and only through `format_money` (the report's
`money` filter and the CLI tables both call it); everything else keeps full precision.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from tracker.core.errors import InvalidInput

# Active ISO 4217 codes (2024 list, without funds and precious-metal codes).
ISO_4217 = frozenset(
    """AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN
    BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP
    GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS
    KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR
    MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF
    SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD
    TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG""".split()
)

ZERO = Decimal(0)
CENT = Decimal("0.01")
def to_decimal(value: object, *, what: str = "amount") -> Decimal:
    """Convert a provider's number to Decimal without passing through binary float.

    Strings and ints convert exactly. A float (some JSON APIs) converts through its
    shortest repr, which is what the provider wrote on the wire.
    """
    if isinstance(value, Decimal):
        result = value
    elif isinstance(value, bool):
        raise InvalidInput(f"{what} must be a number, got {value!r}")
    elif isinstance(value, int):
        result = Decimal(value)
    elif isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise InvalidInput(f"{what} is not a finite number: {value!r}")
        result = Decimal(repr(value))
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("$"):
            text = text[1:]
        if "," in text:
            # Only as thousands separators (2,199.00): "2.199,00" (a decimal comma) or
            # "1,2" is ambiguous, never read as 2.199 or 12.
            if not _THOUSANDS.fullmatch(text):
                raise InvalidInput(f"{what} is not a plain number: {_shown(value)}")
            text = text.replace(",", "")
        try:
            result = Decimal(text)
        except InvalidOperation:
            raise InvalidInput(f"{what} is not a number: {_shown(value)}") from None
    else:
        raise InvalidInput(f"{what} must be a number, got {type(value).__name__}")
    if not result.is_finite():
        raise InvalidInput(f"{what} is not a finite number: {_shown(value)}")
    if result and not -MAX_EXPONENT <= result.adjusted() <= MAX_EXPONENT:
        # Far outside any amount (1e999999999): refused here, so arithmetic on it can
        # neither overflow nor write out a billion digits.
        raise InvalidInput(f"{what} is out of range: {_shown(value)}")
    return result


# Amounts are refused beyond 10^±MAX_EXPONENT (tracker/core/bounds.py has the real bounds; this
# only keeps Decimal arithmetic exact and finite on what a provider sends).
MAX_EXPONENT = 100
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def normalize_decimal(value: Decimal) -> Decimal:
    """Canonical form for storage and comparison: no exponent, no trailing zeros."""
    if value == 0:
        return ZERO
    normalized = value.normalize()
    # normalize() may produce an exponent form (1E+1); quantize back to an integer form then.
    exponent = normalized.as_tuple().exponent  # a letter only for NaN/Infinity (refused earlier)
    if isinstance(exponent, int) and exponent > 0:
        normalized = normalized.quantize(Decimal(1))
    return normalized


def decimal_to_str(value: Decimal) -> str:
    """Exact, plain-notation string for JSON and CSV (never scientific notation).

    The text of normalize_decimal(value): format 'f' writes a positive exponent out as
    zeros (1E+1 as 10), so the quantize that normalize_decimal needs for its Decimal is left
    out here; ingest converts every new price this way."""
    return "0" if value == 0 else format(value.normalize(), "f")


def check_currency(code: str) -> str:
    if code is not None and not isinstance(code, str):  # a provider's JSON number or list
        raise InvalidInput(f"currency {_shown(code)} is not an ISO 4217 code")
    code = (code or "").strip().upper()
    if code not in ISO_4217:
        raise InvalidInput(f"currency {code!r} is not an ISO 4217 code")
    return code


def round_money(value: Decimal, places: Decimal = CENT) -> Decimal:
    """The one money rounding, at the edge only: half up to `places`, as invoices and finance
    readers round. The report's `money` filter and the economics outputs
    (`tracker.economics.units.money_out`) both call it."""
    return value.quantize(places, rounding=ROUND_HALF_UP)


# ISO 4217 minor units where they are not 2 (the others in ISO_4217 have 2).
MINOR_UNITS = {
    **dict.fromkeys("BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF".split(),
                    0),
    **dict.fromkeys("BHD IQD JOD KWD LYD OMR TND".split(), 3),
}


def minor_units(currency: str) -> int:
    """Decimal places of the currency's minor unit (JPY 0, USD 2, KWD 3; ISO 4217)."""
    return MINOR_UNITS.get(currency.upper(), 2)


def money_places(value: Decimal, currency: str, *, rate: bool = False,
                 signed: bool = False) -> int:
    """Decimal places an amount is shown with: the currency's minor unit (JPY 0, USD 2). A
    price per unit (`rate`: per GPU-hour, per million tokens) below one unit of a currency
    with cents shows one more, always, so a column of sub-dollar prices never mixes two and
    three decimals ($0.079 and $0.450 alike); a change (`signed`) keeps the minor unit."""
    places = minor_units(currency)
    if places == 2 and rate and not signed and abs(value) < 1:
        places = 3
    return places


def display_amount(value: Decimal, currency: str, *, rate: bool = False) -> Decimal:
    """An amount rounded for people, to `money_places`."""
    return round_money(value, Decimal(1).scaleb(-money_places(value, currency, rate=rate)))


# The report's typography: a symbol before the figure where one is unambiguous, and a real
# minus sign; terminals and CSV get the ISO code after the figure and an ASCII hyphen.
SYMBOLS = {"USD": "$", "EUR": "\u20ac", "GBP": "\u00a3", "JPY": "\u00a5"}
MINUS = "\u2212"


def format_money(value: Decimal, currency: str, *, per: str | None = None,
                 rate: bool = False, signed: bool = False, places: int | None = None,
                 symbol: bool = False) -> str:
    """An amount for people: rounded half up to `money_places` (or `places`), thousands
    separated, labelled with its currency (`1,234.57 USD`; with `symbol`, `$1,234.57` and
    `1.20 CHF`), `+`/`\u00b1` in front of a `signed` change, `/per` after a price per unit
    (`per` makes it a `rate`)."""
    if places is None:
        places = money_places(value, currency, rate=rate or per is not None, signed=signed)
    rounded = round_money(value, Decimal(1).scaleb(-places))
    digits = f"{abs(rounded):,.{places}f}"
    mark = SYMBOLS.get(currency) if symbol else None
    text = f"{mark}{digits}" if mark else f"{digits} {currency}"
    if rounded < 0:
        text = (MINUS if symbol else "-") + text
    elif signed and rounded > 0:
        text = "+" + text
    elif signed:
        text = "\u00b1" + text
    return f"{text}/{per}" if per else text


def display_rate(rate: Decimal) -> Decimal:
    """An exchange rate for output: 6 significant digits, as the ECB publishes them."""
    if rate == 0:
        return rate
    digits = rate.adjusted()
    return normalize_decimal(rate.quantize(Decimal(1).scaleb(digits - 5)))
