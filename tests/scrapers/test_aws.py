"""The aws source against a recorded-shape bulk CSV per region, spot.js and the Spot Advisor."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapers.aws import (
    AWS_FAMILY_GPUS,
    AwsSource,
    BulkCsvParser,
    advisor_bands,
    family_selected,
    instance_family,
    parse_spot_js,
    spot_region_code,
)
from scrapers.base import InterruptionFact, PriceObservation, Rejected
from tests.helpers import fetch_records
from tracker.core.errors import SourceError
from tracker.core.gpus import canonical_gpu

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "aws"
FETCHED_AT = datetime(2026, 9, 1, 6, 0, tzinfo=UTC)
BULK = "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current"
SPOT = "https://spot-price.s3.amazonaws.com/spot.js"
ADVISOR = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
PLANS = ("https://pricing.us-east-1.amazonaws.com/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/"
         "current/region_index.json")
PLANS_CSV = ("https://pricing.us-east-1.amazonaws.com/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/"
             "20260828192011/{region}/index.csv")
FAMILIES = tuple(AwsSource.DEFAULTS["gpu_families"])


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


class Recorder:
    def __init__(self, overrides: dict[str, httpx.Response] | None = None) -> None:
        self.urls: list[str] = []
        self.overrides = overrides or {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        self.urls.append(url)
        if url in self.overrides:
            return self.overrides[url]
        if url == SPOT:
            return httpx.Response(200, content=fixture_bytes("spot.js"))
        if url == ADVISOR:
            return httpx.Response(200, content=fixture_bytes("spot-advisor-data.json"))
        if url == PLANS:
            return httpx.Response(200, content=fixture_bytes("savings-plans/region_index.json"))
        for region in ("us-east-1", "eu-west-1"):
            if url == f"{BULK}/{region}/index.csv":
                return httpx.Response(200, content=fixture_bytes(f"{region}/index.csv"))
            if url == PLANS_CSV.format(region=region):
                return httpx.Response(200, content=fixture_bytes(
                    f"savings-plans/{region}/index.csv"))
        return httpx.Response(404)


def run(settings_: dict | None = None, handler=None, environ: dict | None = None) -> list:
    config = {"regions": ["us-east-1", "eu-west-1"], **(settings_ or {})}
    source = AwsSource.from_config(config, environ=environ or {})
    return fetch_records(source, handler or Recorder(), FETCHED_AT)


def obs(records: list, instance_type: str, region: str, category: str,
        variant: str = "") -> PriceObservation:
    hits = [r for r in records if isinstance(r, PriceObservation)
            and (r.instance_type, r.region, r.category, r.variant) ==
            (instance_type, region, category, variant)]
    assert len(hits) == 1, hits
    return hits[0]


def observations(records: list) -> list[PriceObservation]:
    return [r for r in records if isinstance(r, PriceObservation)]


@pytest.fixture(scope="module")
def records() -> list:
    return run()


# -- bulk CSV: on-demand and reserved ----------------------------------------------------------

def test_p5_on_demand(records: list) -> None:
    p5 = obs(records, "p5.48xlarge", "us-east-1", "on-demand")
    assert p5.price_per_hour == Decimal("55.04")
    assert str(p5.price_per_hour) == "55.0400000000"  # straight from the CSV string
    assert (p5.gpu_name, p5.gpu_count, p5.gpu_memory_gb) == ("NVIDIA H100", 8, 80)
    assert canonical_gpu(p5.gpu_name, p5.gpu_memory_gb) == "h100-sxm"
    assert p5.vcpus == 192
    assert p5.ram_gb == pytest.approx(2199.023)  # 2048 GiB
    assert (p5.provider, p5.currency, p5.observed_at) == ("aws", "USD", FETCHED_AT)
    assert p5.source_url == f"{BULK}/us-east-1/index.csv"
    assert p5.attributes["price_list_version"] == "20260828191407"


def test_only_linux_shared_used_plain_on_demand_rows_are_kept(records: list) -> None:
    # Windows, Dedicated, RHEL, an unused capacity reservation and a Capacity Block of the
    # same p5.48xlarge are all in the file; one on-demand row survives.
    p5 = [r for r in observations(records)
          if r.instance_type == "p5.48xlarge" and r.region == "us-east-1"
          and r.category == "on-demand"]
    assert [r.price_per_hour for r in p5] == [Decimal("55.0400000000")]
    g5 = obs(records, "g5.xlarge", "us-east-1", "on-demand")  # not the SQL Std row
    assert g5.price_per_hour == Decimal("1.006")


def test_reserved_no_upfront_standard_only(records: list) -> None:
    assert obs(records, "p5.48xlarge", "us-east-1", "reserved-1y").price_per_hour == \
        Decimal("34.675")
    r3 = obs(records, "p5.48xlarge", "us-east-1", "reserved-3y")
    assert r3.price_per_hour == Decimal("23.503")
    assert r3.attributes["purchase_option"] == "No Upfront"
    assert r3.attributes["offering_class"] == "standard"
    assert (r3.attributes["commitment_kind"], r3.attributes["term_months"]) == \
        ("reserved-instance", 36)
    categories = sorted(r.category for r in observations(records)
                        if r.instance_type == "p5.48xlarge" and r.region == "us-east-1")
    assert categories == ["on-demand", "reserved-1y", "reserved-1y", "reserved-3y",
                          "reserved-3y", "spot"]  # a reserved instance and a savings plan


def test_include_reserved_off() -> None:
    records = run({"include_reserved": False, "spot_url": "", "advisor_url": ""})
    assert {r.category for r in observations(records)} == {"on-demand"}


# -- EC2 Instance Savings Plans (the Savings Plans price list) --------------------------------

def test_ec2_instance_savings_plans_no_upfront_linux_shared_only(records: list) -> None:
    one = obs(records, "p5.48xlarge", "us-east-1", "reserved-1y", "savings-plan")
    three = obs(records, "p5.48xlarge", "us-east-1", "reserved-3y", "savings-plan")
    # Not the All Upfront, Windows, Dedicated or Compute Savings Plans rates of the same type
    assert (one.price_per_hour, three.price_per_hour) == (Decimal("36.403"), Decimal("24.782"))
    assert one.attributes == {
        "billing": "per-second", "commitment_kind": "savings-plan",
        "savings_plan_type": "ec2-instance", "term_months": 12,
        "purchase_option": "No Upfront", "price_list_version": "20260828192011"}
    assert three.attributes["term_months"] == 36
    # GPUs, vCPUs and RAM from the same region's bulk CSV
    assert (one.gpu_name, one.gpu_count, one.vcpus) == ("NVIDIA H100", 8, 192)
    assert one.source_url == PLANS_CSV.format(region="us-east-1")
    assert obs(records, "g5.xlarge", "us-east-1", "reserved-1y",
               "savings-plan").price_per_hour == Decimal("0.714")
    # the EU- prefixed usage type of another region
    assert obs(records, "p4d.24xlarge", "eu-west-1", "reserved-1y",
               "savings-plan").price_per_hour == Decimal("16.28")
    plans = [r for r in observations(records) if r.variant == "savings-plan"]
    assert len(plans) == 4 and not any(r.instance_type.startswith("m5") for r in plans)


def test_a_bad_savings_plan_rate_is_rejected_with_its_row(records: list) -> None:
    (bad,) = [r for r in records if isinstance(r, Rejected) and "savings plan" in r.reason]
    assert "g6.xlarge" in bad.reason and bad.raw["DiscountedRate"] == "n/a"


def test_savings_plans_are_stored_as_their_own_offers_with_history(tmp_path) -> None:
    from dataclasses import replace
    from datetime import timedelta

    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records
    from tracker.store.queries import history

    db = open_database(f"sqlite:///{tmp_path / 'aws.db'}", create=True)
    first = [r for r in run({"regions": ["us-east-1"], "spot_url": "", "advisor_url": ""})
             if isinstance(r, PriceObservation)]
    ingest_records(db, "aws", first, started_at=FETCHED_AT)
    later = FETCHED_AT + timedelta(days=7)
    cut = [replace(r, observed_at=later, price_per_hour=Decimal("30"))
           if r.variant == "savings-plan" and r.category == "reserved-1y"
           and r.instance_type == "p5.48xlarge" else replace(r, observed_at=later)
           for r in first]
    ingest_records(db, "aws", cut, started_at=later)
    spans = [s for s in history(db, ["h100-sxm"]) if s.category == "reserved-1y"]
    db.close()
    by_offer: dict[int, list[tuple[str, bool]]] = {}
    for span in sorted(spans, key=lambda x: x.valid_from):
        by_offer.setdefault(span.offer_id, []).append(
            (str(span.price_per_gpu_hour), span.valid_to is None))
    # the reserved instance unchanged; the savings plan's cut closes its first span
    assert sorted(by_offer.values()) == [[("4.334375", True)],
                                         [("4.550375", False), ("3.75", True)]]


def test_include_reserved_off_also_skips_savings_plans() -> None:
    recorder = Recorder()
    run({"include_reserved": False, "spot_url": "", "advisor_url": ""}, handler=recorder)
    assert PLANS not in recorder.urls


def test_savings_plan_index_without_regions_fails_the_source() -> None:
    with pytest.raises(SourceError, match="no regions list"):
        run(handler=Recorder({PLANS: httpx.Response(200, content=b'{"offers": []}')}))


def test_gpu_models_and_counts_from_the_csv_and_family_table(records: list) -> None:
    expected = {
        "g5.xlarge": (1, "a10g", Decimal("1.006")),
        "g5.12xlarge": (4, "a10g", Decimal("5.672")),
        "g6e.xlarge": (1, "l40s", Decimal("1.861")),
        "g4dn.xlarge": (1, "t4", Decimal("0.526")),
        "g4dn.12xlarge": (4, "t4", Decimal("3.912")),
        "p4d.24xlarge": (8, "a100-40gb", Decimal("21.9576")),
    }
    for instance_type, (count, canonical, price) in expected.items():
        o = obs(records, instance_type, "us-east-1", "on-demand")
        assert o.gpu_count == count, instance_type
        assert canonical_gpu(o.gpu_name, o.gpu_memory_gb) == canonical, instance_type
        assert o.price_per_hour == price, instance_type


def test_cpu_rows_and_unconfigured_families_are_skipped(records: list) -> None:
    types = {r.instance_type for r in observations(records)}
    assert not types & {"m5.large", "c6i.large", "g4ad.xlarge"}


def test_missing_price_is_rejected_with_the_raw_row(records: list) -> None:
    rejected = [r for r in records if isinstance(r, Rejected) and isinstance(r.raw, dict)
                and "Instance Type" in r.raw]
    assert len(rejected) == 1
    assert rejected[0].reason == "PricePerUnit is not a number: ''"
    assert rejected[0].raw["Instance Type"] == "g6.xlarge"
    assert rejected[0].raw["SKU"] == "6GYZ2PWT4TQGWKXR"
    assert rejected[0].provider == "aws"


def test_second_region(records: list) -> None:
    assert obs(records, "g5.xlarge", "eu-west-1", "on-demand").price_per_hour == \
        Decimal("1.123")
    assert obs(records, "g5.xlarge", "eu-west-1", "reserved-1y").price_per_hour == \
        Decimal("0.707")
    p4d = obs(records, "p4d.24xlarge", "eu-west-1", "on-demand")
    assert p4d.price_per_hour == Decimal("24.5299")
    assert p4d.source_url == f"{BULK}/eu-west-1/index.csv"


# -- spot.js ------------------------------------------------------------------------------------

def test_spot_prices_from_spot_js(records: list) -> None:
    p5 = obs(records, "p5.48xlarge", "us-east-1", "spot")
    assert p5.price_per_hour == Decimal("21.9852")
    assert (p5.gpu_count, p5.vcpus) == (8, 192)  # what the CSV said about p5.48xlarge
    assert p5.source_url == SPOT
    assert p5.attributes["spot_basis"] == "regional (spot.js)"
    assert obs(records, "g5.xlarge", "eu-west-1", "spot").price_per_hour == Decimal("0.4391")
    assert obs(records, "p4d.24xlarge", "eu-west-1", "spot").price_per_hour == Decimal("9.812")
    # g5.48xlarge has no CSV row here: the count comes from the size table.
    big = obs(records, "g5.48xlarge", "us-east-1", "spot")
    assert (big.gpu_count, big.vcpus, big.price_per_hour) == (8, None, Decimal("5.7944"))


def test_spot_edge_cases(records: list) -> None:
    spot = {(r.instance_type, r.region) for r in observations(records) if r.category == "spot"}
    assert ("g6.xlarge", "us-east-1") not in spot  # "N/A*": not offered
    assert ("m5.large", "us-east-1") not in spot  # not a GPU family
    assert all(region != "ap-northeast-1" for _, region in spot)  # apac-tokyo not configured
    bad = [r for r in records if isinstance(r, Rejected) and r.raw.get("size") == "g6e.xlarge"]
    assert [r.reason for r in bad] == ["spot price is not a number: 'n/a?'"]
    assert len(spot) == 7


def test_spot_js_envelope() -> None:
    document = parse_spot_js(fixture_bytes("spot.js"))
    assert document["config"]["regions"][0]["region"] == "us-east"
    with pytest.raises(SourceError, match="JSONP"):
        parse_spot_js(b'{"config": {}}')


def test_spot_region_labels() -> None:
    assert spot_region_code("us-east") == "us-east-1"
    assert spot_region_code("eu-ireland") == "eu-west-1"
    assert spot_region_code("apac-tokyo") == "ap-northeast-1"
    assert spot_region_code("us-east-2") == "us-east-2"
    assert spot_region_code("us-gov-west-1") == "us-gov-west-1"
    assert spot_region_code("moon-base") is None


# -- Spot Advisor -------------------------------------------------------------------------------

def test_interruption_facts(records: list) -> None:
    facts = {(f.region, f.instance_type): f for f in records if isinstance(f, InterruptionFact)}
    assert set(facts) == {("us-east-1", "p5.48xlarge"), ("us-east-1", "p4d.24xlarge"),
                          ("us-east-1", "g5.xlarge"), ("us-east-1", "g4dn.xlarge"),
                          ("eu-west-1", "g5.xlarge")}
    p5 = facts[("us-east-1", "p5.48xlarge")]
    assert (p5.band, p5.band_label, p5.min_pct, p5.max_pct) == (3, "15-20%", 16.0, 22.0)
    assert (p5.savings_pct, p5.os, p5.as_of, p5.provider) == (60.0, "Linux", FETCHED_AT, "aws")
    p4d = facts[("us-east-1", "p4d.24xlarge")]
    assert (p4d.band_label, p4d.min_pct, p4d.max_pct) == (">20%", 22.0, None)
    g5 = facts[("us-east-1", "g5.xlarge")]
    assert (g5.band, g5.min_pct, g5.max_pct) == (0, 0.0, 5.0)
    eu = facts[("eu-west-1", "g5.xlarge")]
    assert (eu.band_label, eu.min_pct, eu.max_pct, eu.savings_pct) == ("10-15%", 11.0, 16.0, 61.0)


def test_unknown_band_is_rejected(records: list) -> None:
    bad = [r for r in records if isinstance(r, Rejected)
           and r.raw.get("instance_type") == "g6e.xlarge"]
    assert [r.reason for r in bad] == ["interruption band 7 is not in the file's ranges"]


def test_band_limits_come_from_the_file() -> None:
    document = json.loads(fixture_bytes("spot-advisor-data.json"))
    for entry, limit in zip(document["ranges"], (5, 10, 15, 20, 100), strict=True):
        entry["max"] = limit
    document["ranges"].reverse()  # order in the file does not matter, the index does
    assert advisor_bands(document) == {
        0: ("<5%", 0.0, 5.0), 1: ("5-10%", 5.0, 10.0), 2: ("10-15%", 10.0, 15.0),
        3: ("15-20%", 15.0, 20.0), 4: (">20%", 20.0, None)}
    with pytest.raises(SourceError, match="ranges"):
        advisor_bands({"spot_advisor": {}})


# -- settings and requests ----------------------------------------------------------------------

def test_requests_and_environment_overrides() -> None:
    recorder = Recorder()
    records = run(handler=recorder, environ={
        "GPU_TRACKER_SOURCE_AWS_REGIONS": "eu-west-1",
        "GPU_TRACKER_SOURCE_AWS_GPU_FAMILIES": "p4d",
    })
    assert recorder.urls == [ADVISOR, SPOT, PLANS, f"{BULK}/eu-west-1/index.csv",
                             PLANS_CSV.format(region="eu-west-1")]
    assert {(r.instance_type, r.category) for r in observations(records)} == {
        ("p4d.24xlarge", "on-demand"), ("p4d.24xlarge", "spot"),
        ("p4d.24xlarge", "reserved-1y")}
    assert not [r for r in records if isinstance(r, InterruptionFact)]


def test_feeds_can_be_turned_off() -> None:
    recorder = Recorder()
    records = run({"spot_url": "", "advisor_url": "", "savings_plan_url": ""},
                  handler=recorder)
    assert recorder.urls == [f"{BULK}/us-east-1/index.csv", f"{BULK}/eu-west-1/index.csv"]
    assert {r.category for r in observations(records)} == {
        "on-demand", "reserved-1y", "reserved-3y"}
    assert len(observations(records)) == 12  # 9 in us-east-1, 3 in eu-west-1


def test_base_url_is_configurable() -> None:
    recorder = Recorder(overrides={
        "http://127.0.0.1:9000/ec2/eu-west-1/index.csv":
            httpx.Response(200, content=fixture_bytes("eu-west-1/index.csv"))})
    records = run({"url": "http://127.0.0.1:9000/ec2/", "regions": ["eu-west-1"],
                   "spot_url": "", "advisor_url": "", "savings_plan_url": ""},
                  handler=recorder)
    assert recorder.urls == ["http://127.0.0.1:9000/ec2/eu-west-1/index.csv"]
    assert len(observations(records)) == 3


def test_a_missing_region_file_fails_the_source() -> None:
    with pytest.raises(SourceError, match="HTTP 404"):
        run({"regions": ["us-east-1", "ap-south-2"], "spot_url": "", "advisor_url": ""})


def test_size_cap_on_the_csv() -> None:
    with pytest.raises(SourceError, match="larger than"):
        run({"max_csv_mb": 0, "spot_url": "", "advisor_url": ""})


def test_malformed_feeds_fail_the_source() -> None:
    with pytest.raises(SourceError, match="JSONP"):
        run(handler=Recorder({SPOT: httpx.Response(200, content=b"<html>busy</html>")}))
    with pytest.raises(SourceError, match="not valid JSON"):
        run(handler=Recorder({ADVISOR: httpx.Response(200, content=b'{"ranges": [')}))


# -- the streaming parser -----------------------------------------------------------------------

def fixture_lines(region: str = "us-east-1") -> list[str]:
    return fixture_bytes(f"{region}/index.csv").decode().splitlines()


def parse(lines, **kwargs) -> tuple[BulkCsvParser, list]:
    parser = BulkCsvParser(families=kwargs.pop("families", FAMILIES), fetched_at=FETCHED_AT,
                           **kwargs)
    return parser, list(parser.parse(lines))


def test_parser_reads_metadata_and_keeps_gpu_specs() -> None:
    parser, records = parse(iter(fixture_lines()), region="us-east-1")
    assert parser.metadata["Version"] == "20260828191407"
    assert parser.metadata["OfferCode"] == "AmazonEC2"
    assert parser.instances["g5.12xlarge"].gpu_count == 4
    assert parser.instances["g5.12xlarge"].vcpus == 48
    assert len([r for r in records if isinstance(r, PriceObservation)]) == 9


def test_parser_is_lazy() -> None:
    def lines():
        yield from fixture_lines()[:7]  # preamble, header, the p5 on-demand row
        raise AssertionError("read past the first record")

    parser = BulkCsvParser(families=FAMILIES, fetched_at=FETCHED_AT)
    first = next(iter(parser.parse(lines())))
    assert first.instance_type == "p5.48xlarge"


def test_parser_handles_an_unquoted_file() -> None:
    rows = list(csv.reader(fixture_lines()))
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerows(rows)
    _, quoted = parse(fixture_lines())
    _, unquoted = parse(buffer.getvalue().splitlines())
    assert not buffer.getvalue().startswith('"')
    assert unquoted == quoted


def test_parser_errors() -> None:
    with pytest.raises(SourceError, match="no header row"):
        parse(['"FormatVersion","v1.0"', '"OfferCode","AmazonEC2"'])
    header = fixture_lines()[5].replace('"Tenancy",', '"Tenure",')
    with pytest.raises(SourceError, match="lacks columns Tenancy"):
        parse([header])


def test_family_matching() -> None:
    assert instance_family("p6-b200.48xlarge") == "p6-b200"
    assert family_selected("p6-b200", ["p6"])
    assert not family_selected("p5e", ["p5"])
    assert not family_selected("g6e", ["g6"])
    assert family_selected("g6e", ["g6", "g6e"])


# Mutations of real-shaped rows: the cheap pre-filter must never drop a row that the full
# parser would keep (the filter is an optimization, not a rule).
class Unfiltered(BulkCsvParser):
    def _prefilter(self, *, quoted: bool):
        return lambda line: True


VALUES = {
    "Operating System": ["Linux", "Windows", "RHEL", "SUSE", "Linux "],
    "Tenancy": ["Shared", "Dedicated", "Host"],
    "CapacityStatus": ["Used", "UnusedCapacityReservation", "AllocatedCapacityReservation"],
    "Instance Type": ["p5.48xlarge", "p5e.48xlarge", "p6-b200.48xlarge", "g6f.large",
                      "g5g.xlarge", "m5.large", "xp5.48xlarge", "g6e.12xlarge"],
    "TermType": ["OnDemand", "Reserved"],
    "Pre Installed S/W": ["NA", "", "SQL Web"],
    "MarketOption": ["OnDemand", "CapacityBlock", ""],
}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in VALUES.items()}),
                min_size=1, max_size=12),
       st.booleans())
def test_prefilter_never_changes_the_result(mutations: list[dict], unquoted: bool) -> None:
    lines = fixture_lines()
    header = next(csv.reader([lines[5]]))
    base = next(csv.reader([lines[6]]))
    rows = []
    for change in mutations:
        row = dict(zip(header, base, strict=True))
        row.update(change)
        rows.append([row[h] for h in header])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n",
                        quoting=csv.QUOTE_MINIMAL if unquoted else csv.QUOTE_ALL)
    writer.writerow(header)
    writer.writerows(rows)
    text = lines[:5] + buffer.getvalue().splitlines()
    families = ("p5", "p6", "g6", "g6f")
    _, filtered = parse(text, families=families)

    unfiltered = list(Unfiltered(families=families, fetched_at=FETCHED_AT).parse(text))
    assert filtered == unfiltered


# -- tables ---------------------------------------------------------------------------------------

NOT_CANONICAL: set[str] = set()  # every AWS GPU family is in the table now


@pytest.mark.parametrize("family", sorted(AWS_FAMILY_GPUS))
def test_family_table_maps_to_canonical_gpus(family: str) -> None:
    gpu = AWS_FAMILY_GPUS[family]
    if gpu.gpu_name in NOT_CANONICAL:
        assert canonical_gpu(gpu.gpu_name, gpu.memory_gb) is None
    else:
        assert canonical_gpu(gpu.gpu_name, gpu.memory_gb) is not None


def test_known_canonical_mappings() -> None:
    expect = {"p3": "v100-16gb", "p3dn": "v100-32gb", "p4d": "a100-40gb", "p4de": "a100-80gb",
              "p5": "h100-sxm", "p5e": "h200", "p5en": "h200", "p6-b200": "b200",
              "g5": "a10g", "g6": "l4", "g6e": "l40s", "gr6": "l4", "g4dn": "t4"}
    for family, canonical in expect.items():
        gpu = AWS_FAMILY_GPUS[family]
        assert canonical_gpu(gpu.gpu_name, gpu.memory_gb) == canonical, family


def test_defaults() -> None:
    assert AwsSource.name == "aws"
    assert AwsSource.SECRET_ENV is None
    assert AwsSource.DEFAULTS["url"] == BULK
    assert AwsSource.DEFAULTS["spot_url"] == SPOT
    assert AwsSource.DEFAULTS["advisor_url"] == ADVISOR
    assert "us-east-1" in AwsSource.DEFAULTS["regions"]
    assert all(f in AWS_FAMILY_GPUS or any(k.startswith(f + "-") for k in AWS_FAMILY_GPUS)
               for f in AwsSource.DEFAULTS["gpu_families"])
    from scrapers import load_source
    assert load_source("aws") is AwsSource


# -- Blackwell families: p6-b300, p6e-gb200 (NVL72 slice), g7e ----------------------------------

def template_row(**fields: str) -> str:
    """The fixture's p5.48xlarge On-Demand Linux row (real column layout and quoting) with some
    fields changed: a hand-made row of another instance type (tests/fixtures/aws/README.md)."""
    lines = fixture_lines()
    header = next(csv.reader([lines[5]]))
    row = next(csv.reader([lines[6]]))
    assert row[header.index("Instance Type")] == "p5.48xlarge"
    instance_type = fields.pop("Instance Type")
    for name, old in (("usageType", "BoxUsage:p5.48xlarge"),
                      ("PriceDescription", "$55.04 per On Demand Linux p5.48xlarge Instance Hour")):
        row[header.index(name)] = old.replace("p5.48xlarge", instance_type)
    row[header.index("Instance Type")] = instance_type
    for name, value in fields.items():
        row[header.index(name)] = value
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="").writerow(
        [value if value else None for value in row])
    # The real files leave empty fields bare (`,,`), as the quoted fixture does.
    return buffer.getvalue().replace('""', "")


def blackwell_records(*rows: str) -> tuple[BulkCsvParser, list]:
    return parse(fixture_lines()[:6] + list(rows), region="us-east-1")


def test_blackwell_instances_map_to_their_class_count_and_memory() -> None:
    # ac.html "Performance specifications" (see AWS_FAMILY_GPUS): p6-b300.48xlarge 8 x B300
    # (268 GiB each = 288 GB), p6e-gb200.36xlarge 4 GPUs of a GB200 superchip, g7e 1 to 8
    # RTX PRO Server 6000 of 96 GB. Each row once with the CSV's GPU column and once with it
    # empty (the size table's count).
    cases = {
        "p6-b300.48xlarge": ("8", "192", "4096 GiB", "b300", 8, 288),
        "p6e-gb200.36xlarge": ("4", "144", "960 GiB", "gb200", 4, 186),
        "g7e.2xlarge": ("1", "8", "64 GiB", "rtx-pro-6000", 1, 96),
        "g7e.12xlarge": ("2", "48", "512 GiB", "rtx-pro-6000", 2, 96),
        "g7e.48xlarge": ("8", "192", "2048 GiB", "rtx-pro-6000", 8, 96),
    }
    for gpu_column in (True, False):
        rows = [template_row(**{"Instance Type": name, "GPU": gpus if gpu_column else "",
                                "vCPU": vcpus, "Memory": memory, "PricePerUnit": "100.0"})
                for name, (gpus, vcpus, memory, *_rest) in cases.items()]
        _, records = blackwell_records(*rows)
        assert not [r for r in records if isinstance(r, Rejected)]
        by_type = {o.instance_type: o for o in observations(records)}
        for name, (_gpus, vcpus, _memory, canonical, count, memory_gb) in cases.items():
            o = by_type[name]
            assert (o.gpu_count, o.gpu_memory_gb, o.vcpus) == (count, memory_gb, float(vcpus))
            assert canonical_gpu(o.gpu_name, o.gpu_memory_gb) == canonical, name


def test_the_p6e_gb200_slice_carries_its_ultraserver_domain_and_efa() -> None:
    # data/fabric.json's p6e-gb200 row: the offer is one slice of a 36- or 72-GPU NVLink domain.
    from tracker.core.fabric import offer_network, offer_scale_up_domain

    _, records = blackwell_records(template_row(**{
        "Instance Type": "p6e-gb200.36xlarge", "GPU": "4", "vCPU": "144", "Memory": "960 GiB"}))
    (o,) = observations(records)
    gpu = canonical_gpu(o.gpu_name, o.gpu_memory_gb)
    net = offer_network("aws", o.instance_type, gpu, int(o.gpu_count))
    assert (net.node_link, net.cluster_network, net.cluster_gbps) == ("nvlink5", "efa", 1600.0)
    assert offer_scale_up_domain("aws", o.instance_type) == 36


def test_unknown_blackwell_sizes_and_families_are_rejected_not_guessed() -> None:
    # A size the table lacks with an empty GPU column has no count; P6e-GB300 (no GPU count
    # in AWS's specifications page) has no model. The default families read both.
    assert family_selected("p6e-gb300", FAMILIES) and family_selected("g7e", FAMILIES)
    _, records = blackwell_records(
        template_row(**{"Instance Type": "g7e.96xlarge", "GPU": ""}),
        template_row(**{"Instance Type": "p6e-gb300.72xlarge", "GPU": "4"}),
        template_row(**{"Instance Type": "p6e-gb200.72xlarge", "GPU": ""}))
    assert observations(records) == []
    reasons = sorted(r.reason for r in records if isinstance(r, Rejected))
    assert reasons == ["no GPU count for g7e.96xlarge", "no GPU count for p6e-gb200.72xlarge",
                       "no GPU model known for AWS family p6e-gb300 (AWS_FAMILY_GPUS)"]
