"""The options several commands share, declared once so that each has one meaning everywhere.

- `--as-of DATE`: the question's instant (UTC; a bare date is the end of that day).
- `--currency CODE` (also `GPU_TRACKER_CURRENCY`): the display currency. Every amount shown
  is in it, converted at the ECB reference rate of its own date and labelled with the code.
- `--price-currency CODE`: the currency of the amounts typed on the command line
  (`--price-per-gpu-hour`, `--capex`, ...); default: the display currency.
- `--provider`, `--region`: only offers from these (repeatable, or comma-separated: `--provider
  aws,gcp` is `--provider aws --provider gcp`).
- `--category`: the pricing category of the offers considered.

The economics commands price in one currency, so their display currency has a default
(`[economics] currency`); the store's listings (`prices`, `history`, ...) show amounts as
quoted unless `--currency` asks for one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from tracker.cli.commands.params import Instant
from tracker.core.categories import CATEGORIES

Decorator = Callable[[Any], Any]

CURRENCY_ENV = "GPU_TRACKER_CURRENCY"


def as_of_option(what: str = "Prices valid", *, end_of_day: bool = True,
                 default: str = "now") -> Decorator:
    """`--as-of DATE`: `what` at this instant; `default` names what no date means."""
    day = "; a bare date is the end of that day" if end_of_day else ""
    return click.option(
        "--as-of", "as_of", type=Instant(end_of_day=end_of_day),
        help=f"{what} at this date/time (UTC{day}). Default: {default}.")


def _check_currency(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None or value == "":
        return None
    from tracker.core.errors import InvalidInput
    from tracker.core.money import check_currency

    try:
        return check_currency(str(value))
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def currency_option(default: str = "as quoted") -> Decorator:
    """`--currency CODE` (also GPU_TRACKER_CURRENCY), the display currency."""
    return click.option(
        "--currency", "currency", metavar="CODE", envvar=CURRENCY_ENV, show_envvar=True,
        default=None, callback=_check_currency,
        help="Show money in this ISO currency (EUR, GBP, JPY, ...), each amount converted at "
             f"the ECB reference rate of its own date. Default: {default}.")


def price_currency_option(amounts: str) -> Decorator:
    """`--price-currency CODE`: the currency of the amounts given on the command line."""
    return click.option(
        "--price-currency", "price_currency", metavar="CODE", default=None,
        callback=_check_currency,
        help=f"Currency of the amounts given on the command line ({amounts}). Default: the "
             "display currency (--currency).")


def economics_currency_options(amounts: str) -> Decorator:
    """`--currency` (default `[economics] currency`) and `--price-currency` for `amounts`: the
    pair every economics command takes."""
    display = currency_option("[economics] currency, USD")
    typed = price_currency_option(amounts)
    return lambda func: display(typed(func))


def _names(ctx: click.Context, param: click.Parameter, value: Any) -> tuple[str, ...]:
    """Repeated and comma-separated values as one tuple, blanks dropped, order kept."""
    names: list[str] = []
    for item in value or ():
        names.extend(part.strip() for part in str(item).split(",") if part.strip())
    return tuple(dict.fromkeys(names))


def _provider_names(ctx: click.Context, param: click.Parameter,
                    value: Any) -> tuple[str, ...]:
    """Lower-cased, and a name a source uses for a provider read as the tracker's id
    (`lambdalabs` is `lambda`), as the stored offers carry it."""
    from tracker.core.providers import provider_id

    return tuple(dict.fromkeys(provider_id(name.lower())
                               for name in _names(ctx, param, value)))


def provider_option(purpose: str = "") -> Decorator:
    """`--provider ID` (repeatable, or comma-separated): only offers from these providers."""
    return click.option(
        "--provider", "providers", multiple=True, metavar="ID", callback=_provider_names,
        help=f"Only offers from these providers (repeatable, or comma-separated){purpose}.")


def region_option(purpose: str = "") -> Decorator:
    """`--region NAME` (repeatable, or comma-separated): only offers in these regions."""
    return click.option(
        "--region", "regions", multiple=True, metavar="NAME", callback=_names,
        help=f"Only offers in these regions (repeatable, or comma-separated){purpose}.")


def category_option(choices: Sequence[str] = CATEGORIES, *, many: bool = True,
                    default: str | None = None, purpose: str = "") -> Decorator:
    """`--category`: the pricing categories of the offers considered; `many` takes several
    (repeatable), else one with `default`."""
    if many:
        return click.option(
            "--category", "categories", multiple=True, type=click.Choice(list(choices)),
            help=f"Only these pricing categories (repeatable){purpose}.")
    return click.option(
        "--category", "category", type=click.Choice(list(choices)), default=default,
        show_default=default is not None,
        help=f"Pricing category of the offer{purpose}.")


def one_provider(providers: Sequence[str], why: str) -> str | None:
    """The one provider a question about a single instance type needs (a usage error for
    more than one)."""
    if len(providers) > 1:
        raise click.UsageError(f"--provider: give one provider {why}, got "
                               f"{', '.join(providers)}")
    return providers[0] if providers else None


__all__ = ["CURRENCY_ENV", "as_of_option", "category_option", "currency_option",
           "economics_currency_options", "one_provider", "price_currency_option",
           "provider_option", "region_option"]
