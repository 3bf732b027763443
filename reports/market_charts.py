"""The price-index chart: small multiples, one panel per featured GPU class, each the daily
median per GPU-hour (line) with its p10-p90 band and, after the last day, the class's
forecast (dashed P50 in its P10-P90 band), as one inline SVG for the web report.

Written directly as SVG (no matplotlib): the chart is a step line and a band per panel, and
drawing it this way costs milliseconds where a matplotlib figure costs about a second in the
report's time budget. Colours and fonts follow the trend charts (reports.charts); the output
is deterministic (coordinates rounded to 0.1 px, no ids but the chart's own).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from markupsafe import escape

from reports.charts import PALETTE
from reports.filters import money

CHART_ID = "index-chart"
PANEL_W, PANEL_H = 320, 150
LEFT, RIGHT, TOP, BOTTOM = 52, 10, 26, 22
# One column of 320-unit panels, shown at most 400 px wide (templates/_style.css): on a
# 390 px phone the SVG is ~366 px wide, so 11-unit labels stay at >= 11 px.
COLUMNS = 1
HEADER = 32  # two lines of heading above the panels


def index_alt(charts: Sequence[dict[str, Any]], currency: str) -> str:
    parts = []
    for chart in charts:
        latest = chart["latest"]
        text = (f"{chart['gpu_name']} {money(latest['median'], currency, per='GPU-h')} "
                f"median over {latest['providers']} providers on {latest['date']}")
        forecast = chart.get("forecast") or {}
        if forecast.get("available") and forecast.get("days"):
            text += (f", forecast for {forecast['days'][-1]} {money(forecast['p50'][-1], currency)}"
                     f" (P10 {money(forecast['p10'][-1], currency)}, P90 "
                     f"{money(forecast['p90'][-1], currency)})")
        parts.append(text)
    return "On-demand price index: " + "; ".join(parts)


def _f(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _day(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])


def _panel(chart: dict[str, Any], x0: float, y0: float, currency: str) -> list[str]:
    days = [_day(d) for d in chart["days"]]
    median = [float(Decimal(str(v))) for v in chart["median"]]
    low = [float(Decimal(str(v))) for v in chart["p10"]]
    high = [float(Decimal(str(v))) for v in chart["p90"]]
    forecast = chart.get("forecast") or {}
    ahead = forecast.get("days") if forecast.get("available") else None
    f_days = [_day(d) for d in ahead] if ahead else []
    f_low = [float(Decimal(str(v))) for v in forecast.get("p10", [])] if f_days else []
    f_mid = [float(Decimal(str(v))) for v in forecast.get("p50", [])] if f_days else []
    f_high = [float(Decimal(str(v))) for v in forecast.get("p90", [])] if f_days else []
    top = max(high + f_high) * 1.08 or 1.0
    end_day = f_days[-1] if f_days else days[-1]
    span = max((end_day - days[0]).days + 1, 1)  # each day is a step of one day's width
    width, height = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM

    def x(i: int, end: bool = False) -> float:
        return x0 + LEFT + width * ((days[i] - days[0]).days + (1 if end else 0)) / span

    def y(value: float) -> float:
        return y0 + TOP + height * (1 - value / top)

    out = [f'<text x="{_f(x0 + 4)}" y="{_f(y0 + 14)}" class="t">{escape(chart["gpu_name"])}'
           "</text>"]
    for fraction in (0.0, 0.5, 1.0):  # gridlines with money labels
        value = top / 1.08 * fraction
        out.append(f'<line x1="{_f(x0 + LEFT)}" x2="{_f(x0 + PANEL_W - RIGHT)}" '
                   f'y1="{_f(y(value))}" y2="{_f(y(value))}" class="g"/>')
        out.append(f'<text x="{_f(x0 + LEFT - 4)}" y="{_f(y(value) + 3)}" class="l" '
                   f'text-anchor="end">{escape(money(value, currency))}</text>')
    band_top = []
    band_bottom = []
    line = []
    for i in range(len(days)):
        band_top += [(x(i), y(high[i])), (x(i, True), y(high[i]))]
        band_bottom += [(x(i), y(low[i])), (x(i, True), y(low[i]))]
        line += [(x(i), y(median[i])), (x(i, True), y(median[i]))]
    polygon = " ".join(f"{_f(a)},{_f(b)}" for a, b in band_top + band_bottom[::-1])
    path = " ".join(f"{_f(a)},{_f(b)}" for a, b in line)
    out.append(f'<polygon points="{polygon}" fill="{PALETTE[0]}" fill-opacity="0.18"/>')
    out.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[0]}" '
               'stroke-width="1.6"/>')
    if f_days:
        def fx(i: int, end: bool = False) -> float:
            return x0 + LEFT + width * ((f_days[i] - days[0]).days + (1 if end else 0)) / span

        upper = [(fx(i), y(f_high[i])) for i in range(len(f_days))]
        lower = [(fx(i), y(f_low[i])) for i in range(len(f_days))]
        mid = [(fx(i), y(f_mid[i])) for i in range(len(f_days))]
        out.append('<polygon points="' + " ".join(f"{_f(a)},{_f(b)}" for a, b in
                                                  upper + lower[::-1])
                   + f'" fill="{PALETTE[1]}" fill-opacity="0.18"/>')
        out.append('<polyline points="' + " ".join(f"{_f(a)},{_f(b)}" for a, b in mid)
                   + f'" fill="none" stroke="{PALETTE[1]}" stroke-width="1.4" '
                   'stroke-dasharray="4 3"/>')
    labels = [(x(0), "start", days[0]), (x(len(days) - 1, True),
                                         "middle" if f_days else "end", days[-1])]
    if f_days:
        labels.append((fx(len(f_days) - 1, True), "end", f_days[-1]))
    for xpos, anchor, day in labels:
        out.append(f'<text x="{_f(xpos)}" y="{_f(y0 + PANEL_H - 6)}" class="l" '
                   f'text-anchor="{anchor}">{day.strftime("%b %d")}</text>')
    return out


def index_svg(charts: Sequence[dict[str, Any]], currency: str) -> str:
    """One SVG with a panel per chart (two columns), a title stating the latest figures."""
    rows = (len(charts) + COLUMNS - 1) // COLUMNS
    columns = min(COLUMNS, len(charts)) or 1
    width, height = columns * PANEL_W, rows * PANEL_H + HEADER
    title_id = f"{CHART_ID}-title"
    parts = [
        f'<svg id="{CHART_ID}" role="img" aria-labelledby="{title_id}" '
        f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%">',
        f' <title id="{title_id}">{escape(index_alt(charts, currency))}</title>',
        ' <style>text{font-family:"DejaVu Sans",sans-serif}.t{font-size:12px}'
        '.l{font-size:11px;fill:#444}.g{stroke:#dddddd;stroke-width:0.6}</style>',
        f' <text x="4" y="12" class="l">On-demand price index, {escape(currency)} per '
        'GPU-hour:</text>',
        ' <text x="4" y="26" class="l">median (line), p10\u2013p90 (band)'
        + ('; forecast dashed' if any(
            (c.get("forecast") or {}).get("available") for c in charts) else "")
        + '</text>',
    ]
    for n, chart in enumerate(charts):
        x0, y0 = (n % COLUMNS) * PANEL_W, HEADER + (n // COLUMNS) * PANEL_H
        parts += [" " + line for line in _panel(chart, x0, y0, currency)]
    parts.append("</svg>")
    return "\n".join(parts)
