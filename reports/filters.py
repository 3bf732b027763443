"""Template filters. Every public function here is registered as a filter of the report's
jinja2 environment (see `render.environment`).

Money is formatted ONLY by `money`: the HTML, the mail, the plain-text part, chart axes and
chart alt text all call it, and it is `tracker.core.money.format_money`, the function the CLI
tables use too, so rounding (half up), places (the currency's minor units) and symbols are
decided in one place. Everything else that builds a
sentence (`summary_sentence`, `chart_alt`) returns plain text and leaves escaping to
autoescape.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from tracker.core.money import MINUS, format_money

_MINUS = MINUS  # a real minus sign reads better than a hyphen in figures


def _decimal(value: Any) -> Decimal | None:
    if value is None or value == "":
        return None
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        # Chart ticks and axis limits arrive as floats; they are positions, not prices.
        return Decimal(repr(float(value)))
    return Decimal(str(value))


def money(value: Any, currency: str = "USD", per: str | None = None, signed: bool = False,
          places: int | None = None) -> str:
    """`$2.49/GPU-h`, `+$0.12`, `$12,345.67`, `1.20 CHF`, `¥1,234`; an em dash for no value.

    Amounts show the currency's minor units, rounded half up. Every price below one unit
    (`per` given, not a signed change) shows one more place, always ($0.079/GPU-h and
    $0.450/GPU-h alike), so a column of sub-dollar prices never mixes two and three decimals;
    changes (`signed`) keep the minor units.
    """
    amount = _decimal(value)
    if amount is None:
        return "\u2014"
    return format_money(amount, currency, per=per, signed=signed, places=places, symbol=True)


def pct(value: Any, signed: bool = True, places: int = 1) -> str:
    """`+4.2%`, `\u22123.0%`; an em dash when there is no base to compare with."""
    if value is None or value == "":
        return "\u2014"
    number = float(value)
    text = f"{abs(number):.{places}f}%"
    if round(number, places) < 0:
        return _MINUS + text
    if signed and round(number, places) > 0:
        return "+" + text
    return text


def number(value: Any, places: int = 0) -> str:
    """Plain quantities (GPU counts, hours, offers) with thousands separators."""
    if value is None or value == "":
        return "\u2014"
    value = float(value)
    if places == 0 and value == int(value):
        return f"{int(value):,}"
    return f"{value:,.{places}f}"


def hours(value: Any) -> str:
    """Wall time for people: `45 min`, `6.2 h`, `3.1 days`, `14 weeks`."""
    if value is None or value == "":
        return "\u2014"
    h = float(value)
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    if h < 24 * 14:
        return f"{h / 24:.1f} days"
    return f"{h / 168:.1f} weeks"


def utc(value: Any, seconds: bool = False) -> str:
    """`2026-11-30 00:00 UTC` from an ISO string or datetime."""
    if value is None or value == "":
        return "\u2014"
    moment = value if isinstance(value, datetime) else parse_time(str(value))
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def day(value: Any) -> str:
    if value is None or value == "":
        return "\u2014"
    moment = value if isinstance(value, datetime) else parse_time(str(value))
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def local_time(value: Any, timezone: str) -> str:
    """The same instant in the reader's zone (config `[report] timezone`)."""
    from zoneinfo import ZoneInfo

    moment = value if isinstance(value, datetime) else parse_time(str(value))
    return moment.astimezone(ZoneInfo(timezone)).strftime(f"%Y-%m-%d %H:%M {timezone}")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def category_label(category: str) -> str:
    return {"on-demand": "on-demand", "spot": "spot", "bid": "spot (bid)",
            "reserved-1y": "1-year reserved", "reserved-3y": "3-year reserved"}.get(
        category, category)


def direction(value: Any) -> str:
    """`up`, `down` or `flat` for a signed change (CSS class and plain-text arrow)."""
    if value is None or value == "":
        return "none"
    amount = _decimal(value)
    if amount is None:  # unreachable: _decimal returns None only for the blanks handled above
        return "none"
    return "up" if amount > 0 else "down" if amount < 0 else "flat"


def arrow(value: Any) -> str:
    return {"up": "\u2191", "down": "\u2193", "flat": "\u2192"}.get(direction(value), "")


def _gpu_label(item: dict[str, Any]) -> str:
    return item.get("gpu_name") or item.get("gpu") or "?"


def summary_sentence(item: dict[str, Any], currency: str = "USD") -> str:
    """One executive-summary sentence from a structured summary item (plain text)."""
    kind = item.get("kind")
    if kind == "headline":
        return _headline(item, currency)
    if kind == "move":
        verb = "rose" if Decimal(item["change"]) > 0 else "fell"
        return (f"{_gpu_label(item)} {category_label(item['category'])}: the cheapest price "
                f"{verb} {pct(abs(item['change_pct']), signed=False)} "
                f"({money(item['change'], currency, per='GPU-h', signed=True)}) to "
                f"{money(item['price'], currency, per='GPU-h')} at {item['provider']}, from "
                f"{money(item['previous_price'], currency, per='GPU-h')} a week earlier.")
    if kind == "new_low":
        return (f"New {item['window_weeks']}-week low for {_gpu_label(item)} "
                f"{category_label(item['category'])}: "
                f"{money(item['price'], currency, per='GPU-h')} at {item['provider']} "
                f"({item['region'] or 'no region'}), below the previous low of "
                f"{money(item['previous_low'], currency, per='GPU-h')}.")
    if kind == "recommendation":
        return _recommendation_sentence(item, currency)
    if kind == "data_quality":
        parts = []
        if item.get("failed"):
            parts.append(f"{item['failed']} source(s) failed ({', '.join(item['failed_sources'])})")
        if item.get("stale"):
            parts.append(f"{item['stale']} source(s) stale ({', '.join(item['stale_sources'])})")
        return "Data quality: " + "; ".join(parts) + ". Figures for those sources may be old."
    if kind == "no_data":
        return ("No prices in the store for this week: run `gpu-tracker refresh` "
                "(or `gpu-tracker demo`) and build the report again.")
    return str(item.get("text", ""))


