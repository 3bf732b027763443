"""Read queries over the price store: prices as of an instant, cheapest per GPU, history.

Money stays Decimal; SQLite keeps it as exact text, so ordering by price happens here in
Python rather than in SQL. The filters that narrow the rows (GPU, provider, category,
instant) run in SQL on indexed columns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, overload

from sqlalchemy import String, and_, select, type_coerce

from tracker.core.categories import QUOTE_CATEGORY
from tracker.core.fabric import Network
from tracker.store.db import Database
from tracker.store.models import IngestRun, Offer, PriceSpan, SourceScope, SpotInterruption
from tracker.store.series import offer_spans, overlapping, per_gpu

PRICE_JSON_KEYS = (
    "provider", "region", "zone", "instance_type", "variant", "gpu", "gpu_raw", "gpu_count",
    "category", "price_per_hour", "price_per_gpu_hour", "currency", "observed_at", "last_seen",
    "source", "vcpus", "ram_gb", "node_link", "node_link_gbps", "cluster_network",
    "cluster_gbps", "network_note",
)


@dataclass(frozen=True, slots=True)
class PriceRow:
    offer_id: int
    source: str
    provider: str
    region: str
    zone: str
    instance_type: str
    variant: str
    gpu: str
    gpu_raw: str
    gpu_count: float
    category: str
    price_per_hour: Decimal
    price_per_gpu_hour: Decimal
    currency: str
    observed_at: datetime  # when this price was first seen
    last_seen: datetime
    vcpus: float | None
    ram_gb: float | None
    attributes: dict[str, Any]
    source_url: str | None = None
    node_link: str | None = None
    node_link_gbps: float | None = None
    cluster_network: str | None = None
    cluster_gbps: float | None = None
    network_note: str | None = None

    @property
    def network(self) -> Network:
        """The stored links as a tracker.core.fabric.Network."""
        return Network(self.node_link, self.node_link_gbps, self.cluster_network,
                       self.cluster_gbps, self.network_note or "")

    def to_json(self) -> dict[str, Any]:
        """The documented JSON object of `prices` (money as exact strings), with `ownership`
        (`rental`, or `owned` for a hardware quote) and, for a quote priced as owned, its
        `owned_cost` parts."""
        from tracker.core.categories import ownership_of
        from tracker.core.serialization import to_jsonable

        data = {key: to_jsonable(getattr(self, key)) for key in PRICE_JSON_KEYS}
        data["ownership"] = ownership_of(self.category)
        breakdown = (self.attributes or {}).get("owned_cost")
        if breakdown is not None:
            data["owned_cost"] = to_jsonable(breakdown)
        if "fx" in self.attributes:  # converted by --currency: the rate and its ECB day
            data["fx"] = to_jsonable(self.attributes["fx"])
        return data


@overload
def _as_list(value: str | Iterable[str]) -> list[str]: ...
@overload
def _as_list(value: str | Iterable[str] | None) -> list[str] | None: ...
def _as_list(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return list(value)


def _with_scope(joined, o):
    """Join each offer's source scope: when its region was last listed (see last_seen)."""
    sc = SourceScope.__table__
    return joined.outerjoin(sc, and_(sc.c.source == o.c.source, sc.c.provider == o.c.provider,
                                     sc.c.region == o.c.region))


def sighting_at(last_seen: datetime, as_of: datetime,
                last_success_started: datetime | None) -> datetime:
    """When a price valid at `as_of` was last confirmed by then, the one rule `sources`,
    `status` and the report's data quality apply: its stored `last_seen` may be a later
    sighting, and prices are seen only by their source's runs, so it is capped at the newest
    successful run started by `as_of` (a span seen on 1 October and again on 1 November was
    not seen in between) and at `as_of` itself."""
    seen = min(last_seen, as_of)
    return seen if last_success_started is None else min(seen, last_success_started)


def last_sighting(span_last_seen: datetime, valid_to: datetime | None,
                  region_listed_at: datetime | None) -> datetime:
    """An open span was seen at every snapshot of its region since it opened (an offer a
    snapshot no longer lists is closed), so its last sighting is the later of the two."""
    if valid_to is None and region_listed_at is not None and region_listed_at > span_last_seen:
        return region_listed_at
    return span_last_seen


def _past(db: Database, as_of: datetime | None) -> datetime | None:
    """`as_of`, or None when it is at or after everything stored, where the prices valid then
    are the current ones (each offer's newest span, found by its pointer rather than one index
    seek per offer). Every instant stored for a source's offers in a region is no later than
    that region's scope time (revision 0007, kept by ingest), and first_seen is indexed
    (revision 0009): two small reads."""
    if as_of is None:
        return None
    from sqlalchemy import func

    s, sc = PriceSpan.__table__, SourceScope.__table__
    with db.engine.connect() as conn:
        newest = [conn.execute(select(func.max(s.c.first_seen))).scalar(),
                  conn.execute(select(func.max(sc.c.last_snapshot_at))).scalar()]
    if any(when is None or when > as_of for when in newest):
        return as_of
    return None


