"""Trend charts from the report document: inline SVG for the web report, 2x PNG for mail.

Charts are drawn from the JSON document only (never from the store), with matplotlib's
object API (no pyplot global state). Output is deterministic: `svg.hashsalt` is fixed per
chart (so ids are stable and unique within one page), and no date or software metadata is
written.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

from reports.filters import chart_alt, money, parse_time

# Okabe-Ito, distinguishable with the common colour-vision deficiencies, without its yellow
# (#F0E442, 1.2:1 against white) and with the orange last (2.2:1).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#56B4E9", "#E69F00")
# A marker per provider as well as a colour: near-equal lines stay apart in grey or for a
# reader who cannot tell two colours apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
# The figure is laid out at 4.8 in (345.6 pt of viewBox): on a 390 px phone the SVG is
# ~350 px wide, so 11.5-unit text renders at >= 11 px; on a desktop it is capped by CSS.
WIDTH_IN, HEIGHT_IN = 4.8, 3.6
FONT_SIZE = 11.5
# Mail lays the PNG out at 640 px (100 px/in): wider, as mail clients give it the width.
MAIL_WIDTH_IN = 6.4
PNG_DPI = 200  # 2x of the 100 px/in the mail lays the image out at
MAIL_WIDTH_PX, MAIL_HEIGHT_PX = round(MAIL_WIDTH_IN * 100), round(HEIGHT_IN * 100)
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # real <text>: searchable, small, escaped by the SVG writer
    "font.family": "DejaVu Sans",
    "font.size": FONT_SIZE,
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


LABEL_CHARS = 16


def _short(provider: str) -> str:
    """A provider name short enough for a two-column legend on a phone."""
    return provider if len(provider) <= LABEL_CHARS else provider[:LABEL_CHARS - 1] + "…"


def figure(chart: dict[str, Any], times: list[str], currency: str,
           width_in: float = WIDTH_IN) -> Any:
    from matplotlib.dates import AutoDateLocator, DateFormatter, date2num
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    providers = sorted({s["provider"] for s in chart["series"]})
    buckets = {s["bucket"] for s in chart["series"]}
    # One legend entry per provider (its colour and marker) and one per line style, in three
    # columns when the names are short: an entry per line took most of the figure.
    ncol = 3 if max((len(_short(p)) for p in providers), default=0) <= 12 else 2
    fig = Figure(figsize=(width_in, HEIGHT_IN), layout="constrained")
    ax = fig.add_subplot()
    x = date2num([parse_time(t).replace(tzinfo=None) for t in times])
    colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(providers)}
    marker = {p: MARKERS[i % len(MARKERS)] for i, p in enumerate(providers)}
    every = max(1, len(times) // 6)
    for series in chart["series"]:
        y = [float(p) if p is not None else float("nan") for p in series["prices"]]
        spot = series["bucket"] == "spot"
        ax.plot(x, y, drawstyle="steps-post", color=colour[series["provider"]],
                linestyle=(0, (4, 2)) if spot else "-", linewidth=1.8 if not spot else 1.5,
                marker=marker[series["provider"]], markersize=4.5, markevery=every,
                markerfacecolor="white" if spot else colour[series["provider"]])
    # Two lines: one long title would run off a phone-width chart.
    ax.set_title(_plain(f"{chart['gpu_name']}\ncheapest {currency} per GPU-hour"),
                 loc="left", fontsize=FONT_SIZE + 1)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: money(value, currency)))
    ax.xaxis.set_major_locator(AutoDateLocator(minticks=3, maxticks=4))
    ax.xaxis.set_major_formatter(DateFormatter("%b %d"))
    ax.set_xlim(x[0], x[-1])
    ax.set_ylim(bottom=0)
    if chart["series"]:
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=colour[p], marker=marker[p], markersize=4.5,
                          linewidth=1.8, label=_plain(_short(p))) for p in providers]
        if len(buckets) > 1:
            handles += [Line2D([], [], color="#555555", linewidth=1.8, label="on-demand"),
                        Line2D([], [], color="#555555", linewidth=1.5,
                               linestyle=(0, (4, 2)), label="spot (dashed)")]
        # Below the plot: a right-hand legend would take half a phone's width.
        fig.legend(handles=handles, loc="outside lower left", ncol=ncol,
                   fontsize=FONT_SIZE, handlelength=2.2, columnspacing=0.9)
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
        fig = figure(chart, times, currency, MAIL_WIDTH_IN)
        FigureCanvasAgg(fig)
        fig.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return buffer.getvalue()


