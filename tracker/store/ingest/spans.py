"""Ingest's span diff: one snapshot of a source against the newest span of each of its offers.

Each observation of an offer either extends the current span of an unchanged price
(`last_seen`) or closes it (`valid_to`) and opens a new one. The new span takes over the
row of the offer's newest one (`offer.latest_span_id`, fixed from the offer's first span
on) and the closed one moves to a new row, so a price change writes no offer row. An open
span's extension is recorded once per region in `source_scope` (see `Scope`), not per
offer, so an unchanged price costs no write at all. Offers that a snapshot no longer lists
(within the provider/regions it covered) get their span closed. Observations older than
what is stored (backfills) are merged into the history in place.

A cron-started refresh is a new process that reads the offers' state back on every run, so
that state is one plain row per offer (`OfferState`) as the database gives it (one JSON
array on SQLite), put under its identity in one comprehension and compared on the price and
currency alone while the snapshot is newer than every stored sighting (an ordinary refresh).
"""

from __future__ import annotations

import itertools
import json
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy.engine import Connection

from scrapers.base import PriceObservation
from tracker.core.fabric import offer_network
from tracker.store.ingest.checks import Reject, observation_raw, offer_identity, raw_json
from tracker.store.ingest.sql import (
    bind_processor_of,
    execute,
    execute_many,
    fetch_rows,
    fetch_value,
    instant_binder,
    instant_reader,
)
from tracker.store.models import Offer, PriceSpan
from tracker.store.types import UTCDateTime

# What the diff needs of an offer's newest span, in the layout of load_states' rows:
# (provider, region, zone, instance_type, variant, category,  -- the offer's identity
#  offer id, span id, price, currency, last_seen, valid_to)  -- its newest span, if any
# with the values as the database returned them (a SQLite price is exact text, an instant
# naive UTC text) or as ingest wrote them (Decimal, aware datetime). An open span's last
# sighting is the later of its last_seen and its region's scope time (see Scope).
OfferState = Sequence[Any]  # a tuple, or a list as JSON gives it
OFFER_ID, SPAN_ID, PRICE, CURRENCY, LAST_SEEN, VALID_TO = range(6, 12)

_provider_region = operator.itemgetter(0, 1)  # of an offer key
_listed_region = operator.attrgetter("provider", "region")  # of an observation


@dataclass
class Counters:
    offers_seen: int = 0
    prices_changed: int = 0
    new_offers: int = 0
    offers_closed: int = 0
    rejects: list[Reject] = field(default_factory=list)


class OfferStates:
    """The newest span of every offer of one source, by offer identity.

    `newest_ms` is no earlier than any sighting stored in `by_key` (None when there is
    none); instants are turned into epoch ms once per distinct value (an open span's
    `last_seen` is shared by every offer of its snapshot)."""

    __slots__ = ("_ms", "by_key", "newest_ms")

    def __init__(self, by_key: dict[tuple, OfferState], instants: Iterable[Any]) -> None:
        self.by_key = by_key
        self._ms: dict[Any, int | None] = {value: _stored_ms(value) for value in instants}
        self.newest_ms = max((v for v in self._ms.values() if v is not None), default=None)

    def ms(self, value: Any) -> int | None:
        """Epoch ms of a stored instant."""
        ms = self._ms.get(value, -1)
        if ms == -1:
            ms = self._ms[value] = _stored_ms(value)
        return ms

    def last_ms(self, state: OfferState, scope: Scope) -> int | None:
        """The offer's last sighting (epoch ms)."""
        last = self.ms(state[LAST_SEEN])
        if state[VALID_TO] is None:
            listed = scope.ms.get(_provider_region(state))
            if listed is not None and (last is None or listed > last):
                return listed
        return last

    def replace(self, state: OfferState, *values: Any) -> None:
        """Record what ingest wrote of the offer's newest span (span id onwards)."""
        self.by_key[tuple(state[:6])] = (*state[:SPAN_ID], *values)


