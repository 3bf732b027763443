"""SkyPilot catalog source against real vms.csv files (tests/fixtures/skypilot, see README)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapers.base import PriceObservation, Rejected
from scrapers.skypilot import (
    DEFAULT_CLOUDS,
    HOSTED_CATALOG_URL,
    SkypilotSource,
    parse_gpu_info,
    parse_vms_csv,
    per_gpu_memory_gb,
)
from tests.helpers import fetch_records
from tracker.core.errors import SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "skypilot"
ROOT = "https://catalog.test/catalogs"
FETCHED_AT = datetime(2026, 9, 20, 6, 0, tzinfo=UTC)


def parse(cloud: str, path: Path | None = None) -> list[PriceObservation | Rejected]:
    path = path or FIXTURES / "v8" / cloud / "vms.csv"
    with path.open(newline="") as handle:
        return list(parse_vms_csv(handle, cloud=cloud, observed_at=FETCHED_AT,
                                  source_url=f"{ROOT}/v8/{cloud}/vms.csv"))


def observations(records: list) -> list[PriceObservation]:
    return [r for r in records if isinstance(r, PriceObservation)]


def index(records: list) -> dict[tuple[str, str, str, str, str], PriceObservation]:
    out = {}
    for r in observations(records):
        key = (r.instance_type, r.region, r.zone, r.variant, r.category)
        assert key not in out, f"duplicate offer {key}"
        out[key] = r
    return out


def catalog_handler(requests: list[httpx.Request] | None = None,
                    overrides: dict[str, httpx.Response] | None = None) -> Callable:
    """Serve tests/fixtures/skypilot/v8 as the hosted catalog root does; 404 elsewhere."""

    def handler(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            requests.append(request)
        path = request.url.path
        if overrides and path in overrides:
            return overrides[path]
        prefix = "/catalogs/"
        file = FIXTURES / path[len(prefix):] if path.startswith(prefix) else None
        if file is not None and file.is_file() and file.name == "vms.csv":
            return httpx.Response(200, content=file.read_bytes(),
                                  headers={"Content-Type": "text/plain; charset=utf-8"})
        return httpx.Response(404, text="404: Not Found")

    return handler


def fetch(handler: Callable, clouds: list[str]) -> list:
    return fetch_records(SkypilotSource.from_config({"url": ROOT, "clouds": clouds}, {}),
                         handler, FETCHED_AT, retries=2)


# -- lambda: two real versions of the same file ----------------------------------------------------

def test_lambda_current_version_exact_prices() -> None:
    offers = index(parse("lambda"))
    h100 = offers[("gpu_8x_h100_sxm5", "us-east-1", "", "", "on-demand")]
    assert h100.price_per_hour == Decimal("31.92")
    assert h100.gpu_count == 8.0
    assert h100.gpu_name == "H100 SXM"
    assert h100.gpu_memory_gb == 80.0
    assert canonical_gpu(h100.gpu_name, h100.gpu_memory_gb) == "h100-sxm"
    assert (h100.vcpus, h100.ram_gb) == (208.0, 1800.0)
    assert h100.provider == "lambda" and h100.currency == "USD"
    assert h100.observed_at == FETCHED_AT
    assert h100.source_url == f"{ROOT}/v8/lambda/vms.csv"
    a6000 = offers[("gpu_1x_a6000", "europe-central-1", "", "", "on-demand")]
    assert a6000.price_per_hour == Decimal("1.09")
    assert canonical_gpu(a6000.gpu_name, a6000.gpu_memory_gb) == "rtx-a6000"


def test_lambda_older_version_exact_prices() -> None:
    offers = index(parse("lambda", FIXTURES / "history" / "lambda-95eaf484.csv"))
    assert offers[("gpu_8x_h100_sxm5", "us-west-1", "", "", "on-demand")].price_per_hour \
        == Decimal("23.92")
    assert offers[("gpu_1x_a6000", "us-west-1", "", "", "on-demand")].price_per_hour \
        == Decimal("0.8")
    assert ("gpu_1x_b200_sxm6", "us-west-1", "", "", "on-demand") not in offers


def test_lambda_rows_cpu_skipped_one_offer_per_region_no_spot() -> None:
    records = parse("lambda")
    obs = observations(records)
    assert len(records) == len(obs) == 22 * 3  # 24 types minus 2 CPU-only, 3 regions
    assert not any(o.instance_type.startswith("cpu_") for o in obs)
    assert {o.category for o in obs} == {"on-demand"}  # SpotPrice is empty on lambda
    assert {o.region for o in obs} == {"europe-central-1", "us-east-1", "us-west-1"}


def test_lambda_form_factor_from_instance_type() -> None:
    offers = index(parse("lambda"))
    pcie = offers[("gpu_1x_h100_pcie", "us-east-1", "", "", "on-demand")]
    assert pcie.gpu_name == "H100 PCIe"
    assert pcie.attributes["accelerator_name"] == "H100"
    assert canonical_gpu(pcie.gpu_name, pcie.gpu_memory_gb) == "h100-pcie"
    assert pcie.price_per_hour == Decimal("3.29")
    a100_80 = offers[("gpu_8x_a100_80gb_sxm4", "us-east-1", "", "", "on-demand")]
    assert canonical_gpu(a100_80.gpu_name, a100_80.gpu_memory_gb) == "a100-80gb"
    a100_40 = offers[("gpu_8x_a100", "us-east-1", "", "", "on-demand")]
    assert a100_40.gpu_name == "A100" and a100_40.gpu_memory_gb == 40.0
    assert canonical_gpu(a100_40.gpu_name, a100_40.gpu_memory_gb) == "a100-40gb"


# -- GpuInfo in both dialects --------------------------------------------------------------------

def test_gpu_info_python_dict_lambda_total_is_per_gpu() -> None:
    text = ("{'Gpus': [{'Name': 'V100', 'Manufacturer': 'NVIDIA', 'Count': 8.0, "
            "'MemoryInfo': {'SizeInMiB': 16384}}], 'TotalGpuMemoryInMiB': 16384}")
    info = parse_gpu_info(text)
    assert info is not None
    assert (info.name, info.memory_mib, info.total_mib) == ("V100", 16384.0, 16384.0)
    assert per_gpu_memory_gb(info, 8, "lambda") == 16.0
    # Without MemoryInfo, lambda's "total" is per GPU; elsewhere it is divided by the count.
    bare = parse_gpu_info("{'Gpus': [{'Name': 'V100', 'Count': 8.0}], "
                          "'TotalGpuMemoryInMiB': 16384}")
    assert per_gpu_memory_gb(bare, 8, "lambda") == 16.0
    assert per_gpu_memory_gb(bare, 8, "verda") == 2.0


def test_gpu_info_json_spheron_with_doubled_quotes_in_csv() -> None:
    records = parse("spheron")
    h100 = index(records)[("1H100.80S.32V_FIN-03_500", "Finland 3", "", "data-crunch",
                           "on-demand")]
    assert h100.gpu_name == "H100_SXM5" and h100.gpu_memory_gb == 80.0
    info = parse_gpu_info('{"Gpus": [{"Name": "H100_NVL", "Manufacturer": "NVIDIA", '
                          '"Count": 8.0, "MemoryInfo": {"SizeInMiB": 81920}, '
                          '"TotalGpuMemoryInMiB": 655360}]}')
    assert info is not None and info.name == "H100_NVL"
    assert (info.memory_mib, info.total_mib) == (81920.0, 655360.0)
    assert per_gpu_memory_gb(info, 8, "spheron") == 80.0


def test_gpu_info_that_is_not_a_dict() -> None:
    assert parse_gpu_info("") is None
    assert parse_gpu_info("A100-80GB") is None  # RunPod writes the name only
    assert parse_gpu_info("tpu-v2-8") is None
    assert parse_gpu_info("{'Gpus': [") is None
    # literal_eval, never eval: code is not run, it is just not a literal.
    assert parse_gpu_info("{'Gpus': __import__('os').system('echo pwned')}") is None


@given(st.text(max_size=200))
def test_gpu_info_never_raises(text: str) -> None:
    info = parse_gpu_info(text)
    assert info is None or info.memory_mib is None or info.memory_mib > 0


# -- spheron: an aggregator --------------------------------------------------------------------

def test_spheron_host_is_variant_and_spot_only_row() -> None:
    records = parse("spheron")
    offers = index(records)
    assert {o.provider for o in offers.values()} == {"spheron"}
    both = ("1H100.80S.32V_FIN-03_1000", "Finland 3", "", "data-crunch")
    assert offers[(*both, "on-demand")].price_per_hour == Decimal("3.0768")
    assert offers[(*both, "spot")].price_per_hour == Decimal("0.8015")
    assert offers[(*both, "spot")].attributes["host_provider"] == "data-crunch"
    # Spot offers with their own row have an empty Price: only a spot observation.
    spot_row = ("n3-A100x1-spot__CANADA-1", "CANADA-1", "", "spheron-ai")
    assert offers[(*spot_row, "spot")].price_per_hour == Decimal("1.1476")
    assert (*spot_row, "on-demand") not in offers
    assert offers[(*spot_row, "spot")].attributes["offer_type"] == "SPOT"
    nvl = offers[("n3-H100x8-NVLink__CANADA-1", "CANADA-1", "", "spheron-ai", "on-demand")]
    assert nvl.gpu_count == 8.0 and nvl.price_per_hour == Decimal("16.4807")
    assert canonical_gpu(nvl.gpu_name, nvl.gpu_memory_gb) == "h100-nvl"
    pcie = offers[("n3-H100x1__CANADA-1", "CANADA-1", "", "spheron-ai", "on-demand")]
    assert canonical_gpu(pcie.gpu_name, pcie.gpu_memory_gb) == "h100-pcie"
    assert len(observations(records)) == 18 + 4
    assert not [r for r in records if isinstance(r, Rejected)]


def test_spheron_a16_rows_keep_their_raw_name() -> None:
    a16 = [o for o in observations(parse("spheron")) if o.gpu_name == "A16_PCIE"]
    assert len(a16) == 1 and a16[0].gpu_count == 16.0
    assert canonical_gpu(a16[0].gpu_name, a16[0].gpu_memory_gb) == "a16"


def test_unknown_gpu_names_are_left_to_ingest() -> None:
    assert canonical_gpu("Voodoo 5 6000", None) is None  # ingest quarantines such rows


# -- nebius, aws, gcp ---------------------------------------------------------------------------

def test_nebius_zero_count_rows_are_cpu_only_and_spot_on_the_same_row() -> None:
    records = parse("nebius")
    offers = index(records)
    assert not any(o.instance_type.startswith("cpu-") for o in offers.values())
    key = ("gpu-h100-sxm_8gpu-128vcpu-1600gb", "eu-north1", "", "")
    assert offers[(*key, "on-demand")].price_per_hour == Decimal("23.60")
    assert offers[(*key, "spot")].price_per_hour == Decimal("10.00")
    assert offers[(*key, "on-demand")].gpu_memory_gb == 80.0  # not the 640 GB total
    assert canonical_gpu(offers[(*key, "spot")].gpu_name, 80.0) == "h100-sxm"
    b200 = offers[("gpu-b200-sxm_8gpu-160vcpu-1792gb", "us-central1", "", "", "on-demand")]
    assert b200.price_per_hour == Decimal("44.00") and b200.gpu_memory_gb == 180.0
    assert len(offers) == 21 + 8


def test_aws_spot_per_zone_on_demand_per_region() -> None:
    offers = index(parse("aws"))
    assert not any(o.instance_type == "a1.large" for o in offers.values())
    on_demand = offers[("g6.xlarge", "us-east-1", "", "", "on-demand")]
    assert on_demand.price_per_hour == Decimal("0.8048")
    assert on_demand.attributes == {"arch": "x86_64"}
    spots = {k[2]: v.price_per_hour for k, v in offers.items()
             if k[:2] == ("g6.xlarge", "us-east-1") and k[4] == "spot"}
    assert spots == {"use1-az1": Decimal("0.401100"), "use1-az2": Decimal("0.365300"),
                     "use1-az4": Decimal("0.349000"), "use1-az6": Decimal("0.398800")}
    assert canonical_gpu(on_demand.gpu_name, on_demand.gpu_memory_gb) == "l4"
    assert on_demand.gpu_memory_gb == pytest.approx(22888 / 1024, abs=1e-3)
    l40s = offers[("g6e.12xlarge", "eu-central-1", "euc1-az3", "", "spot")]
    assert l40s.price_per_hour == Decimal("13.120000") and l40s.gpu_count == 4.0
    # Per GPU, not the 183104 MiB total.
    assert l40s.gpu_memory_gb == pytest.approx(45776 / 1024, abs=1e-3)
    assert len(offers) == 4 + 12  # 4 regional on-demand, 12 zonal spot


def test_on_demand_kept_per_zone_when_zones_disagree() -> None:
    lines = (FIXTURES / "v8" / "aws" / "vms.csv").read_text().splitlines()
    header, rows = lines[0], [r for r in lines[1:] if r.startswith("g6.xlarge")
                              and ",us-east-2," in r]
    rows[1] = rows[1].replace(",0.8048,", ",0.8100,")  # a zone priced differently
    records = list(parse_vms_csv([header, *rows], cloud="aws", observed_at=FETCHED_AT))
    on_demand = {o.zone: o.price_per_hour for o in observations(records)
                 if o.category == "on-demand"}
    assert on_demand == {"use2-az1": Decimal("0.8048"), "use2-az2": Decimal("0.8100"),
                         "use2-az3": Decimal("0.8048")}


def test_gcp_accelerator_only_rows_and_tpus_skipped() -> None:
    records = parse("gcp")
    offers = index(records)
    assert not any(o.instance_type.startswith("a2-") for o in offers.values())  # no GPU listed
    assert not any("tpu" in o.instance_type for o in offers.values())
    t4 = offers[("T4:2", "us-central1", "", "", "on-demand")]
    assert t4.price_per_hour == Decimal("0.7") and t4.gpu_count == 2.0
    assert t4.attributes["price_scope"] == "accelerator-only"
    assert t4.gpu_memory_gb == 16.0 and canonical_gpu(t4.gpu_name, 16.0) == "t4"
    assert offers[("T4:2", "europe-west2", "europe-west2-b", "", "spot")].price_per_hour \
        == Decimal("0.2362")
    v100 = offers[("V100:8", "europe-west4", "", "", "on-demand")]
    assert v100.price_per_hour == Decimal("20.832")
    assert canonical_gpu(v100.gpu_name, v100.gpu_memory_gb) == "v100-16gb"
    assert len(offers) == 3 + 6


def test_bad_rows_are_rejected_with_reason() -> None:
    header = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,"
              "GpuInfo,SpotPrice")
    rows = [
        header,
        "gpu_1x_a10,A10,1.0,30.0,200.0,,us-east-1,,",  # neither price
        "gpu_1x_a10,A10,1.0,30.0,200.0,n/a,us-west-1,,",  # not a number
        "gpu_1x_a10,A10,1.0,30.0,200.0,1.29,,,",  # no region
        "gpu_1x_a10,A10,one,30.0,200.0,1.29,us-east-2,,",  # bad count
        "gpu_1x_a10,A10,1.0,30.0,200.0,1.29,us-south-1,,NaN",  # bad spot, good on-demand
        "gpu_1x_a10,A10,1.0,30.0,200.0,1.29,us-west-2,,,extra",  # too many cells
    ]
    records = list(parse_vms_csv(rows, cloud="lambda", observed_at=FETCHED_AT))
    reasons = [r.reason for r in records if isinstance(r, Rejected)]
    assert reasons == [
        "no Price and no SpotPrice",
        "Price not a number: 'n/a'",
        "missing Region",
        "AcceleratorCount is not a number: 'one'",
        "SpotPrice not a finite number: 'NaN'",
        "row has 1 cells more than the header",
    ]
    assert all(r.provider == "lambda" for r in records if isinstance(r, Rejected))
    kept = observations(records)
    assert [(o.region, o.category, o.price_per_hour) for o in kept] == [
        ("us-south-1", "on-demand", Decimal("1.29"))]


def test_file_without_v8_columns_fails_the_source() -> None:
    with pytest.raises(SourceError, match="missing columns: AcceleratorName"):
        list(parse_vms_csv(["InstanceType,Price,Region", "x,1,y"], cloud="aws",
                           observed_at=FETCHED_AT, source_url=f"{ROOT}/v8/aws/vms.csv"))


# -- the source over HTTP -----------------------------------------------------------------------

def test_fetch_several_clouds_over_http() -> None:
    requests: list[httpx.Request] = []
    records = fetch(catalog_handler(requests), ["lambda", "spheron", "nebius"])
    assert [r.url.path for r in requests] == [
        "/catalogs/v8/lambda/vms.csv", "/catalogs/v8/spheron/vms.csv",
        "/catalogs/v8/nebius/vms.csv"]
    by_provider: dict[str, int] = {}
    for o in observations(records):
        by_provider[o.provider] = by_provider.get(o.provider, 0) + 1
    assert by_provider == {"lambda": 66, "spheron": 22, "nebius": 29}
    assert all(o.observed_at == FETCHED_AT for o in observations(records))


def test_vast_directory_maps_to_vastai_provider() -> None:
    rows = ["InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Region,"
            "Price,SpotPrice",
            "1x-RTX4090-16-64,RTX4090,1,16,64,,US,0.35,0.25"]
    (obs,) = [o for o in parse_vms_csv(rows, cloud="vast", observed_at=FETCHED_AT)
              if o.category == "on-demand"]
    assert obs.provider == "vastai"


def test_missing_cloud_becomes_rejected_row_others_still_read() -> None:
    records = fetch(catalog_handler(), ["lambda", "fluidstack"])
    rejected = [r for r in records if isinstance(r, Rejected)]
    assert len(rejected) == 1
    assert rejected[0].provider == "fluidstack"
    assert "fluidstack" in rejected[0].reason and "HTTP 404" in rejected[0].reason
    assert rejected[0].raw == {"cloud": "fluidstack", "url": f"{ROOT}/v8/fluidstack/vms.csv"}
    assert len(observations(records)) == 66


def test_every_cloud_missing_fails_the_source() -> None:
    with pytest.raises(SourceError, match="no catalog found for any cloud"):
        fetch(catalog_handler(), ["fluidstack", "paperspace"])


def test_server_error_fails_the_whole_source() -> None:
    overrides = {"/catalogs/v8/nebius/vms.csv": httpx.Response(503)}
    with pytest.raises(SourceError, match="HTTP 503"):
        fetch(catalog_handler(overrides=overrides), ["lambda", "nebius"])


def test_settings_defaults_and_environment() -> None:
    assert SkypilotSource.DEFAULTS["url"] == HOSTED_CATALOG_URL
    assert HOSTED_CATALOG_URL.endswith("/skypilot-catalog/master/catalogs")
    assert {"aws", "azure", "gcp", "lambda", "runpod", "nebius", "spheron"} <= set(DEFAULT_CLOUDS)
    assert not {"paperspace", "fluidstack", "do", "kubernetes"} & set(DEFAULT_CLOUDS)
    source = SkypilotSource.from_config({}, {
        "GPU_TRACKER_SOURCE_SKYPILOT_CLOUDS": "lambda,runpod",
        "GPU_TRACKER_SOURCE_SKYPILOT_URL": "http://127.0.0.1:8123/catalogs"})
    assert source.settings["clouds"] == ["lambda", "runpod"]
    assert source.settings["url"] == "http://127.0.0.1:8123/catalogs"
    assert SkypilotSource.SECRET_ENV is None
