"""The currencies of one economics answer: the display currency every amount is shown in, the
currency of the amounts typed on the command line, and the rates between them.

An answer adds and compares amounts, so all of them are brought into the display currency
first: the stored prices at the ECB rate of their own day (`tracker.store.rates`), the
command line's amounts and the `[economics]` defaults at the rate of the question's day
(`--as-of`, else today). A default stated in dollars is converted, never relabelled: 1,000 USD
of staff a month is about 150,000 JPY, not 1,000 JPY.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, overload

import click

from tracker.cli.commands.options import CURRENCY_ENV

if TYPE_CHECKING:
    from tracker.cli.commands import AppContext
    from tracker.economics.defaults import EconomicsSettings


@dataclass
class Currencies:
    """What an economics command prices with: `settings` (with its amounts in `display` when
    the command uses them), and `given` to bring a command-line amount (in `price_currency`)
    into `display`."""

    display: str
    price_currency: str
    settings: EconomicsSettings
    rates: dict[str, Decimal] = field(default_factory=dict)  # display units per unit of key
    notes: list[str] = field(default_factory=list)  # one line per conversion made

    @overload
    def given(self, amount: Decimal) -> Decimal: ...
    @overload
    def given(self, amount: None) -> None: ...
    @overload
    def given(self, amount: Decimal | None) -> Decimal | None: ...

    def given(self, amount: Decimal | None) -> Decimal | None:
        """A command-line amount in the display currency."""
        if amount is None or self.price_currency == self.display:
            return amount
        return amount * self.rates[self.price_currency]


def economics_currencies(app: AppContext, currency: str | None, price_currency: str | None,
                         *, as_of: datetime | None, given: Mapping[str, object],
                         uses_defaults: bool = False) -> Currencies:
    """The display currency (`--currency`, else `[economics] currency`), the command line's
    (`--price-currency`, else the display currency) and the settings in the display currency.

    `given` maps each money option to its value (None when not given), for the warning when
    GPU_TRACKER_CURRENCY alone changed the currency those amounts are read in; with
    `uses_defaults` the `[economics]` amounts (capex, power, staff, ...) are converted too."""
    from tracker.cli.commands import economics_settings

    settings = economics_settings(app)
    display = currency or settings.currency
    price_in = price_currency or display
    typed = [name for name, value in given.items() if value is not None]
    if typed and price_currency is None and display != settings.currency \
            and _from_environment(currency):
        app.note(f"warning: {CURRENCY_ENV}={display} sets the display currency, and the "
                 f"amounts given ({', '.join(typed)}) are read in it; give --price-currency "
                 f"{settings.currency} for {settings.currency} amounts")
    defaults_in = settings.stated_currencies() if uses_defaults else set()
    what: dict[str, list[str]] = {}
    for code in defaults_in - {display}:
        what.setdefault(code, []).append("the [economics] defaults")
    if typed and price_in != display:
        what.setdefault(price_in, []).append(", ".join(typed))
    if not what:
        return Currencies(display, price_in, settings)
    rates, rate_text = _rates(app, sorted(what), display, as_of)
    notes = [f"{' and '.join(what[code])} converted from {code} at {rate_text[code]}"
             for code in sorted(what)]
    if uses_defaults:
        settings = settings.in_currency(display, rates)
    return Currencies(display, price_in, settings, rates, notes)


def _from_environment(currency: str | None) -> bool:
    """Whether --currency came from GPU_TRACKER_CURRENCY rather than the command line."""
    ctx = click.get_current_context(silent=True)
    if currency is None or ctx is None:
        return False
    source = ctx.get_parameter_source("currency")
    return source is click.core.ParameterSource.ENVIRONMENT and bool(os.environ.get(CURRENCY_ENV))


def _rates(app: AppContext, needed: list[str], display: str, as_of: datetime | None
           ) -> tuple[dict[str, Decimal], dict[str, str]]:
    """Units of `display` per unit of each `needed` currency on the question's day, and the
    text naming each rate and its ECB day."""
    from tracker.core.errors import InvalidInput, TrackerError
    from tracker.core.fx import STALE_RATE_DAYS
    from tracker.core.money import display_rate
    from tracker.store.rates import rate_table

    try:
        table = rate_table(app.db)  # the ecb source's stored days are newer than the bundle's
    except TrackerError:  # no database yet: the bundled ECB history alone
        table = rate_table(None)
    day = (as_of or datetime.now(UTC)).date()
    rates, notes = {}, {}
    for code in needed:
        try:
            rate, rate_day = table.rate(code, display, day)
        except InvalidInput as exc:
            raise InvalidInput(f"cannot show {code} amounts in {display}: {exc}") from None
        rates[code] = rate
        shown_day = rate_day.isoformat() if rate_day else day.isoformat()
        note = f"1 {code} = {display_rate(rate)} {display} (ECB, {shown_day})"
        if rate_day is not None and (day - rate_day).days > STALE_RATE_DAYS:
            note += (f", {(day - rate_day).days} days before {day.isoformat()}: "
                     "`gpu-tracker refresh --source ecb` fetches newer rates")
        notes[code] = note
    return rates, notes


__all__ = ["Currencies", "economics_currencies"]
