"""Ingest: validate records, canonicalize GPUs, and store price history as spans.

One call is one run of one source and one transaction: either every record of the run is
stored (with its rejects and a run row), or nothing is and a failed run row says why.

Each observation of an offer either extends the current span of an unchanged price
(`last_seen`) or closes it (`valid_to`) and opens a new one. An open span's extension is
recorded once per region in `source_scope` (see `_Scope`), not per offer. Records may carry several
`observed_at` instants; each instant is one complete snapshot of the source, applied oldest
first, and offers that a snapshot no longer lists (within the provider/regions it covered)
get their span closed. Observations older than what is stored (backfills) are merged into
the history in place.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import operator
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import bindparam, func, select, text
from sqlalchemy.engine import Connection

from scrapers.base import (
    CATEGORIES,
    CatalogVersion,
    ExchangeRateFact,
    InterruptionFact,
    PriceObservation,
    Rejected,
)
from tracker.db import Database, insert_missing, inserted_id
from tracker.errors import Interrupted, TrackerError
from tracker.fabric import offer_network
from tracker.gpus import canonical_gpu, memory_mismatch
from tracker.models import (
    CatalogVersionRow,
    IngestRun,
    Offer,
    PriceSpan,
    Provider,
    RejectedRow,
    SourceScope,
    SpotInterruption,
)
from tracker.money import ISO_4217, decimal_to_str

log = logging.getLogger(__name__)

MAX_PRICE_PER_GPU_HOUR = Decimal(500)

# Offer state of the last committed run per (database, source), kept by a long-running
# process (the scheduler, a backfill) so the next run of that source need not re-read it.
# It is used only when that run is still the newest of the source in the database, checked
# inside the write transaction, i.e. under the write lock; any other writer invalidates it.
_STATE_CACHE: dict[tuple[str, str], tuple[int, dict]] = {}
_STATE_LOCK = threading.Lock()



@dataclass
class RunSummary:
    source: str
    status: str = "ok"  # ok | failed | skipped | interrupted
    offers_seen: int = 0
    prices_changed: int = 0
    new_offers: int = 0
    offers_closed: int = 0
    rejected: int = 0
    interruption_facts: int = 0
    duration_s: float = 0.0
    error: str | None = None
    version: str | None = None
    run_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class _State:
    """What ingest needs to know of an offer's newest span, without parsing datetimes."""

    offer_id: int
    span_id: int | None
    price: Decimal | None
    currency: str | None
    last_ms: int | None  # the span's stored last_seen; open spans: see _Scope
    valid_to_ms: int | None
    provider: str
    region: str


@dataclass
class _Counters:
    offers_seen: int = 0
    prices_changed: int = 0
    new_offers: int = 0
    offers_closed: int = 0
    rejects: list[tuple[str, str, Any, datetime]] = field(default_factory=list)


class _Scope:
    """When this source last listed each (provider, region) in a snapshot.

    An open span was seen at every snapshot of its region since it opened (else it would
    have been closed), so its last sighting is the later of its stored `last_seen` and this
    time. Unchanged prices therefore cost no write at all.
    """

    def __init__(self, rows: Iterable[tuple[str, str, datetime]]) -> None:
        self.at: dict[tuple[str, str], datetime] = {}
        self.ms: dict[tuple[str, str], int] = {}
        self.changed: set[tuple[str, str]] = set()
        for provider, region, when in rows:
            self.at[(provider, region)] = when
            self.ms[(provider, region)] = _ms(when)

    def last_ms(self, st: _State) -> int | None:
        """The offer's last sighting (epoch ms)."""
        if st.valid_to_ms is None:
            listed = self.ms.get((st.provider, st.region))
            if listed is not None and (st.last_ms is None or listed > st.last_ms):
                return listed
        return st.last_ms

    def listed(self, keys: Iterable[tuple[str, str]], when: datetime) -> None:
        when_ms = _ms(when)
        for key in keys:
            if self.ms.get(key, -1) < when_ms:
                self.at[key], self.ms[key] = when, when_ms
                self.changed.add(key)


def _ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)


# C-level getters for the per-row tuples of the hot loops.
_offer_identity = operator.attrgetter(
    "provider", "region", "zone", "instance_type", "variant", "category")
