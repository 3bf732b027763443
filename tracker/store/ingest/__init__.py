"""Ingest: validate records, canonicalize GPUs, and store price history as spans.

One call is one run of one source and one transaction: either every record of the run is
stored (with its rejects and a run row), or nothing is and a failed run row says why.

The parts live by concern: tracker.store.ingest.checks validates the records,
tracker.store.ingest.spans turns each snapshot into span history (an unchanged price costs no
write), and tracker.store.ingest.facts keeps rejects, catalog versions and interruption bands.
Records may carry several `observed_at` instants; each instant is one complete snapshot of
the source, applied oldest first.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import operator
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from tracker.core.errors import Interrupted, TrackerError
from tracker.store.db import Database, insert_missing, inserted_id
from tracker.store.ingest import kept_state
from tracker.store.ingest.checks import MAX_PRICE_PER_GPU_HOUR, sort_records, validate
from tracker.store.ingest.facts import store_catalog_versions as _store_catalog_versions
from tracker.store.ingest.facts import store_facts as _store_facts
from tracker.store.ingest.facts import store_rejects as _store_rejects
from tracker.store.ingest.spans import (
    OFFER_ID,
    Counters,
    OfferStates,
    apply_snapshot,
    by_instant,
    epoch_ms,
    load_scope,
    load_states,
    save_scope,
)
from tracker.store.ingest.sql import (
    execute,
    fetch_rows,
    fetch_value,
    insert_id,
    instant_binder,
    page_cache,
)
from tracker.store.models import IngestRun, Provider

__all__ = ["MAX_PRICE_PER_GPU_HOUR", "RunSummary", "collector_paused", "forget_offer_states",
           "imported_versions", "ingest_records", "keep_states", "record_skipped_run",
           "validate"]

log = logging.getLogger(__name__)

_provider = operator.attrgetter("provider")

# Offer state of the last committed run per (database, source), kept by a long-running
# process (a backfill, the scheduler) so the next run of that source need not re-read it,
# when what the last run stored (kept_state) cannot serve it: a run older than the newest
# stored snapshot, or one after such a run. An ordinary refresh compares with the stored
# state instead (for 10k offers ~85-95 ms a run against ~105-130 through this full state).
# It is used only when that run is still the newest of the source in the database, checked
# inside the write transaction, i.e. under the write lock; any other writer invalidates it.
# A process keeps it only from its second run of a source on (`_SOURCES_RUN`): a one-shot
# refresh (cron, `gpu-tracker refresh`) runs each source once, and keeping its 10k-offer
# state alive past the run only made the garbage collector walk it (15-30 ms a run).
_STATE_CACHE: dict[tuple[str, str], tuple[int, OfferStates]] = {}
_SOURCES_RUN: set[tuple[str, str]] = set()
_STATE_LOCK = threading.Lock()

# SQLite's page cache during a run (KiB; its default is 2,000). A refresh of the 9,648-offer
# source of bench/market_scale.py's store reads and changes ~1,000 scattered 16 KiB pages of
# the span table and its indexes: in the default cache most were read twice and dirty ones
# went to the WAL before the commit. Measured there, cold refreshes: ~196 -> ~170 ms CPU.
_RUN_PAGE_CACHE_KIB = 65_536


def forget_offer_states() -> None:
    """Forget every kept offer state and which sources this process has run: the next run
    of each source reads its state back and keeps none, as in a newly started process."""
    with _STATE_LOCK:
        _STATE_CACHE.clear()
        _SOURCES_RUN.clear()


@dataclass
class RunSummary:
    source: str
    status: str = "ok"  # ok | failed | skipped | interrupted
    offers_seen: int = 0
    prices_changed: int = 0
    new_offers: int = 0
    offers_closed: int = 0
    rejected: int = 0
    unmapped: int = 0  # of the rejected: instance types the source maps to no GPU (new SKUs)
    interruption_facts: int = 0
    duration_s: float = 0.0
    error: str | None = None
    version: str | None = None
    run_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ingest_records(
    db: Database, source: str, records: Iterable[Any], *, started_at: datetime,
    version: str | None = None, trigger: str = "manual", host: str | None = None,
    allow_empty: bool = True,
) -> RunSummary:
    """Store one run of `source`. Never raises for bad data or a failing fetch: the summary
    says `failed` with the error, and nothing of the run is stored but the failed run row.

    `allow_empty=False` (a refresh of a source that always lists something): a fetch that
    yields nothing at all is a failed run, not an `ok` one that would keep the source fresh."""
    clock = time.perf_counter()
    host = host or socket.gethostname()
    summary = RunSummary(source=source, version=version)
    try:
        # The fetch (network) happens here, outside the write transaction, so a slow source
        # never holds the database lock.
        items = list(records)
        if not items and not allow_empty:
            from tracker.core.errors import SourceError

            raise SourceError("the source returned an empty listing (no offers, no rejected "
                              "rows): kept as a failure, the stored prices stand as they were")
        with collector_paused():
            summary = _write(db, source, items, started_at=started_at, version=version,
                             trigger=trigger, host=host)
    except Interrupted as exc:
        # Stopped by the user: the run rolled back and is not a failure of the source, so
        # it leaves no run row (the store holds exactly the runs that committed).
        summary.status = "interrupted"
        summary.error = _one_line(exc)
    except Exception as exc:  # a failing source never blocks the others
        from tracker.core.errors import describe_failure
        from tracker.core.secrets import scrub

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


_GC_LOCK = threading.Lock()
_gc_pauses = 0  # runs inside collector_paused() now, in any thread
_gc_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block without Python's cyclic garbage collector, restoring it afterwards.

    A run allocates tens of thousands of tuples (the offers' state, their keys) that all
    stay alive until it ends, and each allocation burst makes the collector walk every
    object in the process again, none of which it can free: in a cron-started refresh of
    10k offers that was 70-110 ms of a 245-280 ms run (measured by running the same process
    with the collector off). Reference counting still frees everything at once; only cycles
    wait, and a run makes none of note. Nested and concurrent runs (the scheduler's threads)
    share one pause, and the collector is turned back on only if it was on before the first.
    """
    global _gc_pauses, _gc_was_enabled
    with _GC_LOCK:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _one_line(exc: BaseException) -> str:
    from tracker.core.secrets import scrub

    text_ = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return scrub(text_ if isinstance(exc, TrackerError) else f"{type(exc).__name__}: {text_}")


