"""The price forecast engine: trend recovery, band calibration, back-test, bad input."""

from __future__ import annotations

import math
from datetime import date, timedelta
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.core.errors import InvalidInput
from tracker.economics import forecast
from tracker.economics.forecast import InsufficientHistory, backtest, forecast_series

D0 = date(2025, 1, 1)


def synthetic(days: int, trend_pct: float, sigma: float, seed: int = 1,
              level: float = 2.0) -> list[tuple[date, Decimal]]:
    """A log-linear trend of `trend_pct` a year with iid lognormal noise of `sigma`."""
    rng = np.random.default_rng(seed)
    slope = math.log1p(trend_pct / 100.0) / 365.0
    return [(D0 + timedelta(days=i),
             Decimal(repr(level * math.exp(slope * i + rng.normal(0.0, sigma))))
             .quantize(Decimal("0.0001")))
            for i in range(days)]


@pytest.mark.parametrize("trend", [-40.0, -25.0, 0.0, 10.0])
def test_median_recovers_a_known_trend(trend):
    history = synthetic(365, trend, 0.03)
    result = forecast_series(history, horizon_days=90)
    assert result.method == forecast.METHOD
    assert result.history_days == 365
    assert len(result.points) == 90
    assert result.points[0].date == D0 + timedelta(days=365)
    # The fitted annual trend within 4 points of the truth (180 days of noise at 3%).
    assert result.trend_pct_per_year == pytest.approx(trend, abs=4.0)
    # The P50 at day 90 against the true median 2·(1+trend)^((364+90)/365), within 2%.
    truth = 2.0 * (1 + trend / 100.0) ** ((364 + 90) / 365.0)
    assert float(result.points[-1].p50) == pytest.approx(truth, rel=0.02)
    for point in result.points:
        assert point.p10 <= point.p50 <= point.p90


@pytest.mark.parametrize(("trend", "sigma", "seed"),
                         [(-25.0, 0.02, 1), (0.0, 0.05, 2), (10.0, 0.03, 3)])
def test_backtest_coverage_near_nominal_on_a_trend_with_noise(trend, sigma, seed):
    result = backtest(synthetic(400, trend, sigma, seed=seed))
    assert result.horizons_days == (7, 30, 90)
    assert result.origins >= 50
    assert result.band_coverage is not None
    # Nominal 80%; the band is the wider of two estimates, so it errs on the wide side.
    assert 0.72 <= result.band_coverage <= 0.92
    for error in result.median_abs_pct_error:
        # iid noise of sigma: the median |error| of a well-fitted median is ≈ 0.67 sigma.
        assert error is not None and error <= 100 * sigma * 1.3


def test_flat_history_forecasts_flat():
    history = [(D0 + timedelta(days=i), Decimal("2.4900")) for i in range(60)]
    result = forecast_series(history, horizon_days=30)
    assert result.trend_pct_per_year == 0.0
    assert {(p.p10, p.p50, p.p90) for p in result.points} == {
        (Decimal("2.4900"), Decimal("2.4900"), Decimal("2.4900"))}
    bt = backtest(history)
    assert bt.median_abs_pct_error[:2] == (0.0, 0.0)
    assert bt.band_coverage == 1.0


def test_a_gap_in_the_history_counts_calendar_days():
    # Every other day observed: the trend is still per calendar day.
    history = synthetic(400, -25.0, 0.0)[::2]
    result = forecast_series(history, horizon_days=10)
    assert result.trend_pct_per_year == pytest.approx(-25.0, abs=0.01)
    assert result.points[0].date == history[-1][0] + timedelta(days=1)


def test_first_day_after_a_stale_end_warns():
    history = synthetic(60, 0.0, 0.01)
    result = forecast_series(history, horizon_days=5, first_day=D0 + timedelta(days=80))
    assert result.points[0].date == D0 + timedelta(days=80)
    assert any("days before the forecast starts" in w for w in result.warnings)


def test_a_long_horizon_on_a_short_history_is_marked_extrapolated():
    result = forecast_series(synthetic(40, 0.0, 0.01), horizon_days=90)
    assert any(w.startswith("extrapolated") for w in result.warnings)


@pytest.mark.parametrize("horizon", [0, -1, 3650, forecast.MAX_HORIZON_DAYS + 1])
def test_bad_horizon_is_one_line(horizon):
    with pytest.raises(InvalidInput, match=r"^forecast horizon must be 1 to 730 days, got"):
        forecast_series(synthetic(60, 0.0, 0.01), horizon_days=horizon)


def test_too_little_history_says_how_much():
    with pytest.raises(InsufficientHistory) as info:
        forecast_series(synthetic(10, 0.0, 0.01))
    assert str(info.value) == "10 days of history; the forecast needs at least 28"
    with pytest.raises(InsufficientHistory, match=r"^0 days of history"):
        backtest([])


def test_non_positive_values_are_rejected():
    history = synthetic(40, 0.0, 0.01)
    history[5] = (history[5][0], Decimal("0"))
    with pytest.raises(InvalidInput, match="must be a positive number"):
        forecast_series(history)


def test_backtest_uses_only_what_was_known():
    # A history that is flat and then jumps: no origin before the jump can have seen it, so
    # the back-test's 7-day errors before it are exactly 0 and the jump shows after.
    history = [(D0 + timedelta(days=i), Decimal("2") if i < 200 else Decimal("1"))
               for i in range(260)]
    bt = backtest(history, horizons_days=(7,))
    assert bt.median_abs_pct_error[0] == 0.0
    assert bt.band_coverage is not None and bt.band_coverage < 1.0


@settings(max_examples=25, deadline=None)
@given(level=st.floats(0.05, 500.0), trend=st.floats(-60.0, 60.0),
       sigma=st.floats(0.0, 0.2), seed=st.integers(0, 2**16))
def test_quantiles_are_ordered_and_positive(level, trend, sigma, seed):
    result = forecast_series(synthetic(45, trend, sigma, seed=seed, level=level),
                             horizon_days=30, places=Decimal("0.000001"))
    for point in result.points:
        assert Decimal(0) <= point.p10 <= point.p50 <= point.p90


def test_no_supported_trend_carries_the_last_value():
    # 58 days, flat then a 40% step up (a new provider in a median): too short a history to
    # extrapolate a slope from (it would read as +1,600% a year), so the P50 stays at the
    # last value.
    history = [(D0 + timedelta(days=i), Decimal("2.20") if i < 40 else Decimal("3.10"))
               for i in range(58)]
    result = forecast_series(history, horizon_days=90)
    assert result.trended is False and result.trend_pct_per_year == 0.0
    assert {p.p50 for p in result.points} == {Decimal("3.1000")}
    assert result.points[-1].p10 < Decimal("3.10")  # the band remembers the lower level
    trended = forecast_series(synthetic(365, -25.0, 0.02), horizon_days=10)
    assert trended.trended is True
    # Pure noise around a flat level over a year: no trend either.
    assert forecast_series(synthetic(365, 0.0, 0.05, seed=4), horizon_days=10).trended is False