_provider_region = operator.itemgetter(0, 1)  # of an offer identity tuple
_offer_kind = operator.attrgetter(
    "category", "currency", "gpu_count", "gpu_name", "gpu_memory_gb")


def _raw_json(value: Any) -> str:
    try:
        return json.dumps(value, default=_json_default, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps(repr(value))


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return decimal_to_str(value) if value.is_finite() else str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return repr(value)


def validate(obs: PriceObservation) -> tuple[str | None, str | None]:
    """(canonical GPU id, None) for a storable observation, else (None, reason)."""
    if not obs.provider or not obs.instance_type:
        return None, "missing provider or instance type"
    if obs.observed_at is None or obs.observed_at.tzinfo is None:
        return None, "observed_at missing or not timezone-aware"
    gpu_id, reason, cap = _validate_offer(
        obs.category, obs.currency, obs.gpu_count, obs.gpu_name, obs.gpu_memory_gb)
    if reason is not None:
        return None, reason
    price = obs.price_per_hour
    if not isinstance(price, Decimal):
        return None, f"price is not a Decimal: {price!r}"
    if not price.is_finite():
        return None, f"price is not a finite number: {price}"
    if price <= 0:
        return None, f"price must be positive, got {decimal_to_str(price)}"
    if price > cap:
        return None, (f"absurd price {decimal_to_str(price)} {obs.currency}/h for "
                      f"{obs.gpu_count:g} GPU(s): above {MAX_PRICE_PER_GPU_HOUR} per GPU-hour")
    return gpu_id, None


@functools.lru_cache(maxsize=4096)
def _validate_offer(category: str, currency: str, count: Any, gpu_name: str | None,
                    memory_gb: float | None) -> tuple[str | None, str | None, Decimal]:
    """The checks that depend only on what kind of offer a row is; cached, since a source
    lists thousands of rows of a few dozen kinds."""
    cap = Decimal(0)
    if category not in CATEGORIES:
        return None, f"unknown pricing category {category!r}", cap
    if currency not in ISO_4217:
        return None, f"currency {currency!r} is not an ISO 4217 code", cap
    if count is None or isinstance(count, bool) or not isinstance(count, (int, float)) \
            or not math.isfinite(count) or count <= 0:
        return None, f"GPU count must be positive, got {count!r}", cap
    gpu_id = canonical_gpu(gpu_name or "", memory_gb)
    if gpu_id is None:
        return None, f"unknown GPU {gpu_name!r}", cap
    # Never re-class silently: memory that cannot be this GPU's means the row was misread.
    mismatch = memory_mismatch(gpu_id, memory_gb)
    if mismatch is not None:
        return None, mismatch, cap
    return gpu_id, None, MAX_PRICE_PER_GPU_HOUR * Decimal(repr(float(count)))


def ingest_records(
    db: Database, source: str, records: Iterable[Any], *, started_at: datetime,
    version: str | None = None, trigger: str = "manual", host: str | None = None,
) -> RunSummary:
    """Store one run of `source`. Never raises for bad data or a failing fetch: the summary
    says `failed` with the error, and nothing of the run is stored but the failed run row."""
    clock = time.perf_counter()
    host = host or socket.gethostname()
    summary = RunSummary(source=source, version=version)
    try:
        # The fetch (network) happens here, outside the write transaction, so a slow source
        # never holds the database lock.
        items = list(records)
        summary = _write(db, source, items, started_at=started_at, version=version,
                         trigger=trigger, host=host)
    except Interrupted as exc:
        # Stopped by the user: the run rolled back and is not a failure of the source, so
        # it leaves no run row (the store holds exactly the runs that committed).
        summary.status = "interrupted"
        summary.error = _one_line(exc)
    except Exception as exc:  # a failing source never blocks the others
        from tracker.errors import describe_failure
        from tracker.secrets import scrub

        expected = describe_failure(exc)  # database locked, disk full, ...: one line
        message = scrub(expected) if expected is not None else _one_line(exc)
        if not isinstance(exc, TrackerError) and expected is None:
            # A bug: the traceback only with -vv (the error line is in the run either way).
            log.warning("source %s failed unexpectedly: %s", source, message,
                        exc_info=log.isEnabledFor(logging.DEBUG))
        summary.status = "failed"
        summary.error = message
        summary.run_id = _record_failed_run(db, source, started_at, version, trigger, host,
                                            message)
    summary.duration_s = time.perf_counter() - clock
    return summary


def _one_line(exc: BaseException) -> str:
    from tracker.secrets import scrub

    text_ = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return scrub(text_ if isinstance(exc, TrackerError) else f"{type(exc).__name__}: {text_}")


def record_skipped_run(db: Database, source: str, started_at: datetime, reason: str,
                       trigger: str = "manual") -> None:
    """A source skipped for a missing key still leaves a trace for `sources`/`status`."""
    from tracker.secrets import scrub

    reason = scrub(reason)
    with db.write() as conn:
        conn.execute(IngestRun.__table__.insert().values(
            source=source, version=None, trigger=trigger, host=socket.gethostname(),
            started_at=started_at, finished_at=started_at, status="skipped", offers_seen=0,
            prices_changed=0, new_offers=0, offers_closed=0, rejected=0, error=reason))


def _record_failed_run(db: Database, source: str, started_at: datetime, version: str | None,
                       trigger: str, host: str, message: str) -> int | None:
    try:
        with db.write() as conn:
            return inserted_id(conn.execute(IngestRun.__table__.insert().values(
                source=source, version=version, trigger=trigger, host=host,
                started_at=started_at, finished_at=datetime.now(UTC), status="failed",
                offers_seen=0, prices_changed=0, new_offers=0, offers_closed=0, rejected=0,
                error=message)))
    except Exception as exc:  # the database itself is gone: the caller still gets the summary
        from tracker.errors import describe_failure

        # The caller reports the error itself; this is detail (-v), not a second error line.
        log.info("could not record the failed run of %s: %s", source,
                    describe_failure(exc) or type(exc).__name__,
                    exc_info=log.isEnabledFor(logging.DEBUG))
        return None


def _write(db: Database, source: str, items: Sequence[Any], *, started_at: datetime,
           version: str | None, trigger: str, host: str) -> RunSummary:
    counters = _Counters()
    accepted: list[PriceObservation] = []
    facts: list[InterruptionFact] = []
    versions: list[CatalogVersion] = []
    rates: list[ExchangeRateFact] = []
    offer_checks: dict[tuple, tuple[str | None, str | None, Decimal]] = {}
    for item in items:
        if isinstance(item, PriceObservation):
            # Fast path: the offer-kind checks are cached per kind; only the price and the
            # identity fields are checked per row. Anything odd goes through validate().
            kind = _offer_kind(item)
            checked = offer_checks.get(kind)
            if checked is None:
                checked = offer_checks[kind] = _validate_offer(*kind)
            _gpu, reason, cap = checked
            price = item.price_per_hour
            if (reason is None and item.provider and item.instance_type
                    and type(price) is Decimal and price.is_finite() and 0 < price <= cap
                    and item.observed_at.tzinfo is not None):
                accepted.append(item)
                continue
            _gpu, reason = validate(item)
            if reason is not None:
                raw = item.raw if item.raw is not None else _observation_raw(item)
                counters.rejects.append((reason, item.provider, raw, item.observed_at))
            else:
                accepted.append(item)
        elif isinstance(item, Rejected):
            counters.rejects.append((item.reason, item.provider, item.raw, started_at))
        elif isinstance(item, InterruptionFact):
            facts.append(item)
        elif isinstance(item, CatalogVersion):
            versions.append(item)
        elif isinstance(item, ExchangeRateFact):
            rates.append(item)
        else:
            raise TypeError(f"source {source} yielded {type(item).__name__}, not a record")

    snapshots = _by_instant(accepted)

    def gpu_of(obs: PriceObservation) -> str:
        gpu = offer_checks[_offer_kind(obs)][0]
        assert gpu is not None  # accepted rows passed _validate_offer, which found their GPU
        return gpu

    cache_key = (db.url, source)
    with _STATE_LOCK:
        cached = _STATE_CACHE.pop(cache_key, None)  # put back only after a commit
    with db.write() as conn:
        _ensure_providers(conn, {obs.provider for obs in accepted}
                          | {f.provider for f in facts})
        previous_run = conn.execute(text("SELECT max(id) FROM ingest_run WHERE source = :s"),
                                    {"s": source}).scalar()
        run_id = inserted_id(conn.execute(IngestRun.__table__.insert().values(
            source=source, version=version, trigger=trigger, host=host, started_at=started_at,
            status="running", offers_seen=0, prices_changed=0, new_offers=0, offers_closed=0,
            rejected=0)))
        if cached is not None and cached[0] == previous_run and previous_run is not None:
            state = cached[1]
        else:
            state = _load_state(conn, source)
        scope = _Scope(_load_scope(conn, source))
        for observed_at in sorted(snapshots):
            _apply_snapshot(conn, source, state, scope, snapshots[observed_at], observed_at,
                            run_id, counters, gpu_of)
        _save_scope(conn, source, scope)
        _store_rejects(conn, source, counters.rejects, run_id, started_at)
        n_facts = _store_facts(conn, source, facts, run_id)
        _store_catalog_versions(conn, source, versions, run_id, started_at)
        if rates:
            from tracker.market.store import store_exchange_rates

            n_facts += store_exchange_rates(conn, source, rates, started_at)
        finished = datetime.now(UTC)
        conn.execute(IngestRun.__table__.update().where(IngestRun.__table__.c.id == run_id)
                     .values(status="ok", finished_at=finished,
                             offers_seen=counters.offers_seen,
                             prices_changed=counters.prices_changed,
                             new_offers=counters.new_offers,
                             offers_closed=counters.offers_closed,
                             rejected=len(counters.rejects)))
    with _STATE_LOCK:
        _STATE_CACHE[cache_key] = (run_id, state)
    return RunSummary(
        source=source, status="ok", offers_seen=counters.offers_seen,
        prices_changed=counters.prices_changed, new_offers=counters.new_offers,
        offers_closed=counters.offers_closed, rejected=len(counters.rejects),
        interruption_facts=n_facts, version=version, run_id=run_id)


def _by_instant(observations: list[PriceObservation]) -> dict[datetime, list[PriceObservation]]:
    """Snapshots by instant; a plain refresh has one instant and keeps its list as it is."""
    instants = {obs.observed_at for obs in observations}
    if len(instants) <= 1:
        return {instant: observations for instant in instants}
    grouped: dict[datetime, list[PriceObservation]] = defaultdict(list)
    for obs in observations:
        grouped[obs.observed_at].append(obs)
    return grouped


def _observation_raw(obs: PriceObservation) -> dict[str, Any]:
    data = {f: getattr(obs, f) for f in obs.__dataclass_fields__ if f != "raw"}
    data["attributes"] = dict(obs.attributes)
    return data


def _ensure_providers(conn: Connection, providers: set[str]) -> None:
    from tracker.providers import display_name  # the registry, data/providers.json

    if not providers:
        return
    existing = {row[0] for row in conn.execute(text("SELECT id FROM provider"))}
    insert_missing(conn, Provider.__table__, [
        {"id": p, "display_name": display_name(p)}
        for p in sorted(providers - existing)])


def _load_scope(conn: Connection, source: str) -> list[tuple[str, str, datetime]]:
    table = SourceScope.__table__
    return [tuple(row) for row in conn.execute(
        select(table.c.provider, table.c.region, table.c.last_snapshot_at)
        .where(table.c.source == source))]


def _save_scope(conn: Connection, source: str, scope: _Scope) -> None:
    if not scope.changed:
        return
    table = SourceScope.__table__
    insert: Any  # the dialect's INSERT .. ON CONFLICT; the two modules type it differently
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    statement = insert(table)
    # The run holds the source's write (and run lock), so the time computed here is the max.
    conn.execute(statement.on_conflict_do_update(
        index_elements=[table.c.source, table.c.provider, table.c.region],
        set_={"last_snapshot_at": statement.excluded.last_snapshot_at}),
        [{"source": source, "provider": p, "region": r, "last_snapshot_at": scope.at[(p, r)]}
         for p, r in sorted(scope.changed)])


def _load_state(conn: Connection, source: str) -> dict[tuple, _State]:
    """The newest span of every offer of `source`, read once per run without a state cache.

    A cron-started refresh is a new process, so this runs on every refresh: the rows come
    from the DBAPI cursor as plain tuples (no per-value result processing for the 10^4-10^5
    offers of a source), and the instants are turned into epoch ms once per distinct value
    (an open span's `last_seen` is shared by every offer of its snapshot)."""
    sql = ("SELECT o.id, o.provider, o.region, o.zone, o.instance_type, o.variant, o.category, "
           "s.id, s.price_per_hour, s.currency, s.last_seen, s.valid_to "
           "FROM offer o LEFT JOIN price_span s ON s.id = o.latest_span_id "
           "WHERE o.source = {}")
    statement = sql.format("%s" if conn.dialect.name == "postgresql" else "?")
    dbapi_error = conn.dialect.loaded_dbapi.Error
    cursor = conn.connection.cursor()
    try:
        cursor.execute(statement, (source,))
        rows = cursor.fetchall()
    except dbapi_error as error:
        # Wrapped as SQLAlchemy wraps its own statements, so a lock timeout reads as one.
        from sqlalchemy.exc import DBAPIError

        raise DBAPIError.instance(statement, (source,), error, dbapi_error,
                                  dialect=conn.dialect) from error
    finally:
        cursor.close()
    instants: dict[Any, int | None] = {None: None}

    def epoch_ms(value: Any) -> int | None:
        ms = instants.get(value, -1)
        if ms == -1:
            when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            ms = instants[value] = _ms(when)
        return ms

    state: dict[tuple, _State] = {}
    get_ms = instants.get
    for (offer_id, provider, region, zone, instance_type, variant, category, span_id, price,
         currency, last_seen, valid_to) in rows:
        if price is not None and not isinstance(price, Decimal):
            price = Decimal(price)
        last_ms = get_ms(last_seen, -1)
        if last_ms == -1:
            last_ms = epoch_ms(last_seen)
        state[(provider, region, zone, instance_type, variant, category)] = _State(
            offer_id, span_id, price, currency, last_ms,
            None if valid_to is None else epoch_ms(valid_to), provider, region)
    return state


def _apply_snapshot(
    conn: Connection, source: str, state: dict[tuple, _State], scope: _Scope,
    group: list[PriceObservation], observed_at: datetime, run_id: int, counters: _Counters,
    gpu_of: Callable[[PriceObservation], str],
) -> None:
    t_ms = _ms(observed_at)
    seen: set[tuple] = set()
    close: list[_State] = []
    new_spans: list[tuple[tuple, PriceObservation, Decimal]] = []
    new_offers: list[tuple[tuple, PriceObservation, str, Decimal]] = []
    past: list[tuple[_State, PriceObservation]] = []
    for obs in group:
        key = _offer_identity(obs)
        if key in seen:
            counters.rejects.append(("duplicate of an earlier row in the same snapshot",
                                     obs.provider, _observation_raw(obs), observed_at))
            continue
        seen.add(key)
        price = obs.price_per_hour
        st = state.get(key)
        if st is None or st.span_id is None:
            new_offers.append((key, obs, gpu_of(obs), price))
            continue
        if t_ms >= (scope.last_ms(st) or 0):  # a stored span always has its last sighting
            same = st.price == price and st.currency == obs.currency
            if not same or st.valid_to_ms is not None:
                # An unchanged open price needs no write: the scope records the sighting.
                if st.valid_to_ms is None:
                    close.append(st)
                if not same:
                    counters.prices_changed += 1
                new_spans.append((key, obs, price))
        else:
            past.append((st, obs))
    counters.offers_seen += len(seen)
    listed = set(map(_provider_region, seen))

    _close(conn, scope, close, observed_at)
    if new_offers:
        offer_rows = [{
            "source": source, "provider": obs.provider, "region": obs.region, "zone": obs.zone,
            "instance_type": obs.instance_type, "variant": obs.variant,
            "category": obs.category, "gpu_id": gpu_id, "gpu_raw": obs.gpu_name[:128],
            "gpu_count": float(obs.gpu_count), "fractional": float(obs.gpu_count) % 1 != 0,
            "gpu_memory_gb": obs.gpu_memory_gb, "vcpus": obs.vcpus, "ram_gb": obs.ram_gb,
            "source_url": obs.source_url,
            "attributes": _raw_json(dict(obs.attributes)) if obs.attributes else "{}",
            "first_seen": observed_at,
            **offer_network(obs.provider, obs.instance_type, gpu_id, obs.gpu_count,
                            obs.attributes).to_json(),
        } for _key, obs, gpu_id, _price in new_offers]
        ids = _insert_ids(conn, Offer.__table__, offer_rows)
        counters.new_offers += len(ids)
        for (key, obs, _gpu, price), offer_id in zip(new_offers, ids, strict=True):
            state[key] = _State(offer_id, None, None, None, None, None, obs.provider,
                                obs.region)
            new_spans.append((key, obs, price))

    if new_spans:
        span_table = PriceSpan.__table__
        span_rows = [{
            "offer_id": state[key].offer_id, "price_per_hour": obs.price_per_hour,
            "currency": obs.currency, "first_seen": observed_at, "last_seen": observed_at,
            "valid_to": None, "run_id": run_id,
        } for key, obs, _price in new_spans]
        span_ids = _insert_ids(conn, span_table, span_rows)
        conn.execute(
            text("UPDATE offer SET latest_span_id = :span WHERE id = :offer"),
            [{"span": sid, "offer": state[key].offer_id}
             for (key, _obs, _p), sid in zip(new_spans, span_ids, strict=True)])
        for (key, obs, price), sid in zip(new_spans, span_ids, strict=True):
            st = state[key]
            st.span_id, st.price, st.currency = sid, price, obs.currency
            st.last_ms = t_ms
            st.valid_to_ms = None

    for st, obs in past:
        _merge_past(conn, st, scope, obs, observed_at, run_id, counters)

    # Offers this snapshot no longer lists (in the provider/regions it covered) are closed.
    # Every seen offer is in `state` by now, so when the sizes agree nothing can be gone.
    gone = [] if len(state) == len(seen) else [
        st for key, st in state.items()
        if key not in seen and (st.provider, st.region) in listed
        and st.span_id is not None and st.valid_to_ms is None
        and (scope.last_ms(st) or t_ms) < t_ms]
    _close(conn, scope, gone, observed_at)
    counters.offers_closed += len(gone)
    scope.listed(listed, observed_at)


def _close(conn: Connection, scope: _Scope, spans: list[_State], when: datetime) -> None:
    """End open spans at `when`, writing down their last sighting (the scope's time)."""
    by_sighting: dict[datetime | None, list[int]] = defaultdict(list)
    when_ms = _ms(when)
    for st in spans:
        assert st.span_id is not None  # callers pass open spans only
        listed = scope.at.get((st.provider, st.region))
        by_sighting[listed if listed is not None and _ms(listed) < when_ms else None].append(
            st.span_id)
        st.valid_to_ms = when_ms
    later = "GREATEST" if conn.dialect.name == "postgresql" else "max"
    for sighting, ids in by_sighting.items():
        if sighting is None:
            _update_in(conn, "UPDATE price_span SET valid_to = :t WHERE id IN :ids", ids, when)
        else:
            _update_in(conn, "UPDATE price_span SET valid_to = :t, last_seen = "
                       f"{later}(last_seen, :seen) WHERE id IN :ids", ids, when, seen=sighting)


def _insert_ids(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert rows and return their ids in order.

    On SQLite the write transaction holds the database lock (BEGIN IMMEDIATE), so ids can be
    assigned here and inserted in one executemany; ordered RETURNING would cost one
    statement per row. PostgreSQL batches ordered RETURNING itself.
    """
    if conn.dialect.name == "sqlite":
        start = (conn.execute(text(f"SELECT max(id) FROM {table.name}")).scalar() or 0) + 1
        ids = list(range(start, start + len(rows)))
        conn.execute(table.insert(), [{**row, "id": i} for row, i in zip(rows, ids, strict=True)])
        return ids
    return list(conn.execute(
        table.insert().returning(table.c.id, sort_by_parameter_order=True), rows).scalars())


def _update_in(conn: Connection, sql: str, ids: list[int], when: datetime,
               seen: datetime | None = None) -> None:
    """Run `UPDATE ... WHERE id IN :ids` for many ids as one statement with one parameter
    (a JSON array on SQLite, an array on PostgreSQL), not one bound parameter per id."""
    if not ids:
        return
    from tracker.types import UTCDateTime

    if conn.dialect.name == "postgresql":
        sql = sql.replace("IN :ids", "= ANY(:ids)")
        ids_param: Any = ids
    else:
        sql = sql.replace("IN :ids", "IN (SELECT value FROM json_each(:ids))")
        ids_param = json.dumps(ids)
    params: dict[str, Any] = {"t": when, "ids": ids_param}
    statement = text(sql).bindparams(bindparam("t", type_=UTCDateTime()))
    if seen is not None:
        statement = statement.bindparams(bindparam("seen", type_=UTCDateTime()))
        params["seen"] = seen
    conn.execute(statement, params)


def _merge_past(conn: Connection, st: _State, scope: _Scope, obs: PriceObservation,
                observed_at: datetime, run_id: int, counters: _Counters) -> None:
    """Place an observation older than the offer's newest one into its history."""
    table = PriceSpan.__table__
    spans = conn.execute(
        table.select().where(table.c.offer_id == st.offer_id).order_by(table.c.first_seen)
    ).mappings().all()
    price_dec = obs.price_per_hour

    def same(span: Any) -> bool:
        return span["price_per_hour"] == price_dec and span["currency"] == obs.currency

    containing = None
    following = None
    for span in spans:
        if span["first_seen"] <= observed_at and (
                span["valid_to"] is None or observed_at < span["valid_to"]):
            containing = span
        if span["first_seen"] > observed_at and following is None:
            following = span
    if containing is not None:
        last_seen = containing["last_seen"]
        listed = scope.at.get((st.provider, st.region))
        if containing["valid_to"] is None and listed is not None and listed > last_seen:
            last_seen = listed  # an open span was seen at its region's last snapshot
        if same(containing):
            if observed_at > last_seen:
                conn.execute(table.update().where(table.c.id == containing["id"])
                             .values(last_seen=observed_at))
            return
        if observed_at <= last_seen:
            counters.rejects.append((
                "conflicts with a later observation of the same offer at another price",
                obs.provider, _observation_raw(obs), observed_at))
            return
        conn.execute(table.insert().values(
            offer_id=st.offer_id, price_per_hour=price_dec, currency=obs.currency,
            first_seen=observed_at, last_seen=observed_at, valid_to=containing["valid_to"],
            run_id=run_id))
        conn.execute(table.update().where(table.c.id == containing["id"])
                     .values(valid_to=observed_at))
        counters.prices_changed += 1
        return
    if following is not None and same(following):
        conn.execute(table.update().where(table.c.id == following["id"])
                     .values(first_seen=observed_at))
        return
    conn.execute(table.insert().values(
        offer_id=st.offer_id, price_per_hour=price_dec, currency=obs.currency,
        first_seen=observed_at, last_seen=observed_at,
        valid_to=following["first_seen"] if following is not None else None, run_id=run_id))
    if following is not None and spans and following["id"] != spans[0]["id"]:
        counters.prices_changed += 1


def _reject_key(provider: str, raw: Any) -> str:
    """What identifies a rejected row across runs: the offer identity when the raw row is an
    observation, else a digest of the raw payload (same payload, same row)."""
    if isinstance(raw, dict) and "instance_type" in raw and "category" in raw:
        parts = [provider, *(str(raw.get(k) or "") for k in
                             ("region", "zone", "instance_type", "variant", "category"))]
        return "|".join(parts)[:255]
    return "sha1:" + hashlib.sha1(_raw_json(raw).encode("utf-8")).hexdigest()


def _store_rejects(conn: Connection, source: str,
                   rejects: list[tuple[str, str, Any, datetime]], run_id: int,
                   started_at: datetime) -> None:
    """Rejects are kept once per (source, row key, reason): a row rejected again on the next
    refresh moves `last_seen` and counts up instead of adding a row."""
    if not rejects:
        return
    from tracker.secrets import scrub

    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for reason, provider, raw, when in rejects:
        when = when if when is not None and when.tzinfo else started_at
        # A rejected row keeps the provider's raw payload, which could echo a key.
        key = (_reject_key(provider or "", raw), scrub(reason))
        row = merged.get(key)
        if row is None:
            merged[key] = {"run_id": run_id, "source": source, "provider": provider or "",
                           "row_key": key[0], "reason": key[1], "raw": scrub(_raw_json(raw)),
                           "observed_at": when, "first_seen": when, "last_seen": when,
                           "count": 1}
        else:
            row["count"] += 1
            row["first_seen"] = min(row["first_seen"], when)
            row["last_seen"] = row["observed_at"] = max(row["last_seen"], when)
    table = RejectedRow.__table__
    insert: Any  # the dialect's INSERT .. ON CONFLICT; the two modules type it differently
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
        least, greatest = "LEAST", "GREATEST"
    else:
        from sqlalchemy.dialects.sqlite import insert
        least, greatest = "min", "max"
    statement = insert(table)
    excluded = statement.excluded
    conn.execute(statement.on_conflict_do_update(
        index_elements=[table.c.source, table.c.row_key, table.c.reason],
        set_={"count": table.c.count + excluded.count, "run_id": excluded.run_id,
              "raw": excluded.raw, "provider": excluded.provider,
              "first_seen": getattr(func, least)(table.c.first_seen, excluded.first_seen),
              "last_seen": getattr(func, greatest)(table.c.last_seen, excluded.last_seen),
              "observed_at": getattr(func, greatest)(table.c.observed_at,
                                                        excluded.observed_at)}),
        list(merged.values()))


def _store_catalog_versions(conn: Connection, source: str, versions: list[CatalogVersion],
                            run_id: int, started_at: datetime) -> None:
    """One row per (source, provider, catalog version); a version read again moves last_seen."""
    if not versions:
        return
    table = CatalogVersionRow.__table__
    insert: Any  # the dialect's INSERT .. ON CONFLICT; the two modules type it differently
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    rows = {(v.provider, v.version[:128]): {
        "source": source, "provider": v.provider, "version": v.version[:128],
        "published_at": v.published_at, "first_seen": started_at, "last_seen": started_at,
        "run_id": run_id} for v in versions}
    statement = insert(table)
    conn.execute(statement.on_conflict_do_update(
        index_elements=[table.c.source, table.c.provider, table.c.version],
        set_={"last_seen": statement.excluded.last_seen, "run_id": statement.excluded.run_id}),
        list(rows.values()))


def _store_facts(conn: Connection, source: str, facts: list[InterruptionFact],
                 run_id: int) -> int:
    """Interruption bands as spans too: a new row only when a band changes."""
    if not facts:
        return 0
    table = SpotInterruption.__table__
    latest: dict[tuple, tuple[int, int]] = {}
    for row in conn.execute(
            table.select().where(table.c.provider.in_({f.provider for f in facts}))
            .order_by(table.c.as_of)):
        latest[(row.provider, row.region, row.instance_type, row.os)] = (row.id, row.band)
    inserts: list[dict[str, Any]] = []
    for fact in facts:
        key = (fact.provider, fact.region, fact.instance_type, fact.os)
        current = latest.get(key)
        if current is not None and current[1] == fact.band:
            conn.execute(table.update().where(table.c.id == current[0])
                         .values(last_seen=fact.as_of))
            continue
        inserts.append({
            "source": source, "provider": fact.provider, "region": fact.region,
            "instance_type": fact.instance_type, "os": fact.os, "band": fact.band,
            "band_label": fact.band_label, "min_pct": fact.min_pct, "max_pct": fact.max_pct,
            "savings_pct": fact.savings_pct, "as_of": fact.as_of, "last_seen": fact.as_of,
            "run_id": run_id})
        latest[key] = (-1, fact.band)
    if inserts:
        conn.execute(table.insert(), inserts)
    return len(facts)


def imported_versions(db: Database, source: str) -> set[str]:
    """Versions (catalog commits, snapshot names) already imported by successful runs."""
    with db.engine.connect() as conn:
        return {row[0] for row in conn.execute(text(
            "SELECT DISTINCT version FROM ingest_run WHERE source = :s AND status = 'ok' "
            "AND version IS NOT NULL"), {"s": source})}
