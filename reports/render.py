"""Render the report document: HTML for the browser, plain text, CSV.

One jinja2 environment: templates from the `templates` package (optionally overridden file by
file from `[report] templates_dir`), autoescape on for everything but `.txt` templates,
StrictUndefined so a typo in a template fails the build instead of printing nothing, and the
filters of `reports.filters` (money only through `money`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reports import charts
from reports.filters import FILTERS
from tracker.core.data_files import bundled_dir

SECTIONS = (
    ("summary", "Executive summary"),
    ("key-figures", "Key figures"),
    ("trends", "Trends"),
    ("movers", "Top movers"),
    ("spot", "Spot and interruptible"),
    ("recommendations", "Recommendations"),
    ("market", "Price index and invoice check"),
    ("data-quality", "Data quality"),
    ("prices", "The week's prices"),
)


def _autoescape(name: str | None) -> bool:
    # Plain-text templates (the mail's text part) must not turn "<" into "&lt;".
    return not (name or "").endswith(".txt")


def environment(templates_dir: str | Path | None = None) -> Any:
    import jinja2

    loaders: list[jinja2.BaseLoader] = []
    if templates_dir:
        loaders.append(jinja2.FileSystemLoader(str(Path(templates_dir).expanduser())))
    loaders.append(jinja2.FileSystemLoader(str(bundled_dir("templates"))))
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders), autoescape=_autoescape,
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals["SECTIONS"] = SECTIONS
    return env


def _context(document: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"doc": document, "currency": document["currency"], "mail": False, **extra}


def csv_filename(document: dict[str, Any]) -> str:
    return f"gpu-prices-{document['week']}.csv"


def render_html(document: dict[str, Any], env: Any = None, *,
                csv_href: str | None = None) -> str:
    """The web report: one self-contained HTML file, charts as inline SVG, no script."""
    from markupsafe import Markup

    env = env or environment()
    times = document["trends"].get("times", [])
    svgs = {c["chart_id"]: Markup(charts.svg(c, times, document["currency"]))
            for c in document["trends"]["charts"]}
    from reports.market_charts import CHART_ID, index_svg

    index_charts = document.get("market", {}).get("index", {}).get("charts", [])
    if index_charts:
        svgs[CHART_ID] = Markup(index_svg(index_charts, document["currency"]))
    return env.get_template("report.html").render(_context(
        document, svgs=svgs, cids={}, csv_href=csv_href or csv_filename(document)))


def render_text(document: dict[str, Any], env: Any = None) -> str:
    env = env or environment()
    return env.get_template("report.txt").render(
        _context(document, mail=True, csv_name=csv_filename(document)))


def render_csv(document: dict[str, Any]) -> str:
    """The week's prices, one row per offer; text cells guarded against formula injection."""
    from tracker.core.serialization import write_csv

    prices = document["prices"]
    return write_csv(prices["columns"], ([_cell(row.get(column)) for column in prices["columns"]]
                                         for row in prices["rows"]))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else repr(value)
    return str(value)