def _price_columns() -> Any:
    o, s = Offer.__table__, PriceSpan.__table__
    sc = SourceScope.__table__
    # The price and the instants as the driver gives them (SQLite: text), each distinct value
    # converted once in _price_rows: a refresh's rows share a few dozen instants.
    return select(*(o.c[name] for name in _OFFER_COLUMNS),
                  type_coerce(s.c.price_per_hour, String), s.c.currency,
                  *(type_coerce(column, String) for column in (
                      s.c.first_seen, s.c.last_seen, s.c.valid_to, sc.c.last_snapshot_at)))


def _price_query(as_of: datetime | None, dialect: str):
    o, s = Offer.__table__, PriceSpan.__table__
    query = _price_columns()
    if as_of is None:
        query = query.select_from(_with_scope(o.join(s, s.c.id == o.c.latest_span_id), o)).where(
            s.c.valid_to.is_(None))
    else:
        # One index seek per offer (tracker.store.series), not every span before as_of.
        joined, valid = offer_spans(dialect, as_of)
        query = query.select_from(_with_scope(joined, o)).where(*valid)
    return query, o, s


# What a PriceRow takes of the offer (not its first_seen or latest_span_id), in the order of
# the query's first columns; the span's price, currency, first_seen, last_seen, valid_to and
# the region's last snapshot follow.
_OFFER_COLUMNS = ("id", "source", "provider", "region", "zone", "instance_type", "variant",
                  "gpu_id", "gpu_raw", "gpu_count", "category", "vcpus", "ram_gb",
                  "attributes", "source_url", "node_link", "node_link_gbps", "cluster_network",
                  "cluster_gbps", "network_note")


class _Converted(dict):
    """Each distinct stored value converted once (`convert(value)`, on first use): a refresh's
    rows share a few dozen instants, and many rows one price."""

    __slots__ = ("convert",)

    def __init__(self, convert: Any) -> None:
        super().__init__()
        self.convert = convert

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.convert(key)
        return value


def _prices_of(key: tuple[Any, float]) -> tuple[Decimal, Decimal]:
    """(price per hour, per GPU-hour) of a stored (price, GPU count)."""
    price = Decimal(str(key[0]))
    return price, per_gpu(price, key[1])


def _price_rows(conn: Any, query: Any, ends: list[datetime | None] | None = None,
                keep: Callable[[Sequence[Any]], list[Any]] | None = None) -> list[PriceRow]:
    """PriceRows of the rows of a _price_query: each distinct stored instant and (price,
    GPU count) converted once; `ends`, when given, receives each row's span end (valid_to).
    With `keep`, only the stored rows it returns (of all of them) become PriceRows."""
    from tracker.store.ingest.sql import instant_reader

    read = instant_reader(conn)
    instants = _Converted(lambda stamp: None if stamp is None else read(stamp))
    prices = _Converted(_prices_of)
    # The driver's own rows, all at once: SQLAlchemy's rows cost a step and an object each
    # (on PostgreSQL a Python-level fetchone per row), and the query's columns need no
    # conversion by it (the price and the instants are converted below, each distinct value
    # once).
    result = conn.execute(query)
    stored: Sequence[Any] = result.cursor.fetchall()
    result.close()
    if keep is not None:
        stored = keep(stored)
    rows: list[PriceRow] = []
    append = rows.append
    for (offer_id, source, provider, region, zone, instance_type, variant, gpu, gpu_raw, count,
         category, vcpus, ram_gb, attributes, source_url, node_link, node_link_gbps,
         cluster_network, cluster_gbps, network_note, price_raw, currency, first, last,
         valid_to, listed) in stored:
        valid_to = instants[valid_to]
        if ends is not None:
            ends.append(valid_to)
        price, price_per_gpu = prices[(price_raw, count)]
        append(PriceRow(
            offer_id, source, provider, region, zone, instance_type, variant, gpu, gpu_raw,
            count, category, price, price_per_gpu, currency, instants[first],
            last_sighting(instants[last], valid_to, instants[listed]), vcpus, ram_gb,
            json.loads(attributes) if attributes not in ("{}", "", None) else {},
            source_url, node_link, node_link_gbps, cluster_network, cluster_gbps,
            network_note))
    return rows


def _filtered(query: Any, o: Any, *, gpu: Any, provider: Any, region: Any, category: Any,
              source: Any, min_gpus: float | None, gpu_count: float | None) -> Any:
    for column, value in ((o.c.gpu_id, gpu), (o.c.provider, provider), (o.c.region, region),
                          (o.c.category, category), (o.c.source, source)):
        values = _as_list(value)
        if values is not None:
            query = query.where(column.in_(values))
    if min_gpus is not None:
        query = query.where(o.c.gpu_count >= min_gpus)
    if gpu_count is not None:
        query = query.where(o.c.gpu_count == gpu_count)
    return query


