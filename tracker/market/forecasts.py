"""Forecasts of the price index and of a workload's cost per run (`forecast`, the report).

One function per question, both store-backed, both the pure engine's
(tracker.economics.forecast) method on a daily series: `price_forecast` on the `index`
median of one GPU class and category over the trailing `history_days`; `job_forecast` on the
cost-per-job index of one configured workload. Each returns the `forecast --format json`
document: `gpu` (or `job`), `category`, `currency`, `method`, `history_days`, `points`
(`date`, `p10`, `p50`, `p90`), `backtest` (`horizons_days`, `median_abs_pct_error`,
`band_coverage`, ...), `trend_pct_per_year`, `warnings`. The forecast starts the day after
`as_of` (passed in; nothing here reads the clock).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput

if TYPE_CHECKING:
    from tracker.economics.forecast import Backtest, Forecast
    from tracker.store.db import Database

DEFAULT_PRICE_HISTORY_DAYS = 365
# A cost-per-job point prices the whole workload on that day's offers (index.job_costs), so
# its history is shorter by default: 180 days still back-tests the 90-day horizon.
DEFAULT_JOB_HISTORY_DAYS = 180
FORECAST_JSON_KEYS = ("gpu", "category", "currency", "method", "history_days", "points",
                      "backtest")
BACKTEST_JSON_KEYS = ("horizons_days", "median_abs_pct_error", "band_coverage")


@dataclass(frozen=True)
class ForecastAnswer:
    data: dict[str, Any]  # the JSON document
    forecast: Forecast
    backtest: Backtest | None


def _history_window(as_of: datetime, history_days: int, horizon_days: int) -> tuple[date, date]:
    """The first and last day of the trailing history a forecast reads, once `history_days`
    and `horizon_days` are checked (one line naming the bad one)."""
    from tracker.economics.forecast import MAX_HORIZON_DAYS, MIN_HISTORY_DAYS, check_horizon

    if not MIN_HISTORY_DAYS <= history_days <= 5 * MAX_HORIZON_DAYS:
        raise InvalidInput(f"--history-days must be {MIN_HISTORY_DAYS} to "
                           f"{5 * MAX_HORIZON_DAYS}, got {history_days}")
    check_horizon(horizon_days)
    until = as_of.date()
    return until - timedelta(days=history_days - 1), until


def forecast_document(
    series: Sequence[tuple[date, Decimal]], *, subject: Mapping[str, Any], currency: str,
    horizon_days: int, as_of_day: date, what: str, places: Decimal | None = None,
) -> ForecastAnswer:
    """Forecast and back-test `series`; `what` names it in the one-line error when the history
    is too short ("h100-sxm on-demand index")."""
    from tracker.economics.forecast import (
        METHOD_DESCRIPTION,
        PLACES,
        InsufficientHistory,
        backtest,
        check_horizon,
        forecast_series,
    )

    check_horizon(horizon_days)
    try:
        result = forecast_series(series, horizon_days=horizon_days,
                                 first_day=as_of_day + timedelta(days=1),
                                 places=places or PLACES)
    except InsufficientHistory as exc:
        span = (f" ({series[0][0].isoformat()} to {series[-1][0].isoformat()})"
                if series else "")
        raise InvalidInput(f"{what}: {exc.have} day{'s' if exc.have != 1 else ''} of "
                           f"history{span}; the forecast needs at least {exc.need}") from None
    bt = backtest(series)
    warnings = list(result.warnings) + list(bt.warnings)
    data: dict[str, Any] = {
        **subject,
        "currency": currency,
        "method": result.method,
        "method_description": METHOD_DESCRIPTION,
        "history_days": result.history_days,
        "history_start": series[0][0].isoformat(),
        "last_observed": result.last_observed.isoformat(),
        "last_value": str(Decimal(series[-1][1])),
        "window_days": result.window_days,
        "trend_pct_per_year": round(result.trend_pct_per_year, 2),
        "trend_supported": result.trended,
        "points": [p.to_json() for p in result.points],
        "backtest": bt.to_json(),
        "warnings": warnings,
    }
    return ForecastAnswer(data=data, forecast=result, backtest=bt)


def price_forecast(
    db: Database, gpu: str, *, category: str = "on-demand", as_of: datetime,
    horizon_days: int = 90, history_days: int = DEFAULT_PRICE_HISTORY_DAYS,
    currency: str = "USD", max_age_hours: float = 48.0,
    providers: Sequence[str] | None = None, regions: Sequence[str] | None = None,
) -> ForecastAnswer:
    """The forecast of `gpu`'s daily `category` index median from the stored history."""
    from tracker.market.index import INDEX_CATEGORIES, price_index

    if category not in INDEX_CATEGORIES:
        raise InvalidInput(f"forecast category must be one of {', '.join(INDEX_CATEGORIES)}, "
                           f"got {category}")
    since, until = _history_window(as_of, history_days, horizon_days)
    result = price_index(db, [gpu], since=since, until=until, currency=currency,
                         categories=[category], max_age_hours=max_age_hours,
                         providers=providers, regions=regions)
    series = [(p.date, p.median) for p in result.points]
    where = "".join(f" {label} {', '.join(v)}" for label, v in
                    (("from", providers), ("in", regions)) if v)
    answer = forecast_document(
        series, subject={"gpu": gpu, "category": category,
                         "providers": list(providers or []), "regions": list(regions or [])},
        currency=currency, horizon_days=horizon_days, as_of_day=until,
        what=f"{gpu} {category} index{where} over the {history_days} days to "
             f"{until.isoformat()}")
    answer.data["warnings"] = list(result.warnings) + answer.data["warnings"]
    return answer


