"""The azure source against recorded Retail Prices API pages served through HttpClient."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from scrapers.azure import (
    AZURE_GPU_SIZES,
    AzureSource,
    gpu_for_size,
    odata_filter,
    rebase_link,
)
from scrapers.base import PriceObservation, Rejected
from tests.helpers import fetch_records
from tracker.core.errors import SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "azure"
FETCHED_AT = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def page(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def family_of(request: httpx.Request) -> str:
    odata = parse_qs(urlsplit(str(request.url)).query)["$filter"][0]
    for family in ("NC", "ND", "NV"):
        if f"'Standard_{family}'" in odata:
            return family
    raise AssertionError(f"unexpected filter {odata}")


class Recorder:
    """A MockTransport handler serving the recorded pages by filter and $skip."""

    def __init__(self, pages: dict[tuple[str, str], dict] | None = None) -> None:
        self.requests: list[httpx.Request] = []
        self.pages = pages if pages is not None else {
            ("NC", ""): page("nc_page1.json"),
            ("NC", "1000"): page("nc_page2.json"),
            ("ND", ""): page("nd_page1.json"),
            ("NV", ""): page("nv_page1.json"),
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        query = parse_qs(urlsplit(str(request.url)).query)
        key = (family_of(request), query.get("$skip", [""])[0])
        body = self.pages.get(key, page("empty_page.json"))
        return httpx.Response(200, content=json.dumps(body).encode())


def run(source: AzureSource, handler) -> list:
    return fetch_records(source, handler, FETCHED_AT)


def default_source(**overrides) -> AzureSource:
    return AzureSource.from_config(overrides or None, environ={})


def observations(records: list) -> list[PriceObservation]:
    return [r for r in records if isinstance(r, PriceObservation)]


def find(records: list, size: str, region: str, category: str) -> PriceObservation:
    hits = [o for o in observations(records)
            if o.instance_type == size and o.region == region and o.category == category]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.fixture(scope="module")
def records() -> list:
    return run(default_source(), Recorder())


def test_requests_follow_next_page_link_on_the_configured_endpoint() -> None:
    recorder = Recorder()
    run(default_source(), recorder)
    urls = [urlsplit(str(r.url)) for r in recorder.requests]
    assert len(urls) == 4  # NC page 1, NC page 2, ND, NV
    first = parse_qs(urls[0].query)
    assert first["api-version"] == ["2023-01-01-preview"]
    assert first["currencyCode"] == ["'USD'"]
    assert first["meterRegion"] == ["'primary'"]
    assert first["$filter"] == [
        "serviceName eq 'Virtual Machines' and (priceType eq 'Consumption' or priceType eq "
        "'Reservation') and contains(armSkuName, 'Standard_NC')"]
    second = parse_qs(urls[1].query)
    assert second["$skip"] == ["1000"]
    # The link carries its own query (the recorded page's, fetched without reservations).
    link = urlsplit(page("nc_page1.json")["NextPageLink"])
    assert second["$filter"] == parse_qs(link.query)["$filter"]
    assert (urls[1].scheme, urls[1].netloc, urls[1].path) == (
        "https", "prices.azure.com", "/api/retail/prices")


def test_next_page_link_is_rebased_onto_a_loopback_url() -> None:
    recorder = Recorder()
    source = default_source(url="http://127.0.0.1:8765/api/retail/prices")
    run(source, recorder)
    hosts = {(r.url.host, r.url.port) for r in recorder.requests}
    assert hosts == {("127.0.0.1", 8765)}
    link = page("nc_page1.json")["NextPageLink"]
    rebased = rebase_link(link, "http://127.0.0.1:8765/api/retail/prices")
    assert rebased.startswith("http://127.0.0.1:8765/api/retail/prices?currencyCode=")
    assert rebased.endswith("&$skip=1000")


def test_a100_pcie_on_demand_and_spot(records: list) -> None:
    od = find(records, "Standard_NC24ads_A100_v4", "eastus", "on-demand")
    assert od.price_per_hour == Decimal("3.673")
    assert isinstance(od.price_per_hour, Decimal)
    assert od.currency == "USD"
    assert (od.gpu_name, od.gpu_count, od.gpu_memory_gb) == ("NVIDIA A100 80GB PCIe", 1, 80)
    assert canonical_gpu(od.gpu_name, od.gpu_memory_gb) == "a100-80gb-pcie"
    assert od.vcpus == 24
    assert od.provider == "azure"
    assert od.observed_at == FETCHED_AT  # one snapshot per fetch
    assert od.attributes["effective_start"] == "2023-09-01T00:00:00Z"
    assert od.source_url == "https://prices.azure.com/api/retail/prices"
    assert od.attributes["meter_id"] == "0a6e8a3c-7e37-5f7d-9d44-0c1b2a6a7e01"
    spot = find(records, "Standard_NC24ads_A100_v4", "eastus", "spot")
    assert spot.price_per_hour == Decimal("0.7346")
    assert find(records, "Standard_NC48ads_A100_v4", "eastus", "on-demand").gpu_count == 2
    eu = find(records, "Standard_NC96ads_A100_v4", "westeurope", "spot")
    assert (eu.price_per_hour, eu.gpu_count) == (Decimal("5.2296"), 4)


def test_windows_low_priority_and_non_primary_rows_are_skipped(records: list) -> None:
    nc24 = [o for o in observations(records) if not o.variant
            and o.instance_type == "Standard_NC24ads_A100_v4" and o.region == "eastus"]
    assert sorted(o.category for o in nc24) == ["on-demand", "spot"]
    assert all(o.price_per_hour != Decimal("4.409") for o in nc24)  # the Windows meter
    nc6 = [o for o in observations(records) if o.instance_type == "Standard_NC6s_v3"
           and not o.variant]
    assert [(o.category, o.price_per_hour) for o in nc6] == [("on-demand", Decimal("3.06"))]
    t4 = [o for o in observations(records) if o.instance_type == "Standard_NC4as_T4_v3"
          and not o.variant]
    assert sorted((o.category, o.price_per_hour) for o in t4) == [
        ("on-demand", Decimal("0.526")), ("spot", Decimal("0.0526"))]
    h100 = [o for o in observations(records) if o.instance_type == "Standard_ND96isr_H100_v5"
            and not o.variant]
    assert sorted(o.price_per_hour for o in h100) == [Decimal("39.328"), Decimal("98.32")]


def test_nd_series_gpu_models(records: list) -> None:
    h100 = find(records, "Standard_ND96isr_H100_v5", "eastus", "on-demand")
    assert (h100.gpu_count, h100.gpu_memory_gb, h100.vcpus) == (8, 80, 96)
    assert canonical_gpu(h100.gpu_name, h100.gpu_memory_gb) == "h100-sxm"
    a100_40 = find(records, "Standard_ND96asr_v4", "eastus", "on-demand")
    assert canonical_gpu(a100_40.gpu_name, a100_40.gpu_memory_gb) == "a100-40gb"
    assert a100_40.price_per_hour == Decimal("27.197")
    a100_80 = find(records, "Standard_ND96amsr_A100_v4", "westeurope", "on-demand")
    assert canonical_gpu(a100_80.gpu_name, a100_80.gpu_memory_gb) == "a100-80gb"
    h200 = find(records, "Standard_ND96isr_H200_v5", "eastus2", "on-demand")
    assert (canonical_gpu(h200.gpu_name, h200.gpu_memory_gb), h200.gpu_count) == ("h200", 8)
    mi = find(records, "Standard_ND96isr_MI300X_v5", "eastus", "on-demand")
    assert canonical_gpu(mi.gpu_name, mi.gpu_memory_gb) == "mi300x"
    assert mi.price_per_hour == Decimal("48.0")


def test_h100_nvl_is_not_h100_sxm(records: list) -> None:
    nvl = find(records, "Standard_NC40ads_H100_v5", "eastus", "on-demand")
    assert canonical_gpu(nvl.gpu_name, nvl.gpu_memory_gb) == "h100-nvl"
    assert (nvl.price_per_hour, nvl.gpu_memory_gb) == (Decimal("6.98"), 94)


def test_fractional_a10(records: list) -> None:
    sixth = find(records, "Standard_NV6ads_A10_v5", "eastus", "on-demand")
    assert sixth.gpu_count == pytest.approx(1 / 6)
    assert sixth.gpu_memory_gb == 24
    assert sixth.gpu_count * sixth.gpu_memory_gb == pytest.approx(4.0)  # 4 GB slice
    assert sixth.attributes["fractional_gpu"] is True
    assert canonical_gpu(sixth.gpu_name, sixth.gpu_memory_gb) == "a10"
    spot = find(records, "Standard_NV6ads_A10_v5", "eastus", "spot")
    assert spot.price_per_hour == Decimal("0.0908")
    whole = find(records, "Standard_NV36ads_A10_v5", "eastus", "on-demand")
    assert whole.gpu_count == 1 and "fractional_gpu" not in whole.attributes


def test_zero_price_is_left_to_ingest_validation(records: list) -> None:
    zero = find(records, "Standard_NC80adis_H100_v5", "westus3", "on-demand")
    assert zero.price_per_hour == Decimal("0.0")
    assert zero.gpu_count == 2


def test_rejections_carry_reason_and_raw_row(records: list) -> None:
    rejected = [r for r in records if isinstance(r, Rejected)]
    reasons = sorted(r.reason for r in rejected)
    assert len(rejected) == 2  # GB200 (ND128isr_NDR_GB200_v6) is in the size table now
    assert reasons[0].startswith("retailPrice is missing or not a number: None")
    assert "unmapped Azure GPU VM size Standard_NC8ads_A10_v4" in reasons[1]
    assert all(r.provider == "azure" and isinstance(r.raw, dict) for r in rejected)
    assert {r.raw["armSkuName"] for r in rejected} == {
        "Standard_NC12s_v3", "Standard_NC8ads_A10_v4"}


def test_totals(records: list) -> None:
    obs = [o for o in observations(records) if not o.variant]
    assert len(obs) == 21
    assert len({(o.instance_type, o.region, o.category) for o in obs}) == 21
    plans = [o for o in observations(records) if o.variant]
    assert {o.variant for o in plans} == {"savings-plan"}  # the fixtures' savingsPlan lists
    assert len(plans) == 14
    assert len(run(default_source(commitments=False), Recorder())) == len(records) - 14
    assert {o.region for o in obs} == {"eastus", "eastus2", "westeurope", "westus3"}


def test_regions_setting_adds_one_query_per_family_and_region() -> None:
    recorder = Recorder(pages={})
    source = AzureSource.from_config(
        {"regions": ["eastus", "westeurope"]}, environ={})
    assert run(source, recorder) == []
    filters = [parse_qs(urlsplit(str(r.url)).query)["$filter"][0] for r in recorder.requests]
    assert len(filters) == 6
    assert filters[0].endswith("contains(armSkuName, 'Standard_NC') and armRegionName eq 'eastus'")
    assert filters[1].endswith("and armRegionName eq 'westeurope'")


def test_families_and_currency_from_environment() -> None:
    recorder = Recorder()
    source = AzureSource.from_config(None, environ={
        "GPU_TRACKER_SOURCE_AZURE_FAMILIES": "ND",
        "GPU_TRACKER_SOURCE_AZURE_CURRENCY": "EUR",
    })
    records = run(source, recorder)
    assert len(recorder.requests) == 1
    assert parse_qs(urlsplit(str(recorder.requests[0].url)).query)["currencyCode"] == ["'EUR'"]
    assert {o.instance_type for o in observations(records)} == {
        "Standard_ND96isr_H100_v5", "Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4",
        "Standard_ND96isr_H200_v5", "Standard_ND96isr_MI300X_v5", "Standard_ND128isr_NDR_GB200_v6"}


def test_currency_comes_from_each_item() -> None:
    eur = page("nv_page1.json")
    for item in eur["Items"]:
        item["currencyCode"] = "EUR"
    source = default_source(families=["NV"])
    obs = observations(run(source, Recorder(pages={("NV", ""): eur})))
    assert {o.currency for o in obs} == {"EUR"}


def test_a_repeating_next_page_link_fails_the_source() -> None:
    looping = page("nd_page1.json")
    looping["NextPageLink"] = (
        "https://prices.azure.com:443/api/retail/prices?api-version=2023-01-01-preview"
        "&$filter=contains(armSkuName,%20%27Standard_ND%27)&$skip=1000")
    pages = {("ND", ""): looping, ("ND", "1000"): looping}
    source = default_source(families=["ND"])
    with pytest.raises(SourceError, match="NextPageLink repeats"):
        run(source, Recorder(pages=pages))


def test_more_pages_than_max_pages_fails_the_source() -> None:
    calls = {"n": 0}

    def endless(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        body = page("empty_page.json")
        body["NextPageLink"] = (
            "https://prices.azure.com:443/api/retail/prices?$filter=contains(armSkuName,"
            f"%20%27Standard_NV%27)&$skip={calls['n'] * 1000}")
        return httpx.Response(200, json=body)

    source = default_source(families=["NV"], max_pages=3)
    with pytest.raises(SourceError, match="max_pages=3"):
        run(source, endless)
    assert calls["n"] == 3


def test_empty_page_ends_without_records() -> None:
    source = default_source(families=["NV"])
    assert run(source, Recorder(pages={("NV", ""): page("empty_page.json")})) == []


@pytest.mark.parametrize("body", [b'{"Items": [', b'{"BillingCurrency": "USD"}', b"[]"])
def test_malformed_pages_fail_the_source(body: bytes) -> None:
    source = default_source(families=["NC"])
    with pytest.raises(SourceError):
        run(source, lambda request: httpx.Response(200, content=body))


def test_server_errors_after_retries_fail_the_source() -> None:
    calls = {"n": 0}

    def failing(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(503)

    with pytest.raises(SourceError, match="HTTP 503"):
        run(default_source(families=["NC"]), failing)
    assert calls["n"] == 4  # one try and three retries


def single_item_page(**changes) -> dict:
    body = page("nv_page1.json")
    item = copy.deepcopy(body["Items"][0])
    item.update(changes)
    body["Items"] = [item]
    return body


@pytest.mark.parametrize(("changes", "reason"), [
    ({"unitOfMeasure": "1/Month"}, "unexpected unitOfMeasure '1/Month' (want '1 Hour')"),
    ({"currencyCode": None}, "missing currencyCode"),
    ({"armRegionName": ""}, "missing armRegionName"),
    ({"armSkuName": None}, "missing armSkuName"),
    ({"retailPrice": "0.454"}, "retailPrice is missing or not a number: '0.454'"),
])
def test_bad_fields_are_rejected(changes: dict, reason: str) -> None:
    source = default_source(families=["NV"])
    records = run(source, Recorder(pages={("NV", ""): single_item_page(**changes)}))
    assert len(records) == 1
    assert isinstance(records[0], Rejected)
    assert records[0].reason == reason


def test_every_row_of_a_fetch_is_one_snapshot(records: list) -> None:
    assert {o.observed_at for o in observations(records)} == {FETCHED_AT}
    starts = {o.attributes["effective_start"] for o in observations(records)}
    assert len(starts) > 5  # the meters' own dates differ; they stay attributes


def test_duplicate_meter_with_another_price_is_rejected() -> None:
    body = page("nv_page1.json")
    twin = copy.deepcopy(body["Items"][0])
    twin["retailPrice"] = 0.5
    twin["meterId"] = "ffffffff-0000-0000-0000-000000000000"
    same = copy.deepcopy(body["Items"][0])
    body["Items"] += [twin, same]
    source = default_source(families=["NV"])
    records = run(source, Recorder(pages={("NV", ""): body}))
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert len(rejected) == 1  # the exact duplicate is dropped silently
    assert rejected[0].reason.startswith(
        "second on-demand meter for Standard_NV6ads_A10_v5 in eastus with a different price")


def test_odata_filter_quotes_values() -> None:
    assert odata_filter("NC", "o'brien") == (
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
        "and contains(armSkuName, 'Standard_NC') and armRegionName eq 'o''brien'")


# Sizes whose GPU is not in the canonical table: ingest quarantines them as unknown GPUs.
NOT_CANONICAL: set[str] = set()  # M60, P40 and MI25 joined the table (issue 13)


@pytest.mark.parametrize("size", sorted(AZURE_GPU_SIZES))
def test_every_table_entry_maps_to_a_canonical_gpu(size: str) -> None:
    gpu = AZURE_GPU_SIZES[size]
    assert gpu_for_size(size.upper()) == gpu  # lookup ignores case
    assert 0 < gpu.count <= 8
    if gpu.gpu_name in NOT_CANONICAL:
        assert canonical_gpu(gpu.gpu_name, gpu.memory_gb) is None
    else:
        assert canonical_gpu(gpu.gpu_name, gpu.memory_gb) is not None


def test_settings_and_registry_contract() -> None:
    assert AzureSource.name == "azure"
    assert AzureSource.SECRET_ENV is None
    assert AzureSource.DEFAULTS["url"] == "https://prices.azure.com/api/retail/prices"
    assert AzureSource.DEFAULTS["regions"] == []
    assert AzureSource.DEFAULTS["currency"] == "USD"
    assert AzureSource.DEFAULTS["max_pages"] > 0
    from scrapers import load_source
    assert load_source("azure") is AzureSource


# Committed prices: reservations and savings plans ------------------------------------------

def reservation_records() -> list:
    return run(default_source(), Recorder(pages={("ND", ""): page("nd_reservations_page.json")}))


def test_reservation_rows_store_the_hourly_equivalent_of_the_term_price() -> None:
    records = reservation_records()
    committed = {(o.region, o.category, o.variant): o for o in observations(records)
                 if o.variant == "reservation"}
    one = committed[("eastus", "reserved-1y", "reservation")]
    assert one.price_per_hour == (Decimal("530000") / 8760).quantize(Decimal("1e-10"))
    assert one.attributes["upfront_total"] == "530000.0"
    assert (one.attributes["commitment_kind"], one.attributes["term_months"]) == \
        ("reservation", 12)
    assert (one.gpu_count, one.instance_type) == (8, "Standard_ND96isr_H100_v5")
    three = committed[("eastus", "reserved-3y", "reservation")]
    assert three.price_per_hour == (Decimal("1150000") / 26280).quantize(Decimal("1e-10"))
    assert three.attributes["term_months"] == 36
    # unitOfMeasure "1 Year" is accepted for a reservation too
    eu = committed[("westeurope", "reserved-1y", "reservation")]
    assert eu.price_per_hour == (Decimal("580000") / 8760).quantize(Decimal("1e-10"))
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert [r.reason for r in rejected] == [
        "unknown reservationTerm '5 Years' (want '1 Year' or '3 Years')"]


def test_savings_plan_rates_are_committed_prices_of_their_own() -> None:
    records = reservation_records()
    plans = {o.category: o for o in observations(records) if o.variant == "savings-plan"}
    assert plans["reserved-1y"].price_per_hour == Decimal("65.2")
    assert plans["reserved-3y"].price_per_hour == Decimal("46.4")
    assert plans["reserved-1y"].attributes["commitment_kind"] == "savings-plan"
    od = [o for o in observations(records) if o.category == "on-demand"]
    assert [o.price_per_hour for o in od] == [Decimal("98.32")]


def test_commitments_off_skips_reservation_rows_and_savings_plans() -> None:
    records = run(default_source(commitments=False),
                  Recorder(pages={("ND", ""): page("nd_reservations_page.json")}))
    assert {o.category for o in observations(records)} == {"on-demand"}
    assert not [r for r in records if isinstance(r, Rejected)]


def test_real_capture_savings_plans_of_a_gpu_size() -> None:
    capture = json.loads((FIXTURES / "real" / "eastus2_page1.json").read_text("utf-8"))
    capture["NextPageLink"] = None  # its link names another query; one page is enough here
    records = run(default_source(), Recorder(pages={("NC", ""): capture}))
    a100 = {(o.category, o.variant): o.price_per_hour for o in observations(records)
            if o.instance_type == "Standard_NC48ads_A100_v4"}
    assert a100[("on-demand", "")] == Decimal("7.346")
    assert a100[("reserved-1y", "savings-plan")] == Decimal("6.1148104")
    assert a100[("reserved-3y", "savings-plan")] == Decimal("4.5317474")


def gb300_page() -> dict:
    """nd_page1.json's ND GB200 v6 item re-labelled for the ND GB300 v6 sizes (hand-made rows,
    tests/fixtures/azure/README.md), plus a size no Microsoft table lists."""
    nd = page("nd_page1.json")
    (gb200,) = [i for i in nd["Items"] if i["armSkuName"] == "Standard_ND128isr_NDR_GB200_v6"]
    items = []
    for size, price in (("Standard_ND128isr_GB300_v6", 150.0),
                        ("Standard_ND128isrG5_GB300_v6", 155.0),
                        ("Standard_ND256isr_GB300_v6", 300.0)):
        label = size.removeprefix("Standard_").replace("_", " ")
        item = copy.deepcopy(gb200)
        item.update(armSkuName=size, meterName=label, skuName=label, retailPrice=price,
                    unitPrice=price, productName="Virtual Machines NDsv6 GB300 Series")
        items.append(item)
    return {**nd, "Items": items, "Count": len(items)}


def test_nd_gb300_v6_maps_to_gb300_with_four_gpus_and_its_rack_fabric() -> None:
    # nd-gb300-v6-series.md@0c72655c, Accelerators tab: both sizes "4 | 288".
    from tracker.core.fabric import offer_network, offer_scale_up_domain

    records = run(default_source(families=["ND"]), Recorder(pages={("ND", ""): gb300_page()}))
    for size in ("Standard_ND128isr_GB300_v6", "Standard_ND128isrG5_GB300_v6"):
        o = find(records, size, "eastus2", "on-demand")
        assert (o.gpu_count, o.gpu_memory_gb) == (4, 288)
        gpu = canonical_gpu(o.gpu_name, o.gpu_memory_gb)
        assert gpu == "gb300"
        net = offer_network("azure", size, gpu, 4)
        assert (net.node_link, net.cluster_network, net.cluster_gbps) == (
            "nvlink5", "infiniband", 3200.0)  # 4 x 800 Gb/s, the same page's Network tab
        assert offer_scale_up_domain("azure", size) == 72
    # A GB300 size no table lists is rejected as unmapped, its GPU named but no count guessed.
    (rejected,) = [r for r in records if isinstance(r, Rejected)]
    assert rejected.raw["armSkuName"] == "Standard_ND256isr_GB300_v6"
    assert "unmapped Azure GPU VM size Standard_ND256isr_GB300_v6" in rejected.reason
    assert "NVIDIA GB300" in rejected.reason
    assert gpu_for_size("Standard_ND256isr_GB300_v6") is None