def record_skipped_run(db: Database, source: str, started_at: datetime, reason: str,
                       trigger: str = "manual") -> None:
    """A source skipped for a missing key still leaves a trace for `sources`/`status`."""
    from tracker.core.secrets import scrub

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
        from tracker.core.errors import describe_failure

        # The caller reports the error itself; this is detail (-v), not a second error line.
        log.info("could not record the failed run of %s: %s", source,
                    describe_failure(exc) or type(exc).__name__,
                    exc_info=log.isEnabledFor(logging.DEBUG))
        return None


def _write(db: Database, source: str, items: Sequence[Any], *, started_at: datetime,
           version: str | None, trigger: str, host: str) -> RunSummary:
    records = sort_records(source, items, started_at)
    counters = Counters(rejects=records.rejects)
    snapshots = by_instant(records.accepted)
    cache_key = (db.url, source)
    with _STATE_LOCK:
        cached = _STATE_CACHE.pop(cache_key, None)  # put back only after a commit
        run_before = cache_key in _SOURCES_RUN
        _SOURCES_RUN.add(cache_key)
    with db.write() as conn, page_cache(conn, _RUN_PAGE_CACHE_KIB):
        _ensure_providers(conn, set(map(_provider, records.accepted))
                          | set(map(_provider, records.facts)))
        previous_run = fetch_value(conn, "SELECT max(id) FROM ingest_run WHERE source = ?",
                                   (source,))
        bind = instant_binder(conn)
        run_id = insert_id(conn, (
            "INSERT INTO ingest_run (source, version, trigger, host, started_at, status, "
            "offers_seen, prices_changed, new_offers, offers_closed, rejected) "
            "VALUES (?, ?, ?, ?, ?, 'running', 0, 0, 0, 0, 0)"),
            (source, version, trigger, host, bind(started_at)))
        scope = load_scope(conn, source)
        in_order = len(snapshots) == 1 and scope.precedes(min(snapshots))
        listing = stored = None
        if in_order:
            # An ordinary refresh: what the last run left, if it was the source's newest,
            # says which offers to read back. A process keeping the state in memory (the
            # scheduler) does so too: this costs less than diffing every kept offer.
            stored = kept_state.read(conn, source, previous_run)
            if stored is not None and (stored.newest_ms is None
                                       or stored.newest_ms <= epoch_ms(min(snapshots))):
                listing = kept_state.compare(stored, snapshots[min(snapshots)], records.keys)
        if listing is not None:
            assert stored is not None
            states = load_states(conn, source, sightings=False,
                                 offer_ids=listing.offer_ids_to_read(stored))
            states.newest_ms = max(filter(None, (states.newest_ms, stored.newest_ms)),
                                   default=None)
        elif cached is not None and cached[0] == previous_run and previous_run is not None:
            states = cached[1]
        else:
            # A state that will not be kept, for a run newer than every stored sighting,
            # needs no sightings (see load_states).
            states = load_states(conn, source, sightings=run_before or not scope.precedes(
                min(snapshots, default=None)))
        for observed_at in sorted(snapshots):
            apply_snapshot(conn, source, states, scope, snapshots[observed_at], observed_at,
                           run_id, counters, records.gpu_of,
                           None if listing is None else listing.candidates)
        if listing is not None:
            assert stored is not None
            kept_state.save(conn, source, run_id, kept_state.after_run(
                stored, listing, snapshots[min(snapshots)], states.by_key, states.newest_ms))
        elif snapshots and (in_order or not run_before):
            kept_state.save(conn, source, run_id, kept_state.from_states(states.by_key,
                                                                         states.newest_ms))
        else:  # a backfill in a process that keeps the state in memory for the next one
            kept_state.forget(conn, source)
        save_scope(conn, source, scope)
        _store_rejects(conn, source, counters.rejects, run_id, started_at)
        n_facts = _store_facts(conn, source, records.facts, run_id)
        _store_catalog_versions(conn, source, records.versions, run_id, started_at)
        if records.rates:
            from tracker.store.market import store_exchange_rates

            n_facts += store_exchange_rates(conn, source, records.rates, started_at)
        execute(conn, (
            "UPDATE ingest_run SET status = 'ok', finished_at = ?, offers_seen = ?, "
            "prices_changed = ?, new_offers = ?, offers_closed = ?, rejected = ? WHERE id = ?"),
            (bind(datetime.now(UTC)), counters.offers_seen, counters.prices_changed,
             counters.new_offers, counters.offers_closed, len(counters.rejects), run_id))
    if run_before and listing is None:  # (a kept-state run read only some offers back)
        with _STATE_LOCK:
            _STATE_CACHE[cache_key] = (run_id, states)
    return RunSummary(
        source=source, status="ok", offers_seen=counters.offers_seen,
        prices_changed=counters.prices_changed, new_offers=counters.new_offers,
        offers_closed=counters.offers_closed, rejected=len(counters.rejects),
        unmapped=records.unmapped,
        interruption_facts=n_facts, version=version, run_id=run_id)


