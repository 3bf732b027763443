"""Chart rules a reader relies on: the big three clouds stay on a featured class's chart,
the palette has no low-contrast yellow, and each provider has its own marker."""

from __future__ import annotations

import pandas as pd

from reports import charts
from reports.sections.trends import BIG_THREE, MAX_CHART_PROVIDERS, _chart_providers


def _rows(rank: int) -> pd.DataFrame:
    return pd.DataFrame({"sample": [0, 1, 2], "rank": [rank] * 3})


def test_big_three_on_demand_lines_are_kept_even_when_dearest():
    # Ten providers; the three clouds are the dearest (highest rank numbers).
    cheap = {f"neo{i}": _rows(i) for i in range(7)}
    clouds = {"aws": _rows(100), "azure": _rows(101), "gcp": _rows(102)}
    by_provider = {**cheap, **clouds}
    plain = _chart_providers(by_provider, 3)
    assert "aws" not in plain and len(plain) == MAX_CHART_PROVIDERS
    kept = _chart_providers(by_provider, 3, BIG_THREE)
    assert {"aws", "azure", "gcp"} <= set(kept)
    assert len(kept) == MAX_CHART_PROVIDERS
    assert set(kept) - set(BIG_THREE) == {"neo0", "neo1", "neo2"}  # the cheapest others
    # A cloud with no price for this class is not invented.
    assert _chart_providers({"neo0": _rows(0), "aws": _rows(9)}, 3, BIG_THREE) == [
        "aws", "neo0"]


def test_palette_is_colour_blind_safe_without_yellow_and_markers_are_distinct():
    assert "#F0E442" not in charts.PALETTE
    assert len(set(charts.PALETTE)) == len(charts.PALETTE)
    assert len(set(charts.MARKERS)) == len(charts.MARKERS) >= len(charts.PALETTE)
    assert charts.FONT_SIZE * 350 / (charts.WIDTH_IN * 72) >= 11  # >= 11 px on a phone
