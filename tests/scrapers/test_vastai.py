"""Vast.ai bundles search source against a recorded offers response (tests/fixtures/vastai)."""

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
from scrapers.vastai import BUNDLES_URL, VastaiSource, country_of, nearest_rank
from tests.helpers import fetch_records, observations_by
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vastai"
KEY = "vast-test-key-0f1e2d3c4b5a69788796a5b4c3d2e1f0"
FETCHED_AT = datetime(2026, 9, 14, 8, 30, tzinfo=UTC)


def recorded(requests: list[httpx.Request] | None = None, name: str = "bundles.json") -> Callable:
    def handler(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        return httpx.Response(200, content=(FIXTURES / name).read_bytes())

    return handler


def run(handler: Callable[[httpx.Request], httpx.Response], environ: dict[str, str] | None = None,
        settings: dict | None = None) -> list[PriceObservation | Rejected]:
    source = VastaiSource.from_config(settings or {}, environ or {})
    return fetch_records(source, handler, FETCHED_AT)


@pytest.fixture
def records() -> list[PriceObservation | Rejected]:
    return run(recorded())


def offers(records: list) -> dict[tuple[str, str, str, str], PriceObservation]:
    return observations_by(records, "instance_type", "region", "variant", "category")


def test_request_is_a_post_of_the_filter_body_without_auth() -> None:
    requests: list[httpx.Request] = []
    run(recorded(requests))
    assert len(requests) == 1
    assert requests[0].method == "POST"
    assert str(requests[0].url) == BUNDLES_URL
    assert "Authorization" not in requests[0].headers
    assert json.loads(requests[0].content) == {
        "limit": 5000, "type": "on-demand", "rentable": {"eq": True}, "rented": {"eq": False},
        "order": [["dph_total", "asc"]]}


def test_optional_key_and_filters_go_into_the_request() -> None:
    requests: list[httpx.Request] = []
    run(recorded(requests), environ={
        "GPU_TRACKER_VASTAI_API_KEY": KEY, "GPU_TRACKER_SOURCE_VASTAI_VERIFIED_ONLY": "true",
        "GPU_TRACKER_SOURCE_VASTAI_DATACENTER_ONLY": "yes",
        "GPU_TRACKER_SOURCE_VASTAI_LIMIT": "64"})
    assert requests[0].headers["Authorization"] == f"Bearer {KEY}"
    body = json.loads(requests[0].content)
    assert body["verified"] == {"eq": True}
    assert body["datacenter"] == {"eq": True}
    assert body["limit"] == 64


def test_offers_are_bucketed_by_gpu_count_country_and_verification(records: list) -> None:
    by_key = offers(records)
    ask = by_key[("1x RTX 4090", "US", "verified", "on-demand")]
    assert ask.price_per_hour == Decimal("0.3735")  # cheapest of 0.3735, 0.4012, 0.552
    assert ask.attributes["offers"] == 3
    assert ask.attributes["dph_total_min"] == "0.3735"
    assert ask.attributes["dph_total_max"] == "0.552"
    assert ask.attributes["price_basis"] == "cheapest"
    assert ask.attributes["offer_id"] == 20001
    assert (ask.gpu_name, ask.gpu_count, ask.gpu_memory_gb) == ("RTX 4090", 1, 24.0)
    assert canonical_gpu(ask.gpu_name, ask.gpu_memory_gb) == "rtx-4090"
    assert (ask.vcpus, ask.ram_gb) == (16.0, 64.0)  # 128000 MB x 16 / 32 cores
    assert ask.provider == "vastai"
    assert ask.currency == "USD"
    assert ask.observed_at == FETCHED_AT
    bid = by_key[("1x RTX 4090", "US", "verified", "bid")]
    assert bid.price_per_hour == Decimal("0.2")
    assert bid.attributes["offers"] == 2  # offer 20003 has min_bid null
    assert bid.attributes["min_bid_max"] == "0.25"
    unverified = by_key[("1x RTX 4090", "US", "unverified", "on-demand")]
    assert unverified.price_per_hour == Decimal("0.31")
    assert by_key[("2x RTX 4090", "US", "verified", "on-demand")].price_per_hour == \
        Decimal("0.747")


def test_eight_gpu_offer_prices_the_whole_machine(records: list) -> None:
    by_key = offers(records)
    h100 = by_key[("8x H100 SXM", "CA", "verified", "on-demand")]
    assert h100.price_per_hour == Decimal("19.62")
    assert h100.gpu_count == 8
    assert h100.gpu_memory_gb == 79.6  # 81559 MiB per GPU
    assert canonical_gpu(h100.gpu_name, h100.gpu_memory_gb) == "h100-sxm"
    assert h100.ram_gb == 1769.0  # 2063800 MB x 192 / 224
    assert by_key[("8x H100 SXM", "CA", "verified", "bid")].price_per_hour == Decimal("14.0")
    rtx5090 = by_key[("4x RTX 5090", "TW", "verified", "on-demand")]  # gpu_frac 0.5 of a host
    assert rtx5090.price_per_hour == Decimal("2.246")
    assert canonical_gpu(rtx5090.gpu_name, rtx5090.gpu_memory_gb) == "rtx-5090"


def test_null_cpu_cores_and_null_geolocation(records: list) -> None:
    by_key = offers(records)
    a100 = by_key[("1x A100 PCIE", "DE", "verified", "on-demand")]
    assert a100.ram_gb is None
    assert a100.vcpus == 8.0
    assert canonical_gpu(a100.gpu_name, a100.gpu_memory_gb) == "a100-40gb-pcie"
    rtx3090 = by_key[("1x RTX 3090", "", "unverified", "on-demand")]
    assert rtx3090.price_per_hour == Decimal("0.1612")


def test_bad_offers_are_rejected_one_by_one(records: list) -> None:
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert [(r.raw["id"], r.reason) for r in rejected] == [
        (20010, "vastai offer 20010: no dph_total and no search.totalHour"),
        (20011, "vastai offer 20011: dph_total is 0, not a price"),
        (20013, "vastai offer 20013: gpu_name is missing"),
    ]
    assert all(r.provider == "vastai" for r in rejected)
    by_key = offers(records)
    assert not [k for k in by_key if "Tesla V100" in k[0] or k[1] == "SE"]
    # offer 20012 (rentable: false, $0.29) is neither a price nor a rejection
    assert all(o.attributes["offer_id"] != 20012 for o in by_key.values())
    assert len(by_key) == 14  # 7 classes x (on-demand, bid)


def test_percentile_setting_picks_a_real_ask() -> None:
    by_key = offers(run(recorded(), settings={"price_percentile": 50}))
    median = by_key[("1x RTX 4090", "US", "verified", "on-demand")]
    assert median.price_per_hour == Decimal("0.4012")
    assert median.attributes["price_basis"] == "p50"
    assert median.attributes["offer_id"] == 20002
    assert (median.vcpus, median.ram_gb) == (32.0, 128.5)
    assert by_key[("1x RTX 4090", "US", "verified", "bid")].price_per_hour == Decimal("0.2")
    top = offers(run(recorded(), environ={"GPU_TRACKER_SOURCE_VASTAI_PRICE_PERCENTILE": "100"}))
    assert top[("1x RTX 4090", "US", "verified", "on-demand")].price_per_hour == Decimal("0.552")


def test_percentile_out_of_range_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="price_percentile"):
        run(recorded(), settings={"price_percentile": 101})