def price_rows(
    db: Database, *, as_of: datetime | None = None, gpu: str | Iterable[str] | None = None,
    provider: str | Iterable[str] | None = None, region: str | Iterable[str] | None = None,
    category: str | Iterable[str] | None = None, min_gpus: float | None = None,
    gpu_count: float | None = None, max_price: Decimal | None = None,
    source: str | Iterable[str] | None = None, currency: str | None = None,
    offer_ids: Iterable[int] | None = None,
) -> list[PriceRow]:
    """Offers with their price valid at `as_of` (default: the current prices), cheapest per
    GPU-hour first. `gpu` takes canonical ids; `max_price` caps the price per GPU-hour;
    `offer_ids` keeps only those offers."""
    query, o, s = _price_query(_past(db, as_of), db.dialect)
    query = _filtered(query, o, gpu=gpu, provider=provider, region=region, category=category,
                      source=source, min_gpus=min_gpus, gpu_count=gpu_count)
    if currency is not None:
        query = query.where(s.c.currency == currency)
    if offer_ids is not None:
        query = query.where(o.c.id.in_(list(offer_ids)))
    with db.engine.connect() as conn:
        rows = _price_rows(conn, query)
    if max_price is not None:
        rows = [r for r in rows if r.price_per_gpu_hour <= max_price]
    rows.sort(key=_rank)
    return rows


@dataclass(frozen=True, slots=True)
class PriceWatch:
    """What one question watches of the prices (an alert rule's offers): a GPU class and
    category, optionally one provider, region and GPU count, priced in `currency`."""

    gpu: str
    category: str
    currency: str
    provider: str | None = None
    region: str | None = None
    gpu_count: float | None = None


@dataclass(frozen=True, slots=True)
class Watched:
    """Of the prices a PriceWatch matches: how many there are (`listed`), and those seen
    since the cut-off that can be the cheapest once priced in its currency (`rows`, in
    price_rows' order): every one within 1e-9 of the cheapest in its currency, and every one in
    another currency (converted at its own day's rate, their order changes after)."""

    listed: int
    rows: list[PriceRow]


def watched_prices(db: Database, watches: Sequence[PriceWatch], *, as_of: datetime,
                   seen_since: datetime) -> list[Watched]:
    """For each watch, what `price_rows(db, as_of=as_of, <its filters>)` says of its cheapest
    price seen since `seen_since`, from one read of the watched classes' prices (their GPUs
    and categories, in SQL) for them all. Only the rows that can be some watch's cheapest
    become PriceRows: an alerts check of 50 rules over 47,600 prices builds a few dozen."""
    query, o, _s = _price_query(_past(db, as_of), db.dialect)
    query = _filtered(query, o, gpu=sorted({w.gpu for w in watches}), provider=None,
                      region=None, category=sorted({w.category for w in watches}), source=None,
                      min_gpus=None, gpu_count=None)
    by_class: dict[tuple[str, str], list[int]] = {}
    for i, watch in enumerate(watches):
        by_class.setdefault((watch.gpu, watch.category), []).append(i)
    listed = [0] * len(watches)
    picked: dict[int, list[int]] = {}  # stored row index -> the watches it is a candidate of
    at = {name: _OFFER_COLUMNS.index(name) for name in (
        "provider", "region", "gpu_id", "gpu_count", "category")}
    width = len(_OFFER_COLUMNS)  # then price, currency, first seen, last seen, valid to, listed

    def keep(stored: Sequence[Any]) -> list[Any]:
        lows = [float("inf")] * len(watches)
        near: list[list[tuple[float, int]]] = [[] for _ in watches]
        for j, row in enumerate(stored):
            seen: datetime | None = None
            for i in by_class.get((row[at["gpu_id"]], row[at["category"]]), ()):
                watch = watches[i]
                if (watch.provider is not None and row[at["provider"]] != watch.provider) or (
                        watch.region is not None and row[at["region"]] != watch.region) or (
                        watch.gpu_count is not None and row[at["gpu_count"]] != watch.gpu_count):
                    continue
                listed[i] += 1
                if seen is None:
                    seen = last_sighting(instants[row[width + 3]], instants[row[width + 4]],
                                         instants[row[width + 5]])
                if seen < seen_since:
                    continue
                count = row[at["gpu_count"]]
                if row[width + 1] != watch.currency or not count or count <= 0:
                    picked.setdefault(j, []).append(i)  # ranked exactly after conversion
                    continue
                value = float(row[width]) / count
                near[i].append((value, j))
                if value < lows[i]:
                    lows[i] = value
        for i, candidates in enumerate(near):
            for value, j in candidates:
                if is_near_cheapest(value, lows[i]):
                    picked.setdefault(j, []).append(i)
        order[:] = sorted(picked)
        return [stored[j] for j in order]

    order: list[int] = []
    with db.engine.connect() as conn:
        from tracker.store.ingest.sql import instant_reader

        read = instant_reader(conn)
        instants = _Converted(lambda stamp: None if stamp is None else read(stamp))
        rows = _price_rows(conn, query, keep=keep)
    found: list[list[PriceRow]] = [[] for _ in watches]
    for j, row in zip(order, rows, strict=True):
        for i in picked[j]:
            found[i].append(row)
    return [Watched(listed[i], sorted(found[i], key=_rank)) for i in range(len(watches))]


