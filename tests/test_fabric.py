"""Offers know their network: the fabric table, its lookup, storage and the 0005 backfill.

Facts: docs/fabric.md (data/fabric.json rows each carry their source).
"""

from __future__ import annotations

import json
from importlib import resources

import pytest
from sqlalchemy import create_engine, text

from tracker.core.errors import InvalidInput
from tracker.core.fabric import (
    CLUSTER_KINDS,
    LINK_KINDS,
    UNCLUSTERED_GBPS,
    collective_ratios,
    effective_cluster,
    offer_network,
    parse_overrides,
)
from tracker.store.db import migrate, open_database
from tracker.store.ingest import ingest_records
from tracker.store.queries import price_rows

from .helpers import at, obs


def test_every_fabric_row_has_a_source_and_known_kinds():
    table = json.loads(resources.files("data").joinpath("fabric.json").read_text("utf-8"))
    for row in table["families"]:
        assert row["source"] and row["summary"], row
        assert row["cluster_network"] in (None, *CLUSTER_KINDS), row
        assert row["node_link"] in (None, *LINK_KINDS), row
        assert (row["cluster_network"] is None) == (row["cluster_gbps"] is None), row
    for kind, row in table["collectives"].items():
        assert row["source"], kind


@pytest.mark.parametrize(("provider", "instance", "gpu", "count", "kind", "gbps", "link"), [
    ("aws", "p5.48xlarge", "h100-sxm", 8, "efa", 3200, "nvlink4"),
    ("aws", "p4d.24xlarge", "a100-40gb", 8, "efa", 400, "nvlink3"),
    ("aws", "g6.24xlarge", "l4", 4, None, None, "pcie"),
    ("azure", "Standard_ND96isr_H100_v5", "h100-sxm", 8, "infiniband", 3200, "nvlink4"),
    ("azure", "Standard_ND96asr_v4", "a100-40gb", 8, "infiniband", 1600, "nvlink3"),
    ("azure", "Standard_NC96ads_A100_v4", "a100-80gb-pcie", 4, None, None, "pcie"),
    ("gcp", "a3-ultragpu-8g", "h200", 8, "roce", 3200, "nvlink4"),
    ("gcp", "a3-megagpu-8g", "h100-sxm", 8, "tcpxo", 1600, "nvlink4"),
    ("oci", "BM.GPU.H100.8", "h100-sxm", 8, "roce", 3200, "nvlink4"),
    ("nebius", "gpu-h100-sxm_8gpu-128vcpu-1600gb", "h100-sxm", 8, "infiniband", 3200,
     "nvlink4"),
    ("lambda", "gpu_8x_h100_sxm5", "h100-sxm", 8, None, None, "nvlink4"),
    ("digitalocean", "gpu-h100x8-640gb", "h100-sxm", 8, None, None, "nvlink4"),
])
def test_offer_network_from_the_table(provider, instance, gpu, count, kind, gbps, link):
    net = offer_network(provider, instance, gpu, count)
    assert (net.cluster_network, net.cluster_gbps, net.node_link) == (kind, gbps, link)
    assert net.network_note


def test_marketplace_hosts_have_no_cluster_network():
    for provider, instance in (("vastai", "1x-B200"), ("runpod", "1x_H100-SXM_SECURE")):
        net = offer_network(provider, instance, "b200", 1)
        assert net.cluster_network is None and not net.clustered
        assert net.node_link is None  # one GPU: nothing inside the instance to link
    assert offer_network("vastai", "1x-B200", "b200", 1).network_note == \
        "independent hosts, no cluster network"


def test_unknown_provider_takes_the_link_from_the_gpu():
    net = offer_network("someco", "box-8", "h100-pcie", 8)
    assert (net.node_link, net.node_link_gbps, net.cluster_network) == ("pcie", 63.0, None)
    assert "no cluster fabric known" in net.network_note
    assert offer_network("someco", "box-8", "b200", 8).node_link == "nvlink5"


def test_aws_price_list_network_performance_sets_the_bandwidth():
    net = offer_network("aws", "p5.48xlarge", "h100-sxm", 8,
                        {"network_performance": "4x 100 Gigabit"})
    assert net.cluster_gbps == 400
    assert "AWS price list" in net.network_note
    # "Up to" figures are burst rates, not a fabric: the table's figure stays.
    assert offer_network("aws", "p5.48xlarge", "h100-sxm", 8,
                         {"network_performance": "Up to 25 Gigabit"}).cluster_gbps == 3200


