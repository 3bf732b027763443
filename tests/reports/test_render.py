"""Rendering: determinism, escaping of scraped strings, the money filter, CSV, charts."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal

import pytest

from reports import build_and_archive
from reports.build import build_report
from reports.filters import csv_cell, money, pct, summary_sentence
from reports.render import environment, render_csv, render_html, render_text
from tests.reports.conftest import (
    EVIL_INSTANCE,
    EVIL_PROVIDER,
    EVIL_REGION,
    NOW,
    WEEK,
    active_markup,
)
from tracker.core.serialization import canonical_json


@pytest.fixture(scope="module")
def doc(report_db_path):
    """The week's document as the renderers see it (parsed back from its JSON)."""
    from tracker.config.schema import Config
    from tracker.store.db import open_database

    config = Config.from_data({"report": {"featured_gpus": ["h100-sxm", "a100-80gb", "l40s"]},
                               "refresh": {"stale_after_hours": 48.0}})
    db = open_database(f"sqlite:///{report_db_path}", upgrade=False)
    try:
        return json.loads(canonical_json(build_report(db, config, WEEK, now=NOW)))
    finally:
        db.close()


def test_same_week_twice_gives_identical_files(report_db, report_config, tmp_path):
    first = build_and_archive(report_db, report_config, WEEK, as_of=NOW, out_dir=tmp_path / "a")
    second = build_and_archive(report_db, report_config, WEEK, as_of=NOW, out_dir=tmp_path / "b")
    for attribute in ("path_json", "path_html", "path_csv"):
        a, b = getattr(first, attribute), getattr(second, attribute)
        assert a.read_bytes() == b.read_bytes(), attribute
    assert first.sha256 == second.sha256
    # Building later (another clock) does not change a finished week either.
    later = build_report(report_db, report_config, WEEK, now=NOW.replace(year=2027))
    assert canonical_json(later) == first.path_json.read_text("utf-8")
    text = first.path_json.read_text("utf-8")
    assert text == canonical_json(json.loads(text))  # canonical: sorted keys, stable layout
    assert "generated_at" in json.loads(text) and json.loads(text)["generated_at"] is None


def test_generated_at_only_when_passed(report_db, report_config, tmp_path):
    from datetime import UTC, datetime

    stamp = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    built = build_and_archive(report_db, report_config, WEEK, as_of=NOW, out_dir=tmp_path,
                              generated_at=stamp)
    assert built.document["generated_at"] == "2026-12-02T08:00:00Z"
    assert "Generated 2026-12-02 08:00 UTC" in built.path_html.read_text("utf-8")


def test_html_has_every_section_in_order_and_no_script(doc):
    html = render_html(doc)
    ids = re.findall(r'<section id="([a-z-]+)"', html)
    assert ids == ["summary", "key-figures", "trends", "movers", "spot", "recommendations",
                   "market", "commitments", "data-quality", "prices", "appendix"]
    assert "<script" not in html.lower()
    assert html.count("<svg ") == 4  # three trend charts, the index's small multiples
    assert 'href="gpu-prices-2026-W48.csv"' in html


def test_scraped_strings_are_escaped_in_html(doc):
    html = render_html(doc)
    assert active_markup(html) == []
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    # Inside the SVG legend too (matplotlib's SVG writer escapes text).
    svg = html[html.index('<svg id="trend-l40s"'):]
    svg = svg[:svg.index("</svg>")]
    assert "&lt;script&gt;" in svg and "<script" not in svg


def test_plain_text_part_keeps_strings_as_text(doc):
    text = render_text(doc)
    assert EVIL_PROVIDER in text  # text/plain is never interpreted: shown as it is
    assert "&lt;" not in text and "&#34;" not in text
    assert text.startswith("GPU prices, week 2026-W48\n")
    for heading in ("KEY FIGURES", "TRENDS", "TOP MOVERS", "SPOT", "RECOMMENDATIONS",
                    "DATA QUALITY", "THE WEEK'S PRICES"):
        assert heading in text


def test_csv_has_every_offer_and_guards_formulas(doc):
    rows = list(csv.reader(io.StringIO(render_csv(doc))))
    header, body = rows[0], rows[1:]
    assert header == doc["prices"]["columns"]
    assert len(body) == 14
    evil = [dict(zip(header, r, strict=True)) for r in body if r[header.index("gpu")] == "l40s"]
    assert {r["region"] for r in evil} == {"'" + EVIL_REGION}
    assert {r["instance_type"] for r in evil} == {EVIL_INSTANCE}
    lam = next(dict(zip(header, r, strict=True)) for r in body
               if r[header.index("instance_type")] == "gpu_1x_h100_sxm5")
    assert (lam["price_per_gpu_hour"], lam["previous_price_per_gpu_hour"], lam["change_pct"],
            lam["gpu_count"]) == ("2.29", "2.49", "-8.03", "1")


