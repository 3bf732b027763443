"""`gpu-tracker breakeven`: rent vs buy (the click layer).

Parses the flags, looks the cloud price up in the store only when it is not given
(`tracker.answers.pricing`), builds the answer with `tracker.answers.breakeven_documents` and
prints it with the shared formatter; the human table is drawn here. With a given price it
starts without SQLAlchemy, pandas or numpy.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import click

from tracker.answers.breakeven_documents import (
    breakeven_document,
    hardware_costs,
)
from tracker.cli.commands import AppContext, pass_app
from tracker.cli.commands.options import (
    as_of_option,
    category_option,
    economics_currency_options,
    provider_option,
    region_option,
)
from tracker.cli.commands.params import (
    DECIMAL_FRACTION,
    GPU_COUNT,
    MONEY,
    MONTHS,
    OPEN_DECIMAL_FRACTION,
    PUE,
    YEARS,
    BoundedDecimal,
    resolve_gpus,
)
from tracker.cli.commands.printing import emit, field_lines, format_option, money_text
from tracker.core.errors import InvalidInput
from tracker.economics.units import positive

# An annual rate, 0 to 1000 %/yr: below 0 the NPV rewards paying later and flips the verdict.
DISCOUNT_RATE = BoundedDecimal(0, 10, interval=True)

HOURS_PER_MONTH = BoundedDecimal(0, 744, min_open=True, why="31 days")


@click.command()
@click.option("--capex", type=MONEY,
              help="Hardware cost (servers or GPUs). Default with --gpu: the per-GPU default x "
                   "count, plus networking per GPU.")
@click.option("--networking-per-gpu", type=MONEY,
              help="Networking per GPU added to capex (default: only with capex from --gpu).")
@click.option("--storage", type=MONEY, default=Decimal(0), help="Storage capex.")
@click.option("--install", type=MONEY, default=Decimal(0), help="Installation capex.")
@click.option("--power-kw", type=MONEY, help="Rated IT power in kW (default with --gpu).")
@click.option("--power-factor", type=DECIMAL_FRACTION,
              help="Average share of rated power drawn (1).")
@click.option("--pue", type=PUE, help="Power usage effectiveness (1.3).")
@click.option("--kwh-price", type=MONEY, help="Electricity price per kWh (0.08).")
@click.option("--colo-per-kw-month", type=MONEY, help="Colocation per kW-month (150).")
@click.option("--staff-per-month", type=MONEY,
              help="Staff and maintenance per month (1000 per 8-GPU node).")
@click.option("--other-opex-per-month", type=MONEY, help="Other monthly opex (0).")
@click.option("--cloud-price-per-hour", type=MONEY,
              help="Cloud price per hour for the same GPUs (else from the store with --gpu).")
@click.option("--offer", "offer_id", type=int,
              help="Stored offer id to rent instead (`offer_id` in compare/cost JSON; default: "
                   "the cheapest on-demand offer with the same GPUs in one node).")
@click.option("--gpu", help="GPU model: store price, capex and power defaults.")
@click.option("--count", type=GPU_COUNT, help="GPUs bought and rented (default 8).")
@provider_option(" (the store price)")
@region_option(" (the store price)")
@category_option(many=False, default="on-demand", purpose=" (the store price)")
@as_of_option("The store price and the exchange rates valid")
@economics_currency_options("--capex, --cloud-price-per-hour, --kwh-price, ...")
@click.option("--utilization", type=OPEN_DECIMAL_FRACTION, required=True,
              help="Share of hours the GPUs would be rented, in (0, 1].")
@click.option("--horizon-months", type=MONTHS, help="Months the hardware is kept (36).")
@click.option("--residual-fraction", type=DECIMAL_FRACTION,
              help="Resale share of capex at the horizon.")
@click.option("--discount-rate", type=DISCOUNT_RATE, help="Annual discount rate (0.10).")
@click.option("--hours-per-month", type=HOURS_PER_MONTH,
              help="Hours per month (730; 720 = 30 days).")
@click.option("--depreciation", type=click.Choice(["sl", "ddb", "macrs5"]),
              help="Add a depreciation schedule (straight line, double declining, MACRS 5-yr).")
@click.option("--depreciation-years", type=YEARS,
              help="Book life for sl/ddb (default: the horizon in whole years).")
@click.option("--cloud-price-trend", "trend", metavar="PCT|forecast",
              help="Move the rental price by PCT percent a year over the horizon (-25 for "
                   "falling 25% a year), or `forecast`: the fitted trend of the comparable "
                   "offer's price index (`gpu-tracker forecast`). Default: 0, today's price.")
@format_option
@pass_app
def breakeven(app: AppContext, capex: Decimal | None, networking_per_gpu: Decimal | None,
              storage: Decimal, install: Decimal, power_kw: Decimal | None,
              power_factor: Decimal | None, pue: Decimal | None, kwh_price: Decimal | None,
              colo_per_kw_month: Decimal | None, staff_per_month: Decimal | None,
              other_opex_per_month: Decimal | None, cloud_price_per_hour: Decimal | None,
              offer_id: int | None, gpu: str | None, count: float | None,
              providers: tuple[str, ...], regions: tuple[str, ...],
              category: str, as_of: datetime | None, currency: str | None,
              price_currency: str | None,
              utilization: Decimal, horizon_months: int | None,
              residual_fraction: Decimal | None, discount_rate: Decimal | None,
              hours_per_month: Decimal | None, depreciation: str | None,
              depreciation_years: int | None, trend: str | None, fmt: str) -> None:
    """Rent vs buy: monthly costs, payback, NPV and IRR of buying, breakeven utilization.

    Give --capex, --power-kw and --cloud-price-per-hour, or --gpu and --count to take the
    capex and power defaults and the cheapest stored cloud price as of --as-of.
    """
    from tracker.cli.commands.currencies import economics_currencies

    typed = {"--capex": capex, "--networking-per-gpu": networking_per_gpu,
             "--storage": storage or None, "--install": install or None,
             "--kwh-price": kwh_price, "--colo-per-kw-month": colo_per_kw_month,
             "--staff-per-month": staff_per_month,
             "--other-opex-per-month": other_opex_per_month,
             "--cloud-price-per-hour": cloud_price_per_hour}
    money = economics_currencies(app, currency, price_currency, as_of=as_of, given=typed,
                                 uses_defaults=True)
    settings, currency = money.settings, money.display
    (capex, networking_per_gpu, storage, install, kwh_price, colo_per_kw_month,
     staff_per_month, other_opex_per_month, cloud_price_per_hour) = (
        money.given(capex), money.given(networking_per_gpu), money.given(storage),
        money.given(install), money.given(kwh_price), money.given(colo_per_kw_month),
        money.given(staff_per_month), money.given(other_opex_per_month),
        money.given(cloud_price_per_hour))
    gpu_id = resolve_gpus([gpu], app)[0] if gpu else None
    gpus = Decimal(repr(count)) if count is not None else settings.value("gpus_per_node")
    positive(float(gpus), "--count")
    bought = hardware_costs(settings, gpu=gpu_id, gpus=gpus, capex=capex,
                            networking_per_gpu=networking_per_gpu, storage=storage,
                            install=install, power_kw=power_kw)
    offer = comparator = None
    if cloud_price_per_hour is not None and offer_id is not None:
        raise InvalidInput("give --offer or --cloud-price-per-hour, not both")
    if cloud_price_per_hour is None:
        if gpu_id is None and offer_id is None:
            raise InvalidInput("give --cloud-price-per-hour, or --gpu to price from the store")
        from tracker.answers import pricing
        from tracker.store.known import check_filters

        check_filters(app.db, providers, regions)  # a store price: they must be in the store
        cloud_price_per_hour, offer, comparator = pricing.cloud_price(
            app.db, gpu=gpu_id, gpus=gpus, as_of=as_of, provider=list(providers) or None,
            region=list(regions) or None,
            category=category, currency=currency, offer_id=offer_id)
    trend_fraction, trend_source, trend_warnings = _trend(
        app, trend, offer=offer, gpu=gpu_id, as_of=as_of, currency=currency)
    answer = breakeven_document(
        settings, bought, gpus=gpus, cloud_price_per_hour=cloud_price_per_hour,
        utilization=utilization, currency=currency, offer=offer, comparator=comparator,
        pue=pue, kwh_price=kwh_price,
        colo_per_kw_month=colo_per_kw_month, staff_per_month=staff_per_month,
        other_opex_per_month=other_opex_per_month, residual_fraction=residual_fraction,
        discount_rate=discount_rate, hours_per_month=hours_per_month,
        power_factor=power_factor, horizon_months=horizon_months, depreciation=depreciation,
        depreciation_years=depreciation_years, cloud_price_trend=trend_fraction,
        trend_source=trend_source)
    answer.data["warnings"].extend([*trend_warnings, *money.notes])
    emit(answer.data, fmt, table_text=_breakeven_table(answer.data,
                                                        with_sensitivity=fmt == "table"))


def _trend(app: AppContext, trend: str | None, *, offer: Any, gpu: str | None,
           as_of: datetime | None, currency: str
           ) -> tuple[Decimal | None, str | None, list[str]]:
    """(--cloud-price-trend as a fraction a year, where it came from, warnings)."""
    if trend is None:
        return None, None, []
    if trend.strip().lower() != "forecast":
        try:
            pct = Decimal(trend.strip().rstrip("%"))
        except ArithmeticError:
            raise click.BadParameter(f"{trend!r} is not a percentage a year or `forecast`",
                                     param_hint="'--cloud-price-trend'") from None
        if not pct.is_finite() or not -100 < pct <= 100:
            raise click.BadParameter(f"must be more than -100 and at most 100 (percent a "
                                     f"year), got {trend}", param_hint="'--cloud-price-trend'")
        return pct / 100, f"given: {pct:+}% a year", []
    from datetime import UTC

    from tracker.answers.freshness import stale_after_hours
    from tracker.market.forecasts import forecast_trend

    gpu = offer.gpu if offer is not None else gpu
    if gpu is None:
        raise click.UsageError("--cloud-price-trend forecast needs --gpu or a stored offer "
                               "(the class whose index to forecast)")
    category = offer.category if offer is not None else "on-demand"
    found = forecast_trend(app.db, gpu, category=category, as_of=as_of or datetime.now(UTC),
                           currency=currency, max_age_hours=stale_after_hours(app.config))
    return found.trend, found.source, list(found.warnings)


def _payback_text(months: Any, never: bool, horizon: int, shown: str) -> str:
    """A payback as the table says it (`shown` names `months`): null in the document is never
    (no monthly saving to pay back with) or beyond the horizon."""
    if months is not None:
        return shown.format(months)
    return "never" if never else f"not within {horizon} months"


def _share_text(value: Any, bound: str | None) -> str:
    if bound is not None:
        return bound
    return "-" if value is None else f"{value:.1%}"


def _breakeven_table(data: dict[str, Any], *, with_sensitivity: bool) -> str:
    """The human table, drawn from the JSON document alone (the same figures, rounded)."""
    currency = data["currency"]
    horizon = data["horizon_months"]

    def money(key: str, *, rate: bool = False) -> str:
        return money_text(data[key], currency, rate=rate)

    parts = [f"power {money('monthly_power')}", f"colo {money('monthly_colo')}",
             f"staff {money('monthly_staff')}"]
    if data["monthly_other_opex"]:
        parts.append(f"other {money('monthly_other_opex')}")
    breakeven = _share_text(data["breakeven_utilization"], data["breakeven_bound"])
    if data["breakeven_bound"] == "never":
        breakeven = f"never within {horizon} months (above 100%)"
    elif data["breakeven_bound"] == "always":
        breakeven = "always (buying pays even at 0%)"
    else:
        breakeven += f" over {horizon} months"
    # No monthly saving at today's price (and no trend to change it): no payback ever.
    never = data["monthly_net_saving"] <= 0 and not data["cloud_price_trend_pct_per_year"]
    irr = ("-" if data["irr_monthly"] is None
           else f"{data['irr_monthly']:.3%}/month, {data['irr_annual']:.2%}/year")
    pairs = [
        ("capex", money("capex")),
        ("on-prem opex / month", f"{money('monthly_onprem_opex')} = {' + '.join(parts)}"),
        ("cloud / month", f"{money('monthly_cloud_cost')} ({float(data['utilization']):.0%} of "
                          f"{data['hours_per_month']} h at "
                          f"{money('cloud_price_per_hour', rate=True)}/h)"),
        ("cloud comparator", data["comparator"]),
        ("payback", _payback_text(data["payback_months"], never, horizon, "{:.2f} months")),
        ("discounted payback", _payback_text(data["discounted_payback_month"], never, horizon,
                                             "month {}")),
        ("breakeven utilization", breakeven),
        (f"NPV buy - rent (at {float(data['discount_rate']):.1%}/yr)", money("npv")),
        ("IRR", irr),
        ("owned cost / GPU-hour", money("owned_cost_per_gpu_hour", rate=True)),
    ]
    trend_pct = data["cloud_price_trend_pct_per_year"]
    if trend_pct:
        pairs.insert(3, ("cloud price trend", f"{trend_pct:+g}% a year, "
                         f"{money_text(data['last_monthly_cloud_cost'], currency)} / month by "
                         f"month {horizon} ({data['cloud_price_trend_source']})"))
    headline = f"verdict: {data['verdict']} -- {data['verdict_reason']}"
    text = headline + "\n" + field_lines(pairs, data["warnings"])
    if with_sensitivity:
        text += "\n\nsensitivity of breakeven utilization (low -> high input):\n"
        width = max(len(r["input"]) for r in data["sensitivity"])
        for row in data["sensitivity"]:
            low = _share_text(row["breakeven_low"], row["breakeven_low_bound"])
            high = _share_text(row["breakeven_high"], row["breakeven_high_bound"])
            if low == "-" or high == "-":
                continue
            swing = "" if row["swing"] is None else f"  swing {row['swing']:.1%}"
            text += f"  {row['input'].ljust(width)}  {low:>7} -> {high:>7}{swing}\n"
        text += "\nby cloud price trend: breakeven utilization, NPV, verdict:\n"
        for row in data["trend_sensitivity"]:
            share = _share_text(row["breakeven_utilization"], row["breakeven_bound"])
            text += (f"  {row['trend_pct_per_year']:+6.1f}%/yr  {share:>7}  "
                     f"{money_text(row['npv'], currency):>16}  {row['verdict']}\n")
        text = text.rstrip("\n")
    return text