def price_rows_over(db: Database, days: Sequence[datetime], *,
                    category: str | Iterable[str] | None = None) -> list[list[PriceRow]]:
    """For each instant of `days` (ascending), what `price_rows(db, as_of=day,
    category=category)` returns, from one read of the spans overlapping the first to the last
    instant (tracker.store.series.overlapping) instead of one read per instant."""
    if not days:
        return []
    o = Offer.__table__

    def make(joined: Any) -> Any:
        query = _price_columns().select_from(_with_scope(joined, o))
        return _filtered(query, o, gpu=None, provider=None, region=None, category=category,
                         source=None, min_gpus=None, gpu_count=None)

    ends: list[datetime | None] = []
    query = overlapping(make, db.dialect, since=days[0], until=days[-1])
    with db.engine.connect() as conn:
        rows = _price_rows(conn, query, ends)
    # price_rows' order: its sort key, ties in offer order (as its query reads the offers).
    order = sorted(range(len(rows)), key=lambda i: rows[i].offer_id)
    order.sort(key=lambda i: _rank(rows[i]))
    ranked = [rows[i] for i in order]
    # Which rows each instant keeps, as integer microseconds compared in numpy (one pass per
    # instant over 117,000 rows of the report's 7 instants was a third of a second); the
    # rows share a few hundred distinct instants, each converted once.
    import numpy as np

    micros = _Converted(_epoch_us)
    first = np.fromiter((micros[row.observed_at] for row in ranked), np.int64, len(ranked))
    end = np.fromiter((_OPEN_US if ends[i] is None else micros[ends[i]] for i in order),
                      np.int64, len(ranked))
    kept = []
    for day in days:
        at = _epoch_us(day)
        kept.append([ranked[i] for i in np.flatnonzero((first <= at) & (end > at)).tolist()])
    return kept


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_OPEN_US = 2**63 - 1  # the end of a span still open: after every instant
_MICROSECOND = timedelta(microseconds=1)


def _epoch_us(moment: datetime) -> int:
    """An aware instant as whole microseconds since the epoch (exact: its order is the
    datetimes' order)."""
    return (moment - _EPOCH) // _MICROSECOND


def _rank(r: PriceRow) -> tuple:
    """price_rows' order: cheapest per GPU-hour first, ties by GPU, provider, region, zone,
    instance type, category and, last, the offer (so equal rows come in one order on every
    database, whatever order its plan reads them in)."""
    return (r.price_per_gpu_hour, r.gpu, r.provider, r.region, r.zone, r.instance_type,
            r.category, r.offer_id)


# A price per GPU-hour within this of its class's cheapest (as a float, relative, and at least
# absolute: per_gpu rounds a fractional GPU's price to 1e-10) may be the exact cheapest.
NEAR_CHEAPEST = 1e-9
_MAX_CANDIDATES = 20_000


def cheapest_per_gpu(
    db: Database, *, as_of: datetime | None = None, category: str | Iterable[str] | None = None,
    max_price: Decimal | None = None, **filters: Any,
) -> list[PriceRow]:
    """The cheapest offer per (canonical GPU, category) valid at `as_of`, as cheapest_of
    picks it from price_rows. The database gives each offer's price per GPU-hour as a float
    (in its own row order: an index order made each offer row a random read); the offers
    within 1e-9 of their class's cheapest become PriceRows and are ranked exactly."""
    if max_price is not None:  # a cap near a class's cheapest would need exact arithmetic
        return cheapest_of(price_rows(db, as_of=as_of, category=category, max_price=max_price,
                                      **filters))
    from sqlalchemy import Float, cast

    past = _past(db, as_of)
    wanted = {k: filters.get(k) for k in ("gpu", "provider", "region", "source", "min_gpus",
                                          "gpu_count")}
    unknown = set(filters) - set(wanted) - {"currency"}
    if unknown:
        raise TypeError(f"unknown filter(s) {', '.join(sorted(unknown))}")
    if db.dialect == "postgresql":
        ids = _near_cheapest_ids(db, past, category, wanted, filters.get("currency"))
    else:
        query, o, s = _price_query(past, db.dialect)
        floats = _filtered(query.with_only_columns(
            o.c.id, o.c.gpu_id, o.c.category, cast(s.c.price_per_hour, Float) / o.c.gpu_count),
            o, category=category, **wanted)
        if filters.get("currency") is not None:
            floats = floats.where(s.c.currency == filters["currency"])
        with db.engine.connect() as conn:
            rows = conn.execute(floats).all()
        lows: dict[tuple[str, str], float] = {}
        for _id, gpu, cat, value in rows:
            if value < lows.get((gpu, cat), float("inf")):
                lows[(gpu, cat)] = value
        ids = [offer_id for offer_id, gpu, cat, value in rows
               if value <= lows[(gpu, cat)] + max(lows[(gpu, cat)] * NEAR_CHEAPEST, NEAR_CHEAPEST)]
    if len(ids) > _MAX_CANDIDATES:  # many offers at one price: rank them all
        return cheapest_of(price_rows(db, as_of=as_of, category=category, **filters))
    return cheapest_of(price_rows(db, as_of=as_of, category=category, offer_ids=ids,
                                  **filters))


