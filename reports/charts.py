"""Trend charts from the report document: inline SVG for the web report, 2x PNG for mail.

Charts are drawn from the JSON document only (never from the store), with matplotlib's
object API (no pyplot global state). Output is deterministic: `svg.hashsalt` is fixed per
chart (so ids are stable and unique within one page), and no date or software metadata is
written.
"""

from __future__ import annotations

import io
import re
from typing import Any

from reports.filters import chart_alt, money, parse_time

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442")
WIDTH_IN, HEIGHT_IN = 6.4, 3.2
PNG_DPI = 200  # 2x of the 100 px/in the mail lays the image out at
MAIL_WIDTH_PX, MAIL_HEIGHT_PX = round(WIDTH_IN * 100), round(HEIGHT_IN * 100)
_RC = {
    "svg.fonttype": "none",  # real <text>: searchable, small, escaped by the SVG writer
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "path.simplify": False,
}


def _plain(text: str) -> str:
    """Provider strings are data: keep matplotlib from reading `$...$` as math or a leading
    underscore as "hide this label"."""
    text = text.replace("\\", "\\\\").replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


def figure(chart: dict[str, Any], times: list[str], currency: str) -> Any:
    from matplotlib.dates import AutoDateLocator, DateFormatter, date2num
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    ax = fig.add_subplot()
    x = date2num([parse_time(t).replace(tzinfo=None) for t in times])
    providers = sorted({s["provider"] for s in chart["series"]})
    colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(providers)}
    for series in chart["series"]:
        y = [float(p) if p is not None else float("nan") for p in series["prices"]]
        spot = series["bucket"] == "spot"
        ax.plot(x, y, drawstyle="steps-post", color=colour[series["provider"]],
                linestyle="--" if spot else "-", linewidth=1.6 if not spot else 1.3,
                label=_plain(f"{series['provider']} {'spot' if spot else 'on-demand'}"))
    ax.set_title(_plain(f"{chart['gpu_name']}: cheapest {currency} per GPU-hour"),
                 loc="left", fontsize=10)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: money(value, currency)))
    ax.xaxis.set_major_locator(AutoDateLocator(minticks=4, maxticks=8))
    ax.xaxis.set_major_formatter(DateFormatter("%b %d"))
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(bottom=0)
    if chart["series"]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7.5)
    return fig


def svg(chart: dict[str, Any], times: list[str], currency: str) -> str:
    """The chart as an inline `<svg>` element with a `<title>` stating the finding."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"gpu-tracker:{chart['chart_id']}"}):
        fig = figure(chart, times, currency)
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE for inline use
    title_id = f"{chart['chart_id']}-title"
    alt = chart_alt(chart, currency)
    from markupsafe import escape

    text = re.sub(r'<svg\s+([^>]*?)width="[^"]*"\s+height="[^"]*"',
                  lambda m: f'<svg {m.group(1)}width="100%"', text, count=1)
    text = text.replace(
        "<svg ", f'<svg id="{chart["chart_id"]}" role="img" aria-labelledby="{title_id}" ',
        1)
    head_end = text.index(">") + 1
    return (text[:head_end] + f'\n <title id="{title_id}">{escape(alt)}</title>'
            + text[head_end:]).strip()


def png(chart: dict[str, Any], times: list[str], currency: str) -> bytes:
    """The chart as a PNG at twice the size it is shown in the mail (sharp on HiDPI)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    with matplotlib.rc_context(_RC):
        fig = figure(chart, times, currency)
        FigureCanvasAgg(fig)
        fig.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return buffer.getvalue()


