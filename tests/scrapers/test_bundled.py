"""The bundled, dated price snapshots (data/prices) and the `bundled` source that reads them."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapers import load_source
from scrapers.base import PriceObservation, Rejected
from scrapers.bundled import COLUMNS, BundledSource, parse_snapshot, snapshot_files
from scrapers.http import HttpClient
from tracker.core.errors import SourceError
from tracker.core.gpus import canonical_gpu
from tracker.core.http_settings import HttpSettings
from tracker.core.money import ISO_4217

FETCHED_AT = datetime(2026, 11, 29, 9, 15, tzinfo=UTC)
HEADER = ",".join(COLUMNS)
GOOD_ROW = ("aws,us-east-1,,p5.48xlarge,H100,8,80,192,2048,on-demand,55.04,USD,"
            "https://aws.amazon.com/ec2/pricing/on-demand/")

# Every (provider GPU name, memory hint) in the bundled data and the canonical GPU it must be.
EXPECTED_GPU = {
    ("A10", 24.0): "a10",
    ("A10 (24 GB PCIe)", 24.0): "a10",
    ("A100", 40.0): "a100-40gb",
    ("A100", 80.0): "a100-80gb",
    ("A100 (40 GB SXM4)", 40.0): "a100-40gb",
    ("A100 (80 GB SXM4)", 80.0): "a100-80gb",
    ("A100 40GB SXM4", 40.0): "a100-40gb",
    ("A100 80GB PCIe", 80.0): "a100-80gb-pcie",
    ("A100 80GB SXM4", 80.0): "a100-80gb",
    ("A100 SXM4", 40.0): "a100-40gb",
    ("A100-80GB", 80.0): "a100-80gb",
    ("A100-PCIe-40GB", 40.0): "a100-40gb-pcie",
    ("A100-SXM-80GB", 80.0): "a100-80gb",
    ("A6000 (48 GB)", 48.0): "rtx-a6000",
    ("B200", 180.0): "b200",
    ("B200 (180 GB SXM6)", 180.0): "b200",
    ("B200 SXM", 180.0): "b200",
    ("GH200 (96 GB)", 96.0): "gh200",
    ("H100", 80.0): "h100-sxm",
    ("H100 (80 GB PCIe)", 80.0): "h100-pcie",
    ("H100 (80 GB SXM5)", 80.0): "h100-sxm",
    ("H100 NVL", 94.0): "h100-nvl",
    ("H100 SXM", 80.0): "h100-sxm",
    ("H100-SXM-80GB", 80.0): "h100-sxm",
    ("H200", 141.0): "h200",
    ("H200 SXM", 141.0): "h200",
    ("H200-SXM-141GB", 141.0): "h200",
    ("L4", 24.0): "l4",
    ("L40S", 48.0): "l40s",
    ("L40S-48GB", 48.0): "l40s",
    ("MI300X", 192.0): "mi300x",
    ("MI300X-192GB", 192.0): "mi300x",
    ("NVIDIA A100 80GB PCIe", 80.0): "a100-80gb-pcie",
    ("NVIDIA A100-SXM4-80GB", 80.0): "a100-80gb",
    ("NVIDIA B200", 180.0): "b200",
    ("NVIDIA GeForce RTX 4090", 24.0): "rtx-4090",
    ("NVIDIA H100 80GB HBM3", 80.0): "h100-sxm",
    ("NVIDIA H100 NVL", 94.0): "h100-nvl",
    ("NVIDIA H100 PCIe", 80.0): "h100-pcie",
    ("NVIDIA H200", 141.0): "h200",
    ("NVIDIA L40S", 48.0): "l40s",
    ("RTX 4090", 24.0): "rtx-4090",
    ("RTX A6000", 48.0): "rtx-a6000",
    ("amd_mi300x", 192.0): "mi300x",
    ("nvidia-h100-80gb", 80.0): "h100-sxm",
    ("nvidia-h200-141gb", 141.0): "h200",
    ("nvidia-tesla-a100", 40.0): "a100-40gb",
    ("nvidia_h100", 80.0): "h100-sxm",
}

# GPU classes the embedded default must cover; each entry is satisfied by any of its ids.
REQUIRED_GPU_CLASSES = {
    "H100 SXM": {"h100-sxm"},
    "H100 PCIe": {"h100-pcie"},
    "H200": {"h200"},
    "B200": {"b200"},
    "A100 40GB": {"a100-40gb", "a100-40gb-pcie"},
    "A100 80GB": {"a100-80gb", "a100-80gb-pcie"},
    "L40S": {"l40s"},
    "L4": {"l4"},
    "RTX 4090": {"rtx-4090"},
    "RTX 6000 Ada / RTX A6000": {"rtx-6000-ada", "rtx-a6000"},
    "MI300X": {"mi300x"},
}


def offer_key(obs: PriceObservation) -> tuple[str, str, str, str, str]:
    return (obs.provider, obs.region, obs.zone, obs.instance_type, obs.category)


@pytest.fixture(scope="module")
def bundled() -> list[PriceObservation | Rejected]:
    return list(BundledSource.from_config({}, {}).fetch(None, FETCHED_AT))


@pytest.fixture(scope="module")
def by_day(bundled) -> dict[datetime, list[PriceObservation]]:
    days: dict[datetime, list[PriceObservation]] = defaultdict(list)
    for record in bundled:
        days[record.observed_at].append(record)
    return dict(sorted(days.items()))


def find(observations, day: str, provider: str, instance_type: str,
         category: str = "on-demand") -> PriceObservation:
    when = datetime.fromisoformat(day).replace(tzinfo=UTC)
    hits = [o for o in observations if o.observed_at == when and o.provider == provider
            and o.instance_type == instance_type and o.category == category]
    assert len(hits) == 1, (day, provider, instance_type, category, hits)
    return hits[0]


# --- the bundled data ---------------------------------------------------------------------------


def test_bundled_data_parses_without_rejects(bundled):
    assert bundled
    assert [r for r in bundled if isinstance(r, Rejected)] == []
    assert all(isinstance(r, PriceObservation) for r in bundled)


def test_snapshot_dates_span_at_least_eight_weeks_and_end_recently(by_day):
    days = list(by_day)
    assert len(days) >= 4
    assert (days[-1] - days[0]).days >= 56
    assert days[-1] == datetime(2026, 11, 23, tzinfo=UTC)  # the product's "today" is 2026-11-29
    recent = [d for d in days if d.year == 2026]
    assert len(recent) >= 4 and (recent[-1] - recent[0]).days >= 56


def test_latest_snapshot_has_enough_offers_providers_and_gpu_classes(by_day):
    latest = list(by_day.values())[-1]
    offers = {offer_key(o) for o in latest}
    assert len(offers) == len(latest) >= 60
    providers = {o.provider for o in latest}
    assert len(providers) >= 8
    assert {"aws", "azure", "gcp", "lambda", "runpod", "vastai", "nebius"} <= providers
    gpus = {canonical_gpu(o.gpu_name, o.gpu_memory_gb) for o in latest}
    missing = [name for name, ids in REQUIRED_GPU_CLASSES.items() if not ids & gpus]
    assert missing == []


def test_every_gpu_name_maps_to_the_expected_canonical_gpu(bundled):
    pairs = {(o.gpu_name, o.gpu_memory_gb) for o in bundled}
    assert pairs == set(EXPECTED_GPU)  # a new name in the data needs its expected id here
    wrong = {pair: canonical_gpu(*pair) for pair in pairs
             if canonical_gpu(*pair) != EXPECTED_GPU[pair]}
    assert wrong == {}


def test_every_row_has_a_positive_decimal_price_iso_currency_and_https_source(bundled):
    for obs in bundled:
        assert isinstance(obs.price_per_hour, Decimal)
        assert obs.price_per_hour > 0
        assert obs.currency in ISO_4217
        assert obs.source_url and obs.source_url.startswith("https://")
        assert obs.gpu_count >= 1
        assert obs.observed_at.tzinfo is not None
        assert (obs.observed_at.hour, obs.observed_at.minute) == (0, 0)


def test_spot_and_bid_prices_are_cheaper_than_on_demand_for_the_same_offer(by_day):
    compared = 0
    for observations in by_day.values():
        on_demand = {offer_key(o)[:4]: o.price_per_hour for o in observations
                     if o.category == "on-demand"}
        for obs in observations:
            if obs.category in ("spot", "bid") and offer_key(obs)[:4] in on_demand:
                assert obs.price_per_hour < on_demand[offer_key(obs)[:4]], obs
                compared += 1
    assert compared >= 40


def test_spot_prices_exist_where_providers_sell_spot(by_day):
    latest = list(by_day.values())[-1]
    spot = {(o.provider, o.category) for o in latest if o.category in ("spot", "bid")}
    assert {("aws", "spot"), ("azure", "spot"), ("gcp", "spot"), ("vastai", "bid")} <= spot


def test_offer_set_is_stable_across_the_recent_snapshots(by_day):
    recent = [{offer_key(o) for o in obs} for day, obs in by_day.items() if day.year == 2026]
    first, last = recent[0], recent[-1]
    assert first <= last  # nothing disappears; a few appear
    assert len(last - first) <= 5
    assert ("gcp", "us-central1", "", "a3-ultragpu-8g", "on-demand") in last - first


def test_real_price_changes_are_in_the_history(bundled):
    # AWS's June 2025 P5 cut.
    assert find(bundled, "2025-05-26", "aws", "p5.48xlarge").price_per_hour == Decimal("98.32")
    assert find(bundled, "2025-06-16", "aws", "p5.48xlarge").price_per_hour == Decimal("55.04")
    assert find(bundled, "2026-11-23", "aws", "p5.48xlarge").price_per_hour == Decimal("55.04")
    # Lambda's catalog change between its 2025 and 2026 lists.
    assert find(bundled, "2025-06-16", "lambda", "gpu_8x_h100_sxm5").price_per_hour \
        == Decimal("23.92")
    assert find(bundled, "2026-09-28", "lambda", "gpu_8x_h100_sxm5").price_per_hour \
        == Decimal("31.92")
    # RunPod Secure Cloud H100 between the 2026-09-25 and 2026-11-09 scrapes.
    secure = [find(bundled, day, "runpod", "1x_H100-SXM_SECURE").price_per_hour
              for day in ("2026-09-28", "2026-10-19", "2026-11-09", "2026-11-23")]
    assert secure == [Decimal("3.49"), Decimal("3.49"), Decimal("3.99"), Decimal("3.99")]


def test_fetch_yields_exact_values_dated_at_the_snapshot_not_at_fetch_time(bundled):
    p5 = find(bundled, "2026-11-09", "aws", "p5.48xlarge")
    assert p5 == PriceObservation(
        provider="aws", instance_type="p5.48xlarge", gpu_name="H100", gpu_count=8.0,
        category="on-demand", price_per_hour=Decimal("55.04"), currency="USD",
        observed_at=datetime(2026, 11, 9, tzinfo=UTC), region="us-east-1", zone="",
        gpu_memory_gb=80.0, vcpus=192.0, ram_gb=2048.0,
        source_url=("https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/"
                    "00148f2af3672e2229b4f7bf8157d5a3f36e3c35/catalogs/v8/aws/vms.csv"),
    )
    spot = find(bundled, "2026-11-09", "aws", "p5.48xlarge", "spot")
    assert spot.price_per_hour == Decimal("17.628900")
    assert str(spot.price_per_hour) == "17.628900"  # exact string as printed, no float detour
    vast = find(bundled, "2026-10-19", "vastai", "1x-RTX_4090", "bid")
    assert (vast.price_per_hour, vast.gpu_count, vast.region) == (Decimal("0.31"), 1.0, "global")
    nebius = find(bundled, "2026-09-28", "nebius", "gpu-h100-sxm_8gpu-128vcpu-1600gb")
    assert nebius.price_per_hour == Decimal("30.80")  # 8 x 3.85 per GPU-hour
    assert all(o.observed_at != FETCHED_AT for o in bundled)


def test_fetch_uses_no_network():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"bundled must not call {request.url}")

    client = HttpClient(HttpSettings(backoff=0), transport=httpx.MockTransport(refuse),
                        sleep=lambda _s: None)
    with client:
        records = list(BundledSource.from_config({}, {}).fetch(client, FETCHED_AT))
    assert len(records) > 300


def test_source_is_registered_with_its_contract():
    cls = load_source("bundled")
    assert cls is BundledSource
    assert cls.name == "bundled"
    assert cls.DEFAULTS == {"url": ""}
    assert cls.SECRET_ENV is None


def test_snapshot_files_lists_the_package_files_oldest_first():
    files = snapshot_files("")
    names = [item.name for _day, item in files]
    assert names == sorted(names)
    assert names[0] == "2025-05-26.csv" and names[-1] == "2026-11-23.csv"
    assert "SOURCES.md" not in names


# --- reading a directory of snapshots -----------------------------------------------------------


def write(directory: Path, name: str, *lines: str) -> Path:
    path = directory / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def fetch_dir(location: Path | str) -> list[PriceObservation | Rejected]:
    source = BundledSource.from_config({"url": str(location)}, {})
    return list(source.fetch(None, FETCHED_AT))


def test_a_directory_of_snapshots_in_the_same_format(tmp_path):
    write(tmp_path, "2026-02-01.csv", HEADER, GOOD_ROW)
    write(tmp_path, "2026-01-01.csv", HEADER, GOOD_ROW.replace("55.04", "98.32"))
    write(tmp_path, "notes.md", "not a snapshot")
    records = fetch_dir(tmp_path)
    assert [(r.observed_at.date().isoformat(), r.price_per_hour) for r in records] == [
        ("2026-01-01", Decimal("98.32")), ("2026-02-01", Decimal("55.04"))]


def test_the_url_setting_comes_from_the_environment(tmp_path):
    write(tmp_path, "2026-03-01.csv", HEADER, GOOD_ROW)
    source = BundledSource.from_config({}, {"GPU_TRACKER_SOURCE_BUNDLED_URL": str(tmp_path)})
    [obs] = list(source.fetch(None, FETCHED_AT))
    assert obs.observed_at == datetime(2026, 3, 1, tzinfo=UTC)


def test_a_single_snapshot_file_and_a_file_url(tmp_path):
    path = write(tmp_path, "2026-03-01.csv", HEADER, GOOD_ROW)
    assert len(fetch_dir(path)) == 1
    assert len(fetch_dir(f"file://{tmp_path}")) == 1


@pytest.mark.parametrize(("row", "reason"), [
    (GOOD_ROW.replace("55.04", "abc"), "price_per_hour is not a number"),
    (GOOD_ROW.replace("55.04", "0"), "price_per_hour must be positive"),
    (GOOD_ROW.replace("55.04", "-1.5"), "price_per_hour must be positive"),
    (GOOD_ROW.replace("USD", "USX"), "not an ISO 4217 code"),
    (GOOD_ROW.replace("on-demand", "monthly"), "unknown category 'monthly'"),
    (GOOD_ROW.replace(",8,80,", ",,80,"), "empty gpu_count"),
    (GOOD_ROW.replace(",8,80,", ",0,80,"), "gpu_count must be positive"),
    (GOOD_ROW.replace(",8,80,", ",eight,80,"), "gpu_count is not a number"),
    (GOOD_ROW.replace(",H100,", ",,"), "empty gpu_name"),
    (GOOD_ROW.replace("https://", "ftp://"), "source_url is not an http(s) URL"),
    (GOOD_ROW + ",surplus", "more cells than columns"),
])
def test_malformed_rows_are_rejected_with_file_and_line(tmp_path, row, reason):
    write(tmp_path, "2026-04-01.csv", HEADER, GOOD_ROW.replace("p5.48xlarge", "p5.4xlarge"), row)
    records = fetch_dir(tmp_path)
    assert isinstance(records[0], PriceObservation)
    rejected = records[1]
    assert isinstance(rejected, Rejected)
    assert rejected.reason.startswith("2026-04-01.csv line 3: ")
    assert reason in rejected.reason
    assert rejected.raw["file"] == "2026-04-01.csv" and rejected.raw["line"] == 3
    assert rejected.provider == "aws"


def test_duplicate_offers_in_one_snapshot_are_rejected(tmp_path):
    write(tmp_path, "2026-04-01.csv", HEADER, GOOD_ROW, GOOD_ROW.replace("55.04", "56"))
    first, second = fetch_dir(tmp_path)
    assert first.price_per_hour == Decimal("55.04")
    assert second.reason == "2026-04-01.csv line 3: duplicate of line 2"


def test_a_missing_column_rejects_the_whole_file_but_not_the_others(tmp_path):
    write(tmp_path, "2026-04-01.csv", HEADER.replace(",currency", ""), "x")
    write(tmp_path, "2026-04-02.csv", HEADER, GOOD_ROW)
    rejected, obs = fetch_dir(tmp_path)
    assert rejected.reason == "2026-04-01.csv line 1: missing column(s) currency"
    assert obs.observed_at == datetime(2026, 4, 2, tzinfo=UTC)


def test_a_csv_that_is_not_named_by_date_is_reported(tmp_path):
    write(tmp_path, "latest.csv", HEADER, GOOD_ROW)
    write(tmp_path, "2026-02-30.csv", HEADER, GOOD_ROW)
    write(tmp_path, "2026-04-02.csv", HEADER, GOOD_ROW)
    records = fetch_dir(tmp_path)
    assert isinstance(records[0], PriceObservation)
    assert sorted(r.reason for r in records[1:]) == [
        "2026-02-30.csv: file name is not YYYY-MM-DD.csv",
        "latest.csv: file name is not YYYY-MM-DD.csv",
    ]


@pytest.mark.parametrize("location", ["https://example.com/prices", "s3://bucket/prices"])
def test_remote_urls_are_refused(location):
    with pytest.raises(SourceError, match="local directory"):
        fetch_dir(location)


def test_missing_or_empty_directories_fail_the_source(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        fetch_dir(tmp_path / "nope")
    with pytest.raises(SourceError, match="no snapshot files"):
        fetch_dir(tmp_path)


def test_optional_columns_may_be_empty_and_a_bom_is_tolerated(tmp_path):
    row = "runpod,global,,1x_L40S_SECURE,NVIDIA L40S,1,,,,on-demand,1.09,usd,"
    (tmp_path / "2026-05-01.csv").write_text("\ufeff" + HEADER + "\n" + row + "\n",
                                             encoding="utf-8")
    [obs] = fetch_dir(tmp_path)
    assert (obs.gpu_memory_gb, obs.vcpus, obs.ram_gb, obs.source_url) == (None, None, None, None)
    assert obs.currency == "USD"


@given(st.decimals(min_value=Decimal("0.0001"), max_value=Decimal("99999"), places=6,
                   allow_nan=False, allow_infinity=False))
def test_prices_round_trip_exactly(price):
    text = "\n".join([HEADER, GOOD_ROW.replace("55.04", str(price))]) + "\n"
    [obs] = list(parse_snapshot(text, datetime(2026, 1, 1, tzinfo=UTC), "2026-01-01.csv"))
    assert obs.price_per_hour == price
    assert str(obs.price_per_hour) == str(price)


# --- through the ingest path ----------------------------------------------------------------------


def test_the_bundled_snapshots_ingest_idempotently_with_real_history(sqlite_url):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records
    from tracker.store.queries import history

    db = open_database(sqlite_url)
    try:
        source = BundledSource.from_config({}, {})
        first = ingest_records(db, "bundled", source.fetch(None, FETCHED_AT),
                               started_at=FETCHED_AT)
        assert first.status == "ok" and first.rejected == 0
        assert first.new_offers == 102  # 99 + the Azure eastus2 savings-plan offer x3
        second = ingest_records(db, "bundled", source.fetch(None, FETCHED_AT),
                                started_at=FETCHED_AT)
        assert (second.status, second.new_offers, second.prices_changed) == ("ok", 0, 0)
        points = [p for p in history(db, "h100-sxm", provider="aws", category="on-demand")
                  if p.instance_type == "p5.48xlarge"]
        assert [(p.price_per_hour, p.valid_from.date().isoformat()) for p in points] == [
            (Decimal("98.32"), "2025-05-26"), (Decimal("55.04"), "2025-06-16")]
    finally:
        db.close()