def job_forecast(
    db: Database, workloads: Sequence[Mapping[str, Any]], name: str, *, as_of: datetime,
    horizon_days: int = 90, history_days: int = DEFAULT_JOB_HISTORY_DAYS,
    currency: str = "USD", economics: Mapping[str, Any] | None = None,
) -> ForecastAnswer:
    """The forecast of one configured workload's cheapest on-demand cost per run (serve
    workloads: per million output tokens) from its cost-per-job index."""
    from tracker.market.index import day_range, job_index

    known = [str(w.get("name", "")) for w in workloads]
    if name not in known:
        raise InvalidInput(f"no configured workload named {name!r} (configured: "
                           f"{'; '.join(known) or 'none'})")
    since, until = _history_window(as_of, history_days, horizon_days)
    points = job_index(db, workloads, day_range(since, until),
                       currency=currency, economics=economics, names=[name])
    series = [(p.date, p.cost) for p in points if p.cost is not None and p.cost > 0]
    basis = points[0].basis if points else "run"
    return forecast_document(
        series, subject={"job": name, "category": "on-demand", "basis": basis},
        currency=currency, horizon_days=horizon_days, as_of_day=until,
        what=f"the cost-per-job index of {name!r} over the {history_days} days to "
             f"{until.isoformat()}",
        places=Decimal("0.01") if basis == "run" else Decimal("0.0001"))


@dataclass(frozen=True)
class TrendFromForecast:
    trend: Decimal  # a fraction per year, as OwnershipInputs.cloud_price_trend takes it
    source: str  # one sentence: which series, fitted how, how well it back-tests
    warnings: tuple[str, ...]


def forecast_trend(
    db: Database, gpu: str, *, category: str, as_of: datetime, currency: str = "USD",
    max_age_hours: float = 48.0,
) -> TrendFromForecast:
    """The fitted annual trend of `gpu`'s index (`price_forecast`) for rent vs buy. A class
    outside the index's categories (reserved terms, quotes) reads its on-demand index."""
    from tracker.economics.ownership import MAX_TREND, TREND_RANGE
    from tracker.market.index import INDEX_CATEGORIES

    if category not in INDEX_CATEGORIES:
        category = "on-demand"
    answer = price_forecast(db, gpu, category=category, as_of=as_of, currency=currency,
                            max_age_hours=max_age_hours)
    data = answer.data
    errors = dict(zip(data["backtest"]["horizons_days"],
                      data["backtest"]["median_abs_pct_error"], strict=True))
    longest = max(errors)
    error = errors[longest]
    pct = Decimal(str(data["trend_pct_per_year"]))
    if pct > MAX_TREND * 100:
        raise InvalidInput(f"the {gpu} {category} index's fitted trend ({pct:+}% a year) is "
                           f"above +{MAX_TREND:.0%}; pass --cloud-price-trend PCT")
    source = (f"forecast: the {gpu} {category} index's fitted trend {pct:+}% a year "
              f"({data['method']}, {data['history_days']} days to {data['last_observed']}; "
              f"back-test median |error| at {longest} days "
              f"{'n/a' if error is None else f'{error:.1f}%'})")
    warnings = list(data["warnings"])
    low, high = (x * 100 for x in TREND_RANGE)
    if not low <= pct <= high:
        warnings.append(f"the fitted trend {pct:+}% a year is outside the {low:+.0f}%..."
                        f"{high:+.0f}% the sensitivity table spans: a year-scale rate read "
                        f"from {data['window_days']} days of an index that moves in steps")
    return TrendFromForecast(trend=pct / 100, source=source, warnings=tuple(warnings))


__all__ = [
    "BACKTEST_JSON_KEYS",
    "DEFAULT_JOB_HISTORY_DAYS",
    "DEFAULT_PRICE_HISTORY_DAYS",
    "FORECAST_JSON_KEYS",
    "ForecastAnswer",
    "TrendFromForecast",
    "forecast_document",
    "forecast_trend",
    "job_forecast",
    "price_forecast",
]
