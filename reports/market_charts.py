"""The price-index chart: the daily median per GPU-hour with the p10-p90 band (inline SVG for
the web report), drawn like the trend charts (reports.charts: same style, deterministic)."""

from __future__ import annotations

import io
import re
from typing import Any

from reports.charts import _RC, HEIGHT_IN, PALETTE, WIDTH_IN, _plain
from reports.filters import money


def index_svg(chart: dict[str, Any], currency: str) -> str:
    import matplotlib
    from markupsafe import escape
    from matplotlib.dates import AutoDateLocator, DateFormatter, date2num
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from tracker.commands.params import parse_instant

    buffer = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"gpu-tracker:{chart['chart_id']}"}):
        fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN * 0.8), layout="constrained")
        ax = fig.add_subplot()
        x = date2num([parse_instant(str(d)).replace(tzinfo=None) for d in chart["days"]])
        low = [float(v) for v in chart["p10"]]
        high = [float(v) for v in chart["p90"]]
        ax.fill_between(x, low, high, step="post", color=PALETTE[0], alpha=0.18,
                        linewidth=0, label="p10\u2013p90")
        ax.plot(x, [float(v) for v in chart["median"]], drawstyle="steps-post",
                color=PALETTE[0], linewidth=1.8, label="median")
        ax.set_title(_plain(f"{chart['gpu_name']}: on-demand price index, {currency} per "
                            "GPU-hour"), loc="left", fontsize=10)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: money(v, currency)))
        ax.xaxis.set_major_locator(AutoDateLocator(minticks=3, maxticks=8))
        ax.xaxis.set_major_formatter(DateFormatter("%b %d"))
        if len(x) > 1:
            ax.set_xlim(x[0], x[-1])
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7.5)
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'<svg\s+([^>]*?)width="[^"]*"\s+height="[^"]*"',
                  lambda m: f'<svg {m.group(1)}width="100%"', text, count=1)
    title_id = f"{chart['chart_id']}-title"
    latest = chart["latest"]
    alt = (f"{chart['gpu_name']} on-demand index {latest['date']}: median "
           f"{money(latest['median'], currency, per='GPU-h')} over {latest['providers']} "
           f"providers (p10 {money(latest['p10'], currency)}, p90 "
           f"{money(latest['p90'], currency)})")
    text = text.replace(
        "<svg ", f'<svg id="{chart["chart_id"]}" role="img" aria-labelledby="{title_id}" ', 1)
    head_end = text.index(">") + 1
    return (text[:head_end] + f'\n <title id="{title_id}">{escape(alt)}</title>'
            + text[head_end:]).strip()
