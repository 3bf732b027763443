"""How old the catalogs behind the catalog sources are (gpuhunt, SkyPilot).

A catalog source republishes providers' prices: gpuhunt hourly (a dated version per run),
SkyPilot's catalog repository whenever its 7-hourly fetch finds a change (a commit). Each
catalog version a source read is stored with its publication time (`catalog_version`). For
every (source, provider) the newest version read is compared with the source's allowance
(`CATALOG_MAX_AGE_HOURS` on the source class): older means the publisher stopped, and every
price of that catalog is as old as the version. A version is only reported while it is what
the source last read: a later successful run of the source that read no version (a plain
SkyPilot refresh of the hosted master) makes the age unknown, and the row is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

CATALOG_JSON_KEYS = ("source", "provider", "version", "published_at", "read_at", "age_hours",
                     "max_age_hours", "stale")


@dataclass(frozen=True, slots=True)
class CatalogAge:
    source: str
    provider: str
    version: str
    published_at: datetime | None
    read_at: datetime  # the last run that read this version
    age_hours: float | None  # as_of - published_at
    max_age_hours: float | None  # the source's allowance (None: not a dated catalog source)
    stale: bool

    def to_json(self) -> dict[str, Any]:
        from tracker.core.serialization import to_jsonable

        return {key: to_jsonable(getattr(self, key)) for key in CATALOG_JSON_KEYS}


def max_age_hours(source: str) -> float | None:
    from scrapers import SOURCES, load_source

    if source not in SOURCES:
        return None
    value = getattr(load_source(source), "CATALOG_MAX_AGE_HOURS", None)
    return float(value) if value is not None else None


def catalog_ages(db: Any, as_of: datetime | None = None) -> list[CatalogAge]:
    """The newest catalog version each (source, provider) read by `as_of`, with its age."""
    from tracker.store.catalogs import catalog_versions_read

    as_of = as_of or datetime.now(UTC)
    rows, ok_runs = catalog_versions_read(db, as_of)
    versioned_runs = {row.run_id for row in rows}
    last_unversioned: dict[str, datetime] = {}
    for run in ok_runs:
        if run.id not in versioned_runs and run.started_at > last_unversioned.get(
                run.source, datetime.min.replace(tzinfo=UTC)):
            last_unversioned[run.source] = run.started_at
    newest: dict[tuple[str, str], Any] = {}
    for row in rows:
        key = (row.source, row.provider)
        best = newest.get(key)
        if best is None or (row.last_seen, row.published_at or row.last_seen) > (
                best.last_seen, best.published_at or best.last_seen):
            newest[key] = row
    result = []
    for (source, provider), row in sorted(newest.items()):
        unversioned = last_unversioned.get(source)
        if unversioned is not None and unversioned > row.last_seen:
            continue  # the source's newest run read an undated catalog: age unknown
        allowance = max_age_hours(source)
        age = (as_of - row.published_at).total_seconds() / 3600 if row.published_at else None
        result.append(CatalogAge(
            source=source, provider=provider, version=row.version,
            published_at=row.published_at, read_at=row.last_seen,
            age_hours=round(age, 2) if age is not None else None, max_age_hours=allowance,
            stale=bool(age is not None and allowance is not None and age > allowance)))
    return result