class Scope:
    """When this source last listed each (provider, region) in a snapshot.

    An open span was seen at every snapshot of its region since it opened (else it would
    have been closed), so its last sighting is the later of its stored `last_seen` and this
    time.
    """

    def __init__(self, rows: Iterable[tuple[str, str, datetime]]) -> None:
        self.at: dict[tuple[str, str], datetime] = {}
        self.ms: dict[tuple[str, str], int] = {}
        self.changed: set[tuple[str, str]] = set()
        for provider, region, when in rows:
            self.at[(provider, region)] = when
            self.ms[(provider, region)] = epoch_ms(when)

    def precedes(self, when: datetime | None) -> bool:
        """Whether a snapshot at `when` is no earlier than every stored instant of the
        source, which the scope times bound (False with no scope: nothing to bound by)."""
        return when is not None and bool(self.ms) and epoch_ms(when) >= max(self.ms.values())

    def sighting_before(self, region: tuple[str, str], when_ms: int) -> datetime | None:
        """The region's last snapshot if it is before `when_ms`, else None: the last
        sighting of an open span of that region that ends at `when_ms`."""
        listed_ms = self.ms.get(region)
        return self.at[region] if listed_ms is not None and listed_ms < when_ms else None

    def listed(self, keys: Iterable[tuple[str, str]], when: datetime) -> None:
        when_ms = epoch_ms(when)
        for key in keys:
            if self.ms.get(key, -1) < when_ms:
                self.at[key], self.ms[key] = when, when_ms
                self.changed.add(key)


def epoch_ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)


def _stored_ms(value: Any) -> int | None:
    """Epoch ms of an instant as the DBAPI returns it (naive UTC text on SQLite)."""
    if value is None:
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return epoch_ms(when if when.tzinfo is not None else when.replace(tzinfo=UTC))


def by_instant(observations: list[PriceObservation]) -> dict[datetime, list[PriceObservation]]:
    """Snapshots by instant; a plain refresh has one instant and keeps its list as it is."""
    instants = set(map(operator.attrgetter("observed_at"), observations))
    if len(instants) <= 1:
        return {instant: observations for instant in instants}
    grouped: dict[datetime, list[PriceObservation]] = defaultdict(list)
    for obs in observations:
        grouped[obs.observed_at].append(obs)
    return grouped


def load_states(conn: Connection, source: str, *, sightings: bool = True,
                offer_ids: Sequence[int] | None = None) -> OfferStates:
    """The newest span of every offer of `source`, read once per run without a state cache:
    the rows as the database gives them, each under its offer identity (its first six
    values).

    On SQLite the rows come as one JSON array, built by SQLite and parsed by `json.loads`:
    the stored values are text, integers and NULL, which JSON carries exactly (a price is
    its exact decimal text). Row by row through the cursor, the sqlite3 module steps the
    statement once per offer, releasing and taking the GIL each time, and converts each value
    on its own: for 10k offers that was 16.3 ms against 12.3 (bench/ingest.py's store).

    Without `sightings` each `last_seen` is left out (None), for a run that `Scope.precedes`:
    every stored instant of a source is no later than its region's scope time (revision
    0007), so the diff of such a run compares prices only and an open span's last sighting
    is its region's scope time. A smaller read: one text value fewer per offer.

    With `offer_ids`, only those offers of the source (the ones that may change something,
    as what the last run kept says: tracker/store/ingest/kept_state.py)."""
    columns = ("o.provider, o.region, o.zone, o.instance_type, o.variant, o.category, o.id, "
               "s.id, s.price_per_hour, s.currency, "
               f"{'s.last_seen' if sightings else 'NULL'}, s.valid_to")
    joined = ("FROM offer o LEFT JOIN price_span s ON s.id = o.latest_span_id "
              "WHERE o.source = ?")
    params: tuple[Any, ...] = (source,)
    if offer_ids is not None:
        sqlite = conn.dialect.name == "sqlite"
        joined += (" AND o.id IN (SELECT value FROM json_each(?))" if sqlite
                   else " AND o.id = ANY(?)")
        params += (json.dumps(list(offer_ids)) if sqlite else list(offer_ids),)
    rows: Sequence[OfferState]
    if conn.dialect.name == "sqlite":
        rows = json.loads(fetch_value(
            conn, f"SELECT json_group_array(json_array({columns})) {joined}", params))
    else:  # PostgreSQL's NUMERIC would be a JSON number: its cursor's own values instead
        rows = fetch_rows(conn, f"SELECT {columns} {joined}", params)
    instants = (set(map(operator.itemgetter(LAST_SEEN), rows))
                | set(map(operator.itemgetter(VALID_TO), rows)))
    return OfferStates({tuple(row[:6]): row for row in rows}, instants)


def load_scope(conn: Connection, source: str) -> Scope:
    read = instant_reader(conn)
    return Scope((provider, region, cast(datetime, read(when))) for provider, region, when
                 in fetch_rows(conn, "SELECT provider, region, last_snapshot_at "
                               "FROM source_scope WHERE source = ?", (source,)))


