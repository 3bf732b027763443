"""The GPU price index: a daily median price per GPU-hour per GPU class, and a cost-per-job index.

Method (also in the README, "Price index"):

- One series per GPU class and category: `on-demand`, `spot` (cloud spot/preemptible) and `bid`
  (marketplace minimum bids, Vast.ai) are kept apart; reserved terms and your own quotes are
  never in the index.
- Each day is sampled at its last instant (23:59:59.999999 UTC), from the price history
  (spans): a price counts on day d when its span was valid then.
- Each provider counts once, at its cheapest comparable offer: whole GPUs only (a 1/6 slice of
  a GPU is not comparable), prices per GPU-hour converted into the index currency at the ECB
  rate of day d (nearest earlier business day) before they are compared.
- Excluded: offers seen only once (one sighting in their whole history, so one odd listing
  cannot move the index), and prices whose last sighting is older than `max_age_hours`
  (default `[refresh] stale_after_hours`) at the sampling instant: a stale or failing source
  drops out instead of freezing its last price into the index.
- The day's figures over the providers' prices: the median, p10 and p90 (linear interpolation
  between order statistics, Hyndman & Fan type 7, the default of numpy.percentile), computed
  exactly in Decimal, and the number of providers. With one marketplace listing far below the
  rest the cheapest price moves; the median moves at most one rank.

The cost-per-job index prices the configured reference workloads (`[report] workloads`) with
the same sizing and economics as the report's recommendations, on the on-demand prices valid at
each sample date: the cheapest cost per run (serve workloads: per million output tokens).

`daily_index` and `percentile` are pure; `price_index` and `job_index` read the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from tracker.core.errors import InvalidInput

if TYPE_CHECKING:
    from tracker.core.fx import RateTable
    from tracker.store.db import Database

INDEX_CATEGORIES = ("on-demand", "spot", "bid")
INDEX_JSON_KEYS = ("date", "gpu", "category", "median", "p10", "p90", "providers", "currency")
JOB_JSON_KEYS = ("date", "job", "cost", "currency")
INDEX_PLACES = Decimal("0.0001")  # index figures are rates per GPU-hour: 4 decimals


def percentile(sorted_values: Sequence[Decimal], fraction: Decimal) -> Decimal:
    """Type-7 percentile (linear between order statistics), exact in Decimal."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    position = (len(sorted_values) - 1) * fraction
    low = int(position)
    if low + 1 >= len(sorted_values):
        return sorted_values[-1]
    weight = position - low
    return sorted_values[low] + (sorted_values[low + 1] - sorted_values[low]) * weight


def sample_instant(day: date) -> datetime:
    """The last instant of a UTC day, as `--as-of DATE` reads a bare date."""
    return datetime.combine(day, time.max, tzinfo=UTC)


# The field IndexPoint.date shadows the type `date` inside the class body.
_Day = date


@dataclass(frozen=True, slots=True)
class IndexPoint:
    date: date
    gpu: str
    category: str
    median: Decimal
    p10: Decimal
    p90: Decimal
    providers: int
    currency: str
    cheapest: Decimal
    cheapest_provider: str
    rates: tuple[tuple[str, Decimal, _Day], ...] = ()  # (from currency, rate, rate day)

    def to_json(self) -> dict[str, Any]:
        from tracker.core.money import display_rate
        from tracker.core.serialization import to_jsonable

        data = {key: to_jsonable(getattr(self, key)) for key in INDEX_JSON_KEYS}
        data["cheapest"] = to_jsonable(self.cheapest)
        data["cheapest_provider"] = self.cheapest_provider
        data["rates"] = [{"from": c, "rate": to_jsonable(display_rate(r)),
                          "rate_date": d.isoformat()} for c, r, d in self.rates]
        return data


@dataclass
class IndexResult:
    points: list[IndexPoint]
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> span count
    warnings: list[str] = field(default_factory=list)


