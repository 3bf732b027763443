"""Price forecasts with P10/P50/P90 bands, and their rolling-origin back-test (pure).

Method: a log-linear trend with empirical residual quantiles (docs/economics.md §7.2).

- Fit ordinary least squares of log(value) on the day number over the trailing
  `window_days` of the history (default 180 days: the GPU rental market moves fast enough that
  a year-old level misleads; a falling market is a constant percentage a year, a straight line
  in logs). Prices are positive; the trend is multiplicative, so the forecast never crosses 0.
- The median forecast at day x is the fitted line plus the median residual (so the P50 is a
  median of what the fit leaves, not a mean that a skewed residual drags) — when the history
  supports a trend: the fit spans at least `MIN_TREND_DAYS` (90) calendar days and the slope
  is more than `TREND_T` (2) standard errors from 0, the error corrected for autocorrelation
  as below. Otherwise the forecast is the naive one, the last value carried forward (FPP3
  §5.2, the benchmark a price random walk is best forecast by), and the band the window's
  P10–P90 of levels around the last value (a price that stepped may step back). On the
  bundled index history this rule cut the back-test's mean |error| at 7/30/90 days from
  3.6/5.6/9.2% to 1.4/4.7/6.7% (H100 SXM) and from 1.5/2.5/4.9% to 0.2/0.6/1.4% (A100 80GB);
  on synthetic trends with iid noise it costs at most about 1 point.
- The band: the residuals' empirical 10th and 90th percentiles (Hyndman & Athanasopoulos,
  *Forecasting: Principles and Practice*, 3rd ed., §5.5 "Prediction intervals from
  bootstrapped residuals", https://otexts.com/fpp3/prediction-intervals.html) widened, in
  quadrature, by the fitted line's own uncertainty at x, z₀.₉ · s · sqrt(1/n_eff + (x − x̄)²/Sxx)
  (the standard error of the OLS mean response), with the effective sample size of
  lag-1-autocorrelated residuals n_eff = n (1 − ρ) / (1 + ρ) (Wilks, *Statistical Methods in
  the Atmospheric Sciences*, 3rd ed., eq. 5.12). Price series move in steps, so their residuals
  are autocorrelated; without the correction the band would not grow with the horizon.
  On each side the band is then the wider of that and the P10/P90 of the method's own
  rolling-origin errors at horizons near h (below; empirical prediction intervals, Williams &
  Goodman 1971, JASA 66(336); Lee & Scholtes 2014, Int. J. Forecasting 30(2)), once at least
  `MIN_CALIBRATION` such errors exist; past the longest such horizon they grow as sqrt(h).
- The back-test is rolling-origin evaluation (Tashman 2000, "Out-of-sample tests of
  forecasting accuracy", Int. J. Forecasting 16(4); FPP3 §5.10 "time series cross-validation"):
  from every `step_days`-th day with at least `MIN_HISTORY_DAYS` of history before it, refit on
  what was known then, forecast, and compare with what came: the median absolute percentage
  error of the P50 at each horizon, and the share of all later observed days (up to the
  largest horizon) that fell inside the P10–P90 band (nominal: 80%).

The series may have gaps (days with no observation: a source down, a class not listed); days
are counted on the calendar, so the trend is per calendar day. Values arrive as Decimal money
(or floats) and the forecast is computed in floats (statistics, not accounting), then returned
as Decimal rounded to `places`. Nothing here reads the clock or a database: the history and
the first forecast day come in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from tracker.core.errors import InvalidInput

METHOD = "log-linear-trend-empirical-quantiles"
METHOD_DESCRIPTION = ("log-linear trend (OLS on log price over the trailing 180 days) when the "
                      "history supports one, else the last value; P10/P90 from the residuals "
                      "and the method's past errors at each horizon")
MIN_HISTORY_DAYS = 28  # observed days the fit needs: four weeks, one full weekly cycle × 4
MAX_HORIZON_DAYS = 730  # two years; a decade of a fast-moving market is not a forecast
DEFAULT_WINDOW_DAYS = 180
DEFAULT_HORIZON_DAYS = 90
BACKTEST_HORIZONS = (7, 30, 90)
BACKTEST_STEP_DAYS = 7
NOMINAL_COVERAGE = 0.8
MIN_CALIBRATION = 20  # rolling-origin errors near a horizon before they shape its band
PLACES = Decimal("0.0001")
_Z90 = 1.2815515655446004  # the standard normal's 0.9 quantile
TREND_T = 2.0  # |slope| / its autocorrelation-adjusted standard error a trend must exceed
MIN_TREND_DAYS = 90  # calendar days a fit must span before its slope is extrapolated

# The field ForecastPoint.date shadows the type `date` inside the class body.
_Day = date


class InsufficientHistory(InvalidInput):
    """Too few observed days to fit; the message says how many there are and are needed."""

    def __init__(self, have: int, need: int) -> None:
        self.have, self.need = have, need
        super().__init__(f"{have} day{'s' if have != 1 else ''} of history; the forecast needs "
                         f"at least {need}")


@dataclass(frozen=True, slots=True)
class ForecastPoint:
    date: date
    p10: Decimal
    p50: Decimal
    p90: Decimal

    def to_json(self) -> dict[str, Any]:
        return {"date": self.date.isoformat(), "p10": str(self.p10), "p50": str(self.p50),
                "p90": str(self.p90)}


@dataclass(frozen=True)
class Forecast:
    method: str
    history_days: int  # observed days in the whole history given
    window_days: int  # the trailing window the fit used
    fit_days: int  # observed days inside that window
    last_observed: date
    last_value: Decimal
    trend_pct_per_year: float  # the fitted line's compound annual change, percent
    points: tuple[ForecastPoint, ...]
    warnings: tuple[str, ...] = ()
    trended: bool = True  # False: no trend the history supports, the last value carried on

    def point_on(self, day: _Day) -> ForecastPoint | None:
        for point in self.points:
            if point.date == day:
                return point
        return None


@dataclass(frozen=True)
class Backtest:
    horizons_days: tuple[int, ...]
    median_abs_pct_error: tuple[float | None, ...]  # per horizon; None: no origin reached it
    mean_abs_pct_error: tuple[float | None, ...]  # per horizon: a step series' median can be 0
    evaluations_by_horizon: tuple[int, ...]
    band_coverage: float | None  # share of evaluated days inside P10–P90; None: none
    evaluations: int  # (origin, later observed day) pairs the coverage counts
    origins: int
    nominal_coverage: float = NOMINAL_COVERAGE
    warnings: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "horizons_days": list(self.horizons_days),
            "median_abs_pct_error": [None if e is None else round(e, 2)
                                     for e in self.median_abs_pct_error],
            "mean_abs_pct_error": [None if e is None else round(e, 2)
                                   for e in self.mean_abs_pct_error],
            "evaluations_by_horizon": list(self.evaluations_by_horizon),
            "band_coverage": None if self.band_coverage is None else round(self.band_coverage, 3),
            "nominal_coverage": self.nominal_coverage,
            "evaluations": self.evaluations, "origins": self.origins,
        }


@dataclass(frozen=True)
class _Fit:
    intercept: float  # log value at day 0 of the series' own day numbers
    slope: float  # log change per day
    median_resid: float
    lower: float  # median − P10 of the residuals (≥ 0)
    upper: float  # P90 − median of the residuals (≥ 0)
    scale: float  # residual standard deviation
    n_eff: float
    x_mean: float
    sxx: float
    n: int

    def quantiles(self, x: Any) -> tuple[Any, Any, Any]:
        """(P10, P50, P90) in logs at day numbers x (a numpy array)."""
        import numpy as np

        center = self.intercept + self.slope * x + self.median_resid
        if self.sxx > 0:
            se = self.scale * np.sqrt(1.0 / self.n_eff + (x - self.x_mean) ** 2
                                      * (self.n / self.n_eff) / self.sxx)
        else:
            se = np.zeros_like(x)
        t = _Z90 * se
        return (center - np.sqrt(self.lower ** 2 + t ** 2), center,
                center + np.sqrt(self.upper ** 2 + t ** 2))


def _series(history: Sequence[tuple[date, Decimal | float]]) -> tuple[list[date], list[float]]:
    """Sorted, one value per day (the last given wins), positive."""
    by_day: dict[date, float] = {}
    for day, value in history:
        number = float(value)
        if not math.isfinite(number) or number <= 0:
            raise InvalidInput(f"forecast history value on {day.isoformat()} must be a "
                               f"positive number, got {value}")
        by_day[day] = number
    days = sorted(by_day)
    return days, [by_day[d] for d in days]


def _fit(x: Any, z: Any) -> _Fit:
    import numpy as np

    n = len(x)
    x_mean = float(x.mean())
    sxx = float(((x - x_mean) ** 2).sum())
    z_mean = float(z.mean())
    slope = float(((x - x_mean) * (z - z_mean)).sum() / sxx) if sxx > 0 else 0.0
    intercept = z_mean - slope * x_mean
    resid = z - (intercept + slope * x)
    dof = max(n - 2, 1)
    scale = math.sqrt(float((resid ** 2).sum()) / dof)
    rho = 0.0
    if n > 2 and float((resid ** 2).sum()) > 0:
        rho = float((resid[1:] * resid[:-1]).sum() / (resid ** 2).sum())
    rho = min(max(rho, 0.0), 0.95)  # negative ρ would shrink the band; 0.95 caps n/n_eff at 39
    n_eff = max(n * (1.0 - rho) / (1.0 + rho), 2.0)
    se_slope = scale * math.sqrt(n / n_eff / sxx) if sxx > 0 else math.inf
    span = float(x[-1] - x[0]) + 1.0
    if span < MIN_TREND_DAYS or not abs(slope) > TREND_T * se_slope:
        # No trend the history supports: the naive forecast from the last value, the band
        # the window's P10-P90 of levels around it (a price that stepped may step back).
        last = float(z[-1])
        p10, p90 = (float(v) for v in np.percentile(z, [10, 90]))
        return _Fit(intercept=last, slope=0.0, median_resid=0.0, lower=max(last - p10, 0.0),
                    upper=max(p90 - last, 0.0), scale=0.0, n_eff=n_eff, x_mean=x_mean,
                    sxx=sxx, n=n)
    p10, p50, p90 = (float(v) for v in np.percentile(resid, [10, 50, 90]))
    return _Fit(intercept=intercept, slope=slope, median_resid=p50, lower=p50 - p10,
                upper=p90 - p50, scale=scale, n_eff=n_eff, x_mean=x_mean, sxx=sxx, n=n)


def _fit_window(x: Any, z: Any, window_days: int) -> tuple[_Fit, int]:
    keep = x > x[-1] - window_days
    if int(keep.sum()) < MIN_HISTORY_DAYS:
        # A gappy series: the window holds too few points, so fit the last MIN_HISTORY_DAYS.
        return _fit(x[-MIN_HISTORY_DAYS:], z[-MIN_HISTORY_DAYS:]), MIN_HISTORY_DAYS
    return _fit(x[keep], z[keep]), int(keep.sum())


@dataclass(frozen=True)
class _Errors:
    """Rolling-origin errors in logs: one row per (origin, later observed day)."""

    origin_x: Any  # the origin's day number
    horizon: Any  # days after the origin
    truth_x: Any  # the observed day's number (origin_x + horizon)
    error: Any  # log(observed) − log(P50 forecast)
    inside: Any  # the observation fell inside that origin's calibrated band (back-test only)


def _origins(x: Any, step_days: int, min_lead: int) -> list[int]:
    """Indices of the rolling origins: observed days with MIN_HISTORY_DAYS observed days up to
    them, `step_days` apart, at least `min_lead` days before the last observation."""
    out: list[int] = []
    next_x = -math.inf
    for i in range(MIN_HISTORY_DAYS - 1, len(x)):
        if x[i] >= next_x and x[-1] - x[i] >= min_lead:
            out.append(i)
            next_x = x[i] + step_days
    return out


def _band(fit: _Fit, x_origin: float, future_x: Any, errors: _Errors | None,
          cutoff_x: float) -> tuple[Any, Any, Any, bool]:
    """(P10, P50, P90) in logs at `future_x` forecast from the origin at `x_origin`, and
    whether any horizon's band was stretched past the calibrated horizons.

    The band is the wider, on each side, of the residual band (`_Fit.quantiles`) and the
    empirical quantiles of the rolling-origin errors known at `cutoff_x` (truth on or before
    it) at horizons near h (Lee & Scholtes 2014, "Empirical prediction intervals revisited",
    Int. J. Forecasting 30(2); Williams & Goodman 1971, JASA 66(336)). Past the largest
    horizon with enough errors, that horizon's offsets grow as sqrt(h) (FPP3 §5.5)."""
    import numpy as np

    low, mid, high = fit.quantiles(future_x)
    lower = mid - low
    upper = high - mid
    stretched = False
    if errors is not None and len(errors.error):
        known = errors.truth_x <= cutoff_x
        horizon, error = errors.horizon[known], errors.error[known]
        if len(error) >= MIN_CALIBRATION:
            hs = np.rint(future_x - x_origin).astype(int)
            reach = min(int(horizon.max()), int(hs.max()))
            # The error quantiles on a weekly grid of horizons (and h = 1..7), interpolated
            # between: neighbouring horizons share most of their errors anyway.
            grid = sorted({*range(1, min(reach, 7) + 1), *range(7, reach + 1, 7), reach})
            order = np.argsort(horizon, kind="stable")
            by_h, sorted_err = horizon[order], error[order]
            known_h: list[int] = []
            lows: list[float] = []
            highs: list[float] = []
            for h in grid:
                width = max(3, h // 4)
                lo_i, hi_i = np.searchsorted(by_h, [h - width, h + width + 1e-9])
                if hi_i - lo_i >= MIN_CALIBRATION:
                    q10, q90 = np.percentile(sorted_err[lo_i:hi_i], [10, 90])
                    known_h.append(h)
                    lows.append(float(-q10))
                    highs.append(float(q90))
            if known_h:
                top = known_h[-1]
                clipped = np.clip(hs, known_h[0], top).astype(float)
                emp_low = np.interp(clipped, known_h, lows)
                emp_high = np.interp(clipped, known_h, highs)
                beyond = hs > top
                if beyond.any():
                    # Past the longest calibrated horizon the errors grow as sqrt(h).
                    scale = np.sqrt(np.maximum(hs[beyond], 1) / top)
                    emp_low[beyond] = lows[-1] * scale
                    emp_high[beyond] = highs[-1] * scale
                    stretched = True
                lower = np.maximum(lower, emp_low)
                upper = np.maximum(upper, emp_high)
    return mid - lower, mid, mid + upper, stretched


def _rolling_errors(x: Any, z: Any, window_days: int, step_days: int, max_horizon: int,
                    calibrate: bool) -> tuple[_Errors, int]:
    """Refit at every origin and record the errors of its P50 on the later observed days up
    to `max_horizon`; with `calibrate`, also whether each fell inside the band that origin
    would have drawn from the errors known then. Returns the errors and the origin count."""
    import numpy as np

    rows: list[tuple[Any, Any, Any, Any, Any]] = []
    previous: _Errors | None = None
    count = 0
    for i in _origins(x, step_days, 1):
        later = (x > x[i]) & (x <= x[i] + max_horizon)
        if not later.any():
            continue
        count += 1
        fit, _ = _fit_window(x[: i + 1], z[: i + 1], window_days)
        future = x[later]
        if calibrate:
            low, mid, high, _ = _band(fit, float(x[i]), future, previous, float(x[i]))
            inside = (z[later] >= low - 1e-12) & (z[later] <= high + 1e-12)
        else:
            _, mid, _ = fit.quantiles(future)
            inside = np.zeros(len(future), dtype=bool)
        rows.append((np.full(len(future), x[i]), future - x[i], future, z[later] - mid, inside))
        if calibrate:
            previous = _stack(rows)
    return _stack(rows), count


def _stack(rows: list[tuple[Any, Any, Any, Any, Any]]) -> _Errors:
    import numpy as np

    if not rows:
        empty = np.array([], dtype=float)
        return _Errors(empty, empty, empty, empty, np.array([], dtype=bool))
    return _Errors(*(np.concatenate([r[k] for r in rows]) for k in range(5)))


def backtest(
    history: Sequence[tuple[date, Decimal | float]], *,
    horizons_days: Sequence[int] = BACKTEST_HORIZONS, step_days: int = BACKTEST_STEP_DAYS,
    window_days: int = DEFAULT_WINDOW_DAYS,
) -> Backtest:
    """Rolling-origin evaluation of `forecast_series` on `history` (see the module docstring).

    An origin is an observed day with at least MIN_HISTORY_DAYS observed days up to and
    including it; origins are `step_days` apart. Each origin's forecast uses only what was
    known then (its band calibrated on errors whose truth it had seen). A horizon h counts
    where an observation exists exactly h days after the origin; the coverage counts every
    later observed day up to the largest horizon."""
    import numpy as np

    horizons = tuple(sorted({int(h) for h in horizons_days}))
    if not horizons or horizons[0] < 1 or horizons[-1] > MAX_HORIZON_DAYS:
        raise InvalidInput(f"back-test horizons must be 1 to {MAX_HORIZON_DAYS} days")
    if step_days < 1:
        raise InvalidInput("back-test step must be at least 1 day")
    days, values = _series(history)
    if len(days) < MIN_HISTORY_DAYS:
        raise InsufficientHistory(len(days), MIN_HISTORY_DAYS)
    x = np.array([(d - days[0]).days for d in days], dtype=float)
    z = np.log(np.array(values))
    errors, origins = _rolling_errors(x, z, window_days, step_days, horizons[-1],
                                      calibrate=True)
    mdape: list[float | None] = []
    mape: list[float | None] = []
    counts: list[int] = []
    for h in horizons:
        at = errors.horizon == h
        pct = np.abs(np.exp(-errors.error[at]) - 1.0) * 100.0  # |forecast − truth| / truth
        counts.append(int(at.sum()))
        mdape.append(float(np.median(pct)) if at.any() else None)
        mape.append(float(np.mean(pct)) if at.any() else None)
    warnings = []
    unreached = [h for h, n in zip(horizons, counts, strict=True) if not n]
    if unreached:
        warnings.append("the history is too short to back-test "
                        + ", ".join(f"{h}" for h in unreached) + "-day forecasts")
    total = len(errors.error)
    return Backtest(
        horizons_days=horizons, median_abs_pct_error=tuple(mdape),
        mean_abs_pct_error=tuple(mape),
        evaluations_by_horizon=tuple(counts),
        band_coverage=float(errors.inside.mean()) if total else None, evaluations=total,
        origins=origins, warnings=tuple(warnings))


def check_horizon(horizon_days: int) -> None:
    if not 1 <= horizon_days <= MAX_HORIZON_DAYS:
        raise InvalidInput(f"forecast horizon must be 1 to {MAX_HORIZON_DAYS} days, "
                           f"got {horizon_days}")


def forecast_series(
    history: Sequence[tuple[date, Decimal | float]], *, horizon_days: int = DEFAULT_HORIZON_DAYS,
    first_day: date | None = None, window_days: int = DEFAULT_WINDOW_DAYS,
    places: Decimal = PLACES,
) -> Forecast:
    """P10/P50/P90 for each day from `first_day` (default: the day after the last observation)
    over `horizon_days` days, fitted to `history` (date, value) pairs."""
    import numpy as np

    check_horizon(horizon_days)
    if window_days < MIN_HISTORY_DAYS:
        raise InvalidInput(f"forecast window must be at least {MIN_HISTORY_DAYS} days, "
                           f"got {window_days}")
    days, values = _series(history)
    if len(days) < MIN_HISTORY_DAYS:
        raise InsufficientHistory(len(days), MIN_HISTORY_DAYS)
    start = first_day or days[-1] + timedelta(days=1)
    if start <= days[-1]:
        raise InvalidInput(f"the forecast starts on {start.isoformat()}, not after the last "
                           f"observation ({days[-1].isoformat()})")
    x = np.array([(d - days[0]).days for d in days], dtype=float)
    z = np.log(np.array(values))
    fit, fit_days = _fit_window(x, z, window_days)
    future = np.array([(start - days[0]).days + i for i in range(horizon_days)], dtype=float)
    reach = int(future[-1] - x[-1])
    errors, _ = _rolling_errors(x, z, window_days, BACKTEST_STEP_DAYS, reach, calibrate=False)
    log_low, log_mid, log_high, stretched = _band(fit, float(x[-1]), future, errors,
                                                  float(x[-1]))
    low, mid, high = np.exp(log_low), np.exp(log_mid), np.exp(log_high)
    warnings: list[str] = []
    span = (days[-1] - days[0]).days + 1
    if stretched:
        warnings.append("the band past the back-tested horizons grows as the square root of "
                        "the horizon from the longest one the history calibrates")
    if reach > span:
        warnings.append(f"extrapolated: the forecast reaches {reach} days past the last "
                        f"observation, longer than the {span}-day history it is fitted to")
    if (start - days[-1]).days > 7:
        warnings.append(f"the history ends on {days[-1].isoformat()}, "
                        f"{(start - days[-1]).days} days before the forecast starts")
    points = tuple(
        ForecastPoint(date=start + timedelta(days=i), p10=_dec(low[i], places),
                      p50=_dec(mid[i], places), p90=_dec(high[i], places))
        for i in range(horizon_days))
    return Forecast(method=METHOD, history_days=len(days), window_days=window_days,
                    fit_days=fit_days, last_observed=days[-1],
                    last_value=Decimal(repr(values[-1])),
                    trend_pct_per_year=(math.exp(fit.slope * 365.0) - 1.0) * 100.0,
                    trended=fit.slope != 0.0,
                    points=points, warnings=tuple(warnings))


def _dec(value: float, places: Decimal) -> Decimal:
    return Decimal(repr(float(value))).quantize(places)


def trend_path(trend_pct_per_year: float, years: float) -> float:
    """The price multiplier after `years` at a compound `trend_pct_per_year`."""
    if trend_pct_per_year <= -100:
        raise InvalidInput("a price trend must be more than -100% a year")
    return (1.0 + trend_pct_per_year / 100.0) ** years


__all__ = ["BACKTEST_HORIZONS", "DEFAULT_HORIZON_DAYS", "DEFAULT_WINDOW_DAYS",
           "MAX_HORIZON_DAYS", "METHOD", "METHOD_DESCRIPTION", "MIN_HISTORY_DAYS",
           "NOMINAL_COVERAGE", "Backtest", "Forecast", "ForecastPoint", "InsufficientHistory",
           "backtest", "check_horizon", "forecast_series", "trend_path"]
