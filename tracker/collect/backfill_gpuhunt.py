"""Import past gpuhunt catalogs as dated price history (the shared parts:
tracker/collect/backfill.py).

Every hourly catalog stays on S3 at `{url}/{provider}/{version}/catalog.zip`. Versions are
either given (`versions=[...]`, CLI `--version`) or listed with S3 ListObjectsV2
(`GET {bucket}/?list-type=2&prefix=v3/{provider}/`, XML, continuation tokens), which works
only if the bucket allows anonymous listing (not documented by dstack; when it does not, the
error says to pass versions explicitly). A listed version's instant is the object's
`LastModified`; an explicit version's instant is the CSV's timestamp inside the zip (written
by the publishing job, in UTC), or the version's date at 00:00 UTC.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tracker.collect.backfill import (
    SAFE_VERSION,
    CatalogVersion,
    Clock,
    Progress,
    import_versions,
    in_range,
    utcnow,
)
from tracker.core.errors import InvalidInput, SourceError

if TYPE_CHECKING:
    from scrapers.http import HttpClient
    from tracker.store.db import Database
    from tracker.store.ingest import RunSummary

S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


_GPUHUNT_VERSION = re.compile(r"^(?P<date>\d{8})-(?P<run>\d+)$")


def _gpuhunt_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    from scrapers.gpuhunt import GpuhuntSource

    merged = dict(GpuhuntSource.DEFAULTS)
    merged.update(settings or {})
    return merged


def gpuhunt_version_date(version: str) -> datetime | None:
    match = _GPUHUNT_VERSION.match(version)
    if match is None:
        return None
    try:
        return datetime.strptime(match["date"], "%Y%m%d").replace(tzinfo=UTC)
    except ValueError:
        return None


def gpuhunt_versions(provider: str, versions: Iterable[str],
                     settings: Mapping[str, Any] | None = None) -> list[CatalogVersion]:
    """CatalogVersions for explicitly named gpuhunt versions (`20250601-42`), oldest first."""
    from scrapers.gpuhunt import zip_url

    root = _gpuhunt_settings(settings)["url"]
    out: list[CatalogVersion] = []
    for raw in versions:
        version = raw.strip()
        if not SAFE_VERSION.match(version) or version == "latest":
            raise InvalidInput(f"not a gpuhunt catalog version: {raw!r} (like 20250601-42)")
        out.append(CatalogVersion(cloud=provider, ref=version, observed_at=None,
                                  url=zip_url(root, provider, version)))
    return sorted(out, key=_gpuhunt_order)


def _gpuhunt_order(version: CatalogVersion) -> tuple[Any, ...]:
    match = _GPUHUNT_VERSION.match(version.ref)
    if match is None:
        return (1, version.ref, 0)
    return (0, match["date"], int(match["run"]))


def list_gpuhunt_versions(
    client: HttpClient, provider: str, since: datetime | None, until: datetime | None = None,
    settings: Mapping[str, Any] | None = None, *, daily: bool = False, max_pages: int = 100,
) -> list[CatalogVersion]:
    """The provider's catalog versions on S3 (ListObjectsV2), filtered by LastModified.

    `daily` keeps the last version of each UTC day (the catalog is republished hourly).
    """
    from scrapers.gpuhunt import zip_url

    root = _gpuhunt_settings(settings)["url"].rstrip("/")
    parts = urlsplit(root)
    bucket = f"{parts.scheme}://{parts.netloc}/"
    prefix = f"{parts.path.strip('/')}/{provider}/".lstrip("/")
    params: dict[str, Any] = {"list-type": "2", "prefix": prefix}
    if since is not None:
        # Keys sort by version, which starts with the publishing date: skip older days.
        params["start-after"] = f"{prefix}{(since - timedelta(days=1)):%Y%m%d}"
    found: dict[str, CatalogVersion] = {}
    tokens: set[str] = set()
    for _page in range(max_pages):
        try:
            body = client.get_bytes(bucket, params=params)
        except SourceError as exc:
            if re.search(r": HTTP 403\b", str(exc)):
                raise SourceError(
                    f"{bucket}: listing the gpuhunt bucket is not allowed (HTTP 403); "
                    "name the versions to import with --version") from None
            raise
        keys, token = _parse_list_objects(body, bucket)
        for key, modified in keys:
            match = re.fullmatch(re.escape(prefix) + r"([^/]+)/catalog\.zip", key)
            if match is None or match[1] == "latest":
                continue
            if not in_range(modified, since, until):
                continue
            version = match[1]
            found[version] = CatalogVersion(cloud=provider, ref=version, observed_at=modified,
                                            url=zip_url(root, provider, version))
        if token is None:
            break
        if token in tokens:
            raise SourceError(f"{bucket}: the continuation token repeats")
        tokens.add(token)
        params = {"list-type": "2", "prefix": prefix, "continuation-token": token}
    else:
        raise SourceError(f"{bucket}: more than {max_pages} pages of catalog versions; "
                          "narrow --since/--until")
    versions = sorted(found.values(), key=lambda v: (v.observed_at, _gpuhunt_order(v)))
    if daily:
        last_of_day: dict[Any, CatalogVersion] = {}
        for version in versions:
            assert version.observed_at is not None
            last_of_day[version.observed_at.date()] = version
        versions = list(last_of_day.values())
    return versions


def _parse_list_objects(body: bytes, where: str) -> tuple[list[tuple[str, datetime]], str | None]:
    """(key, LastModified) pairs and the next continuation token of a ListObjectsV2 page."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise SourceError(f"{where}: the bucket listing is not valid XML ({exc})") from None
    ns = S3_NS if root.tag.startswith(S3_NS) else ""
    if root.tag != f"{ns}ListBucketResult":
        raise SourceError(f"{where}: not an S3 ListBucketResult (got <{root.tag}>)")
    keys: list[tuple[str, datetime]] = []
    for item in root.findall(f"{ns}Contents"):
        key = item.findtext(f"{ns}Key")
        modified = item.findtext(f"{ns}LastModified")
        if not key or not modified:
            continue
        try:
            when = datetime.fromisoformat(modified.replace("Z", "+00:00")).astimezone(UTC)
        except ValueError:
            raise SourceError(f"{where}: bad LastModified {modified!r} for {key}") from None
        keys.append((key, when))
    truncated = (root.findtext(f"{ns}IsTruncated") or "").strip().lower() == "true"
    token = root.findtext(f"{ns}NextContinuationToken") if truncated else None
    if truncated and not token:
        raise SourceError(f"{where}: listing is truncated but has no NextContinuationToken")
    return keys, token


