"""Ingest's side records: rejected rows, catalog versions and spot-interruption bands.

Each is kept once per identity and moved forward when read again (a reject counts up, a
catalog version or an unchanged band moves `last_seen`), so refreshing never piles up rows.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Connection

from scrapers.base import CatalogVersion, InterruptionFact
from tracker.store.ingest.checks import Reject, cap_raw, capped_reason, raw_json, storable_text
from tracker.store.models import CatalogVersionRow, RejectedRow, SpotInterruption


def reject_key(provider: str, raw: Any) -> str:
    """What identifies a rejected row across runs: the offer identity when the raw row is an
    observation, else a digest of the raw payload (same payload, same row)."""
    if isinstance(raw, dict) and "instance_type" in raw and "category" in raw:
        parts = [provider, *(str(raw.get(k) or "") for k in
                             ("region", "zone", "instance_type", "variant", "category"))]
        return storable_text("|".join(parts)[:255])
    return "sha1:" + hashlib.sha1(raw_json(raw).encode("utf-8")).hexdigest()


def store_rejects(conn: Connection, source: str,
                   rejects: list[Reject], run_id: int,
                   started_at: datetime) -> None:
    """Rejects are kept once per (source, row key, reason): a row rejected again on the next
    refresh moves `last_seen` and counts up instead of adding a row."""
    if not rejects:
        return
    from tracker.core.secrets import scrub

    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for reason, provider, raw, when in rejects:
        when = when if when is not None and when.tzinfo else started_at
        # A rejected row keeps the provider's raw payload, which could echo a key.
        # Capped, then scrubbed: a hostile row can neither store megabytes of reason or
        # payload nor make the scrubber read them.
        key = (reject_key(provider or "", raw), scrub(capped_reason(reason)))
        row = merged.get(key)
        if row is None:
            merged[key] = {"run_id": run_id, "source": source, "provider": provider or "",
                           "row_key": key[0], "reason": key[1],
                           "raw": scrub(cap_raw(raw_json(raw))),
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


def store_catalog_versions(conn: Connection, source: str, versions: list[CatalogVersion],
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


def store_facts(conn: Connection, source: str, facts: list[InterruptionFact],
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