def _near_cheapest_ids(db: Database, past: datetime | None, category: Any,
                       wanted: dict[str, Any], currency: str | None) -> list[int]:
    """PostgreSQL: the offers within 1e-9 of their (GPU, category)'s cheapest price per
    GPU-hour (as floats) at `past` (None: now), found by the database, which sends only them.
    As of a past instant each offer's span there is one backward seek of
    ix_price_span_offer_first_seen that returns its price itself (not its id, looked up
    again by primary key), and each class's cheapest is a grouped minimum over the rows read
    once (a window over them sorted 46,000 rows to disk): 0.18 s against 0.33 s on
    bench/market_scale.py's store 6 months back."""
    from sqlalchemy import Float, and_, cast, func, or_, true

    o, s = Offer.__table__, PriceSpan.__table__
    if past is None:
        span: Any = s
        joined = o.join(s, s.c.id == o.c.latest_span_id)
        valid: Any = s.c.valid_to.is_(None)
    else:
        older = s.alias("span_at")
        span = (select(older.c.price_per_hour, older.c.currency, older.c.valid_to)
                .where(older.c.offer_id == o.c.id, older.c.first_seen <= past)
                .order_by(older.c.first_seen.desc()).limit(1).lateral("newest_at"))
        joined = o.join(span, true())
        valid = or_(span.c.valid_to.is_(None), span.c.valid_to > past)
    price = (cast(span.c.price_per_hour, Float) / o.c.gpu_count).label("price")
    floats = _filtered(select(o.c.id, o.c.gpu_id, o.c.category, price).select_from(joined)
                       .where(valid), o, category=category, **wanted)
    if currency is not None:
        floats = floats.where(span.c.currency == currency)
    rows = floats.cte("priced")
    lows = (select(rows.c.gpu_id, rows.c.category, func.min(rows.c.price).label("low"))
            .group_by(rows.c.gpu_id, rows.c.category).subquery("lows"))
    near = (select(rows.c.id)
            .join_from(rows, lows, and_(lows.c.gpu_id == rows.c.gpu_id,
                                        lows.c.category == rows.c.category))
            .where(rows.c.price <= lows.c.low + func.greatest(lows.c.low * NEAR_CHEAPEST,
                                                               NEAR_CHEAPEST)))
    with db.engine.connect() as conn:
        if past is not None:
            # Its 50,000 seeks cost the planner past jit_above_cost, but compiling the plan
            # took longer (~25 ms of 0.13 s server CPU) than it saved: this transaction only.
            conn.exec_driver_sql("SET LOCAL jit = off")
        return list(conn.execute(near).scalars())


def cheapest_of(rows: Iterable[PriceRow]) -> list[PriceRow]:
    """The first (cheapest, as rows come sorted) row per (GPU, category), by GPU."""
    best: dict[tuple[str, str], PriceRow] = {}
    for row in rows:
        best.setdefault((row.gpu, row.category), row)
    return sorted(best.values(), key=lambda r: (r.gpu, r.category))


# Rows alike in these are sized alike by a question sized once per shape and priced by their
# price alone (tracker.answers.candidates: the GPU, its instance size, the links inside and
# between instances with the note on them; who sells it, as what, in which currency), so only
# the first (cheapest) of them can be picked. The instance type joins them where it can change
# the answer (`_shape_key`).
SHAPE_FIELDS = ("gpu", "provider", "category", "gpu_count", "node_link", "node_link_gbps",
                "cluster_network", "cluster_gbps", "network_note", "currency")


def _shape_key(gpu: str, provider: str, category: str, gpu_count: float, node_link: Any,
               node_link_gbps: Any, cluster_network: Any, cluster_gbps: Any,
               network_note: Any, currency: str, instance_type: str,
               by_instance: Collection[str], named_unclustered: bool) -> tuple:
    """A row's shape group: its SHAPE_FIELDS, and its instance type where that can change how
    the row is sized or said: for a provider of `by_instance` (scale-up domains, per-instance
    overrides), and with `named_unclustered` for an instance no stored cluster network joins
    (the answers name it: 'vastai 1x-B200: independent hosts, no cluster network', and
    --allow-unclustered joins it by name)."""
    clustered = cluster_network is not None and bool(cluster_gbps)
    return (gpu, provider, category, gpu_count, node_link, node_link_gbps, cluster_network,
            cluster_gbps, network_note, currency,
            instance_type if provider in by_instance or (named_unclustered and not clustered)
            else None)


def shape_of(row: PriceRow, by_instance: Collection[str] = (),
             named_unclustered: bool = True) -> tuple:
    """The shape group of a row (`_shape_key`)."""
    return _shape_key(row.gpu, row.provider, row.category, row.gpu_count, row.node_link,
                      row.node_link_gbps, row.cluster_network, row.cluster_gbps,
                      row.network_note, row.currency, row.instance_type, by_instance,
                      named_unclustered)


def first_per_shape(rows: Iterable[PriceRow], by_instance: Collection[str] = (),
                    named_unclustered: bool = True,
                    grouped: Callable[[PriceRow], bool] | None = None) -> list[PriceRow]:
    """The first row of each shape group (`shape_of`), in the rows' order: of rows coming
    cheapest first (as price_rows orders them), every row a question sized once per shape can
    pick, and every instance it can name. With `grouped`, the rows it says no to are all
    kept. Pure."""
    seen: set[tuple] = set()
    first = []
    for row in rows:
        if grouped is None or grouped(row):
            key = shape_of(row, by_instance, named_unclustered)
            if key in seen:
                continue
            seen.add(key)
        first.append(row)
    return first


