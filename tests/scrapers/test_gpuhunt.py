"""gpuhunt v3 catalog source: per-provider zips built from tests/fixtures/gpuhunt (see README)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from scrapers.base import CatalogVersion, PriceObservation, Rejected
from scrapers.gpuhunt import (
    CATALOG_FIELDS,
    CATALOG_URL,
    OFFLINE_PROVIDERS,
    GpuhuntSource,
    parse_catalog_csv,
    read_catalog_zip,
)
from tests.helpers import fetch_records
from tracker.core.errors import SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpuhunt"
ROOT = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3"
FETCHED_AT = datetime(2025, 6, 2, 12, 0, tzinfo=UTC)
LATEST = {"lambdalabs": "20250602-124", "aws": "20250602-124", "gcp": "20250602-124"}


def catalog_zip(provider: str, csv_text: str,
                when: tuple[int, int, int, int, int, int] = (2025, 6, 2, 10, 7, 40)) -> bytes:
    """A zip like `zip -j catalog.zip {provider}.csv` in publish_catalog.sh makes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo(f"{provider}.csv", date_time=when), csv_text)
    return buffer.getvalue()


def fixture_csv(provider: str, version: str) -> str:
    specific = FIXTURES / f"{provider}-{version}.csv"
    path = specific if specific.exists() else FIXTURES / f"{provider}.csv"
    return path.read_bytes().decode("utf-8")


