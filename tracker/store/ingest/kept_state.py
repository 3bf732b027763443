"""What a source's last run left of its offers, kept in the store for the next run to compare
with (`source_state`: two rows per source).

A cron-started refresh is a new process with no offer state. Without this it reads every
offer's newest span back (a join of each offer to a scattered span row) and looks each
observation up in a dict of identity tuples, to find the few percent whose price moved: for
the 9,648-offer source of bench/market_scale.py's store that was ~37 ms of reading and ~42 ms
of comparing, half of a refresh. What is kept instead, for every offer of the source as the
last run left it, each as one column of text:

- the `offers` row: its identity and its id, in the order of that run's listing (the offers
  it did not list after those); rewritten only when that changes (a new offer, a new order);
- the `prices` row, rewritten by every run: its newest span's price as exact text, its
  currency and whether that span is open.

The next run compares its own listing with these columns at C speed (one string comparison
of the identities when the source lists its offers in the same order as last time, else one
dict), reads back only the offers that may change something (a price or currency that
differs, a closed span listed again, a new offer, an open offer no longer listed) and runs
the ordinary diff on those alone.

The rows are trusted only by the run right after the one that wrote the `prices` row: its
`run_id` must be the source's newest run, checked under the write lock, so any run in
between (failed, or of a process that keeps its state in memory and writes none) makes them
stale, and the next run reads everything back as before and writes them anew. Ingest is the
only writer of offers and spans; a migration that rewrote them would have to delete these.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import Connection

from scrapers.base import PriceObservation
from tracker.store.ingest.checks import IDENTITY_SEPARATOR, offer_identity
from tracker.store.ingest.spans import CURRENCY, OFFER_ID, PRICE, SPAN_ID, VALID_TO, OfferState
from tracker.store.ingest.sql import execute, fetch_rows

__all__ = ["KeptState", "Listing", "after_run", "compare", "decode", "forget", "from_states",
           "read", "save"]

FORMAT = "1"
# Separators no stored value holds (checked by counting them when a state is written or
# read: a value holding one would shift everything after it, and such a state is not kept).
_COLUMN = "\x1e"  # between the columns of a row
_ROW = "\x1d"  # between the offers of the identities column
# Between an offer's identity fields (its identity key: checks.IDENTITY_SEPARATOR), and
# between the values of the prices and currencies columns.
_VALUE = IDENTITY_SEPARATOR
_IDENTITY = 6  # provider, region, zone, instance_type, variant, category
_OFFERS, _PRICES = "offers", "prices"  # source_state.part

_price = operator.attrgetter("price_per_hour")
_currency = operator.attrgetter("currency")


@dataclass(frozen=True)
class KeptState:
    """Every offer of a source as its last run left it, in the order of that run's listing
    (its offers no longer listed after those)."""

    newest_ms: int | None  # no earlier than any sighting or end of its offers' newest spans
    identities: str  # per offer its identity key (fields joined by _VALUE); _ROW between
    offer_ids: str  # per offer its id as `id_width` digits (zero-padded): read by position
    id_width: int
    prices: list[str]  # the newest span's price as exact text ("" for an offer without one)
    currencies: list[str]
    open: str  # "1" per offer whose newest span is open, else "0"
    # The run that wrote the `offers` row this state's identities and ids are in; None for
    # a state whose `offers` row is still to be written.
    offers_run: int | None = None

    def __len__(self) -> int:
        return len(self.prices)

    def keys(self) -> list[str]:
        """Each offer's identity key."""
        return self.identities.split(_ROW)

    def offer_id(self, row: int) -> int:
        return int(self.offer_ids[row * self.id_width:(row + 1) * self.id_width])

    def offer_id_list(self) -> list[str]:
        w = self.id_width
        return [self.offer_ids[i:i + w] for i in range(0, len(self.offer_ids), w)]


@dataclass(frozen=True)
class Listing:
    """An in-order snapshot of the source compared with the stored `KeptState`."""

    keys: list[str]  # each observation's identity key
    identities: str  # the keys as KeptState.identities
    prices: list[str]
    currencies: list[str]
    positions: Sequence[int | None]  # each observation's stored row (None: a new offer)
    candidates: list[int]  # the observations that may change something
    unlisted: list[int]  # the stored rows the listing does not hold
    prefix: bool  # the listed offers are the stored rows 0..n-1 in order

    def offer_ids_to_read(self, stored: KeptState) -> list[int]:
        """The offers whose state the diff needs: the candidates' and every open unlisted
        one's (an offer no longer listed may be closed)."""
        rows = [p for p in map(self.positions.__getitem__, self.candidates) if p is not None]
        rows += [p for p in self.unlisted if stored.open[p] == "1"]
        return list(map(stored.offer_id, rows))


def read(conn: Connection, source: str, newest_run: int | None) -> KeptState | None:
    """What the source's last run kept, if that run is the source's newest (`newest_run`)."""
    if newest_run is None:
        return None
    rows = dict((part, (run_id, body)) for part, run_id, body in fetch_rows(
        conn, "SELECT part, run_id, body FROM source_state WHERE source = ?", (source,)))
    if _OFFERS not in rows or _PRICES not in rows or rows[_PRICES][0] != newest_run:
        return None
    return decode(rows[_OFFERS][1], rows[_PRICES][1], rows[_OFFERS][0])