def price_rows_per_shape(
    db: Database, *, currency: str, as_of: datetime | None = None,
    by_instance: Collection[str] = (), named_unclustered: bool = True,
    gpu: str | Iterable[str] | None = None, provider: str | Iterable[str] | None = None,
    region: str | Iterable[str] | None = None, category: str | Iterable[str] | None = None,
) -> list[PriceRow]:
    """What `price_rows` returns with the same filters, less the rows no question sized once
    per shape can pick or name: of its rows in `currency` that are not hardware quotes, only
    the first of each shape group (`first_per_shape` with `by_instance` and
    `named_unclustered`); every other row (in another currency it converts at its own day's
    rate, a quote is priced as owned: their order changes after).

    The database gives each row's price per GPU-hour as a float and its group's instance
    type where that counts; the rows more than 1e-9 (relative, and absolute: per_gpu rounds a
    fractional GPU's price to 1e-10) above their group's cheapest float cannot be its exact
    first and never become PriceRows. The rest are ranked exactly. On PostgreSQL the database
    leaves the others out (a window over the rows it reads anyway). On SQLite, whose window
    functions (and a GROUP BY joined back) cost more than the rows they save, a first read
    takes of each row only its span, float and group, and a second reads the whole rows of
    the kept spans by primary key, in the same read transaction (one snapshot): a
    50,000-offer market has some 24,000 shape groups, and the first read's narrow rows cost
    about half the whole ones."""
    query, o, s = _price_query(_past(db, as_of), db.dialect)
    query = _filtered(query, o, gpu=gpu, provider=provider, region=region, category=category,
                      source=None, min_gpus=None, gpu_count=None)
    by_instance = frozenset(by_instance)
    with db.engine.connect() as conn:
        if db.dialect == "postgresql":
            query, near = _near_cheapest(query, o, s, currency, by_instance,
                                         named_unclustered)
            rows = _price_rows(conn, query, keep=near)
        else:
            narrow, near_spans = _near_spans(query, o, s, currency, by_instance,
                                             named_unclustered)
            # The driver's own rows (plain tuples: SQLite's driver gives these columns as
            # they are, with no conversion for SQLAlchemy to make) cost half as much.
            result = conn.execute(narrow)
            stored = result.cursor.fetchall()
            result.close()
            rows = _price_rows(conn, _spans_by_id(near_spans(stored)))
    rows.sort(key=_rank)
    return first_per_shape(
        rows, by_instance, named_unclustered,
        grouped=lambda row: row.currency == currency and row.category != QUOTE_CATEGORY)


def _shape_columns(o: Any, s: Any, by_instance: frozenset[str],
                   named_unclustered: bool) -> tuple[list[Any], Any]:
    """(the columns of a row's _shape_key: SHAPE_FIELDS, then its instance type where the key
    keeps it, else NULL; its price per GPU-hour as a float)."""
    from sqlalchemy import Float, case, cast, null, or_

    apart = [o.c.provider.in_(sorted(by_instance))] if by_instance else []
    if named_unclustered:
        apart.append(or_(o.c.cluster_network.is_(None), o.c.cluster_gbps.is_(None),
                         o.c.cluster_gbps == 0))
    instance = case((or_(*apart), o.c.instance_type), else_=None) if apart else null()
    column = {"gpu": o.c.gpu_id, "currency": s.c.currency}
    group = [*(column[name] if name in column else o.c[name] for name in SHAPE_FIELDS),
             instance]
    return group, cast(s.c.price_per_hour, Float) / o.c.gpu_count


def is_near_cheapest(value: float, low: float) -> bool:
    """Whether a float price per GPU-hour may be its group's exact cheapest, `low` being the
    group's cheapest float (NEAR_CHEAPEST)."""
    return value <= low * (1 + NEAR_CHEAPEST) + NEAR_CHEAPEST


def _near_spans(query: Any, o: Any, s: Any, currency: str, by_instance: frozenset[str],
                named_unclustered: bool) -> tuple[Any, Callable[[Sequence[Any]], list[int]]]:
    """(the query narrowed to each row's span id, float price per GPU-hour and _shape_key
    columns; what keeps of its rows the span ids within NEAR_CHEAPEST of the cheapest float
    of their shape group, of rows in another currency and of quotes)."""
    group, price = _shape_columns(o, s, by_instance, named_unclustered)
    narrow = query.with_only_columns(s.c.id, price, *group)
    currency_at = 2 + SHAPE_FIELDS.index("currency")
    category_at = 2 + SHAPE_FIELDS.index("category")

    def near_spans(stored: Sequence[Any]) -> list[int]:
        lows: dict[tuple, float] = {}
        for row in stored:
            value = row[1]
            if value is not None and row[currency_at] == currency \
                    and row[category_at] != QUOTE_CATEGORY:
                key = row[2:]
                low = lows.get(key)
                if low is None or value < low:
                    lows[key] = value
        kept = []
        for row in stored:
            low = lows.get(row[2:])
            value = row[1]
            if low is None or value is None or is_near_cheapest(value, low):
                kept.append(row[0])
        return kept

    return narrow, near_spans