def bucket_handler(requests: list[httpx.Request] | None = None,
                   latest: dict[str, str] | None = None,
                   overrides: dict[str, httpx.Response] | None = None) -> Callable:
    latest = latest or LATEST

    def handler(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        path = request.url.path
        if overrides and path in overrides:
            return overrides[path]
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "v3" and parts[2] == "version":
            return httpx.Response(200, text=latest[parts[1]] + "\n")  # `echo` adds a newline
        if len(parts) == 4 and parts[0] == "v3" and parts[3] == "catalog.zip":
            provider, version = parts[1], parts[2]
            try:
                text = fixture_csv(provider, version)
            except FileNotFoundError:
                return httpx.Response(404)
            return httpx.Response(200, content=catalog_zip(provider, text),
                                  headers={"Content-Type": "application/zip"})
        return httpx.Response(404)

    return handler


def fetch(handler: Callable, **settings) -> list[PriceObservation | Rejected]:
    return fetch_records(GpuhuntSource.from_config({"url": ROOT, **settings}, {}), handler,
                         FETCHED_AT, retries=1)


def offers(records: list) -> dict[tuple[str, str, str, str], PriceObservation]:
    return {(r.provider, r.instance_type, r.region, r.category): r
            for r in records if isinstance(r, PriceObservation)}


def test_fixture_headers_are_the_published_columns() -> None:
    for path in FIXTURES.glob("*.csv"):
        assert path.read_text().splitlines()[0].split(",") == list(CATALOG_FIELDS), path.name


def test_latest_version_then_zip_per_provider() -> None:
    requests: list[httpx.Request] = []
    records = fetch(bucket_handler(requests), providers=["lambdalabs", "aws"])
    assert [r.url.path for r in requests] == [
        "/v3/lambdalabs/version", "/v3/lambdalabs/20250602-124/catalog.zip",
        "/v3/aws/version", "/v3/aws/20250602-124/catalog.zip"]
    by_key = offers(records)
    h100 = by_key[("lambda", "gpu_8x_h100_sxm5", "us-east-1", "on-demand")]
    assert h100.price_per_hour == Decimal("31.92")
    # gpuhunt prints plain H100; the instance name's sxm5 token states the form factor
    assert (h100.gpu_name, h100.gpu_count, h100.gpu_memory_gb) == ("H100 SXM", 8.0, 80.0)
    assert h100.attributes["gpu_name"] == "H100"
    assert canonical_gpu(h100.gpu_name, h100.gpu_memory_gb) == "h100-sxm"
    assert h100.vcpus == 208.0 and h100.ram_gb == pytest.approx(1933.2)
    assert h100.attributes["disk_gb"] == pytest.approx(24195.072)
    assert h100.source_url == f"{ROOT}/lambdalabs/20250602-124/catalog.zip"
    assert h100.observed_at == FETCHED_AT and h100.currency == "USD"
    gh200 = by_key[("lambda", "gpu_1x_gh200", "us-west-1", "on-demand")]
    assert gh200.attributes["cpu_arch"] == "arm" and gh200.attributes["flags"] == ["lambda-arm"]
    assert gh200.price_per_hour == Decimal("2.29")


def test_spot_rows_cpu_rows_and_rejects_aws() -> None:
    records = fetch(bucket_handler(), providers=["aws"])
    by_key = offers(records)
    assert by_key[("aws", "g6.xlarge", "us-east-1", "on-demand")].price_per_hour \
        == Decimal("0.8048")
    spot = by_key[("aws", "p5.48xlarge", "us-east-1", "spot")]
    assert spot.price_per_hour == Decimal("17.63") and spot.gpu_count == 8.0
    assert canonical_gpu(spot.gpu_name, spot.gpu_memory_gb) == "h100-sxm"
    assert not any(k[1] == "m5.large" for k in by_key)  # CPU-only
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert [(r.reason, r.raw["instance_name"], r.provider) for r in rejected] == [
        ("missing price", "p4d.24xlarge", "aws")]
    assert len(by_key) == 4


def test_gcp_zone_location_split_and_tpu_skipped() -> None:
    records = fetch(bucket_handler(), providers=["gcp"])
    (on_demand, spot) = [r for r in records if isinstance(r, PriceObservation)]
    assert (on_demand.region, on_demand.zone) == ("us-central1", "us-central1-a")
    assert on_demand.price_per_hour == Decimal("3.673385") and spot.category == "spot"
    assert canonical_gpu(on_demand.gpu_name, on_demand.gpu_memory_gb) == "a100-40gb"
    assert len(records) == 3  # the TPU row and the CPU row are skipped; one CatalogVersion
    (version,) = [r for r in records if isinstance(r, CatalogVersion)]
    assert (version.provider, version.version) == ("gcp", "20250602-124")
    assert version.published_at == datetime(2025, 6, 2, 10, 7, 40, tzinfo=UTC)  # zip stamp
    assert on_demand.attributes["catalog_version"] == "20250602-124"


def test_pinned_version_skips_the_version_file() -> None:
    requests: list[httpx.Request] = []
    records = fetch(bucket_handler(requests), providers=["lambdalabs"], version="20250601-100")
    assert [r.url.path for r in requests] == ["/v3/lambdalabs/20250601-100/catalog.zip"]
    by_key = offers(records)
    assert by_key[("lambda", "gpu_8x_h100_sxm5", "us-west-1", "on-demand")].price_per_hour \
        == Decimal("23.92")
    assert by_key[("lambda", "gpu_1x_a10", "us-east-1", "on-demand")].price_per_hour \
        == Decimal("0.75")


def test_default_providers_are_the_published_offline_ones() -> None:
    source = GpuhuntSource.from_config({}, {})
    assert source.settings["providers"] == OFFLINE_PROVIDERS
    assert source.settings["url"] == CATALOG_URL
    assert "vastai" not in OFFLINE_PROVIDERS  # online providers have no catalog
    env = GpuhuntSource.from_config({}, {"GPU_TRACKER_SOURCE_GPUHUNT_PROVIDERS": "aws,gcp"})
    assert env.settings["providers"] == ["aws", "gcp"]


def test_missing_catalog_fails_the_source() -> None:
    handler = bucket_handler(overrides={"/v3/aws/20250602-124/catalog.zip": httpx.Response(404)})
    with pytest.raises(SourceError, match="HTTP 404"):
        fetch(handler, providers=["lambdalabs", "aws"])


def test_zip_without_the_provider_csv() -> None:
    data = catalog_zip("aws", fixture_csv("aws", "x"))
    with pytest.raises(SourceError, match=r"no gcp\.csv in the zip"):
        read_catalog_zip(data, "gcp", "https://x/v3/gcp/1/catalog.zip")
    with pytest.raises(SourceError, match="not a zip file"):
        read_catalog_zip(b"<Error><Code>AccessDenied</Code></Error>", "gcp")


def test_zip_timestamp_is_returned() -> None:
    data = catalog_zip("aws", fixture_csv("aws", "x"), when=(2025, 6, 1, 10, 7, 40))
    text, stamp = read_catalog_zip(data, "aws")
    assert stamp == datetime(2025, 6, 1, 10, 7, 40)
    assert text.startswith("instance_name,location,price")


def test_bad_version_file_fails() -> None:
    handler = bucket_handler(latest={"aws": "<html>oops</html>/x"})
    with pytest.raises(SourceError, match="not a catalog version"):
        fetch(handler, providers=["aws"])


def test_rows_with_bad_cells() -> None:
    header = ",".join(CATALOG_FIELDS)
    rows = [header,
            "i1,loc,abc,4,16.0,1,L4,24.0,False,,nvidia,,x86,{}",
            "i2,loc,1.0,4,16.0,1,L4,24.0,maybe,,nvidia,,x86,{}",
            "i3,loc,1.0,4,16.0,x,L4,24.0,False,,nvidia,,x86,{}",
            ",loc,1.0,4,16.0,1,L4,24.0,False,,nvidia,,x86,{}",
            "i5,loc,1.0,4,16.0,1,L4,24.0,False,,nvidia,,x86,{},extra",
            'i6,loc,0.35,16,64.0,1,RTX4090,24.0,True,100.0,nvidia,,x86,"{""min_bid"": 0.3}"']
    records = list(parse_catalog_csv(rows, provider="vastai", observed_at=FETCHED_AT))
    assert [r.reason for r in records if isinstance(r, Rejected)] == [
        "price is not a number: 'abc'", "spot is not True/False: 'maybe'",
        "gpu_count is not a number: 'x'", "missing instance_name or location",
        "row has 1 cells more than the header"]
    (kept,) = [r for r in records if isinstance(r, PriceObservation)]
    assert kept.attributes["provider_data"] == {"min_bid": Decimal("0.3")}
    assert kept.category == "spot" and kept.price_per_hour == Decimal("0.35")


def test_not_a_catalog() -> None:
    with pytest.raises(SourceError, match="not a gpuhunt catalog"):
        list(parse_catalog_csv(["a,b,c", "1,2,3"], provider="aws", observed_at=FETCHED_AT))