def save_scope(conn: Connection, source: str, scope: Scope) -> None:
    if not scope.changed:
        return
    bind = instant_binder(conn)
    # The run holds the source's write (and run lock), so the time computed here is the max.
    execute_many(conn, (
        "INSERT INTO source_scope (source, provider, region, last_snapshot_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (source, provider, region) "
        "DO UPDATE SET last_snapshot_at = excluded.last_snapshot_at"),
        [(source, p, r, bind(scope.at[(p, r)])) for p, r in sorted(scope.changed)])


@dataclass
class _Diff:
    """What one snapshot changes, found before anything is written."""

    seen: set[tuple] = field(default_factory=set)
    repriced: list[tuple[tuple, PriceObservation]] = field(default_factory=list)  # a new span
    new_offers: list[tuple[tuple, PriceObservation]] = field(default_factory=list)
    past: list[tuple[OfferState, PriceObservation]] = field(default_factory=list)
    # The keys of stored offers the snapshot does not list, when known without a lookup
    # of every stored key (see _changed); None: apply_snapshot looks them up in `seen`.
    unseen: list[tuple] | None = None


def _diff(states: OfferStates, scope: Scope, group: list[PriceObservation], t_ms: int,
          counters: Counters, candidates: Sequence[int] | None) -> _Diff:
    diff = _Diff()
    if candidates is not None:
        # What the last run kept found which rows may change something, in a group without
        # repeats: only those are diffed (`seen` holds theirs, `states` their offers' and
        # the open unlisted ones'), the others are unchanged open prices.
        counters.offers_seen += len(group) - len(candidates)
        group = [group[i] for i in candidates]
    keys = list(map(offer_identity, group))
    diff.seen = set(keys)
    counters.offers_seen += len(diff.seen)
    # A snapshot newer than every stored sighting (an ordinary refresh) needs no per-offer
    # time check: an unchanged open span is then recognised by its price alone.
    newest = max((v for v in (states.newest_ms, *scope.ms.values()) if v is not None),
                 default=None)
    in_order = newest is None or t_ms >= newest
    rows: Iterable[tuple[tuple, PriceObservation]] = zip(keys, group, strict=True)
    if in_order and len(diff.seen) == len(keys):
        rows = _changed(states, keys, group, diff)
    met: set[tuple] = set()
    get = states.by_key.get
    for key, obs in rows:
        if key in met:
            counters.rejects.append(("duplicate of an earlier row in the same snapshot",
                                     obs.provider, observation_raw(obs), obs.observed_at))
            continue
        met.add(key)
        state = get(key)
        if state is None or state[SPAN_ID] is None:
            diff.new_offers.append((key, obs))
            continue
        # Decimal() takes the stored exact text (SQLite) and a Decimal alike.
        same = (Decimal(state[PRICE]) == obs.price_per_hour
                and state[CURRENCY] == obs.currency)
        if same and state[VALID_TO] is None and in_order:
            continue  # an unchanged open price needs no write: the scope records the sighting
        if not in_order and t_ms < (_newest_ms(states, scope, state) or 0):
            diff.past.append((state, obs))
        elif not same or state[VALID_TO] is not None:
            if not same:
                counters.prices_changed += 1
            diff.repriced.append((key, obs))
    return diff


def _newest_ms(states: OfferStates, scope: Scope, state: OfferState) -> int | None:
    """Where the offer's history ends: an open span's last sighting, a closed span's end.

    An observation before it is history. For a closed span that includes the time between
    its last sighting and its end: the offer was listed then, which does not make it listed
    now (it is not reopened)."""
    if state[VALID_TO] is None:
        return states.last_ms(state, scope)
    return states.ms(state[VALID_TO])


# Stands in for an offer not stored yet: never equal to an observation, so it is kept.
_UNKNOWN: OfferState = ("",) * 6 + (None, -1, "NaN", None, None, None)