def save(conn: Connection, source: str, run_id: int, kept: KeptState | None) -> None:
    """Keep `kept` as what run `run_id` left (None, or one that cannot be written: none).
    Its `offers` row is written only if it changed (`kept.offers_run` None)."""
    offers_run = run_id if kept is None or kept.offers_run is None else kept.offers_run
    bodies = None if kept is None else _encode(kept, offers_run)
    if bodies is None:
        forget(conn, source)
        return
    upsert = ("INSERT INTO source_state (source, part, run_id, body) VALUES (?, ?, ?, ?) "
              "ON CONFLICT (source, part) DO UPDATE SET run_id = excluded.run_id, "
              "body = excluded.body")
    offers, prices = bodies
    if offers is not None:
        execute(conn, upsert, (source, _OFFERS, run_id, offers))
    execute(conn, upsert, (source, _PRICES, run_id, prices))


def forget(conn: Connection, source: str) -> None:
    execute(conn, "DELETE FROM source_state WHERE source = ?", (source,))


def _encode(kept: KeptState, offers_run: int) -> tuple[str | None, str] | None:
    """The bodies of the `offers` row (None: unchanged) and the `prices` row, or None when a
    value holds a separator."""
    n = len(kept)
    if n == 0 or not (len(kept.currencies) == len(kept.open) == n):
        return None
    offers = None
    if kept.offers_run is None:
        offers = _COLUMN.join([FORMAT, str(n), str(kept.id_width), kept.identities,
                               kept.offer_ids])
        if not _offers_fit(offers.split(_COLUMN), n):
            return None
    prices = _COLUMN.join([
        FORMAT, str(n), str(offers_run), "" if kept.newest_ms is None else str(kept.newest_ms),
        _VALUE.join(kept.prices), _VALUE.join(kept.currencies), kept.open])
    if prices.count(_COLUMN) != 6 or prices.count(_VALUE) != 2 * (n - 1) or _ROW in prices:
        return None
    return offers, prices


def _offers_fit(columns: list[str], n: int) -> bool:
    """Whether the `offers` row's columns hold n offers, each separator where the format
    puts it (no value holds one)."""
    if len(columns) != 5 or not _digits(columns[2]):
        return False
    identities, ids, width = columns[3], columns[4], int(columns[2])
    return (identities.count(_ROW) == n - 1 and identities.count(_VALUE) == (_IDENTITY - 1) * n
            and width > 0 and len(ids) == width * n and _digits(ids))


def _digits(text: str) -> bool:
    """ASCII digits only (str.isdigit alone also takes ² and other digits int() refuses)."""
    return text.isascii() and text.isdigit()


def decode(offers: str, prices: str, offers_run: int) -> KeptState | None:
    """The state `save` wrote as its two rows' bodies (None for another format, rows of two
    runs that do not belong together, or a damaged body)."""
    o, p = offers.split(_COLUMN), prices.split(_COLUMN)
    if (len(o) != 5 or len(p) != 7 or o[0] != FORMAT or p[0] != FORMAT or o[1] != p[1]
            or not _digits(o[1]) or p[2] != str(offers_run)
            or not (p[3] == "" or _digits(p[3].removeprefix("-")))):
        return None
    n = int(o[1])
    if n == 0 or not _offers_fit(o, n):
        return None
    kept = KeptState(
        newest_ms=int(p[3]) if p[3] else None, identities=o[3],
        offer_ids=o[4], id_width=int(o[2]), prices=p[4].split(_VALUE),
        currencies=p[5].split(_VALUE), open=p[6], offers_run=offers_run)
    if (len(kept.prices) != n or len(kept.currencies) != n or len(kept.open) != n
            or kept.open.strip("01")):
        return None
    return kept


