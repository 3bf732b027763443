"""The embedded default: dated price snapshots shipped in `data/prices/YYYY-MM-DD.csv`.

Each file is one complete snapshot of real list prices typed from providers' price pages and
catalogs (see `data/prices/SOURCES.md` for the format and where every price comes from). The
source reads them from the installed package, so a fresh install has prices without network;
`url` may instead name a local directory (or one snapshot file) in the same format.

Every row becomes a `PriceObservation` dated at the snapshot's day, 00:00 UTC, never at
`fetched_at`: the date is when the price was true, not when this process happened to read it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapers.base import CATEGORIES, PriceObservation, Record, Rejected, Source
from tracker.core.data_files import bundled_dir
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.money import check_currency, to_decimal

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from scrapers.http import HttpClient

COLUMNS = (
    "provider", "region", "zone", "instance_type", "gpu_name", "gpu_count", "gpu_memory_gb",
    "vcpus", "ram_gb", "category", "price_per_hour", "currency", "source_url",
)
REQUIRED = ("provider", "instance_type", "gpu_name", "gpu_count", "category", "price_per_hour",
            "currency")
SNAPSHOT_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})\.csv$")


class BundledSource(Source):
    name = "bundled"
    description = "Dated snapshots of real list prices shipped with the package (no network)"
    DEFAULTS = {"url": ""}
    SECRET_ENV = None

    def fetch(self, client: HttpClient | None = None,
              fetched_at: datetime | None = None) -> Iterator[Record]:
        """Yield every row of every snapshot, oldest snapshot first; no network is used."""
        for day, snapshot in snapshot_files(self.settings.get("url") or ""):
            if day is None:
                yield Rejected(reason=f"{snapshot.name}: file name is not YYYY-MM-DD.csv",
                               raw={"file": snapshot.name})
                continue
            try:
                text = snapshot.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError) as exc:
                raise SourceError(f"bundled: cannot read {snapshot.name}: {exc}") from exc
            yield from parse_snapshot(text, day, snapshot.name)


def snapshot_files(location: str) -> list[tuple[datetime | None, Traversable]]:
    """The snapshot files at `location` ("" = the package's `data/prices`), oldest first.

    A `.csv` whose name is not a date comes back with `None` so the caller can report it;
    other files (SOURCES.md) are not snapshots and are skipped.
    """
    root = _root(location)
    if root.is_file():
        candidates = [root]
    elif root.is_dir():
        candidates = [item for item in root.iterdir() if item.is_file()]
    else:
        raise SourceError(f"bundled: {_describe(location)} is not a directory of snapshots")
    found: list[tuple[datetime | None, Traversable]] = []
    for item in candidates:
        if not item.name.lower().endswith(".csv"):
            continue
        found.append((_snapshot_day(item.name), item))
    if not found:
        raise SourceError(f"bundled: no snapshot files (YYYY-MM-DD.csv) in {_describe(location)}")
    # Dated files oldest first (ingest applies snapshots in order); misnamed ones last.
    found.sort(key=lambda pair: (pair[0] is None, pair[0] or datetime.min.replace(tzinfo=UTC),
                                 pair[1].name))
    return found


def _root(location: str) -> Traversable:
    if not location:
        return bundled_dir("data") / "prices"
    if re.match(r"^[a-z][a-z0-9+.-]*://", location, re.IGNORECASE) \
            and not location.lower().startswith("file://"):
        raise SourceError(
            f"bundled: url must be a local directory of snapshot files, got {location!r}")
    path = Path(location.removeprefix("file://")).expanduser()
    if not path.exists():
        raise SourceError(f"bundled: {path} does not exist")
    return path


def _describe(location: str) -> str:
    return location or "the package's data/prices"


def _snapshot_day(file_name: str) -> datetime | None:
    match = SNAPSHOT_NAME.match(file_name)
    if match is None:
        return None
    try:
        return datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)
    except ValueError:  # 2026-02-30.csv
        return None


def parse_snapshot(text: str, day: datetime, file_name: str) -> Iterator[Record]:
    """Parse one snapshot file's text; every row is an observation at `day` or a `Rejected`."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [column for column in REQUIRED if column not in header]
    if missing:
        yield Rejected(reason=f"{file_name} line 1: missing column(s) {', '.join(missing)}",
                       raw={"file": file_name, "header": list(header)})
        return
    seen: dict[tuple[str, ...], int] = {}
    for row in reader:
        line = reader.line_num
        raw = {"file": file_name, "line": line, **{k: v for k, v in row.items() if k}}
        try:
            obs = _observation(row, day)
        except InvalidInput as exc:
            yield Rejected(reason=f"{file_name} line {line}: {exc}", raw=raw,
                           provider=(row.get("provider") or "").strip())
            continue
        key = (obs.provider, obs.region, obs.zone, obs.instance_type, obs.category)
        if key in seen:
            yield Rejected(reason=f"{file_name} line {line}: duplicate of line {seen[key]}",
                           raw=raw, provider=obs.provider)
            continue
        seen[key] = line
        yield obs


def _observation(row: dict[str, Any], day: datetime) -> PriceObservation:
    if None in row:  # DictReader puts surplus cells under the None key
        raise InvalidInput("more cells than columns")
    cells = {column: (row.get(column) or "").strip() for column in COLUMNS}
    for column in REQUIRED:
        if not cells[column]:
            raise InvalidInput(f"empty {column}")
    category = cells["category"]
    if category not in CATEGORIES:
        raise InvalidInput(f"unknown category {category!r} (known: {', '.join(CATEGORIES)})")
    price = to_decimal(cells["price_per_hour"], what="price_per_hour")
    if price <= 0:
        raise InvalidInput(f"price_per_hour must be positive, got {cells['price_per_hour']!r}")
    gpu_count = _number(cells["gpu_count"], "gpu_count")
    if gpu_count is None or gpu_count <= 0:
        raise InvalidInput(f"gpu_count must be positive, got {cells['gpu_count']!r}")
    source_url = cells["source_url"] or None
    if source_url is not None and not source_url.startswith(("https://", "http://")):
        raise InvalidInput(f"source_url is not an http(s) URL: {source_url!r}")
    return PriceObservation(
        provider=cells["provider"].lower(),
        instance_type=cells["instance_type"],
        gpu_name=cells["gpu_name"],
        gpu_count=gpu_count,
        category=category,
        price_per_hour=price,
        currency=check_currency(cells["currency"]),
        observed_at=day,
        region=cells["region"],
        zone=cells["zone"],
        gpu_memory_gb=_number(cells["gpu_memory_gb"], "gpu_memory_gb"),
        vcpus=_number(cells["vcpus"], "vcpus"),
        ram_gb=_number(cells["ram_gb"], "ram_gb"),
        source_url=source_url,
    )


def _number(text: str, column: str) -> float | None:
    """Hardware sizes are physics, so floats are fine here (never for prices)."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InvalidInput(f"{column} is not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise InvalidInput(f"{column} must be a non-negative number, got {text!r}")
    return value
