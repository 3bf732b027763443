"""Golden files of the weekly report for the fixed dataset of conftest.py (week 2026-W48).

The JSON document, the HTML page and the CSV of prices are compared byte for byte with the
files in tests/reports/test_golden/. A change to the report shows up as a reviewable diff of
those files; when the change is intended, regenerate them with one command:

    python -m pytest tests/reports/test_golden.py --force-regen

(pytest-regressions writes the new files and fails once; rerun to see it pass, and commit the
files with the change that caused them.)
"""

from __future__ import annotations

import re

import pytest

from reports.build import build_report
from reports.render import render_csv, render_html
from tests.reports.conftest import NOW, WEEK
from tracker.core.serialization import canonical_json


@pytest.fixture
def document(report_db, report_config):
    return build_report(report_db, report_config, WEEK, now=NOW)


def test_report_json_golden(document, file_regression):
    file_regression.check(canonical_json(document), basename=f"weekly-report-{WEEK}",
                          extension=".json")


def test_report_html_golden(document, file_regression):
    # The charts are matplotlib SVG, which names its version in a title element; the version is
    # pinned by constraints.txt, but a patch release alone should not fail the report's golden.
    html = re.sub(r"Matplotlib v[\w.+-]+", "Matplotlib", render_html(document))
    file_regression.check(html, basename=f"weekly-report-{WEEK}", extension=".html")


def test_report_csv_golden(document, file_regression):
    file_regression.check(render_csv(document), basename=f"gpu-prices-{WEEK}", extension=".csv",
                          newline="\n")