def compare(stored: KeptState, group: list[PriceObservation],
            keys: list[str] | None = None) -> Listing | None:
    """`group` (one snapshot of the source, newer than everything stored) against `stored`,
    or None when it cannot be compared so (a repeated offer, an identity field that is not
    text or holds a separator): the caller then diffs it as before. `keys`: the group's
    identity keys if the checks made them (SortedRecords.keys)."""
    m = len(group)
    if m == 0:
        return None
    if keys is None:
        try:
            keys = list(map(_VALUE.join, map(offer_identity, group)))
        except TypeError:  # a field that is not text
            return None
    identities = _ROW.join(keys)
    if (identities.count(_VALUE) != (_IDENTITY - 1) * m or identities.count(_ROW) != m - 1
            or _COLUMN in identities):
        return None
    n = len(stored)
    prices = list(map(str, map(_price, group)))
    currencies = list(map(_currency, group))
    positions: Sequence[int | None]
    if stored.identities == identities or (
            stored.identities.startswith(identities)
            and stored.identities[len(identities)] == _ROW):
        # The source listed the offers of its last listing in the same order (the usual
        # case): one comparison of two strings stands for ten thousand lookups.
        positions, unlisted, prefix = range(m), list(range(m, n)), True
        if stored.currencies[:m] == currencies and stored.open.startswith("1" * m):
            # The usual refresh: the same currencies, every listed offer open; only the
            # prices can differ.
            candidates = list(itertools.compress(range(m), map(
                operator.ne, stored.prices[:m], prices)))
            return Listing(keys=keys, identities=identities, prices=prices,
                           currencies=currencies, positions=positions, candidates=candidates,
                           unlisted=unlisted, prefix=prefix)
        before: Any = zip(stored.prices[:m], stored.currencies[:m], stored.open[:m],
                          strict=True)
    else:
        stored_rows = dict(zip(stored.keys(), range(n), strict=True))
        positions = list(map(stored_rows.get, keys))
        if len(set(keys)) != m:
            return None  # a repeated offer: the ordinary diff rejects the repeats
        listed = set(positions)
        unlisted = [p for p in range(n) if p not in listed]
        prefix = False
        rows = [n if p is None else p for p in positions]  # n: the "no offer" row
        before = zip(map([*stored.prices, ""].__getitem__, rows),
                     map([*stored.currencies, ""].__getitem__, rows),
                     map((stored.open + "0").__getitem__, rows), strict=True)
    # An observation may change something unless its offer's newest span is open with the
    # same price text and currency (equal text is an equal Decimal; equal Decimals written
    # differently are left to the exact diff, which then writes nothing).
    now = zip(prices, currencies, itertools.repeat("1"))
    candidates = list(itertools.compress(range(m), map(operator.ne, before, now)))
    return Listing(keys=keys, identities=identities, prices=prices, currencies=currencies,
                   positions=positions, candidates=candidates, unlisted=unlisted,
                   prefix=prefix)


def after_run(stored: KeptState, listing: Listing, group: list[PriceObservation],
              by_key: dict[tuple, OfferState], newest_ms: int | None) -> KeptState:
    """The state a run of `listing` leaves: the listed offers open at their observed prices,
    the unlisted ones as they were but for those the run closed. `by_key` holds the states
    the run read back and wrote (at least every candidate's and open unlisted offer's)."""
    m = len(group)
    unlisted = listing.unlisted
    opened = []
    stored_keys = ([""] * m + stored.identities[len(listing.identities) + 1:].split(_ROW)
                   if listing.prefix else stored.keys()) if unlisted else []
    for p in unlisted:
        state = by_key.get(tuple(stored_keys[p].split(_VALUE))) if stored.open[p] == "1" \
            else None
        opened.append("0" if state is not None and state[VALID_TO] is not None
                      else stored.open[p])
    kept = KeptState(
        newest_ms, stored.identities, stored.offer_ids, stored.id_width,
        listing.prices + [stored.prices[p] for p in unlisted],
        listing.currencies + [stored.currencies[p] for p in unlisted],
        "1" * m + "".join(opened), stored.offers_run)
    if listing.prefix:
        return kept  # the same offers in the same order: the `offers` row stands
    ids = stored.offer_id_list()
    listed_ids = ["" if p is None else ids[p] for p in listing.positions]
    for i in listing.candidates:  # new offers got their ids in this run
        listed_ids[i] = str(by_key[offer_identity(group[i])][OFFER_ID])
    return replace(kept, offers_run=None, **_offers_columns(
        [*listing.keys, *map(stored_keys.__getitem__, unlisted)],
        [*listed_ids, *map(ids.__getitem__, unlisted)]))


def _offers_columns(keys: list[str], offer_ids: list[Any]) -> dict[str, Any]:
    ids = list(map(str, offer_ids))
    width = max(map(len, ids))
    return {"identities": _ROW.join(keys), "id_width": width,
            "offer_ids": "".join([i.zfill(width) for i in ids])}


def from_states(by_key: dict[tuple, OfferState], newest_ms: int | None) -> KeptState | None:
    """The kept form of every offer's state in `by_key` (the whole source, as a run that read
    it all back leaves it): the open offers in `by_key`'s order, then the others (a listing
    lists the open ones). A next run that lists them in that order compares by one string
    comparison, any other through a dict once, keeping its own order from then on. None if
    an identity field is not text."""
    states = list(by_key.values())
    opened = [s[SPAN_ID] is not None and s[VALID_TO] is None for s in states]
    keys = [*itertools.compress(by_key, opened),
            *itertools.compress(by_key, map(operator.not_, opened))]
    states = [*itertools.compress(states, opened),
              *itertools.compress(states, map(operator.not_, opened))]
    try:
        identities = list(map(_VALUE.join, keys))
    except TypeError:
        return None
    return KeptState(
        newest_ms=newest_ms,
        prices=["" if s[SPAN_ID] is None else str(s[PRICE]) for s in states],
        currencies=["" if s[CURRENCY] is None else s[CURRENCY] for s in states],
        open="1" * sum(opened) + "0" * (len(opened) - sum(opened)),
        **_offers_columns(identities, [s[OFFER_ID] for s in states]))
