"""Lambda Cloud instance-types source against a recorded response (tests/fixtures/lambda)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapers.base import PriceObservation, Rejected
from scrapers.lambdalabs import INSTANCE_TYPES_URL, LambdaSource
from tests.helpers import fetch_records
from tracker.core.errors import MissingCredentials, SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lambda"
KEY = "secret_lambda-test-key_0123456789abcdef"
ENV = {"GPU_TRACKER_LAMBDA_API_KEY": KEY}
FETCHED_AT = datetime(2026, 9, 14, 8, 30, tzinfo=UTC)


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def run(handler: Callable[[httpx.Request], httpx.Response], environ: dict[str, str] | None = None,
        settings: dict | None = None) -> list[PriceObservation | Rejected]:
    source = LambdaSource.from_config(settings or {}, {**ENV, **(environ or {})})
    return fetch_records(source, handler, FETCHED_AT)


def recorded(requests: list[httpx.Request] | None = None) -> Callable:
    def handler(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        return httpx.Response(200, content=fixture_bytes("instance_types.json"))

    return handler


@pytest.fixture
def records() -> list[PriceObservation | Rejected]:
    return run(recorded())


def by_type_region(records: list) -> dict[tuple[str, str], PriceObservation]:
    return {(r.instance_type, r.region): r for r in records if isinstance(r, PriceObservation)}


def test_request_is_a_get_with_bearer_key() -> None:
    requests: list[httpx.Request] = []
    run(recorded(requests))
    assert len(requests) == 1
    assert requests[0].method == "GET"
    assert str(requests[0].url) == INSTANCE_TYPES_URL
    assert requests[0].headers["Authorization"] == f"Bearer {KEY}"


def test_one_offer_per_region_with_capacity_in_exact_dollars(records: list) -> None:
    offers = by_type_region(records)
    for region in ("us-east-1", "us-west-1"):
        a10 = offers[("gpu_1x_a10", region)]
        assert a10.price_per_hour == Decimal("0.75")
        assert (a10.gpu_name, a10.gpu_count, a10.gpu_memory_gb) == ("A10 (24 GB PCIe)", 1, 24.0)
        assert canonical_gpu(a10.gpu_name, a10.gpu_memory_gb) == "a10"
        assert (a10.vcpus, a10.ram_gb) == (30.0, 200.0)
        assert a10.category == "on-demand"
        assert a10.currency == "USD"
        assert a10.provider == "lambda"
        assert a10.observed_at == FETCHED_AT
        assert a10.attributes["capacity"] is True
    assert offers[("gpu_1x_a10", "us-west-1")].attributes["region_description"] == \
        "California, USA"
    a6000 = offers[("gpu_4x_a6000", "us-east-1")]
    assert a6000.price_per_hour == Decimal("4.36")  # 436 cents for the whole 4-GPU instance
    assert a6000.gpu_count == 4
    assert canonical_gpu(a6000.gpu_name, a6000.gpu_memory_gb) == "rtx-a6000"
    pcie = offers[("gpu_1x_h100_pcie", "us-west-3")]
    assert pcie.price_per_hour == Decimal("2.49")
    assert canonical_gpu(pcie.gpu_name, pcie.gpu_memory_gb) == "h100-pcie"


def test_sold_out_type_is_kept_once_without_region(records: list) -> None:
    offers = by_type_region(records)
    sxm = offers[("gpu_8x_h100_sxm5", "")]
    assert sxm.price_per_hour == Decimal("23.92")
    assert sxm.attributes == {"capacity": False}
    assert sxm.gpu_count == 8
    assert canonical_gpu(sxm.gpu_name, sxm.gpu_memory_gb) == "h100-sxm"
    assert [k for k in offers if k[0] == "gpu_8x_h100_sxm5"] == [("gpu_8x_h100_sxm5", "")]


def test_gpu_name_falls_back_to_the_description_without_count(records: list) -> None:
    gh200 = by_type_region(records)[("gpu_1x_gh200", "us-east-3")]
    assert gh200.gpu_name == "GH200 (96 GB)"
    assert gh200.gpu_memory_gb == 96.0
    assert canonical_gpu(gh200.gpu_name, gh200.gpu_memory_gb) == "gh200"


def test_null_price_is_rejected_and_cpu_types_are_skipped(records: list) -> None:
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert len(rejected) == 1
    assert "gpu_8x_a100_80gb_sxm4" in rejected[0].reason
    assert "price_cents_per_hour is missing" in rejected[0].reason
    assert rejected[0].raw["instance_type"]["name"] == "gpu_8x_a100_80gb_sxm4"
    assert rejected[0].provider == "lambda"
    offers = by_type_region(records)
    assert not [k for k in offers if k[0].startswith("cpu_")]
    assert len(offers) == 6


def test_regions_setting_keeps_sold_out_types() -> None:
    offers = by_type_region(run(recorded(), environ={
        "GPU_TRACKER_SOURCE_LAMBDA_REGIONS": "us-west-1"}))
    assert sorted(offers) == [("gpu_1x_a10", "us-west-1"), ("gpu_8x_h100_sxm5", "")]


def test_gpu_families_setting() -> None:
    offers = by_type_region(run(recorded(), settings={"gpu_families": ["h100"]}))
    assert sorted(offers) == [("gpu_1x_h100_pcie", "us-west-3"), ("gpu_8x_h100_sxm5", "")]


@pytest.mark.parametrize(("status", "said"), [(200, "global/invalid-api-key"), (401, "HTTP 401")],
                         ids=["error body", "HTTP 401"])
def test_an_unauthorized_answer_is_a_source_error_without_the_key(status: int, said: str) -> None:
    def unauthorized(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=fixture_bytes("error_unauthorized.json"))

    with pytest.raises(SourceError, match=said) as info:
        run(unauthorized)
    assert KEY not in str(info.value)


def test_response_without_data_is_a_source_error() -> None:
    with pytest.raises(SourceError, match="no 'data' object"):
        run(lambda request: httpx.Response(200, json={"instance_types": []}))


def test_empty_data_yields_nothing() -> None:
    assert run(lambda request: httpx.Response(200, json={"data": {}})) == []


def test_missing_key_raises_missing_credentials() -> None:
    with pytest.raises(MissingCredentials, match="GPU_TRACKER_LAMBDA_API_KEY"):
        LambdaSource.from_config({}, {"GPU_TRACKER_LAMBDA_API_KEY": ""})


def test_url_is_configurable_from_the_environment() -> None:
    source = LambdaSource.from_config({}, {
        **ENV, "GPU_TRACKER_SOURCE_LAMBDA_URL": "https://cloud.lambda.ai/api/v1/instance-types"})
    assert source.settings["url"] == "https://cloud.lambda.ai/api/v1/instance-types"


@given(st.integers(min_value=1, max_value=10**9))
def test_cents_convert_to_dollars_exactly(cents: int) -> None:
    payload = json.loads(fixture_bytes("instance_types.json"))
    entry = payload["data"]["gpu_1x_a10"]
    entry["instance_type"]["price_cents_per_hour"] = cents
    records = run(lambda request: httpx.Response(200, json={"data": {"gpu_1x_a10": entry}}))
    prices = {r.price_per_hour for r in records}
    assert prices == {Decimal(cents) / 100}
    (price,) = prices
    assert price * 100 == cents
