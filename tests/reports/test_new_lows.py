"""The report's new lows name one previous low whatever order the database reads its spans in
(reports.sections.key_figures.new_lows)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pandas as pd

from reports.sections.common import epoch_ms
from reports.sections.key_figures import new_lows
from tracker.answers.report_settings import ReportOptions

WEEK = datetime(2026, 11, 23, tzinfo=UTC)
WINDOW = datetime(2026, 9, 1, tzinfo=UTC)


def _spans(providers: list[str]) -> pd.DataFrame:
    """Two providers' spans of one price before the week (a tie), and a dearer one."""
    before = epoch_ms(datetime(2026, 10, 1, tzinfo=UTC))
    rows = [{"gpu": "h100-sxm", "bucket": "on_demand", "first_ms": before, "rank": 0,
             "price": Decimal("2.00"), "provider": p} for p in providers]
    rows.append({"gpu": "h100-sxm", "bucket": "on_demand", "first_ms": before, "rank": 1,
                 "price": Decimal("2.50"), "provider": "aws"})
    return pd.DataFrame(rows)


def test_a_tied_previous_low_names_the_same_provider_in_either_read_order():
    figures = [{"gpu": "h100-sxm", "gpu_name": "H100 SXM", "on_demand": {"now": {
        "price": Decimal("1.80"), "category": "on-demand", "provider": "lambda",
        "region": "us-east-1", "instance_type": "gpu_1x_h100"}}, "spot": None}]
    answers = [new_lows(figures, _spans(order), WEEK, WINDOW, ReportOptions())
               for order in (["vastai", "coreweave"], ["coreweave", "vastai"])]
    assert answers[0] == answers[1]
    assert [(low["previous_low"], low["previous_low_provider"]) for low in answers[0]] == [
        (Decimal("2.00"), "coreweave")]
