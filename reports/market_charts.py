"""The price-index chart: small multiples, one panel per featured GPU class, each the daily
median per GPU-hour with its p10-p90 band (one inline SVG for the web report, drawn in one
figure so a report with six classes pays for one render), in the trend charts' style
(reports.charts: same rc settings, deterministic output)."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from typing import Any

from reports.charts import _RC, HEIGHT_IN, PALETTE, WIDTH_IN, _plain
from reports.filters import money

CHART_ID = "index-chart"


def index_alt(charts: Sequence[dict[str, Any]], currency: str) -> str:
    parts = []
    for chart in charts:
        latest = chart["latest"]
        parts.append(f"{chart['gpu_name']} {money(latest['median'], currency, per='GPU-h')} "
                     f"median over {latest['providers']} providers on {latest['date']}")
    return "On-demand price index: " + "; ".join(parts)


def index_svg(charts: Sequence[dict[str, Any]], currency: str) -> str:
    import matplotlib
    from markupsafe import escape
    from matplotlib.dates import AutoDateLocator, DateFormatter, date2num
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from tracker.commands.params import parse_instant

    columns = 2 if len(charts) > 1 else 1
    rows = math.ceil(len(charts) / columns)
    buffer = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"gpu-tracker:{CHART_ID}"}):
        fig = Figure(figsize=(WIDTH_IN, max(HEIGHT_IN * 0.75, 1.9 * rows)), layout="constrained")
        axes = fig.subplots(rows, columns, squeeze=False)
        for ax in axes.flat[len(charts):]:
            ax.set_visible(False)
        for ax, chart in zip(axes.flat, charts, strict=False):
            x = date2num([parse_instant(str(d)).replace(tzinfo=None) for d in chart["days"]])
            ax.fill_between(x, [float(v) for v in chart["p10"]],
                            [float(v) for v in chart["p90"]], step="post", color=PALETTE[0],
                            alpha=0.18, linewidth=0)
            ax.plot(x, [float(v) for v in chart["median"]], drawstyle="steps-post",
                    color=PALETTE[0], linewidth=1.6)
            ax.set_title(_plain(chart["gpu_name"]), loc="left", fontsize=8.5)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: money(v, currency)))
            ax.xaxis.set_major_locator(AutoDateLocator(minticks=2, maxticks=4))
            ax.xaxis.set_major_formatter(DateFormatter("%b %d"))
            if len(x) > 1:
                ax.set_xlim(x[0], x[-1])
            ax.set_ylim(bottom=0)
        fig.suptitle(_plain(f"On-demand price index, {currency} per GPU-hour: median (line) "
                            "and p10\u2013p90 (band)"), x=0.0, ha="left", fontsize=9.5)
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'<svg\s+([^>]*?)width="[^"]*"\s+height="[^"]*"',
                  lambda m: f'<svg {m.group(1)}width="100%"', text, count=1)
    title_id = f"{CHART_ID}-title"
    text = text.replace(
        "<svg ", f'<svg id="{CHART_ID}" role="img" aria-labelledby="{title_id}" ', 1)
    head_end = text.index(">") + 1
    return (text[:head_end] + f'\n <title id="{title_id}">{escape(index_alt(charts, currency))}'
            "</title>" + text[head_end:]).strip()
