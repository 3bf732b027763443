"""The rendered report in a real browser: headless Chromium over the DevTools protocol.

Opens the archived HTML (file://), fails on any console error, uncaught exception or failed
load, checks every section is there and each chart is an SVG with plotted lines of non-zero
size, and saves a full-page screenshot to tests/artifacts/report-<week>.png (kept for CI to
upload; the directory is created when missing).

The layout test renders the page at 1280 px and at 390 px (a phone) and fails on page-level
horizontal overflow or on chart text smaller than 11 CSS px; it saves both screenshots
(tests/artifacts/report-<week>-1280.png and -390.png).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports.cdp import browser, find_chromium
from tests.reports.conftest import NOW, WEEK

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = find_chromium()

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary found (apt-get install "
                                                 "chromium, or set GPU_TRACKER_CHROMIUM)"),
]

PAGE_FACTS = """
(() => {
  const charts = Array.from(document.querySelectorAll('figure.chart svg')).map(svg => {
    const box = svg.getBoundingClientRect();
    const lines = Array.from(svg.querySelectorAll('g[id^="line2d"] path'))
      .filter(p => (p.getAttribute('d') || '').length > 20);
    return {id: svg.id, lines: lines.length, width: box.width, height: box.height,
            title: (svg.querySelector('title') || {}).textContent || ''};
  });
  return {
    sections: Array.from(document.querySelectorAll('section[data-section]')).map(s => s.id),
    headings: Array.from(document.querySelectorAll('section > h2')).map(h => h.textContent),
    charts: charts,
    scripts: document.scripts.length,
    title: document.title,
    headline: document.querySelector('.headline').textContent,
    evilTags: document.querySelectorAll('script, img[onerror]').length,
    height: document.documentElement.scrollHeight,
  };
})()
"""


def test_report_renders_in_chromium(report_db, report_config, tmp_path):
    from reports import build_and_archive

    built = build_and_archive(report_db, report_config, WEEK, as_of=NOW,
                              out_dir=tmp_path / "reports")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    with browser(CHROMIUM, profile) as chrome:
        chrome.open(built.path_html.as_uri())
        facts = chrome.evaluate(PAGE_FACTS)
        assert chrome.errors() == []
        screenshot = ARTIFACTS / f"report-{WEEK}.png"
        chrome.screenshot(screenshot, 1100, int(facts["height"]))

    assert facts["title"] == "GPU prices, week 2026-W48"
    assert facts["sections"] == ["summary", "key-figures", "trends", "movers", "spot",
                                 "recommendations", "market", "commitments", "data-quality",
                                 "prices",
                                 "appendix"]
    assert facts["headings"][:3] == ["Executive summary", "Key figures", "Trends"]
    assert facts["headline"].startswith("GPU prices fell this week; biggest move")
    assert facts["scripts"] == 0 and facts["evilTags"] == 0
    trend_charts = [c for c in facts["charts"] if c["id"].startswith("trend-")]
    index_charts = [c for c in facts["charts"] if c["id"].startswith("index-")]
    assert [c["id"] for c in trend_charts] == ["trend-h100-sxm", "trend-a100-80gb",
                                               "trend-l40s"]
    assert [c["id"] for c in index_charts] == ["index-chart"]
    assert all("median" in c["title"] and c["width"] > 300 for c in index_charts)
    for chart in trend_charts:
        assert chart["lines"] >= 2, chart  # an on-demand and a spot line at least
        assert chart["width"] > 300 and chart["height"] > 150, chart
        assert "cheapest" in chart["title"]
    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(png[16:20], "big") == 1100
    assert int.from_bytes(png[20:24], "big") > 3000  # the whole page, not one screen


def test_the_checker_sees_console_errors_and_failed_loads(tmp_path):
    """Guard against a vacuous pass: a page with errors must be reported as such."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><img src=\"missing.png\">"
                    "<script>console.error('boom'); undefinedFunction();</script>"
                    "</body></html>", encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    with browser(CHROMIUM, profile) as chrome:
        chrome.open(page.as_uri())
        chrome.evaluate("1")  # drain events that arrived with the load
        errors = chrome.errors()
    text = "\n".join(errors)
    assert "boom" in text
    assert "undefinedFunction" in text
    assert "missing.png" in text


LAYOUT_FACTS = """
(() => {
  const root = document.documentElement;
  const small = [];
  let texts = 0;
  for (const text of document.querySelectorAll('figure.chart svg text')) {
    if (!text.textContent.trim()) continue;
    const ctm = text.getScreenCTM();
    const scale = ctm ? Math.hypot(ctm.a, ctm.b) : 1;
    const size = parseFloat(getComputedStyle(text).fontSize) * scale;
    texts += 1;
    if (size < 11) small.push([text.textContent.slice(0, 30), Math.round(size * 10) / 10]);
  }
  const wide = [];
  for (const el of document.querySelectorAll('main *')) {
    const box = el.getBoundingClientRect();
    if (box.right > root.clientWidth + 1 && getComputedStyle(el).position !== 'fixed') {
      let clipped = false;
      for (let p = el.parentElement; p && p !== root; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if (o === 'auto' || o === 'scroll' || o === 'hidden') { clipped = true; break; }
      }
      if (!clipped) wide.push(el.tagName + '.' + el.className + ' ' + Math.round(box.right));
    }
  }
  return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth,
          height: root.scrollHeight, chartTexts: texts, small: small.slice(0, 10),
          wide: wide.slice(0, 10)};
})()
"""


@pytest.mark.parametrize("width", [1280, 390])
def test_report_layout_at_desktop_and_phone_width(report_db, report_config, tmp_path, width):
    from reports import build_and_archive

    built = build_and_archive(report_db, report_config, WEEK, as_of=NOW,
                              out_dir=tmp_path / "reports")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    mobile = width < 600
    with browser(CHROMIUM, profile) as chrome:
        chrome.viewport(width, 900, mobile=mobile)
        chrome.open(built.path_html.as_uri())
        facts = chrome.evaluate(LAYOUT_FACTS)
        assert chrome.errors() == []
        chrome.screenshot(ARTIFACTS / f"report-{WEEK}-{width}.png", width,
                          int(facts["height"]), mobile=mobile)
    assert facts["scrollWidth"] <= facts["clientWidth"], facts  # no page-level sideways scroll
    assert facts["wide"] == [], facts
    assert facts["chartTexts"] > 20, facts
    assert facts["small"] == [], facts  # chart text at least 11 px


def test_the_layout_checker_sees_overflow_and_small_chart_text(tmp_path):
    """Guard against a vacuous pass: a page too wide for a phone, with 6 px chart text."""
    page = tmp_path / "wide.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
        '</head><body><main><div style="width:900px">wide</div><figure class="chart">'
        '<svg viewBox="0 0 100 50" width="100"><text x="0" y="20" style="font-size:6px">'
        'tiny</text></svg></figure></main></body></html>', encoding="utf-8")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    with browser(CHROMIUM, profile) as chrome:
        chrome.viewport(390, 800, mobile=True)
        chrome.open(page.as_uri())
        facts = chrome.evaluate(LAYOUT_FACTS)
    assert facts["scrollWidth"] > facts["clientWidth"]
    assert facts["wide"] and facts["small"] == [["tiny", 6]]
