"""Every real provider capture in tests/fixtures through its scraper and ingest's validation.

Per defect of issue 13 a test on the capture that showed it, and one coverage test: every GPU
row of every real sample is stored with its canonical GPU, count and per-GPU memory, or rejected
for a reason this file names; none is rejected as an "unknown GPU" while the GPU is in the table.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from scrapers.azure import AzureSource
from scrapers.base import PriceObservation, Rejected
from scrapers.gpuhunt import parse_catalog_csv
from scrapers.runpod import RunpodSource
from scrapers.skypilot import parse_vms_csv
from scrapers.vastai import parse_offer
from tests.helpers import mock_client
from tracker.core.gpus import gpu_table
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records, validate

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AT = datetime(2026, 9, 14, 8, 0, tzinfo=UTC)
AZURE_REGIONS = ("westeurope", "eastus2", "swedencentral")
SKYPILOT_CLOUDS = ("vast", "shadeform", "runpod", "lambda", "nebius", "spheron")

# Every reason a real row may be rejected for, and why it is right to reject it.
ALLOWED_REJECTS = [
    # Preview RTX PRO 6000 BSE sizes and NCads A10 v4: no published GPU count (scrapers/azure.py).
    re.compile(r"^unmapped Azure GPU VM size Standard_NC(8ads_A10_v4|(32|64|128|132|256|264|320"
               r"|324)l?ds_xl_RTXPRO6000BSE_v6) "),
    # Real vast hosts list modded or variant cards: a 48 GB RTX 4090, 16 GB "RTX4060"/"RTX4070"
    # (Ti/Super parts under the base name), an 8 GB RTX 3060. Rejected, never re-classed.
    re.compile(r"^memory (47\.988|15\.99\d|8) GB per GPU disagrees with "
               r"(rtx-4090|rtx-4060|rtx-4070|rtx-3060) "),
    # Spheron's n3-H100x8-NVLink lists `H100_NVL` with 80 GB: an SXM board with NVLink, not the
    # 94 GB H100 NVL; the name and the memory disagree, so the row is not stored.
    re.compile(r"^memory 80 GB per GPU disagrees with h100-nvl \(94 GB\)"),
]


def azure_records(region: str) -> list:
    page = json.loads((FIXTURES / "azure" / "real" / f"{region}_page1.json").read_text("utf-8"))
    page["NextPageLink"] = None  # page 1 only: the capture's link points at page 2
    body = json.dumps(page).encode()
    source = AzureSource.from_config({"families": ["NC", "ND", "NV"]}, environ={})
    with mock_client(lambda _r: httpx.Response(200, content=body)) as client:
        return list(source.fetch(client, AT))


def skypilot_records(cloud: str) -> list:
    with open(FIXTURES / "skypilot" / "v8" / cloud / "vms.csv", newline="", encoding="utf-8") as f:
        return list(parse_vms_csv(io.StringIO(f.read(), newline=""), cloud=cloud,
                                  observed_at=AT))


def gpuhunt_lambda_records() -> list:
    path = FIXTURES / "gpuhunt" / "lambdalabs-real-20260310.csv"
    with open(path, newline="", encoding="utf-8") as f:
        return list(parse_catalog_csv(io.StringIO(f.read(), newline=""), provider="lambdalabs",
                                      observed_at=AT))


def runpod_table() -> list[dict]:
    return json.loads((FIXTURES / "runpod" / "gpu_types_table.json").read_text("utf-8"))


def runpod_records(stock: str | None = "High") -> list:
    """RunPod's real table of 45 GPU type ids in the gpuTypes shape (prices hand-made: no real
    priced response exists, see tests/fixtures/runpod/README.md)."""
    gpu_types = [{
        "id": row["id"], "displayName": row["displayName"], "memoryInGb": row["memoryInGb"],
        "secureCloud": True, "communityCloud": False, "securePrice": 1.0, "communityPrice": None,
        "secureSpotPrice": None, "communitySpotPrice": None, "maxGpuCount": 8,
        "lowestPrice": {"stockStatus": stock, "minVcpu": 8, "minMemory": 32},
    } for row in runpod_table()]
    body = json.dumps({"data": {"gpuTypes": gpu_types}}).encode()
    source = RunpodSource.from_config({"gpu_counts": [1]},
                                      {"GPU_TRACKER_RUNPOD_API_KEY": "rpa_test"})
    with mock_client(lambda _r: httpx.Response(200, content=body)) as client:
        return list(source.fetch(client, AT))


def every_sample() -> dict[str, list]:
    samples = {f"azure/{r}": azure_records(r) for r in AZURE_REGIONS}
    samples.update({f"skypilot/{c}": skypilot_records(c) for c in SKYPILOT_CLOUDS})
    samples["gpuhunt/lambdalabs"] = gpuhunt_lambda_records()
    samples["runpod/gpu-types"] = runpod_records()
    return samples


def stored(records: Iterable) -> dict[tuple[str, str, str], tuple[str, float, float | None]]:
    """(instance, region, category) -> (canonical GPU, count, per-GPU memory) of storable rows."""
    result = {}
    for record in records:
        if isinstance(record, PriceObservation):
            gpu_id, reason = validate(record)
            if reason is None:
                key = (record.instance_type, record.region, record.category)
                result[key] = (gpu_id, record.gpu_count, record.gpu_memory_gb)
    return result


def reasons(records: Iterable) -> list[str]:
    out = []
    for record in records:
        if isinstance(record, Rejected):
            out.append(record.reason)
        elif isinstance(record, PriceObservation):
            reason = validate(record)[1]
            if reason is not None:
                out.append(reason)
    return out


# -- the coverage test ------------------------------------------------------------------------

def test_every_real_gpu_row_is_stored_right_or_rejected_for_a_named_reason() -> None:
    table = gpu_table()
    total_stored = 0
    for name, records in every_sample().items():
        for (instance, _region, _cat), (gpu_id, count, memory) in stored(records).items():
            total_stored += 1
            assert count > 0, (name, instance)
            if memory is not None:  # validate() checked it; say it again, independently
                assert abs(memory - table[gpu_id].memory_gb) <= 0.1 * table[gpu_id].memory_gb
        for reason in reasons(records):
            assert not reason.startswith("unknown GPU"), (name, reason)
            assert any(p.search(reason) for p in ALLOWED_REJECTS), (name, reason)
    assert total_stored > 300


# -- per defect ---------------------------------------------------------------------------------

def test_azure_nvv3_nvv4_v710_rtx_pro_and_nd_variants_map() -> None:
    offers = {}
    for region in AZURE_REGIONS:
        offers.update(stored(azure_records(region)))
    expect = {
        ("Standard_NV12s_v3", "westeurope"): ("tesla-m60", 1, 8),
        ("Standard_NV24_Promo", "westeurope"): ("tesla-m60", 4, 8),
        ("Standard_NV16as_v4", "westeurope"): ("mi25", 0.5, 16),
        ("Standard_NV4as_v4", "eastus2"): ("mi25", 0.125, 16),
        ("Standard_NV12ads_V710_v5", "westeurope"): ("radeon-pro-v710", 0.5, 28),
        ("Standard_NC72ds_xl_RTXPRO6000BSE_v6", "westeurope"): ("rtx-pro-6000", 0.5, 96),
        ("Standard_NC144lds_xl_RTXPRO6000BSE_v6", "swedencentral"): ("rtx-pro-6000", 1, 96),
        ("Standard_ND96isf_H100_v5", "swedencentral"): ("h100-sxm", 8, 80),
        ("Standard_ND96is_noIB_H100_v5", "westeurope"): ("h100-sxm", 8, 80),
        ("Standard_ND96isrf_H100_v5", "eastus2"): ("h100-sxm", 8, 80),
        ("Standard_ND96is_MI300X_v5", "eastus2"): ("mi300x", 8, 192),
        ("Standard_ND96asr_A100_v4", "westeurope"): ("a100-40gb", 8, 40),
        ("Standard_ND96ams_A100_v4", "eastus2"): ("a100-80gb", 8, 80),
        ("Standard_ND40s_v2", "swedencentral"): ("v100-32gb", 8, 32),
    }
    found = {(i, r): v for (i, r, _c), v in offers.items()}
    for key, value in expect.items():
        assert found.get(key) == value, key


def test_azure_two_identical_refreshes_keep_each_reject_once(any_db_url: str) -> None:
    db = open_database(any_db_url)
    first = ingest_records(db, "azure", azure_records("eastus2"), started_at=AT)
    second = ingest_records(db, "azure", azure_records("eastus2"),
                            started_at=AT + timedelta(hours=1))
    assert first.status == second.status == "ok"
    assert first.rejected == second.rejected == 3
    # The preview RTX PRO 6000 sizes with no published GPU count, counted as unmapped.
    assert first.unmapped == second.unmapped == 3
    with db.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT count(*), min(count), max(count) FROM rejected_row WHERE source = 'azure'"
        )).one()
        span = conn.execute(text(
            "SELECT min(first_seen), max(last_seen) FROM rejected_row")).one()
    assert tuple(rows) == (3, 2, 2)
    assert span[0] < span[1]


def test_vast_catalog_memory_is_per_gpu_and_no_spot_rows() -> None:
    records = skypilot_records("vast")
    offers = stored(records)
    by_instance: dict[str, tuple] = {}
    for (instance, region, category), value in offers.items():
        assert category == "on-demand"  # SpotPrice 0.00 everywhere: no spot market, no row
        assert region == region.upper() and len(region) == 2, region  # "France, FR, EU" -> FR
        by_instance[instance] = value
    # 2x and 4x A100 40 GB: SizeInMiB is the total (81920, 163840), not 80 GB per GPU
    assert by_instance["2x-A100_SXM4-32-65536"] == ("a100-40gb", 2.0, 40.0)
    assert by_instance["4x-A100_SXM4-32-65536"] == ("a100-40gb", 4.0, 40.0)
    assert by_instance["1x-A100_PCIE-32-65536"] == ("a100-80gb-pcie", 1.0, 80.0)
    v100 = by_instance["8x-Tesla_V100-32-65536"]
    assert v100 == ("v100-16gb", 8.0, 16.0)
    h200 = by_instance["8x-H200-32-65536"]
    assert h200[0] == "h200" and h200[1] == 8.0 and h200[2] == pytest.approx(140.4, abs=0.1)
    assert not any(r.startswith("price must be positive") for r in reasons(records))


@pytest.mark.parametrize("cloud", ["runpod", "shadeform"])
def test_gb_written_as_mib_is_read_as_gb(cloud: str) -> None:
    offers = stored(skypilot_records(cloud))
    assert offers
    assert all(memory is not None and memory >= 16 for _gpu, _n, memory in offers.values())
    a100 = [v for (i, _r, _c), v in offers.items() if "A100-80G" in i]
    assert a100 and all(v[0].startswith("a100-80gb") and v[2] == 80 for v in a100)


def test_lambda_a100_pcie_and_h100_pcie_keep_their_form_factor() -> None:
    sky = {(i, r): v for (i, r, _c), v in stored(skypilot_records("lambda")).items()}
    for n in (1, 2, 4):
        assert sky[(f"gpu_{n}x_a100", "us-east-1")][0] == "a100-40gb-pcie"
    assert sky[("gpu_1x_a100_sxm4", "us-east-1")][0] == "a100-40gb"
    assert sky[("gpu_8x_a100", "us-east-1")][0] == "a100-40gb"
    hunt = {i: v for (i, _r, _c), v in stored(gpuhunt_lambda_records()).items()}
    assert hunt["gpu_1x_h100_pcie"][0] == "h100-pcie"
    assert hunt["gpu_1x_h100_sxm5"][0] == "h100-sxm"
    assert {hunt[f"gpu_{n}x_a100"][0] for n in (1, 2, 4)} == {"a100-40gb-pcie"}


def test_every_runpod_gpu_id_maps_and_mig_slices_are_fractions() -> None:
    records = runpod_records()
    offers = {i: v for (i, _r, _c), v in stored(records).items()}
    assert len(offers) == len(runpod_table()) == 45
    assert reasons(records) == []
    mig_1g = offers["1x NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 1g.24gb"]
    mig_2g = offers["1x NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 2g.48gb"]
    assert mig_1g == ("rtx-pro-6000", 0.25, 96.0)
    assert mig_2g == ("rtx-pro-6000", 0.5, 96.0)
    assert offers["1x NVIDIA RTX PRO 6000 Blackwell Server Edition"] == ("rtx-pro-6000", 1, 96)
    assert offers["1x NVIDIA GeForce RTX 3090 Ti"][0] == "rtx-3090-ti"
    assert offers["1x NVIDIA H200 NVL"][0] == "h200-nvl"


def test_runpod_stock_status_none_string_is_not_in_stock() -> None:
    assert runpod_records(stock="None") == []


def test_real_vast_offer_and_one_without_dph_total() -> None:
    raw = json.loads((FIXTURES / "vastai" / "cli_raw_offer.json").read_text("utf-8"))[0]
    offer = parse_offer(raw)
    assert offer.dph_total == Decimal("0.2466759259259259")
    assert (offer.gpu_name, offer.num_gpus, offer.country) == ("RTX 4090", 1, "CN")
    assert offer.verified is True  # no `verified` key: "verification": "verified"
    missing = {k: v for k, v in raw.items() if k != "dph_total"}
    fallback = parse_offer(missing)
    assert fallback.dph_total == Decimal("0.2466759259259259")  # search.totalHour
    neither = {k: v for k, v in missing.items() if k != "search"}
    assert parse_offer(neither) == "no dph_total and no search.totalHour"


# -- AWS and GCP real captures ------------------------------------------------------------------

def test_real_aws_price_file_head_yields_no_linux_on_demand_gpu_row() -> None:
    from scrapers.aws import AwsSource, BulkCsvParser

    text_ = (FIXTURES / "aws" / "real" / "global-pricing-file-sample.csv").read_text("utf-8")
    parser = BulkCsvParser(families=tuple(AwsSource.DEFAULTS["gpu_families"]), fetched_at=AT)
    records = list(parser.parse(iter(text_.splitlines())))
    assert parser.metadata["Version"] == "20250912225308"
    # its one GPU row is g5.48xlarge SUSE / Dedicated / UnusedCapacityReservation: skipped
    assert [r for r in records if isinstance(r, PriceObservation)] == []


def test_real_2014_spot_js_parses_with_legacy_region_labels() -> None:
    from scrapers.aws import parse_spot_js, spot_prices, spot_region_code

    document = parse_spot_js((FIXTURES / "aws" / "real" / "spot.js").read_bytes())
    rows = list(spot_prices(document))
    gpu = [(label, size, price) for label, size, _cur, price in rows
           if size.startswith(("g2.", "cg1."))]
    assert gpu
    labels = {label for label, _s, _p in gpu}
    assert "us-east" in labels and spot_region_code("us-east") == "us-east-1"


def test_real_gcp_skus_page_classifies_the_a100_gpu_sku() -> None:
    from scrapers.gcp import classify

    page = json.loads((FIXTURES / "gcp" / "real" / "opencost_page1.json").read_text("utf-8"))
    assert page["nextPageToken"]
    kinds = sorted((k.kind, k.key, k.category) for k in map(classify, page["skus"]) if k)
    assert kinds == [("core", "a2", "on-demand"), ("gpu", "nvidia-tesla-a100", "on-demand"),
                     ("ram", "a2", "on-demand")]
