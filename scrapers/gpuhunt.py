"""dstack's gpuhunt catalog (v3): one zip per provider and version, published hourly on S3.

Layout (gpuhunt `src/gpuhunt/_internal/catalog.py` and `.github/scripts/publish_catalog.sh`):
- `{url}/{provider}/version`: the latest version string, e.g. `20250818-42`
  (`$(date +%Y%m%d)-${GITHUB_RUN_NUMBER}`);
- `{url}/{provider}/{version}/catalog.zip`: a zip holding `{provider}.csv`
  (also `{url}/{provider}/latest/catalog.zip`);
- `url` defaults to `https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3`.
Only gpuhunt's *offline* providers are published (aws, azure, verda, gcp, lambdalabs, nebius,
oci, runpod, cloudrift); the *online* ones (vastai, vultr, ...) are queried live by gpuhunt
and have no catalog, so they are not in the default `providers` list.

The CSV has 14 lowercase columns (`CATALOG_V2_FIELDS` in gpuhunt `storage.py`):
`instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,disk_size,
gpu_vendor,flags,cpu_arch,provider_data`. One row is one offer: `price` is USD per hour for
the whole instance, `spot` is `True`/`False` (a spot offer is its own row), `gpu_memory` is
per GPU in GB, `location` is a region (a zone for gcp, e.g. `us-central1-a`, which is split
into region and zone here). Rows without GPUs and TPU rows (`gpu_vendor=google`, or a `tpu-`
name prefix in old catalogs) are skipped. A row whose `price` is missing or not a number is
rejected; so is a row that does not have the 14 columns' worth of cells.

`version` pins one catalog version for every provider (empty = each provider's latest).
Versions are dated, so `tracker/collect/backfill.py` walks them to import history. Each provider's
catalog read is also yielded as a `CatalogVersion` (the version and when it was published: the
CSV's timestamp in the zip, else the version's date), and every row carries
`attributes["catalog_version"]`: gpuhunt publishes hourly (`CATALOG_MAX_AGE_HOURS`), so a
version a day old means the publishing stopped and the prices are that old.
"""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import IO, TYPE_CHECKING, Any, cast

from scrapers.base import (
    CatalogVersion,
    PriceObservation,
    Record,
    Rejected,
    Source,
    catalog_reader,
)
from tracker.core.errors import SourceError
from tracker.core.gpus import with_form_factor

if TYPE_CHECKING:
    from scrapers.http import HttpClient

CATALOG_URL = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3"
OFFLINE_PROVIDERS = [
    "aws", "azure", "verda", "gcp", "lambdalabs", "nebius", "oci", "runpod", "cloudrift",
]
CATALOG_FIELDS = (
    "instance_name", "location", "price", "cpu", "memory", "gpu_count", "gpu_name",
    "gpu_memory", "spot", "disk_size", "gpu_vendor", "flags", "cpu_arch", "provider_data",
)
REQUIRED_FIELDS = ("instance_name", "location", "price", "gpu_count", "spot")
# Uncompressed: the largest real catalog (aws.csv) is a few MB. Counted while inflating, so a
# zip bomb is stopped at this many bytes whatever size its header declares.
MAX_CSV_BYTES = 64 * 1024 * 1024
# gpuhunt's publishing workflow runs hourly (.github/workflows in dstackai/gpuhunt; versions are
# `YYYYMMDD-<run number>`): a catalog older than a day has stopped updating.
CATALOG_MAX_AGE_HOURS = 24.0


def provider_id(slug: str) -> str:
    from tracker.core.providers import provider_id as registry_id

    return registry_id(slug)  # aliases in data/providers.json (gpuhunt: lambdalabs)


def version_url(root: str, provider: str) -> str:
    return f"{root.rstrip('/')}/{provider}/version"


def zip_url(root: str, provider: str, version: str) -> str:
    return f"{root.rstrip('/')}/{provider}/{version}/catalog.zip"