def test_regions_and_gpu_families_settings() -> None:
    by_key = offers(run(recorded(), settings={"regions": ["ca"]}))
    assert sorted(by_key) == [("8x H100 SXM", "CA", "verified", "bid"),
                              ("8x H100 SXM", "CA", "verified", "on-demand")]
    by_key = offers(run(recorded(), settings={"gpu_families": ["rtx-4090"]}))
    assert {k[0] for k in by_key} == {"1x RTX 4090", "2x RTX 4090"}
    assert len(by_key) == 6


def test_empty_offers_yield_nothing() -> None:
    assert run(recorded(name="bundles_empty.json")) == []


def test_refused_search_is_a_source_error() -> None:
    with pytest.raises(SourceError, match="search failed: invalid query"):
        run(lambda request: httpx.Response(200, json={"success": False, "msg": "invalid query"}))


def test_response_without_offers_list_is_a_source_error() -> None:
    with pytest.raises(SourceError, match="no 'offers' list"):
        run(lambda request: httpx.Response(200, json={"offers": {"id": 1}}))


def test_key_is_optional_and_never_in_error_messages() -> None:
    assert VastaiSource.from_config({}, {})._secret is None
    with pytest.raises(SourceError, match="HTTP 500") as info:
        run(lambda request: httpx.Response(500, text=f"boom {KEY}"),
            environ={"GPU_TRACKER_VASTAI_API_KEY": KEY})
    assert KEY not in str(info.value)


@pytest.mark.parametrize(("geolocation", "expected"), [
    ("Texas, US", "US"), ("Quebec, CA", "CA"), ("Atlantis, at", "AT"), (None, ""), ("", ""),
    ("Sweden", "Sweden"), ("US", "US"),
])
def test_country_of(geolocation: str | None, expected: str) -> None:
    assert country_of(geolocation) == expected


@given(st.lists(st.decimals(min_value=0, max_value=1000, places=4), min_size=1),
       st.integers(min_value=0, max_value=100), st.integers(min_value=0, max_value=100))
def test_nearest_rank_is_a_member_and_monotonic(values: list[Decimal], p: int, q: int) -> None:
    values = sorted(values)
    low, high = sorted((p, q))
    assert nearest_rank(values, low) in values
    assert nearest_rank(values, low) <= nearest_rank(values, high)
    assert nearest_rank(values, 0) == values[0]
    assert nearest_rank(values, 100) == values[-1]