def _spans_by_id(span_ids: Sequence[int]) -> Any:
    """A _price_query's columns for these spans (SQLite): each span and its offer found by
    primary key, the ids passed as one JSON array (no limit on their number)."""
    from sqlalchemy import func

    o, s = Offer.__table__, PriceSpan.__table__
    ids = func.json_each(json.dumps(list(span_ids))).table_valued("value")
    return _price_columns().select_from(
        _with_scope(s.join(o, o.c.id == s.c.offer_id), o)).where(
        s.c.id.in_(select(ids.c.value)))


def _near_cheapest(query: Any, o: Any, s: Any, currency: str, by_instance: frozenset[str],
                   named_unclustered: bool) -> tuple[Any, Callable[[Sequence[Any]], list[Any]]]:
    """(the query with two columns more, filtered by the database (PostgreSQL): the rows
    within NEAR_CHEAPEST of the cheapest float of their shape group, rows of another currency
    and quotes; what strips the two columns of its stored rows)."""
    from sqlalchemy import func, or_

    group, price = _shape_columns(o, s, by_instance, named_unclustered)
    query = query.add_columns(group[-1], price)
    ranked = query.add_columns(func.min(price).over(partition_by=group)).subquery()
    columns = list(ranked.c)
    query = select(*columns[:-1]).where(or_(
        columns[-2] <= columns[-1] * (1 + NEAR_CHEAPEST) + NEAR_CHEAPEST,
        ranked.c.currency != currency,
        ranked.c.category == QUOTE_CATEGORY))
    width = len(_OFFER_COLUMNS) + 6  # _price_columns: the offer's, then the span's price,
    # currency, three instants and the region's last snapshot

    def near(stored: Sequence[Any]) -> list[Any]:
        return [row[:width] for row in stored]

    return query, near


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One span of one offer's price: valid from `valid_from` until `valid_to` (None = now)."""

    offer_id: int
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpu_count: float
    category: str
    price_per_hour: Decimal
    price_per_gpu_hour: Decimal
    currency: str
    valid_from: datetime
    last_seen: datetime
    valid_to: datetime | None


def history(
    db: Database, gpu: str | Iterable[str], *, provider: str | Iterable[str] | None = None,
    category: str | Iterable[str] | None = None, region: str | Iterable[str] | None = None,
    since: datetime | None = None, until: datetime | None = None,
) -> list[HistoryPoint]:
    """Every price span of the GPU's offers overlapping [since, until], oldest first."""
    o, s = Offer.__table__, PriceSpan.__table__
    sc = SourceScope.__table__

    def make(joined: Any) -> Any:
        query = (select(o.c.id, o.c.provider, o.c.region, o.c.zone, o.c.instance_type,
                        o.c.gpu_id, o.c.gpu_count, o.c.category, s.c.price_per_hour,
                        s.c.currency, s.c.first_seen, s.c.last_seen, s.c.valid_to,
                        sc.c.last_snapshot_at)
                 .select_from(_with_scope(joined, o))
                 .where(o.c.gpu_id.in_(_as_list(gpu))))
        for column, value in ((o.c.provider, provider), (o.c.category, category),
                              (o.c.region, region)):
            values = _as_list(value)
            if values is not None:
                query = query.where(column.in_(values))
        return query

    with db.engine.connect() as conn:
        points = [HistoryPoint(
            offer_id=r.id, provider=r.provider, region=r.region, zone=r.zone,
            instance_type=r.instance_type, gpu=r.gpu_id, gpu_count=r.gpu_count,
            category=r.category, price_per_hour=r.price_per_hour,
            price_per_gpu_hour=per_gpu(r.price_per_hour, r.gpu_count), currency=r.currency,
            valid_from=r.first_seen,
            last_seen=last_sighting(r.last_seen, r.valid_to, r.last_snapshot_at),
            valid_to=r.valid_to,
        ) for r in conn.execute(overlapping(make, db.dialect, since=since, until=until))]
    points.sort(key=lambda p: (p.valid_from, p.offer_id))
    return points


def price_at(db: Database, offer_id: int, as_of: datetime) -> PriceRow | None:
    """The price of one offer at a past instant (None when it was not listed then)."""
    query, o, _s = _price_query(_past(db, as_of), db.dialect)
    with db.engine.connect() as conn:
        rows = _price_rows(conn, query.where(o.c.id == offer_id))
    return rows[0] if rows else None


def earliest_observation(db: Database) -> datetime | None:
    """The oldest price sighting in the store (None when it holds no prices)."""
    from sqlalchemy import func

    with db.engine.connect() as conn:
        return conn.execute(select(func.min(PriceSpan.__table__.c.first_seen))).scalar()


def latest_observation(db: Database) -> datetime | None:
    """The newest price sighting in the store (None when it holds no prices)."""
    from sqlalchemy import func

    with db.engine.connect() as conn:
        times = [conn.execute(select(func.max(PriceSpan.__table__.c.last_seen))).scalar(),
                 conn.execute(select(func.max(SourceScope.__table__.c.last_snapshot_at)))
                 .scalar()]
    known = [t for t in times if t is not None]
    return max(known) if known else None