class GpuhuntSource(Source):
    CATALOG_MAX_AGE_HOURS = CATALOG_MAX_AGE_HOURS
    name = "gpuhunt"
    description = "dstack gpuhunt's hourly per-provider catalogs (v3 zips on S3), with spot."
    DEFAULTS = {
        "url": CATALOG_URL,
        "providers": list(OFFLINE_PROVIDERS),
        "version": "",  # empty: each provider's latest version
    }
    SECRET_ENV = None

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        providers = [p.strip() for p in self.settings["providers"] if p and p.strip()]
        if not providers:
            raise SourceError("source gpuhunt: the providers setting is empty")
        root = self.settings["url"]
        pinned = str(self.settings.get("version") or "").strip()
        for provider in providers:
            version = pinned or latest_version(client, root, provider)
            url = zip_url(root, provider, version)
            data = client.get_bytes(url)
            yield from parse_catalog_zip(
                data, provider=provider, observed_at=fetched_at, source_url=url,
                version=version)


def latest_version(client: HttpClient, root: str, provider: str) -> str:
    url = version_url(root, provider)
    version = client.get_text(url).strip()
    if not version or "/" in version or len(version) > 64 or not version.isprintable():
        raise SourceError(f"{url}: not a catalog version: {version[:40]!r}")
    return version


# -- parsing (pure) -----------------------------------------------------------------------------

def read_catalog_zip(data: bytes, provider: str, source_url: str | None = None) -> tuple[
        str, datetime | None]:
    """The `{provider}.csv` text of a catalog zip and the CSV's timestamp in the zip (naive,
    as written by the publishing job; GitHub runners run in UTC)."""
    with open_catalog_zip(data, provider, source_url) as (lines, stamp):
        return "".join(lines), stamp


@contextlib.contextmanager
def open_catalog_zip(data: bytes, provider: str, source_url: str | None = None
                     ) -> Iterator[tuple[Iterator[str], datetime | None]]:
    """The `{provider}.csv` of a catalog zip as text lines, inflated as they are read (at
    most MAX_CSV_BYTES, counted, not taken from the header), and the CSV's timestamp."""
    where = source_url or f"{provider} catalog.zip"
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise SourceError(f"{where}: not a zip file") from None
    with archive:
        member = f"{provider}.csv"
        try:
            info = archive.getinfo(member)
        except KeyError:
            names = ", ".join(archive.namelist()[:5]) or "nothing"
            raise SourceError(f"{where}: no {member} in the zip (holds {names})") from None
        if info.file_size > MAX_CSV_BYTES:
            raise SourceError(f"{where}: {member} is larger than {MAX_CSV_BYTES} bytes")
        try:
            stamp: datetime | None = datetime(*info.date_time)
        except ValueError:
            stamp = None
        try:
            raw = archive.open(info)
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError) as exc:
            raise SourceError(f"{where}: cannot read {member} ({exc})") from None
        with raw:
            yield _capped_lines(raw, where, member), stamp


def _capped_lines(raw: IO[bytes], where: str, member: str) -> Iterator[str]:
    text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
    read = 0
    try:
        while True:
            line = text.readline(MAX_CSV_BYTES + 1)
            if not line:
                return
            read += len(line)
            if read > MAX_CSV_BYTES:
                raise SourceError(f"{where}: {member} inflates to more than {MAX_CSV_BYTES} "
                                  "bytes; refused")
            yield line
    except (zipfile.BadZipFile, UnicodeDecodeError, EOFError, zlib.error) as exc:
        raise SourceError(f"{where}: cannot read {member} ({exc})") from None


def parse_catalog_zip(data: bytes, *, provider: str, observed_at: datetime,
                      source_url: str | None = None, version: str | None = None,
                      ) -> Iterator[Record]:
    with open_catalog_zip(data, provider, source_url) as (lines, stamp):
        if version:
            published = stamp.replace(tzinfo=UTC) if stamp is not None \
                else version_date(version)
            yield CatalogVersion(provider_id(provider), version, published)
        for record in parse_catalog_csv(lines, provider=provider, observed_at=observed_at,
                                        source_url=source_url):
            if version and isinstance(record, PriceObservation):
                # parse_catalog_csv builds a fresh dict per row, so adding to it is safe; the
                # field is typed Mapping because observations are read-only everywhere else.
                cast(dict[str, Any], record.attributes)["catalog_version"] = version
            yield record


