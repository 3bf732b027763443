"""Price spans as of an instant and over a window, read through indexes that bound the work by
the answer, not by the length of the history (issue #26).

A span is valid at t when first_seen <= t < valid_to (valid_to NULL: still open); an offer's
spans never overlap. So:

- the span of an offer valid at t is its newest span first seen at or before t, if that one
  has not ended by t: one descending seek of `ix_price_span_offer_first_seen` (offer_id,
  first_seen) per offer (`span_at`), where a plain join on offer_id read every span of the
  offer before t;
- the spans overlapping [since, until] are that span valid at `since` and the spans first
  seen in (since, until] (`overlapping`): a seek and a range of the same index per offer, or
  a range of `ix_price_span_first_seen` (revision 0009) across offers;
- the current prices are each offer's newest span (offer.latest_span_id) if still open:
  SQLite seeks it by rowid; on PostgreSQL `ix_price_span_open` (revision 0010, the open spans
  by id, PostgreSQL only) lets it hash those instead of merge-joining the whole primary key.

tests/test_query_plans.py holds the queries of `prices --as-of`, `history`, `index` and the
report's series to plans without a full scan of price_span on SQLite and PostgreSQL.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import String, literal_column, or_, select, true, type_coerce, union_all

from tracker.store.db import epoch_ms_sql
from tracker.store.models import Offer, PriceSpan, SourceScope

if TYPE_CHECKING:
    from sqlalchemy.sql import ColumnElement, Select
    from sqlalchemy.sql.selectable import CompoundSelect

    from tracker.store.db import Database


def per_gpu(price_per_hour: Decimal, gpu_count: float) -> Decimal:
    """Price per GPU-hour; fractional GPUs (1/6 of an A10) scale up."""
    count, whole = _gpus(gpu_count)
    value = price_per_hour / count
    # Exact for whole counts; for fractions keep 10 significant decimals rather than 28 digits.
    if whole:
        return value
    return value.quantize(Decimal("1e-10")).normalize()


@functools.lru_cache(maxsize=1024)
def _gpus(gpu_count: float) -> tuple[Decimal, bool]:
    """(the GPU count as a Decimal, whether it is whole): a store's offers have a few dozen
    counts, and the report prices ~100,000 rows."""
    count = Decimal(repr(float(gpu_count)))
    return count, count == count.to_integral_value()


def span_at(as_of: datetime) -> ColumnElement[Any]:
    """The id of the offer's (`offer` in the enclosing query) newest span first seen at or
    before `as_of`; the caller keeps it only if it has not ended by then."""
    o = Offer.__table__
    older = PriceSpan.__table__.alias("span_at")
    return (select(older.c.id)
            .where(older.c.offer_id == o.c.id, older.c.first_seen <= as_of)
            .order_by(older.c.first_seen.desc()).limit(1)
            .correlate(o).scalar_subquery())


def offer_spans(dialect: str, as_of: datetime | None = None) -> tuple[Any, list[Any]]:
    """(offer JOIN price_span, filters): every span of each offer, or with `as_of` the span
    valid then. SQLite looks the span up by the id `span_at` finds; PostgreSQL does not use a
    correlated subquery's value as an index condition (it scanned the whole primary key), so
    there the seek is a LATERAL subquery joined by id."""
    o, s = Offer.__table__, PriceSpan.__table__
    if as_of is None:
        return o.join(s, s.c.offer_id == o.c.id), []
    valid = or_(s.c.valid_to.is_(None), s.c.valid_to > as_of)
    if dialect != "postgresql":
        return o.join(s, s.c.id == span_at(as_of)), [valid]
    older = s.alias("span_at")
    newest = (select(older.c.id.label("span_id"))
              .where(older.c.offer_id == o.c.id, older.c.first_seen <= as_of)
              .order_by(older.c.first_seen.desc()).limit(1).lateral("newest_at"))
    return o.join(newest, true()).join(s, s.c.id == newest.c.span_id), [valid]


def overlapping(make: Callable[[Any], Select[Any]], dialect: str, *,
                since: datetime | None, until: datetime | None) -> Select[Any] | CompoundSelect:
    """The spans overlapping [since, until] (either end open when None) of the query
    `make(joined)` builds over `joined`, an offer JOIN price_span (its own columns, further
    joins and filters): the span valid at `since` and those first seen after it, as one
    UNION ALL."""
    s = PriceSpan.__table__
    joined, _ = offer_spans(dialect)
    if since is None:
        query = make(joined)
        return query if until is None else query.where(s.c.first_seen <= until)
    joined_at, valid = offer_spans(dialect, since)
    at_since = make(joined_at).where(*valid)
    after = make(joined).where(s.c.first_seen > since)
    if until is not None:
        at_since = at_since.where(s.c.first_seen <= until)
        after = after.where(s.c.first_seen <= until)
    return union_all(at_since, after)


def _in(query: Select[Any], column: Any, values: Sequence[str] | None) -> Select[Any]:
    return query if values is None else query.where(column.in_(list(values)))


def _ms(dialect: str, column: str) -> Any:
    return literal_column(epoch_ms_sql(dialect, column))


def index_span_rows(
    db: Database, gpus: Sequence[str], *, categories: Sequence[str],
    providers: Sequence[str] | None, regions: Sequence[str] | None, since: datetime,
    until: datetime,
) -> list[tuple[int, str, str, str, float, Decimal, str, int, int | None, int]]:
    """The spans of `gpus` overlapping [since, until] as the price index reads them: (offer
    id, GPU, category, provider, GPU count, price per GPU-hour, currency, first seen,
    valid to (None: open), last sighting), times as epoch ms computed by the database; an
    open span's last sighting is the later of its own and its region's scope time
    (tracker.store.queries.last_sighting)."""
    o, s, sc = Offer.__table__, PriceSpan.__table__, SourceScope.__table__
    dialect = db.dialect

    def make(joined: Any) -> Select[Any]:
        query = (
            select(o.c.id, o.c.gpu_id, o.c.category, o.c.provider, o.c.gpu_count,
                   type_coerce(s.c.price_per_hour, String), s.c.currency,
                   _ms(dialect, "price_span.first_seen"), _ms(dialect, "price_span.valid_to"),
                   _ms(dialect, "price_span.last_seen"),
                   _ms(dialect, "source_scope.last_snapshot_at"))
            .select_from(joined.outerjoin(
                sc, (sc.c.source == o.c.source) & (sc.c.provider == o.c.provider)
                & (sc.c.region == o.c.region)))
            .where(o.c.gpu_id.in_(list(gpus)), o.c.category.in_(list(categories))))
        return _in(_in(query, o.c.provider, providers or None), o.c.region, regions or None)

    cache: dict[tuple[str, float], Decimal] = {}
    rows = []
    query = overlapping(make, dialect, since=since, until=until)
    with db.engine.connect() as conn:
        for (offer_id, gpu, category, provider, count, price, code, first_ms, valid_to_ms,
             last_ms, listed_ms) in conn.execute(query):
            key = (str(price), count)
            per = cache.get(key)
            if per is None:
                per = cache[key] = per_gpu(Decimal(str(price)), count)
            if valid_to_ms is None and listed_ms is not None and listed_ms > last_ms:
                last_ms = listed_ms
            rows.append((offer_id, gpu, category, provider, count, per, code, int(first_ms),
                         None if valid_to_ms is None else int(valid_to_ms), int(last_ms)))
    return rows


def low_span_rows(
    db: Database, gpus: Sequence[str], *, categories: Sequence[str], since: datetime,
    until: datetime,
) -> list[tuple[int, str, str, str, str, float, Any, str, datetime, datetime | None]]:
    """The spans of `gpus` in `categories` overlapping [since, until] as the new-low alerts
    read them: (offer id, GPU, category, provider, region, GPU count, price per hour as
    stored (SQLite: text), currency, first seen, valid to (None: open)); no sighting, no
    scope, each distinct stored instant converted once."""
    from tracker.store.ingest.sql import instant_reader

    o, s = Offer.__table__, PriceSpan.__table__

    def make(joined: Any) -> Select[Any]:
        return (select(o.c.id, o.c.gpu_id, o.c.category, o.c.provider, o.c.region,
                       o.c.gpu_count, type_coerce(s.c.price_per_hour, String), s.c.currency,
                       type_coerce(s.c.first_seen, String), type_coerce(s.c.valid_to, String))
                .select_from(joined)
                .where(o.c.gpu_id.in_(list(gpus)), o.c.category.in_(list(categories))))

    with db.engine.connect() as conn:
        read = instant_reader(conn)
        instants: dict[Any, datetime | None] = {None: None}
        rows = []
        for (offer_id, gpu, category, provider, region, count, price, currency, first,
             valid_to) in conn.execute(overlapping(make, db.dialect, since=since, until=until)):
            if first not in instants:
                instants[first] = read(first)
            if valid_to not in instants:
                instants[valid_to] = read(valid_to)
            start = instants[first]
            assert start is not None  # first_seen is NOT NULL
            rows.append((offer_id, gpu, category, provider, region, count, price, currency,
                         start, instants[valid_to]))
    return rows


REPORT_SPAN_COLUMNS = ("gpu", "category", "provider", "gpu_count", "price_per_hour", "first_ms",
                       "valid_to_ms", "currency")


def report_span_columns(db: Database, *, since: datetime, until: datetime,
                        categories: Sequence[str], currency: str | None = None,
                        ) -> list[Sequence[Any]]:
    """The spans of offers of `categories` overlapping [since, until] as columns (one
    sequence per name of REPORT_SPAN_COLUMNS; price as the stored text or NUMERIC, times as
    epoch ms, valid_to_ms None while open); with `currency`, only spans in it."""
    o, s = Offer.__table__, PriceSpan.__table__
    dialect = db.dialect

    def make(joined: Any) -> Select[Any]:
        query = (
            select(o.c.gpu_id, o.c.category, o.c.provider, o.c.gpu_count,
                   type_coerce(s.c.price_per_hour, String),
                   _ms(dialect, "price_span.first_seen"), _ms(dialect, "price_span.valid_to"),
                   s.c.currency)
            .select_from(joined)
            .where(o.c.category.in_(list(categories))))
        return query if currency is None else query.where(s.c.currency == currency)

    with db.engine.connect() as conn:
        # The driver's own tuples: no column here has a conversion for SQLAlchemy to make.
        result = conn.execute(overlapping(make, dialect, since=since, until=until))
        raw = result.cursor.fetchall()
        result.close()
    # Column lists, not Row objects: pandas probes each Row for attributes otherwise.
    return list(zip(*raw, strict=True)) if raw else [[] for _ in REPORT_SPAN_COLUMNS]


def run_history_rows(db: Database, start: datetime,
                     as_of: datetime) -> tuple[list[Any], dict[str, datetime], list[Any],
                                               list[Any]]:
    """What the report's data quality reads of [start, as_of): the ingest runs (oldest
    first), each source's last successful run start before `as_of`, the rejected rows seen in
    the week as (source, reason, count), and the scheduled jobs' runs (oldest first)."""
    from sqlalchemy import func

    from tracker.store.models import IngestRun, JobRun, RejectedRow

    runs_t, jobs_t, rej_t = IngestRun.__table__, JobRun.__table__, RejectedRow.__table__
    with db.engine.connect() as conn:
        week_runs = list(conn.execute(
            select(runs_t).where(runs_t.c.started_at >= start, runs_t.c.started_at < as_of)
            .order_by(runs_t.c.started_at, runs_t.c.id)).fetchall())
        last_ok = {source: started for source, started in conn.execute(
            select(runs_t.c.source, func.max(runs_t.c.started_at))
            .where(runs_t.c.status == "ok", runs_t.c.started_at < as_of)
            .group_by(runs_t.c.source)).fetchall()}
        rejected = list(conn.execute(
            select(rej_t.c.source, rej_t.c.reason, func.count())
            # One row per (source, row, reason) since revision 0004: a row counts in the week
            # when it was seen in it.
            .where(rej_t.c.last_seen >= start, rej_t.c.first_seen < as_of)
            .group_by(rej_t.c.source, rej_t.c.reason)).fetchall())
        job_rows = list(conn.execute(
            select(jobs_t).where(jobs_t.c.started_at >= start, jobs_t.c.started_at < as_of)
            .order_by(jobs_t.c.started_at, jobs_t.c.id)).fetchall())
    return week_runs, last_ok, rejected, job_rows


__all__ = ["REPORT_SPAN_COLUMNS", "index_span_rows", "low_span_rows", "offer_spans",
           "overlapping", "per_gpu", "report_span_columns", "run_history_rows", "span_at"]