def _ensure_providers(conn: Connection, providers: set[str]) -> None:
    from tracker.core.providers import display_name  # the registry, data/providers.json

    if not providers:
        return
    existing = {row[0] for row in fetch_rows(conn, "SELECT id FROM provider")}
    insert_missing(conn, Provider.__table__, [
        {"id": p, "display_name": display_name(p)}
        for p in sorted(providers - existing)])


def keep_states(db: Database, sources: Iterable[str]) -> None:
    """Keep, for each of `sources`, what its newest run would have kept for the next one
    (tracker/store/ingest/kept_state.py), from its stored offers: for a store whose offers
    were written other than by ingest (tools/synthetic_market.py's bulk path), so that its
    next refresh starts as it would after a real run."""
    with db.write() as conn:
        for source in sources:
            run = fetch_value(conn, "SELECT max(id) FROM ingest_run WHERE source = ?",
                              (source,))
            if run is not None:
                # In the order of the offers' ids, the order in which the source first
                # listed them (the database's own order is not defined on PostgreSQL).
                states = load_states(conn, source)
                by_id = dict(sorted(states.by_key.items(), key=lambda item: item[1][OFFER_ID]))
                kept_state.save(conn, source, run, kept_state.from_states(by_id,
                                                                         states.newest_ms))


def imported_versions(db: Database, source: str) -> set[str]:
    """Versions (catalog commits, snapshot names) already imported by successful runs."""
    with db.engine.connect() as conn:
        return {row[0] for row in conn.execute(text(
            "SELECT DISTINCT version FROM ingest_run WHERE source = :s AND status = 'ok' "
            "AND version IS NOT NULL"), {"s": source})}