def headline_lead(item: dict[str, Any], currency: str = "USD") -> str:
    """The week in one line: which way prices went and the single biggest move."""
    down, up, flat = item["classes_down"], item["classes_up"], item["classes_flat"]
    if item.get("no_fresh_prices"):
        # Nothing was confirmed in the window: a "held steady" would be the absence of data.
        newest = item.get("newest_price_at")
        when = f"; the newest price is from {utc(newest)}" if newest else ""
        return (f"No fresh prices this week: no source confirmed a price within "
                f"{number(item.get('stale_after_hours') or 0)} h of {utc(item['as_of'])}"
                f"{when}, so the figures below are the last known ones.")
    if down + up + flat == 0:
        return (f"No week-over-week comparison yet: {item['classes_priced']} GPU class(es) "
                f"priced as of {utc(item['as_of'])}.")
    if down == up == 0:
        lead = "GPU prices held steady this week"
    elif down > up:
        lead = "GPU prices fell this week"
    elif up > down:
        lead = "GPU prices rose this week"
    else:
        lead = "GPU prices were mixed this week"
    biggest = item.get("biggest")
    if biggest:
        lead += (f"; biggest move {_gpu_label(biggest)} {category_label(biggest['category'])} "
                 f"{pct(biggest['change_pct'])} to "
                 f"{money(biggest['price'], currency, per='GPU-h')} ({biggest['provider']})")
    return lead + "."


def class_figure(figure: dict[str, Any], bucket: str, currency: str = "USD") -> str:
    """'$2.29/GPU-h (−8.0%)' for one featured class and bucket; an em dash without a price."""
    cell = figure.get(bucket)
    if not cell:
        return "\u2014"
    change = "new" if cell["change_pct"] is None else pct(cell["change_pct"])
    return f"{money(cell['price'], currency, per='GPU-h')} ({change})"


def _headline(item: dict[str, Any], currency: str) -> str:
    text = headline_lead(item, currency)
    figures = [f"{f['gpu_name']} on-demand {class_figure(f, 'on_demand', currency)}, spot "
               f"{class_figure(f, 'spot', currency)}" for f in item.get("classes") or ()]
    if figures:
        text += " " + "; ".join(figures) + "."
    return text


def _recommendation_sentence(item: dict[str, Any], currency: str) -> str:
    name = item["workload"]
    now = item.get("now") or {}
    before = item.get("previous") or {}
    if not now:
        return f"{name}: no offer in the store can run it this week."
    per = "per month" if item.get("basis") == "month" else "per run"
    choice = (f"{number(now['count'])}\u00d7 {now['gpu_name']} {category_label(now['category'])} "
              f"at {now['provider']}")
    cost = money(now["cost"], currency)
    if not before:
        return f"{name}: cheapest is {choice}, {cost} {per}."
    if item.get("changed"):
        return (f"{name}: the recommendation changed to {choice}, {cost} {per} "
                f"(was {number(before['count'])}\u00d7 {before['gpu_name']} at "
                f"{before['provider']}, {money(before['cost'], currency)}).")
    if Decimal(item["cost_change"]) == 0:
        return f"{name}: still {choice}, {cost} {per}, unchanged."
    return (f"{name}: still {choice}; {cost} {per}, "
            f"{money(item['cost_change'], currency, signed=True)} on last week.")


def chart_alt(chart: dict[str, Any], currency: str = "USD") -> str:
    """Alt text stating the chart's finding, not its shape."""
    finding = chart.get("finding") or {}
    parts = [f"{chart['gpu_name']}: cheapest price per GPU-hour by provider, "
             f"{day(chart['start'])} to {day(chart['end'])}."]
    for bucket, label in (("on_demand", "On-demand"), ("spot", "Spot")):
        f = finding.get(bucket)
        if not f:
            continue
        sentence = (f"{label} cheapest {money(f['end_price'], currency, per='GPU-h')} "
                    f"({f['end_provider']})")
        if f.get("change_pct") is not None:
            sentence += (f", {pct(f['change_pct'])} since {day(f['start_time'])} "
                         f"({money(f['start_price'], currency, per='GPU-h')})")
        if f.get("low_price") is not None:
            sentence += (f"; window low {money(f['low_price'], currency, per='GPU-h')} on "
                         f"{day(f['low_time'])}")
        parts.append(sentence + ".")
    return " ".join(parts)


def negate(value: Any) -> Decimal | None:
    """The opposite amount (a negative saving read as a cost), still unformatted."""
    amount = _decimal(value)
    return None if amount is None else -amount


def csv_cell(value: Any) -> str:
    """A CSV cell that a spreadsheet will not run as a formula (the project's one guard,
    `tracker.core.serialization.csv_safe`)."""
    from tracker.core.serialization import csv_safe

    return "" if value is None else csv_safe(str(value))


FILTERS = {
    name: obj for name, obj in list(globals().items())
    if callable(obj) and not name.startswith("_") and getattr(obj, "__module__", "") == __name__
    and name not in {"parse_time"}
}