class IndexSpan(NamedTuple):
    """One price span as the index reads it; times are epoch milliseconds (UTC) so a year of
    spans loads without building a datetime per cell. `last_ms` is the last sighting
    (tracker.store.queries.last_sighting); `valid_to_ms` None while the price is current."""

    offer_id: int
    gpu: str
    category: str
    provider: str
    gpu_count: float
    price_per_gpu_hour: Decimal
    currency: str
    first_ms: int
    valid_to_ms: int | None
    last_ms: int


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _ms(moment: datetime) -> int:
    """Whole milliseconds, rounded down: 23:59:59.999999 stays on its own day."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _q(value: Decimal) -> Decimal:
    return value.quantize(INDEX_PLACES)


def daily_index(
    spans: Iterable[IndexSpan], days: Sequence[date], *, currency: str,
    rates: RateTable | None, max_age_hours: float,
    categories: Sequence[str] = INDEX_CATEGORIES,
) -> IndexResult:
    """The index points of `days` from the price spans of one or more GPU classes (pure)."""
    spans = [s for s in spans if s.category in categories]
    excluded = {"fractional_gpu": 0, "seen_once": 0}
    # An offer seen once: its first sighting is its last one, over every span loaded.
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for span in spans:
        first[span.offer_id] = min(first.get(span.offer_id, span.first_ms), span.first_ms)
        last[span.offer_id] = max(last.get(span.offer_id, span.last_ms), span.last_ms)
    usable = []
    for span in spans:
        if float(span.gpu_count) < 1:
            excluded["fractional_gpu"] += 1
        elif first[span.offer_id] == last[span.offer_id]:
            excluded["seen_once"] += 1
        else:
            usable.append(span)
    import bisect

    days = sorted(days)
    instants = [_ms(sample_instant(day)) for day in days]
    max_age = round(max_age_hours * 3_600_000)
    warnings: list[str] = []
    converted: dict[tuple[Decimal, str, date], Decimal | None] = {}
    # best[(day index, gpu, category, provider)] = cheapest price; each span touches only the
    # days it covers: valid_from <= t < valid_to, and t <= last_seen + max_age (not stale).
    # The spans quoted in the index currency, most of them, go through arrays; the others
    # are converted at each day's rate here.
    best, stale = _cheapest_by_day([s for s in usable if s.currency == currency], instants,
                                   max_age)
    used_rates: dict[int, dict[str, tuple[Decimal, date | None]]] = {}
    for span in usable:
        if span.currency == currency:
            continue
        lo = bisect.bisect_left(instants, span.first_ms)
        hi_valid = (len(instants) if span.valid_to_ms is None
                    else bisect.bisect_left(instants, span.valid_to_ms))
        hi = min(hi_valid, bisect.bisect_right(instants, span.last_ms + max_age))
        stale += max(0, hi_valid - max(lo, hi))
        for i in range(lo, hi):
            key = (span.price_per_gpu_hour, span.currency, days[i])
            if key not in converted:
                converted[key] = _convert(rates, span.price_per_gpu_hour, span.currency,
                                          currency, days[i], warnings)
            price = converted[key]
            if price is None:
                continue
            day_rates = used_rates.setdefault(i, {})
            if span.currency not in day_rates:
                assert rates is not None  # _convert returns None without a rate table
                day_rates[span.currency] = rates.rate(span.currency, currency, days[i])
            group = (i, span.gpu, span.category, span.provider)
            current = best.get(group)
            if current is None or price < current:
                best[group] = price
    by_series: dict[tuple[int, str, str], list[tuple[Decimal, str]]] = {}
    for (i, gpu, category, provider), price in best.items():
        by_series.setdefault((i, gpu, category), []).append((price, provider))
    points: list[IndexPoint] = []
    for (i, gpu, category), values in sorted(by_series.items()):
        values.sort()
        prices = [v for v, _ in values]
        points.append(IndexPoint(
            date=days[i], gpu=gpu, category=category,
            median=_q(percentile(prices, Decimal("0.5"))),
            p10=_q(percentile(prices, Decimal("0.1"))),
            p90=_q(percentile(prices, Decimal("0.9"))),
            providers=len(prices), currency=currency, cheapest=_q(prices[0]),
            cheapest_provider=values[0][1],
            rates=tuple((c, r, d) for c, (r, d) in sorted(used_rates.get(i, {}).items())
                        if d is not None)))
    excluded["stale_price_samples"] = stale
    return IndexResult(points=points, excluded=excluded, warnings=sorted(set(warnings)))


_SPAN_DAYS_PER_CHUNK = 1_000_000  # (span, day) cells expanded at once: about 40 MB


def _cheapest_by_day(spans: Sequence[IndexSpan], instants: Sequence[int],
                     max_age: int) -> tuple[dict[tuple[int, str, str, str], Decimal], int]:
    """({(day index, gpu, category, provider): cheapest price}, stale samples) of spans in
    one currency: each span covers the sampling instants from its first sighting to before
    its end, and no later than `max_age` ms after its last sighting. The prices are ranked
    exactly once (Decimal), the minimum per cell is taken over the ranks with numpy."""
    import numpy as np

    if not spans:
        return {}, 0
    n = len(spans)
    at = np.asarray(instants, dtype=np.int64)
    first = np.fromiter((s.first_ms for s in spans), np.int64, n)
    ends = np.fromiter((-1 if s.valid_to_ms is None else s.valid_to_ms for s in spans),
                       np.int64, n)
    last = np.fromiter((s.last_ms for s in spans), np.int64, n)
    lo = np.searchsorted(at, first, side="left")
    hi_valid = np.where(ends < 0, len(at), np.searchsorted(at, ends, side="left"))
    hi = np.minimum(hi_valid, np.searchsorted(at, last + max_age, side="right"))
    stale = int(np.maximum(0, hi_valid - np.maximum(lo, hi)).sum())
    length = np.maximum(hi - lo, 0)
    ordered = sorted({s.price_per_gpu_hour for s in spans})
    rank_of = {price: k for k, price in enumerate(ordered)}
    rank = np.fromiter((rank_of[s.price_per_gpu_hour] for s in spans), np.int64, n)
    names: dict[tuple[str, str, str], int] = {}
    group = np.fromiter((names.setdefault((s.gpu, s.category, s.provider), len(names))
                         for s in spans), np.int64, n)
    width = len(names)
    none = len(ordered)
    cheapest = np.full(len(at) * width, none, dtype=np.int64)
    ends_at = np.cumsum(length)
    start = 0
    while start < n:  # chunks of spans, so the expanded cells stay bounded
        base = ends_at[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends_at, base + _SPAN_DAYS_PER_CHUNK,
                                                  side="right")))
        part = slice(start, stop)
        counts = length[part]
        which = np.repeat(np.arange(start, stop), counts)
        offset = np.arange(len(which)) - np.repeat(np.cumsum(counts) - counts, counts)
        cells = (lo[which] + offset) * width + group[which]
        np.minimum.at(cheapest, cells, rank[which])
        start = stop
    group_names = list(names)
    best = {}
    for cell in np.nonzero(cheapest < none)[0].tolist():
        day, g = divmod(cell, width)
        best[(day, *group_names[g])] = ordered[int(cheapest[cell])]
    return best, stale


def _convert(rates: RateTable | None, price: Decimal, from_currency: str, to_currency: str,
             day: date, warnings: list[str]) -> Decimal | None:
    if rates is None:
        warnings.append(f"{from_currency} prices left out: no exchange rates to {to_currency}")
        return None
    try:
        result = rates.convert(price, from_currency, to_currency, day)
    except InvalidInput as exc:
        warnings.append(f"{from_currency} prices left out: {exc}")
        return None
    if result.warning:
        warnings.append(result.warning)
    return result.amount


def day_range(since: date, until: date) -> list[date]:
    if since > until:
        raise InvalidInput("--since is after the end of the index period")
    return [since + timedelta(days=i) for i in range((until - since).days + 1)]


# --------------------------------------------------------------------------------------------
# Store-backed


def price_index(
    db: Database, gpus: Sequence[str], *, since: date, until: date, currency: str = "USD",
    categories: Sequence[str] = INDEX_CATEGORIES, max_age_hours: float = 48.0,
    providers: Sequence[str] | None = None, regions: Sequence[str] | None = None,
) -> IndexResult:
    """The daily index of `gpus` over [since, until] (UTC days) from the stored history."""
    from tracker.store.rates import rate_table

    bad = sorted(set(categories) - set(INDEX_CATEGORIES))
    if bad:
        raise InvalidInput(f"index category must be one of {', '.join(INDEX_CATEGORIES)}, "
                           f"got {', '.join(bad)}")
    spans = load_index_spans(db, gpus, categories=categories, providers=providers,
                             regions=regions,
                             since=sample_instant(since) - timedelta(hours=max_age_hours),
                             until=sample_instant(until))
    needs_rates = any(s.currency != currency for s in spans)
    rates = rate_table(db) if needs_rates else None
    return daily_index(spans, day_range(since, until), currency=currency, rates=rates,
                       max_age_hours=max_age_hours, categories=categories)


def load_index_spans(
    db: Database, gpus: Sequence[str], *, categories: Sequence[str],
    providers: Sequence[str] | None, regions: Sequence[str] | None, since: datetime,
    until: datetime,
) -> list[IndexSpan]:
    """The spans of `gpus` overlapping [since, until] (tracker.store.series.index_span_rows:
    times as epoch ms computed by the database, last sightings with the region scope)."""
    from tracker.store.series import index_span_rows

    return [IndexSpan._make(row) for row in index_span_rows(
        db, gpus, categories=categories, providers=providers, regions=regions, since=since,
        until=until)]


@dataclass(frozen=True, slots=True)
class JobPoint:
    date: date
    job: str
    cost: Decimal | None  # per run; serve workloads: per million output tokens
    basis: str  # "run" or "million_tokens"
    currency: str
    gpu: str | None
    count: int | None
    provider: str | None

    def to_json(self) -> dict[str, Any]:
        from tracker.core.serialization import to_jsonable

        return {"date": self.date.isoformat(), "job": self.job, "cost": to_jsonable(self.cost),
                "currency": self.currency, "basis": self.basis, "gpu": self.gpu,
                "count": self.count, "provider": self.provider}


def job_costs(workloads: Sequence[Mapping[str, Any]], rows: Sequence[Any], day: date,
              currency: str, economics: Mapping[str, Any] | None = None,
              names: Sequence[str] | None = None) -> list[JobPoint]:
    """The cheapest cost of each workload on one day's on-demand rows (pure), from the first
    row of each shape group (`store.queries.first_per_shape`: no other can be the cheapest,
    and no instance is named)."""
    from tracker.answers.candidates import by_instance
    from tracker.answers.recommend import evaluate_workload
    from tracker.answers.workloads import Workload
    from tracker.core.errors import NotFound
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.queries import first_per_shape

    settings = EconomicsSettings(dict(economics) if economics else None)
    rows = first_per_shape(rows, by_instance(), named_unclustered=False)
    points = []
    for raw in workloads:
        workload = Workload.parse(raw)
        if names and workload.name not in names:
            continue
        basis = "million_tokens" if workload.serving else "run"
        best = None
        cost = None
        try:
            if workload.serving:
                best, cost = _cheapest_per_token(workload, rows, settings)
            else:
                best = evaluate_workload(workload, rows, settings, {},
                                         best_only=True).get("best")
                cost = best["cost"] if best else None
        except (InvalidInput, NotFound):
            best = cost = None
        points.append(JobPoint(
            date=day, job=workload.name, cost=cost, basis=basis, currency=currency,
            gpu=best["gpu"] if best else None, count=best["count"] if best else None,
            provider=best["provider"] if best else None))
    return points


def _cheapest_per_token(workload: Any, rows: Sequence[Any],
                        settings: Any) -> tuple[dict[str, Any] | None, Decimal | None]:
    """Serving: the report's serve recommendation (the cheapest per million output tokens that
    meets the workload's service level and carries its load), as its cost per million output
    tokens — at the load when the workload has one, as the recommendation ranks."""
    from tracker.answers.recommend import evaluate_workload

    best = evaluate_workload(workload, rows, settings, {}, best_only=True).get("best")
    if best is None:
        return None, None
    cost = best["cost_per_million_output_tokens_at_load"] or \
        best["cost_per_million_output_tokens"]
    return best, Decimal(cost).quantize(INDEX_PLACES)


def job_index(
    db: Database, workloads: Sequence[Mapping[str, Any]], days: Sequence[date], *,
    currency: str = "USD", economics: Mapping[str, Any] | None = None,
    names: Sequence[str] | None = None, max_age_hours: float | None = None,
    rows_at: Mapping[date, Sequence[Any]] | None = None,
) -> list[JobPoint]:
    """Each workload's cheapest on-demand cost on each of `days`, from the stored history;
    with `max_age_hours`, prices not seen for that long at the sampling instant are left out,
    as the price index leaves them out (tracker/answers/freshness.py: one rule). `rows_at`
    gives a day's price rows at its sampling instant where the caller has read them
    (`price_rows_over`, any categories): the store is read for the other days only."""
    from tracker.answers.candidates import shared_sizing
    from tracker.core.fx import rows_in_currency
    from tracker.store.rates import rate_table

    rates = None
    by_day: dict[date, list[JobPoint]] = {}
    with shared_sizing():  # a shape sized on one day sizes alike on every other
        for day, rows in _on_demand_by_day(db, sorted(set(days)), rows_at or {}):
            instant = sample_instant(day)
            if max_age_hours is not None:
                oldest = instant - timedelta(hours=max_age_hours)
                rows = [r for r in rows if r.last_seen >= oldest]
            if rates is None and any(r.currency != currency for r in rows):
                rates = rate_table(db)
            by_day[day] = job_costs(workloads, rows_in_currency(rows, currency, rates, instant),
                                    day, currency, economics, names)
    return [point for day in days for point in by_day[day]]


_WINDOW_DAYS = 31  # days whose prices one read covers: a month of spans, not a year's


def _on_demand_by_day(db: Database, days: Sequence[date], known: Mapping[date, Sequence[Any]],
                      ) -> Iterable[tuple[date, list[Any]]]:
    """(day, the on-demand price rows valid at its sampling instant) for ascending `days`:
    from `known`, else one read of the store per window of up to a month
    (tracker.store.queries.price_rows_over) rather than one per day."""
    from tracker.store.queries import price_rows_over

    for day in days:
        if day in known:
            yield day, [r for r in known[day] if r.category == "on-demand"]
    days = [day for day in days if day not in known]
    start = 0
    while start < len(days):
        stop = start + 1
        while stop < len(days) and (days[stop] - days[start]).days < _WINDOW_DAYS:
            stop += 1
        window = days[start:stop]
        yield from zip(window, price_rows_over(db, [sample_instant(d) for d in window],
                                               category="on-demand"), strict=True)
        start = stop


__all__ = ["INDEX_CATEGORIES", "INDEX_JSON_KEYS", "IndexPoint", "IndexResult", "JobPoint",
           "daily_index", "day_range", "job_costs", "job_index", "percentile", "price_index",
           "sample_instant"]