def gpuhunt_observed_at(version: CatalogVersion, zip_stamp: datetime | None) -> datetime:
    """A version's instant: listed LastModified, else the zip's CSV time, else its date."""
    if version.observed_at is not None:
        return version.observed_at
    dated = gpuhunt_version_date(version.ref)
    if zip_stamp is not None and zip_stamp.year >= 2020:
        stamp = zip_stamp.replace(tzinfo=UTC)
        if dated is None or abs(stamp - dated) <= timedelta(days=2):
            return stamp
    if dated is not None:
        return dated
    raise SourceError(f"{version.url}: cannot date this catalog version (no usable time in "
                      "the zip and the version is not YYYYMMDD-N)")


def backfill_gpuhunt(
    db: Database, client: HttpClient, provider: str, since: datetime | None = None,
    until: datetime | None = None, *, settings: Mapping[str, Any] | None = None,
    versions: Sequence[str] | None = None, daily: bool = False,
    on_progress: Progress | None = None, clock: Clock = utcnow,
) -> list[RunSummary]:
    """Import past gpuhunt catalog versions of one provider; one run per version."""
    from scrapers.base import CatalogVersion as VersionRead
    from scrapers.gpuhunt import open_catalog_zip, parse_catalog_csv, provider_id
    from tracker.store.ingest import imported_versions

    if versions:
        catalog_versions = gpuhunt_versions(provider, versions, settings)
    else:
        catalog_versions = list_gpuhunt_versions(client, provider, since, until, settings,
                                                 daily=daily)
        if not catalog_versions:
            if on_progress:
                on_progress(f"no {provider} catalog versions in the requested range")
            return []

    def records(version: CatalogVersion, data: bytes) -> Iterator[Any]:
        # A generator, so a bad zip fails inside ingest as a failed run of this version.
        with open_catalog_zip(data, provider, version.url) as (lines, stamp):
            observed_at = gpuhunt_observed_at(version, stamp)
            yield VersionRead(provider_id(provider), version.ref, observed_at)
            yield from parse_catalog_csv(lines, provider=provider, observed_at=observed_at,
                                         source_url=version.url)

    return import_versions(db, client, "gpuhunt", catalog_versions,
                            imported_versions(db, "gpuhunt"), records,
                            on_progress=on_progress, clock=clock, binary=True)