def _changed(states: OfferStates, keys: list[tuple], group: list[PriceObservation],
             diff: _Diff) -> Iterable[tuple[tuple, PriceObservation]]:
    """(key, observation) of the rows of an in-order snapshot without duplicates that may
    change something: all but those whose offer's open span has their price and currency.
    Sets `diff.unseen`.

    Most rows of a refresh are unchanged, so they are dropped with C-level iterators (one
    pass each for the lookups and the comparison) rather than one Python step per row."""
    by_key = states.by_key
    found = list(map(by_key.get, keys, itertools.repeat(_UNKNOWN)))
    # The stored offers not listed are those whose state no key found: told apart by the
    # state objects' identity, without hashing and comparing every stored key again.
    found_ids = set(map(id, found))
    diff.unseen = [*itertools.compress(by_key, map(
        operator.not_, map(found_ids.__contains__, map(id, by_key.values()))))]
    if None in map(operator.itemgetter(SPAN_ID), found):  # an offer stored without a span
        return zip(keys, group, strict=True)
    get = operator.itemgetter
    stored = zip(map(Decimal, map(get(PRICE), found)), map(get(CURRENCY), found),
                 map(get(VALID_TO), found), strict=True)
    observed = zip(map(operator.attrgetter("price_per_hour"), group),
                   map(operator.attrgetter("currency"), group), itertools.repeat(None),
                   strict=False)
    return itertools.compress(zip(keys, group, strict=True),
                              map(operator.ne, stored, observed))


def apply_snapshot(
    conn: Connection, source: str, states: OfferStates, scope: Scope,
    group: list[PriceObservation], observed_at: datetime, run_id: int, counters: Counters,
    gpu_of: Callable[[PriceObservation], str], candidates: Sequence[int] | None = None,
) -> None:
    """Store one snapshot (`group`, all at `observed_at`) of the source against `states`.

    `candidates` (from what the last run kept, tracker/store/ingest/kept_state.py): the rows
    of an in-order `group` without repeats that may change something; `states` then holds
    only their offers and the open ones `group` does not list."""
    t_ms = epoch_ms(observed_at)
    diff = _diff(states, scope, group, t_ms, counters, candidates)
    by_key = states.by_key
    listed = set(map(_listed_region, group))  # the regions of diff.seen's keys

    _reprice(conn, states, scope, diff.repriced, observed_at, run_id)
    if diff.new_offers:
        ids = _insert_ids(conn, Offer.__table__, [
            _offer_row(source, obs, gpu_of(obs), observed_at) for _key, obs in diff.new_offers])
        counters.new_offers += len(ids)
        for (key, _obs), offer_id in zip(diff.new_offers, ids, strict=True):
            by_key[key] = (*key, offer_id, None, None, None, None, None)
    _open_first_spans(conn, states, diff.new_offers, observed_at, run_id)

    for state, obs in diff.past:
        _merge_past(conn, state, scope, obs, observed_at, run_id, counters)
        # A merge may have moved the newest span's last_seen or end: keep the state true
        # for the rest of the run and a process that keeps it (backfills are rare).
        row = fetch_rows(conn, "SELECT price_per_hour, currency, last_seen, valid_to "
                         "FROM price_span WHERE id = ?", (state[SPAN_ID],))[0]
        states.replace(by_key[tuple(state[:6])], state[SPAN_ID], *row)

    # Offers this snapshot no longer lists (in the provider/regions it covered) are closed.
    # Every seen offer is in `by_key` by now, so when the sizes agree nothing can be gone.
    gone = [] if len(by_key) == len(diff.seen) else [
        state for state in map(by_key.__getitem__, diff.unseen if diff.unseen is not None
                               else [key for key in by_key if key not in diff.seen])
        if _provider_region(state) in listed
        and state[SPAN_ID] is not None and state[VALID_TO] is None
        and (states.last_ms(state, scope) or t_ms) < t_ms]
    _close(conn, states, scope, gone, observed_at)
    counters.offers_closed += len(gone)
    scope.listed(listed, observed_at)
    states.newest_ms = t_ms if states.newest_ms is None else max(states.newest_ms, t_ms)


def _offer_row(source: str, obs: PriceObservation, gpu_id: str,
               observed_at: datetime) -> dict[str, Any]:
    return {
        "source": source, "provider": obs.provider, "region": obs.region, "zone": obs.zone,
        "instance_type": obs.instance_type, "variant": obs.variant,
        "category": obs.category, "gpu_id": gpu_id, "gpu_raw": obs.gpu_name[:128],
        "gpu_count": float(obs.gpu_count), "fractional": float(obs.gpu_count) % 1 != 0,
        "gpu_memory_gb": obs.gpu_memory_gb, "vcpus": obs.vcpus, "ram_gb": obs.ram_gb,
        "source_url": obs.source_url,
        "attributes": raw_json(dict(obs.attributes)) if obs.attributes else "{}",
        "first_seen": observed_at,
        **offer_network(obs.provider, obs.instance_type, gpu_id, obs.gpu_count,
                        obs.attributes).to_json(),
    }