@dataclass(frozen=True, slots=True)
class InterruptionRow:
    provider: str
    region: str
    instance_type: str
    os: str
    band: int
    band_label: str
    min_pct: float
    max_pct: float | None
    savings_pct: float | None
    as_of: datetime
    last_seen: datetime


def interruption_facts(
    db: Database, *, provider: str | None = None, region: str | None = None,
    instance_type: str | None = None, as_of: datetime | None = None,
) -> list[InterruptionRow]:
    """The interruption band in force at `as_of` (default now) per instance and region."""
    t = SpotInterruption.__table__
    query = select(t)
    if provider:
        query = query.where(t.c.provider == provider)
    if region:
        query = query.where(t.c.region == region)
    if instance_type:
        query = query.where(t.c.instance_type == instance_type)
    if as_of is not None:
        query = query.where(t.c.as_of <= as_of)
    latest: dict[tuple, Any] = {}
    with db.engine.connect() as conn:
        for r in conn.execute(query.order_by(t.c.as_of, t.c.id)):
            latest[(r.provider, r.region, r.instance_type, r.os)] = r
    return [InterruptionRow(
        provider=r.provider, region=r.region, instance_type=r.instance_type, os=r.os,
        band=r.band, band_label=r.band_label, min_pct=r.min_pct, max_pct=r.max_pct,
        savings_pct=r.savings_pct, as_of=r.as_of, last_seen=r.last_seen,
    ) for r in sorted(latest.values(), key=lambda r: (r.provider, r.region, r.instance_type))]


def newest_sightings(db: Database,
                     as_of: datetime | None = None) -> list[tuple[str, int, datetime]]:
    """(source, how many of its prices are valid at `as_of` (default now), the latest last
    sighting (last_sighting) of those), computed by the database rather than over every
    PriceRow."""
    from sqlalchemy import case, func

    from tracker.store.types import UTCDateTime

    query, o, s = _price_query(_past(db, as_of), db.dialect)
    sc = SourceScope.__table__
    sighting = case((s.c.valid_to.is_(None) & (sc.c.last_snapshot_at > s.c.last_seen),
                     sc.c.last_snapshot_at), else_=s.c.last_seen)
    query = query.with_only_columns(
        o.c.source, func.count(), type_coerce(func.max(sighting), UTCDateTime())
    ).group_by(o.c.source)
    with db.engine.connect() as conn:
        return [(source, count, seen) for source, count, seen in conn.execute(query)]


@dataclass(frozen=True, slots=True)
class SourceStatus:
    source: str
    last_run_at: datetime | None
    last_status: str | None
    last_error: str | None
    last_success_at: datetime | None
    offers: int
    rejected_last_run: int
    runs: int
    # The newest sighting of its prices valid at the as-of (tracker.answers.freshness); None: none.
    newest_price_at: datetime | None = None


def source_statuses(db: Database, names: Iterable[str],
                    as_of: datetime | None = None) -> list[SourceStatus]:
    """Last run, last success, offer count and the newest sighting of its prices valid at
    `as_of` (default now) per source (for `sources`, `status`, the alerts); with `as_of`,
    only the runs started by then."""
    r = IngestRun.__table__
    names = list(names)
    with db.engine.connect() as conn:
        runs: dict[str, list[Any]] = {}
        query = select(r).order_by(r.c.started_at, r.c.id)
        if as_of is not None:
            query = query.where(r.c.started_at <= as_of)
        for row in conn.execute(query):
            runs.setdefault(row.source, []).append(row)
    newest: dict[str, datetime] = {}
    valid: dict[str, int] = {}
    instant = as_of or datetime.now(UTC)
    # Prices are seen only by their source's runs: as of an instant, a span seen on 1 October
    # and again on 1 November was last seen at the newest successful run started by then
    # (its stored last_seen is the later sighting).
    seen_by = {} if as_of is None else {
        source: max(x.started_at for x in history_ if x.status == "ok")
        for source, history_ in runs.items() if any(x.status == "ok" for x in history_)}
    for source, count, seen in newest_sightings(db, as_of):
        valid[source] = count
        newest[source] = sighting_at(seen, instant, seen_by.get(source))
    # A source's offers listed now are its prices valid now: newest_sightings counted them
    # (each offer's newest span, still open), as of `as_of` the prices valid then.
    result = []
    for name in names + sorted(set(runs) - set(names)):
        history_ = runs.get(name, [])
        last = history_[-1] if history_ else None
        success = next((x for x in reversed(history_) if x.status == "ok"), None)
        result.append(SourceStatus(
            source=name, last_run_at=last.started_at if last else None,
            last_status=last.status if last else None, last_error=last.error if last else None,
            last_success_at=(success.finished_at or success.started_at) if success else None,
            offers=valid.get(name, 0),
            rejected_last_run=last.rejected if last else 0,
            runs=len(history_), newest_price_at=newest.get(name)))
    return result


__all__ = [
    "NEAR_CHEAPEST",
    "HistoryPoint", "InterruptionRow", "PriceRow", "PriceWatch", "SourceStatus", "Watched",
    "cheapest_per_gpu",
    "history", "interruption_facts", "is_near_cheapest", "last_sighting", "latest_observation",
    "price_at", "price_rows", "price_rows_over", "sighting_at", "source_statuses", "watched_prices",
]