def version_date(version: str) -> datetime | None:
    """`20250818-42` -> 2025-08-18 00:00 UTC; None when the version is not dated."""
    try:
        return datetime.strptime(version.split("-", 1)[0], "%Y%m%d").replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_catalog_csv(lines: Iterable[str], *, provider: str, observed_at: datetime,
                      source_url: str | None = None) -> Iterator[Record]:
    """Turn one provider's catalog CSV into observations and rejects (no I/O)."""
    tracker_provider = provider_id(provider)
    reader = catalog_reader(lines, REQUIRED_FIELDS, where=source_url or f"{provider}.csv",
                            what="gpuhunt catalog")
    for raw in reader:
        if None in raw:
            extra = raw.pop(None)
            yield Rejected(f"row has {len(extra)} cells more than the header", raw,
                           tracker_provider)
            continue
        record = _parse_row(raw, provider=tracker_provider, observed_at=observed_at,
                            source_url=source_url)
        if record is not None:
            yield record


def _parse_row(raw: dict[str, str], *, provider: str, observed_at: datetime,
               source_url: str | None) -> Record | None:
    cell = {k: (v or "").strip() for k, v in raw.items()}
    gpu_name = cell.get("gpu_name", "")
    vendor = cell.get("gpu_vendor", "").lower()
    try:
        gpu_count = float(cell.get("gpu_count") or 0)
    except ValueError:
        return Rejected(f"gpu_count is not a number: {cell.get('gpu_count')!r}", raw, provider)
    if gpu_count <= 0 or not gpu_name:
        return None  # CPU-only
    if vendor == "google" or gpu_name.lower().startswith("tpu-"):
        return None  # TPUs are not GPUs
    if not cell.get("instance_name") or not cell.get("location"):
        return Rejected("missing instance_name or location", raw, provider)
    price_text = cell.get("price", "")
    if not price_text:
        return Rejected("missing price", raw, provider)
    try:
        price = Decimal(price_text)
    except InvalidOperation:
        return Rejected(f"price is not a number: {price_text!r}", raw, provider)
    spot_text = cell.get("spot", "").lower()
    if spot_text not in ("true", "false"):
        return Rejected(f"spot is not True/False: {cell.get('spot')!r}", raw, provider)

    location = cell["location"]
    region, zone = location, ""
    if provider == "gcp" and _looks_like_gcp_zone(location):
        region, zone = location.rsplit("-", 1)[0], location
    attributes: dict[str, Any] = {}
    if vendor and vendor != "nvidia":
        attributes["gpu_vendor"] = vendor
    if cell.get("cpu_arch") and cell["cpu_arch"] != "x86":
        attributes["cpu_arch"] = cell["cpu_arch"]
    if cell.get("flags"):
        attributes["flags"] = cell["flags"].split()
    disk = _float(cell.get("disk_size"))
    if disk is not None:
        attributes["disk_gb"] = disk
    provider_data = _provider_data(cell.get("provider_data", ""))
    if provider_data:
        attributes["provider_data"] = provider_data
    # gpuhunt's names drop PCIe/SXM (`H100` for gpu_1x_h100_pcie): the instance name says it.
    stated = with_form_factor(gpu_name, provider, cell["instance_name"])
    if stated != gpu_name:
        attributes["gpu_name"] = gpu_name
    return PriceObservation(
        provider=provider, instance_type=cell["instance_name"], gpu_name=stated,
        gpu_count=gpu_count, category="spot" if spot_text == "true" else "on-demand",
        price_per_hour=price, currency="USD", observed_at=observed_at, region=region,
        zone=zone, gpu_memory_gb=_float(cell.get("gpu_memory")), vcpus=_float(cell.get("cpu")),
        ram_gb=_float(cell.get("memory")), source_url=source_url, attributes=attributes,
        raw=raw,
    )


def _looks_like_gcp_zone(location: str) -> bool:
    head, _, tail = location.rpartition("-")
    return bool(head) and len(tail) == 1 and tail.isalpha() and head[-1:].isdigit()


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and value == value else None


def _provider_data(text: str) -> dict[str, Any] | None:
    """Small provider_data objects are kept (e.g. Vast's `min_bid`); prices in it stay exact."""
    if not text or text == "{}" or len(text) > 1000:
        return None
    try:
        data = json.loads(text, parse_float=Decimal)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data else None