@pytest.mark.parametrize(("value", "kwargs", "expected"), [
    ("2.49", {}, "$2.49"),
    (Decimal("12345.675"), {}, "$12,345.68"),
    ("12345.665", {}, "$12,345.67"),  # half up, decided in one place
    ("0.0785", {"per": "GPU-h"}, "$0.079/GPU-h"),
    ("0.079", {"per": "GPU-h"}, "$0.079/GPU-h"),
    ("0.45", {"per": "GPU-h"}, "$0.450/GPU-h"),  # sub-dollar rates: three places, always
    ("1234.5", {"currency": "JPY"}, "¥1,235"),  # the currency's minor units
    ("1.2345", {"currency": "KWD"}, "1.235 KWD"),
    ("-0.2", {"per": "GPU-h", "signed": True}, "\u2212$0.20/GPU-h"),
    ("0.3", {"signed": True}, "+$0.30"),
    ("0", {"signed": True}, "\u00b1$0.00"),
    ("1.2", {"currency": "CHF"}, "1.20 CHF"),
    ("3", {"currency": "EUR"}, "\u20ac3.00"),
    (None, {}, "\u2014"),
    (2.5, {}, "$2.50"),  # a chart tick
])
def test_money_filter(value, kwargs, expected):
    currency = kwargs.pop("currency", "USD")
    assert money(value, currency, **kwargs) == expected


def test_pct_and_csv_cell():
    assert (pct(-8.03), pct(11.15), pct(0.0), pct(None)) == ("\u22128.0%", "+11.2%", "0.0%",
                                                              "\u2014")
    assert csv_cell("=1+2") == "'=1+2"
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)"
    assert csv_cell("-0.2") == "-0.2"  # a number stays a number
    assert csv_cell("+cmd") == "'+cmd"


def test_money_is_formatted_only_by_the_filter():
    """No template formats a number as money by hand ("$" + value, "%.2f")."""
    from importlib import resources

    root = resources.files("templates")
    offenders = []
    for entry in root.iterdir():
        if entry.name.endswith((".html", ".txt")):
            text = entry.read_text("utf-8")
            if re.search(r"\$\{\{|%\.2f|round\(2\)|\|round", text):
                offenders.append(entry.name)
    assert offenders == []


def test_summary_sentences(doc):
    headline = summary_sentence(doc["summary"]["headline"])
    assert headline.startswith("GPU prices fell this week; biggest move NVIDIA H100 SXM 80GB "
                               "spot (bid) \u221212.5% to $1.40/GPU-h (vastai).")
    # One number per featured class: cheapest on-demand and spot, and the week's change.
    assert ("NVIDIA H100 SXM 80GB on-demand $2.29/GPU-h (\u22128.0%), spot $1.40/GPU-h "
            "(\u221212.5%)") in headline
    assert "NVIDIA L40S 48GB on-demand $0.890/GPU-h (\u221210.1%)" in headline
    classes = doc["summary"]["headline"]["classes"]
    assert [c["gpu"] for c in classes] == ["h100-sxm", "a100-80gb", "l40s"]
    first = summary_sentence(doc["summary"]["items"][0])
    assert first == ("NVIDIA H100 SXM 80GB spot (bid): the cheapest price fell 12.5% "
                     "(\u2212$0.20/GPU-h) to $1.40/GPU-h at vastai, from $1.60/GPU-h a week "
                     "earlier.")


def test_template_override_directory(doc, tmp_path):
    (tmp_path / "_header.html").write_text("<header id=\"top\"><h1>Custom {{ doc.week }}</h1>"
                                           "</header>\n", encoding="utf-8")
    html = render_html(doc, environment(tmp_path))
    assert "<h1>Custom 2026-W48</h1>" in html
    assert 'id="key-figures"' in html


def test_svg_charts_are_deterministic_and_labelled(doc):
    from reports import charts

    chart = doc["trends"]["charts"][0]
    first = charts.svg(chart, doc["trends"]["times"], "USD")
    assert first == charts.svg(chart, doc["trends"]["times"], "USD")
    assert first.startswith('<svg id="trend-h100-sxm" role="img"')
    assert '<title id="trend-h100-sxm-title">NVIDIA H100 SXM 80GB: cheapest price' in first
    assert "<dc:date>" not in first
    png = charts.png(chart, doc["trends"]["times"], "USD")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png[16:20], "big")
    assert width == 2 * charts.MAIL_WIDTH_PX


def test_identical_across_processes_and_hash_seeds(report_db, report_config, tmp_path):
    """Nothing in the output may depend on set or dict order under hash randomization."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    week = "2026-W47"  # finished whatever the machine's clock says
    here = build_and_archive(report_db, report_config, week, out_dir=tmp_path / "here")
    root = Path(__file__).resolve().parents[2]
    for seed in ("1", "4242"):
        out = tmp_path / f"seed{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        subprocess.run(
            [sys.executable, "-m", "tracker", "--db", report_db.url, "--config",
             str(report_config.path), "report", "weekly", "--week", week, "--out", str(out)],
            check=True, capture_output=True, env=env, cwd=root, timeout=300)
        for path in (here.path_json, here.path_html, here.path_csv):
            assert (out / week / path.name).read_bytes() == path.read_bytes(), path.name