def _open_first_spans(conn: Connection, states: OfferStates,
                      new_spans: list[tuple[tuple, PriceObservation]], observed_at: datetime,
                      run_id: int) -> None:
    """Open the first span of each new offer (offer key, observation) at `observed_at` and
    point the offer at it; that row stays its newest span for good (see `_reprice`)."""
    if not new_spans:
        return
    by_key = states.by_key
    offer_ids = [by_key[key][OFFER_ID] for key, _obs in new_spans]
    span_ids = _insert_ids(conn, PriceSpan.__table__, [{
        "offer_id": offer_id, "price_per_hour": obs.price_per_hour,
        "currency": obs.currency, "first_seen": observed_at, "last_seen": observed_at,
        "valid_to": None, "run_id": run_id,
    } for offer_id, (_key, obs) in zip(offer_ids, new_spans, strict=True)])
    execute_many(conn, "UPDATE offer SET latest_span_id = ? WHERE id = ?",
                 list(zip(span_ids, offer_ids, strict=True)))
    for (key, obs), span_id in zip(new_spans, span_ids, strict=True):
        states.replace(by_key[key], span_id, obs.price_per_hour, obs.currency, observed_at,
                       None)


def _reprice(conn: Connection, states: OfferStates, scope: Scope,
             changes: list[tuple[tuple, PriceObservation]], when: datetime, run_id: int) -> None:
    """Open a span at `when` for each (offer key, observation) of an offer that has a newest
    span, in that span's own row.

    The row the offer points at (`latest_span_id`) takes the new price, and what it held
    moves to a new row as history, ended at `when` if it was open. The offer row is never
    written, so a refresh dirties fewer pages: about 125 WAL pages per refresh of
    bench/ingest.py instead of 310 when the offer was pointed at a new row."""
    if not changes:
        return
    by_key = states.by_key
    bind = instant_binder(conn)
    when_ms = epoch_ms(when)
    end = bind(when)
    # The history copies: a closed span as it is; an open one ended at `when`, its last
    # sighting raised to its region's last snapshot before `when` (as `_close` does).
    as_is: list[int] = []
    by_sighting: dict[datetime | None, list[int]] = defaultdict(list)
    for key, _obs in changes:
        state = by_key[key]
        if state[VALID_TO] is not None:
            as_is.append(state[SPAN_ID])
            continue
        by_sighting[scope.sighting_before(_provider_region(state), when_ms)].append(
            state[SPAN_ID])
    columns = "offer_id, price_per_hour, currency, first_seen, last_seen, valid_to, run_id"
    copy = f"INSERT INTO price_span ({columns}) SELECT offer_id, price_per_hour, currency, " \
        "first_seen, {last_seen}, {valid_to}, run_id FROM price_span WHERE id IN ?"
    _execute_in(conn, copy.format(last_seen="last_seen", valid_to="valid_to"), as_is)
    greatest = "GREATEST" if conn.dialect.name == "postgresql" else "max"
    for sighting, ids in by_sighting.items():
        if sighting is None:
            _execute_in(conn, copy.format(last_seen="last_seen", valid_to="?"), ids, end)
        else:
            _execute_in(conn, copy.format(last_seen=f"{greatest}(last_seen, ?)", valid_to="?"),
                        ids, bind(sighting), end)
    price = bind_processor_of(conn, PriceSpan.__table__.c.price_per_hour.type)
    execute_many(conn, (
        "UPDATE price_span SET price_per_hour = ?, currency = ?, first_seen = ?, "
        "last_seen = ?, valid_to = NULL, run_id = ? WHERE id = ?"),
        [(obs.price_per_hour if price is None else price(obs.price_per_hour), obs.currency,
          end, end, run_id, by_key[key][SPAN_ID]) for key, obs in changes])
    for key, obs in changes:
        state = by_key[key]
        states.replace(state, state[SPAN_ID], obs.price_per_hour, obs.currency, when, None)


