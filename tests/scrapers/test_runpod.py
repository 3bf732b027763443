"""RunPod GraphQL source against recorded gpuTypes responses, one per GPU count."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from scrapers.base import PriceObservation, Rejected
from scrapers.runpod import GRAPHQL_URL, RunpodSource
from tests.helpers import fetch_records, observations_by
from tracker.core.errors import InvalidInput, MissingCredentials, SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runpod"
KEY = "rpa_TESTKEY0123456789ABCDEFGHIJKLMNOPQRSTUV"
ENV = {"GPU_TRACKER_RUNPOD_API_KEY": KEY}
FETCHED_AT = datetime(2026, 9, 14, 8, 30, tzinfo=UTC)
H100 = "NVIDIA H100 80GB HBM3"
RTX4090 = "NVIDIA GeForce RTX 4090"


def recorded(requests: list[httpx.Request] | None = None) -> Callable:
    def handler(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        count = json.loads(request.content)["variables"]["lowestPriceInput"]["gpuCount"]
        return httpx.Response(200, content=(FIXTURES / f"gpu_types_count{count}.json").read_bytes())

    return handler


def run(handler: Callable[[httpx.Request], httpx.Response], environ: dict[str, str] | None = None,
        settings: dict | None = None) -> list[PriceObservation | Rejected]:
    source = RunpodSource.from_config(settings or {}, {**ENV, **(environ or {})})
    return fetch_records(source, handler, FETCHED_AT)


@pytest.fixture
def records() -> list[PriceObservation | Rejected]:
    return run(recorded())


def offers(records: list) -> dict[tuple[str, str, str], PriceObservation]:
    return observations_by(records, "instance_type", "variant", "category")


def test_one_graphql_post_per_gpu_count_with_bearer_key() -> None:
    requests: list[httpx.Request] = []
    run(recorded(requests))
    assert len(requests) == 4
    bodies = [json.loads(r.content) for r in requests]
    assert [b["variables"] for b in bodies] == [
        {"lowestPriceInput": {"gpuCount": n}} for n in (1, 2, 4, 8)]
    for request, body in zip(requests, bodies, strict=True):
        assert request.method == "POST"
        assert str(request.url) == GRAPHQL_URL
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert "lowestPrice(input: $lowestPriceInput)" in body["query"]
        for field in ("securePrice", "communityPrice", "secureSpotPrice", "communitySpotPrice",
                      "stockStatus", "memoryInGb", "maxGpuCount"):
            assert field in body["query"]


def test_per_gpu_prices_times_count_with_clouds_apart(records: list) -> None:
    by_key = offers(records)
    secure = by_key[(f"2x {H100}", "secure", "on-demand")]
    community = by_key[(f"2x {H100}", "community", "on-demand")]
    assert secure.price_per_hour == Decimal("5.38")  # 2 x 2.69
    assert community.price_per_hour == Decimal("4.78")  # 2 x 2.39
    assert secure.gpu_count == 2
    assert secure.gpu_name == H100
    assert canonical_gpu(secure.gpu_name, secure.gpu_memory_gb) == "h100-sxm"
    assert (secure.vcpus, secure.ram_gb, secure.gpu_memory_gb) == (32.0, 251.0, 80.0)
    assert secure.attributes["stock_status"] == "Medium"
    assert secure.attributes["display_name"] == "H100 SXM"
    assert secure.attributes["price_per_gpu"] == "2.69"
    assert secure.provider == "runpod"
    assert secure.currency == "USD"
    assert secure.observed_at == FETCHED_AT
    assert by_key[(f"8x {H100}", "secure", "on-demand")].price_per_hour == Decimal("21.52")
    assert by_key[(f"8x {H100}", "community", "on-demand")].price_per_hour == Decimal("19.12")


def test_spot_rows_only_where_a_spot_price_exists(records: list) -> None:
    by_key = offers(records)
    assert by_key[(f"4x {RTX4090}", "secure", "spot")].price_per_hour == Decimal("2.0")
    assert by_key[(f"4x {RTX4090}", "community", "spot")].price_per_hour == Decimal("0.8")
    a100_spot = by_key[("1x NVIDIA A100 80GB PCIe", "secure", "spot")]
    assert a100_spot.price_per_hour == Decimal("1.19")
    assert a100_spot.attributes["price_per_gpu"] == "1.19"
    # H100 spot is null (discontinued); H100 NVL secure spot is 0: neither is a price
    assert not [k for k in by_key if k[0].endswith(H100) and k[2] == "spot"]
    assert not [k for k in by_key if k[0].endswith("NVIDIA H100 NVL") and k[2] == "spot"]


def test_stock_status_null_and_null_lowest_price_mean_not_offered(records: list) -> None:
    by_key = offers(records)
    assert not [k for k in by_key if k[0] == f"8x {RTX4090}"]  # stockStatus null at 8
    assert not [k for k in by_key if k[0] == "1x NVIDIA RTX A6000"]  # stockStatus null at 1
    assert by_key[("2x NVIDIA RTX A6000", "community", "on-demand")].price_per_hour == \
        Decimal("0.66")
    assert not [k for k in by_key if k[0] == "4x NVIDIA RTX A6000"]  # maxGpuCount 2
    assert [k for k in by_key if "B200" in k[0]] == [("8x NVIDIA B200", "secure", "on-demand")]
    b200 = by_key[("8x NVIDIA B200", "secure", "on-demand")]
    assert b200.price_per_hour == Decimal("47.92")
    assert canonical_gpu(b200.gpu_name, b200.gpu_memory_gb) == "b200"


def test_cloud_flags_and_null_prices(records: list) -> None:
    by_key = offers(records)
    nvl = by_key[("1x NVIDIA H100 NVL", "secure", "on-demand")]
    assert nvl.price_per_hour == Decimal("2.59")
    assert canonical_gpu(nvl.gpu_name, nvl.gpu_memory_gb) == "h100-nvl"
    assert ("1x NVIDIA H100 NVL", "community", "on-demand") not in by_key  # communityCloud false
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert [r.reason for r in rejected] == [
        "runpod NVIDIA A100 80GB PCIe x1 community: communityCloud is true but communityPrice "
        "is null",
        "runpod NVIDIA A100 80GB PCIe x2 community: communityCloud is true but communityPrice "
        "is null",
    ]
    assert rejected[0].raw["id"] == "NVIDIA A100 80GB PCIe"
    assert rejected[0].provider == "runpod"


def test_totals(records: list) -> None:
    by_key = offers(records)
    assert len(by_key) == 29
    assert {o.category for o in by_key.values()} == {"on-demand", "spot"}
    assert {o.variant for o in by_key.values()} == {"secure", "community"}
    assert all(KEY not in repr(o) for o in by_key.values())


def test_settings_from_environment_narrow_the_queries() -> None:
    requests: list[httpx.Request] = []
    records = run(recorded(requests), environ={
        "GPU_TRACKER_SOURCE_RUNPOD_GPU_COUNTS": "1,2",
        "GPU_TRACKER_SOURCE_RUNPOD_CLOUDS": "community",
        "GPU_TRACKER_SOURCE_RUNPOD_INCLUDE_SPOT": "false",
        "GPU_TRACKER_SOURCE_RUNPOD_GPU_FAMILIES": "rtx-4090,h100",
    })
    assert len(requests) == 2
    by_key = offers(records)
    assert sorted(by_key) == [
        (f"1x {RTX4090}", "community", "on-demand"),
        (f"1x {H100}", "community", "on-demand"),
        (f"2x {RTX4090}", "community", "on-demand"),
        (f"2x {H100}", "community", "on-demand"),
    ]


@pytest.mark.parametrize("counts", [["0"], ["two"]])
def test_bad_gpu_counts_are_invalid_input(counts: list[str]) -> None:
    with pytest.raises(InvalidInput, match="gpu_counts"):
        run(recorded(), settings={"gpu_counts": counts})


def test_unknown_cloud_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="unknown serverless"):
        run(recorded(), settings={"clouds": ["serverless"]})


def test_graphql_errors_are_a_source_error_without_the_key() -> None:
    def failing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=(FIXTURES / "graphql_error.json").read_bytes())

    with pytest.raises(SourceError, match="GraphQL error: Something went wrong") as info:
        run(failing)
    assert KEY not in str(info.value)


def test_a_key_echoed_by_the_api_is_redacted() -> None:
    def echoing(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"errors": [{"message": f"bad key {KEY}"}], "data": None})

    with pytest.raises(SourceError) as info:
        run(echoing)
    assert KEY not in str(info.value)
    assert "bad key ***" in str(info.value)


def test_http_401_is_a_source_error_without_the_key() -> None:
    with pytest.raises(SourceError, match="HTTP 401") as info:
        run(lambda request: httpx.Response(401, text="Unauthorized"))
    assert KEY not in str(info.value)


def test_response_without_gpu_types_is_a_source_error() -> None:
    with pytest.raises(SourceError, match=r"no data\.gpuTypes list"):
        run(lambda request: httpx.Response(200, json={"data": {"gpuTypes": None}}))


def test_empty_gpu_types_yield_nothing() -> None:
    assert run(lambda request: httpx.Response(200, json={"data": {"gpuTypes": []}})) == []


def test_missing_key_raises_missing_credentials() -> None:
    with pytest.raises(MissingCredentials, match="GPU_TRACKER_RUNPOD_API_KEY"):
        RunpodSource.from_config({}, {})