def test_collective_ratios_match_nccl_tests():
    # 8x H100 NVLS all-reduce 480 GB/s (NVIDIA/nccl-tests#212); ring 365-370 (nccl#1455).
    h100 = collective_ratios("nvlink4")
    assert h100.nvls and 460 <= h100.allreduce * 450 <= 490
    assert 360 <= h100.gather * 450 <= 375
    # 8x A100 235 GB/s (stas00 network/README.md); 8x B200 838.97 (stas00 benchmarks).
    assert collective_ratios("nvlink3").allreduce * 300 == pytest.approx(235, rel=0.02)
    assert collective_ratios("nvlink5").allreduce * 900 == pytest.approx(838.97, rel=0.01)
    # >= 4 nodes x 8 H100 on 8 x 400G: ~320 GB/s of the 400 GB/s aggregate (nccl#1221).
    assert collective_ratios("network").allreduce * 400 == pytest.approx(320, rel=0.05)


def test_overrides_and_allow_unclustered():
    stored = offer_network("vastai", "1x-B200", "b200", 1)
    assert effective_cluster("vastai", "1x-B200", stored) == (None, None, None)
    kind, gbps, note = effective_cluster("vastai", "1x-B200", stored, allow_unclustered=True)
    assert (kind, gbps) == ("tcp", UNCLUSTERED_GBPS) and "--allow-unclustered" in note
    overrides = parse_overrides({"overrides": {
        "vastai": {"cluster_network": "roce", "cluster_gbps": 400},
        "vastai/1x-B200": {"cluster_network": "infiniband", "cluster_gbps": 800}}})
    assert effective_cluster("vastai", "1x-B200", stored, overrides)[:2] == ("infiniband", 800)
    assert effective_cluster("vastai", "1x-H100_SXM", stored, overrides)[:2] == ("roce", 400)
    with pytest.raises(InvalidInput, match="cluster_network must be one of"):
        parse_overrides({"overrides": {"vastai": {"cluster_network": "magic",
                                                  "cluster_gbps": 1}}})
    with pytest.raises(InvalidInput, match="cluster_gbps must be a positive"):
        parse_overrides({"overrides": {"vastai": {"cluster_network": "roce"}}})


def test_ingest_stores_the_network_with_a_new_offer(any_db_url):
    db = open_database(any_db_url)
    t = at("2026-11-02")
    ingest_records(db, "test", [obs("55.04", t), obs("2.5", t, provider="vastai",
                                                     instance_type="1x-H100_SXM",
                                                     gpu_count=1)], started_at=t)
    rows = {r.provider: r for r in price_rows(db)}
    assert rows["aws"].to_json()["cluster_network"] == "efa"
    assert rows["aws"].to_json()["cluster_gbps"] == 3200
    assert rows["aws"].node_link == "nvlink4" and rows["aws"].node_link_gbps == 450
    assert rows["vastai"].cluster_network is None
    assert rows["vastai"].network_note == "independent hosts, no cluster network"
    db.close()


def test_migration_0005_fills_stored_offers(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    migrate(engine, "0003")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO provider (id, display_name) VALUES ('aws', 'AWS')"))
        conn.execute(text("INSERT INTO gpu_model (id, name, vendor, memory_gb, form_factor) "
                          "VALUES ('h100-sxm', 'H100', 'nvidia', 80, 'SXM')"))
        conn.execute(text(
            "INSERT INTO offer (source, provider, region, zone, instance_type, variant, "
            "category, gpu_id, gpu_raw, gpu_count, fractional, attributes, first_seen) VALUES "
            "('t', 'aws', 'us-east-1', '', 'p5.48xlarge', '', 'on-demand', 'h100-sxm', 'H100',"
            " 8, 0, '{}', '2026-01-01 00:00:00.000000')"))
    migrate(engine, "0005")
    with engine.connect() as conn:
        row = conn.execute(text("SELECT node_link, cluster_network, cluster_gbps FROM offer"
                                )).one()
    assert tuple(row) == ("nvlink4", "efa", 3200.0)
    engine.dispose()
