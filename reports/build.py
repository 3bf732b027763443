"""Build the weekly report document: one versioned JSON-ready dict computed from the store.

Everything the HTML, the mail and the CSV show is computed once, by the section modules of
`reports.sections` (and `tracker.answers.recommend`); the renderers only format. This module is the
orchestrator: it resolves the week, loads what the sections read (the prices now and a week
before, the trend window's spans, the interruption bands) once, calls each section and
assembles the document. The document is deterministic: the same week built twice from the
same data gives the same bytes (rows sorted on full keys, no clock unless `generated_at` is
passed in).

Money stays Decimal. pandas does the grouping and joining with Decimal `object` columns;
where a minimum over many rows is needed, prices are ranked exactly (`exact_rank`) instead of
being converted to float.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from reports.background import in_background, in_parallel, threaded_reads
from reports.sections.common import BUCKET_OF, exact_rank
from reports.sections.data_quality import data_quality, load_run_history
from reports.sections.key_figures import key_figures, new_lows
from reports.sections.movers import movers
from reports.sections.prices import prices
from reports.sections.spot import spot
from reports.sections.summary import summary
from reports.sections.trends import trends
from reports.weeks import Week, default_week
from tracker.answers.report_settings import ReportOptions
from tracker.core.errors import InvalidInput
from tracker.core.serialization import versioned_document

if TYPE_CHECKING:
    import pandas as pd

    from tracker.config.schema import Config
    from tracker.store.db import Database
    from tracker.store.queries import PriceRow


SCHEMA_VERSION = 1
DOCUMENT_KIND = "gpu-tracker.weekly-report"


# --------------------------------------------------------------------------------------------
# Entry point


def resolve_week(db: Database, week: Week | str | None, now: datetime) -> Week:
    if isinstance(week, Week):
        return week
    if week:
        return Week.parse(week)
    from tracker.store.queries import latest_observation

    return default_week(now, latest_observation(db))


def check_week(db: Database, week: str, now: datetime) -> str:
    """A week the user names must have started and must not end before the store's first
    price: the report of a week with no data would be an empty document in the archive
    (`build_report` itself reports such a week as "no data")."""
    from tracker.core.errors import usage_error
    from tracker.store.queries import earliest_observation

    asked = Week.parse(week)
    current = Week.containing(now)
    first = earliest_observation(db)
    if first is None:
        raise usage_error(f"no prices in the store to report week {asked} from; run "
                          "`gpu-tracker refresh` first")
    if asked.start > now or asked.end <= first:
        raise usage_error(f"week {asked} has no prices in the store; give a week from "
                          f"{Week.containing(first)} to {current}")
    return str(asked)


def build_report(
    db: Database, config: Config, week: Week | str | None = None, *, now: datetime,
    generated_at: datetime | None = None, options: ReportOptions | None = None,
) -> dict[str, Any]:
    """The report document for `week` (default: the newest finished week with data).

    `now` decides whether the week is finished (then the report is as of its end, Sunday
    24:00 UTC) or still running (as of `now`); it does not appear in the document.
    """
    if now.tzinfo is None:
        raise InvalidInput("now must be timezone-aware (UTC)")
    options = options or ReportOptions.from_config(config)
    week = resolve_week(db, week, now)
    as_of = week.as_of(now)
    previous_as_of = as_of - timedelta(days=7)
    window_start = as_of - timedelta(days=7 * options.trend_weeks)

    import importlib

    from reports.sections.market import index_charts
    from tracker.core.fx import rows_in_currency

    # Read while the prices are: the price index (the store alone), and the trend window's
    # spans in the report's currency, which are the ones it charts unless a price is quoted in
    # another (then they are read again with every currency, converted). What they import is
    # imported here first: a module two threads import at once can meet its import half done.
    for module in ("numpy", "pandas", "tracker.economics.forecast", "tracker.market.forecasts",
                   "tracker.market.index", "tracker.store.rates", "tracker.store.series"):
        importlib.import_module(module)
    # PostgreSQL computes the price index in its own process while a thread waits for it;
    # elsewhere it is computed with the market section (below), in a process of its own.
    charts_read = in_background(db, index_charts, db, options, as_of=as_of,
                                window_start=window_start) if threaded_reads(db) else None
    spans_in_currency = in_background(db, load_spans, db, since=window_start, until=as_of,
                                      currency=options.currency, rates=None)
    rows_now, rows_prev, rows_at = read_prices(db, as_of, previous_as_of)
    from tracker.answers.crosscheck import compare_prices
    from tracker.store.rates import rate_table

    # As quoted, the same rows and rule as `gpu-tracker check` (sources compared per currency).
    cross = compare_prices(rows_now, as_of=as_of)
    now_frame = price_frame(rows_now)  # as quoted: the week's prices CSV, data quality
    prev_frame = price_frame(rows_prev)
    # Prices quoted in other currencies take part converted at their own day's ECB rate.
    rates = (rate_table(db) if any(r.currency != options.currency
                                   for r in (*rows_now, *rows_prev)) else None)
    quoted_now, quoted_prev = rows_now, rows_prev
    rows_now = rows_in_currency(rows_now, options.currency, rates, as_of)
    rows_prev = rows_in_currency(rows_prev, options.currency, rates, previous_as_of)
    # Every price already in the report's currency (the common case): the same frames.
    in_currency_now = now_frame if _same_rows(rows_now, quoted_now) else price_frame(rows_now)
    in_currency_prev = (prev_frame if _same_rows(rows_prev, quoted_prev)
                        else price_frame(rows_prev))
    spans_read = spans_in_currency if rates is None else in_background(
        db, load_spans, db, since=window_start, until=as_of, currency=options.currency,
        rates=rates)
    from tracker.answers.pricing import interruption_bands

    # The market section needs only the prices read so far: it is computed meanwhile on the
    # other core where a child process can be forked (see reports.background).
    market_read = in_parallel(db, _market_section, db, options, week_start=week.start,
                              as_of=as_of, window_start=window_start,
                              rates_used=rates_used(rows_now, options.currency),
                              rows_at=rows_at, charts_read=charts_read)
    bands = interruption_bands(db, as_of)
    history = load_run_history(db, week.start, as_of)

    figures = key_figures(in_currency_now, in_currency_prev, options)
    moves = movers(in_currency_now, in_currency_prev, options)
    spot_offers = spot(in_currency_now, bands, options)
    from tracker.answers.catalogs import catalog_ages

    quality = data_quality(history, as_of, now_frame, options, cross=cross,
                           catalogs=catalog_ages(db, as_of))

    from tracker.answers.candidates import shared_sizing
    from tracker.answers.recommend import recommendations

    # The recommendations (this week and the last) and the cost-per-job index (four days) ask
    # the same workloads of offers of mostly the same shapes: each is sized once.
    with shared_sizing():
        recs = recommendations(options.workloads, rows_now, rows_prev, options, bands)
        market_section = market_read()
    week_prices = prices(now_frame, prev_frame)
    spans = spans_read()
    lows = new_lows(figures, spans, week.start, window_start, options)
    trend_charts = trends(spans, in_currency_now, window_start, as_of, options)

    from reports.sections.commitments import budgets, commitments

    commitments_section = commitments(db, options, as_of=as_of)
    budgets_section = budgets(db, config, as_of=as_of)

    body: dict[str, Any] = {
        "week": str(week),
        "period": {
            "week_start": week.start, "week_end": week.end, "as_of": as_of,
            "previous_as_of": previous_as_of, "complete": week.is_complete(now),
            "trend_start": trend_charts["start"], "timezone": options.timezone,
        },
        "generated_at": generated_at,
        "currency": options.currency,
        "featured_gpus": list(options.featured_gpus),
        "summary": summary(figures, lows, recs, quality, moves, as_of, len(rows_now)),
        "key_figures": figures,
        "new_lows": lows,
        "trends": trend_charts,
        "movers": moves,
        "spot": spot_offers,
        "recommendations": recs,
        "data_quality": quality,
        "prices": week_prices,
        "market": market_section,
        "commitments": commitments_section,
        "budgets": budgets_section,
    }
    return versioned_document(DOCUMENT_KIND, SCHEMA_VERSION, body)


def _market_section(db: Database, options: ReportOptions, *,
                    charts_read: Callable[[], list[dict[str, Any]]] | None,
                    **when: Any) -> dict[str, Any]:
    """The market section, with the price index `charts_read` gives (None: computed here)
    and its own shared sizing when run apart from the recommendations."""
    from reports.sections.market import market
    from tracker.answers.candidates import shared_sizing

    with shared_sizing():
        return market(db, options, charts=None if charts_read is None else charts_read(),
                      **when)


# --------------------------------------------------------------------------------------------
# What the sections read, loaded once


def read_prices(db: Database, as_of: datetime, previous_as_of: datetime,
                ) -> tuple[list[PriceRow], list[PriceRow], dict[date, list[PriceRow]]]:
    """(the prices valid at `as_of`, at `previous_as_of`, and at each cost-per-job index
    day's sampling instant), as price_rows gives them, from one read of the spans
    (tracker.store.queries.price_rows_over) rather than one per instant."""
    from reports.sections.market import job_index_days
    from tracker.market.index import sample_instant
    from tracker.store.queries import price_rows_over

    job_days = job_index_days(as_of)
    instants = sorted({as_of, previous_as_of, *(sample_instant(d) for d in job_days)})
    at = dict(zip(instants, price_rows_over(db, instants), strict=True))
    return at[as_of], at[previous_as_of], {d: at[sample_instant(d)] for d in job_days}


def price_frame(rows: Sequence[PriceRow]) -> pd.DataFrame:
    import pandas as pd

    columns = ["offer_id", "source", "provider", "region", "zone", "instance_type", "variant",
               "gpu", "gpu_count", "category", "price_per_hour", "price_per_gpu_hour",
               "currency", "observed_at", "last_seen"]
    frame = pd.DataFrame([[getattr(r, c) for c in columns] for r in rows], columns=columns)
    # price_rows() returns rows cheapest first on full keys: keep that order as the exact rank.
    frame["rank"] = range(len(frame))
    frame["bucket"] = frame["category"].map(BUCKET_OF)
    return frame


def _same_rows(rows: Sequence[PriceRow], others: Sequence[PriceRow]) -> bool:
    """Whether two lists hold the same row objects in the same order."""
    return len(rows) == len(others) and all(a is b for a, b in zip(rows, others, strict=True))


def rates_used(rows: Sequence[PriceRow], currency: str) -> list[dict[str, Any]]:
    """The ECB rates the converted rows were priced at (for the appendix)."""
    seen = {(r.attributes["fx"]["from"], r.attributes["fx"]["rate"],
             r.attributes["fx"]["rate_date"]) for r in rows if "fx" in r.attributes}
    return [{"from": c, "to": currency, "rate": rate, "rate_date": day}
            for c, rate, day in sorted(seen)]


def load_spans(db: Database, *, since: datetime, until: datetime,
               currency: str, rates: Any = None) -> pd.DataFrame:
    """Every price span of on-demand/spot/bid offers overlapping [since, until].

    Columns (what the new lows and the trends read): gpu, bucket, provider, price (per
    GPU-hour, Decimal), rank (exact price order), first_ms, valid_to_ms (epoch ms; -1 = open).
    """
    import numpy as np
    import pandas as pd

    from tracker.store.queries import per_gpu
    from tracker.store.series import REPORT_SPAN_COLUMNS, report_span_columns

    # Without rates nothing converts: only the report currency's spans.
    data = dict(zip(REPORT_SPAN_COLUMNS, report_span_columns(
        db, since=since, until=until, categories=tuple(BUCKET_OF),
        currency=currency if rates is None else None), strict=True))
    frame = pd.DataFrame({name: data[name] for name in ("gpu", "provider", "first_ms",
                                                         "valid_to_ms")})
    if frame.empty:
        for name in ("bucket", "price", "rank"):
            frame[name] = []
        return frame
    # A quarter's spans repeat few (stored price, GPU count) pairs: each distinct pair is
    # priced as a Decimal and ranked once, and the spans take theirs by code (numpy).
    texts = data["price_per_hour"]
    if not isinstance(texts[0], str):  # NUMERIC on PostgreSQL: 1.50 and 1.5 stay apart
        texts = [str(t) for t in texts]
    text_codes, text_values = pd.factorize(np.asarray(texts, dtype=object))
    count_codes, count_values = pd.factorize(np.asarray(data["gpu_count"], dtype=float))
    width = len(count_values)
    pair_codes, pairs = pd.factorize(text_codes.astype(np.int64) * width + count_codes)
    priced = [per_gpu(Decimal(text_values[pair // width]), float(count_values[pair % width]))
              for pair in pairs.tolist()]
    if rates is None:
        prices = np.empty(len(priced), dtype=object)
        prices[:] = priced
        span_prices: Any = prices[pair_codes]
        ranks: Any = np.asarray(exact_rank(priced), dtype=np.int64)[pair_codes]
    else:
        span_prices, keep = _converted_span_prices(
            [priced[c] for c in pair_codes.tolist()], data["currency"], data["first_ms"],
            currency, rates)
        frame = frame[keep].reset_index(drop=True)
        span_prices = [p for p, k in zip(span_prices, keep, strict=True) if k]
        ranks = exact_rank(span_prices)
        data["category"] = [c for c, k in zip(data["category"], keep, strict=True) if k]
    frame["bucket"] = pd.Series(data["category"], dtype=object).map(BUCKET_OF)
    # pandas-stubs' column values exclude Decimal; pandas stores them as an object column.
    frame["price"] = span_prices
    frame["rank"] = ranks
    frame["valid_to_ms"] = frame["valid_to_ms"].fillna(-1).astype("int64")
    frame["first_ms"] = frame["first_ms"].astype("int64")
    return frame


def _converted_span_prices(prices: list[Decimal], currencies: Sequence[str],
                           first_ms: Sequence[Any], currency: str,
                           rates: Any) -> tuple[list[Decimal], list[bool]]:
    """Each span's price in `currency` at the ECB rate of the day it was first seen; spans
    whose currency has no rate are dropped (never charted unconverted)."""
    from datetime import UTC

    out: list[Decimal] = []
    keep: list[bool] = []
    cache: dict[tuple[Decimal, str, Any], Decimal | None] = {}
    for price, code, ms in zip(prices, currencies, first_ms, strict=True):
        if code == currency:
            out.append(price)
            keep.append(True)
            continue
        day = datetime.fromtimestamp(int(ms) / 1000, UTC).date()
        key = (price, code, day)
        if key not in cache:
            try:
                cache[key] = rates.convert(price, code, currency, day).amount
            except InvalidInput:
                cache[key] = None
        value = cache[key]
        out.append(value if value is not None else price)
        keep.append(value is not None)
    return out, keep