def _close(conn: Connection, states: OfferStates, scope: Scope, spans: list[OfferState],
           when: datetime) -> None:
    """End open spans at `when`, writing down their last sighting (the scope's time)."""
    by_sighting: dict[datetime | None, list[int]] = defaultdict(list)
    when_ms = epoch_ms(when)
    for state in spans:
        assert state[SPAN_ID] is not None  # callers pass open spans only
        region = _provider_region(state)
        sighting = scope.sighting_before(region, when_ms)
        by_sighting[sighting].append(state[SPAN_ID])
        # The state keeps the last_seen written here: a later backfill of this run or of a
        # process keeping the state compares with it (a closed span has no scope time).
        last_seen = state[LAST_SEEN]
        if sighting is not None and (states.ms(last_seen) or -1) < scope.ms[region]:
            last_seen = sighting
        states.replace(state, state[SPAN_ID], state[PRICE], state[CURRENCY], last_seen, when)
    bind = instant_binder(conn)
    for sighting, ids in by_sighting.items():
        if sighting is None:
            _execute_in(conn, "UPDATE price_span SET valid_to = ? WHERE id IN ?", ids,
                        bind(when))
        elif conn.dialect.name == "postgresql":
            _execute_in(conn, "UPDATE price_span SET valid_to = ?, last_seen = "
                        "GREATEST(last_seen, ?) WHERE id IN ?", ids, bind(when), bind(sighting))
        else:
            # One statement per id: SQLite (3.40) runs this UPDATE over a json_each IN-list at
            # half the speed of the plain valid_to one (measured), but not by rowid.
            end, seen = bind(when), bind(sighting)
            execute_many(conn, "UPDATE price_span SET valid_to = ?, last_seen = "
                         "max(last_seen, ?) WHERE id = ?", [(end, seen, i) for i in ids])


def _insert_ids(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> list[int]:
    """Insert rows (all with the same keys) and return their ids in order.

    On SQLite the write transaction holds the database lock (BEGIN IMMEDIATE), so ids can be
    assigned here and the rows inserted in one DBAPI executemany, each column's values
    converted by its own column type (the same stored form as any other insert); ordered
    RETURNING would cost one statement per row. PostgreSQL batches ordered RETURNING itself.
    """
    if conn.dialect.name != "sqlite":
        return list(conn.execute(
            table.insert().returning(table.c.id, sort_by_parameter_order=True), rows).scalars())
    start = (fetch_value(conn, f"SELECT max(id) FROM {table.name}") or 0) + 1
    ids = list(range(start, start + len(rows)))
    names = list(rows[0])
    columns: list[list[Any]] = [ids]
    for name in names:
        values = [row[name] for row in rows]
        process = bind_processor_of(conn, table.c[name].type)
        if process is not None and isinstance(table.c[name].type, UTCDateTime):
            # Equal instants have one stored form, and a snapshot's rows share theirs.
            stored = {value: process(value) for value in set(values)}
            columns.append([stored[value] for value in values])
        else:
            columns.append(values if process is None else list(map(process, values)))
    for column in table.c:  # the columns' own defaults, as an ORM/Core insert would add
        if column.name not in names and column.name != "id" and column.default is not None:
            names.append(column.name)
            columns.append([column.default.arg] * len(rows))
    execute_many(conn, f"INSERT INTO {table.name} (id, {', '.join(names)}) "
                 f"VALUES ({', '.join('?' * len(columns))})", list(zip(*columns, strict=True)))
    return ids


def _execute_in(conn: Connection, sql: str, ids: list[int], *params: Any) -> None:
    """Run a statement ending in `WHERE id IN ?` (its other placeholders bound to `params`)
    for many ids as one statement with one parameter (a JSON array on SQLite, an array on
    PostgreSQL), not one bound parameter per id."""
    if not ids:
        return
    if conn.dialect.name == "postgresql":
        execute(conn, sql.replace("IN ?", "= ANY(?)"), (*params, ids))
    else:
        execute(conn, sql.replace("IN ?", "IN (SELECT value FROM json_each(?))"),
                (*params, json.dumps(ids)))


def _merge_past(conn: Connection, state: OfferState, scope: Scope,
                obs: PriceObservation, observed_at: datetime, run_id: int,
                counters: Counters) -> None:
    """Place an observation older than the offer's newest one into its history."""
    table = PriceSpan.__table__
    spans = conn.execute(
        table.select().where(table.c.offer_id == state[OFFER_ID]).order_by(table.c.first_seen)
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
        listed = scope.at.get(_provider_region(state))
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
                obs.provider, observation_raw(obs), observed_at))
            return
        conn.execute(table.insert().values(
            offer_id=state[OFFER_ID], price_per_hour=price_dec, currency=obs.currency,
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
        offer_id=state[OFFER_ID], price_per_hour=price_dec, currency=obs.currency,
        first_seen=observed_at, last_seen=observed_at,
        valid_to=following["first_seen"] if following is not None else None, run_id=run_id))
    if following is not None and spans and following["id"] != spans[0]["id"]:
        counters.prices_changed += 1
