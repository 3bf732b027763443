"""Every GPU class with offers has the figures sizing needs; `gpus`, `check coverage`,
`[gpus.<id>]` configuration and rack-scale NVLink domains (issue #24).

The offers are the bundled snapshots (data/prices/*.csv) and every real provider capture in
tests/fixtures (the samples tests/test_real_captures.py stores: Azure, SkyPilot's vast,
shadeform, runpod, lambda, nebius and spheron catalogs, gpuhunt's Lambda catalog, RunPod's GPU
table; provenance in each fixture directory's README).
"""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import at, obs
from tests.test_real_captures import every_sample, stored
from tracker.answers.gpu_catalog import coverage_of
from tracker.cli.main import cli
from tracker.core.errors import InvalidInput, NotFound
from tracker.core.gpus import canonical_gpu, gpu_table, missing_figures, set_gpu_overrides
from tracker.sizing import SizingRequest, size_workload
from tracker.sizing.serving import ServingSpec, serve
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

ROOT = Path(__file__).resolve().parents[1]


def classes_with_offers() -> dict[str, str]:
    """GPU class -> where an offer of it was seen."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "data" / "prices").glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                gpu = canonical_gpu(row["gpu_name"], float(row["gpu_memory_gb"] or 0) or None)
                if gpu is not None:
                    found.setdefault(gpu, f"data/prices/{path.name}")
    for sample, records in every_sample().items():
        for gpu, _count, _memory in stored(records).values():
            found.setdefault(gpu, f"tests/fixtures {sample}")
    return found


def test_every_class_with_offers_is_sizeable():
    offered = classes_with_offers()
    assert len(offered) >= 50  # the captures hold ~50 classes; a parser regression drops them
    table = gpu_table()
    lacking = {gpu: (where, missing_figures(table[gpu])) for gpu, where in offered.items()
               if missing_figures(table[gpu])}
    assert not lacking, "classes with offers that cannot be sized (class: where, missing): " \
        + "; ".join(f"{g}: {w}, {', '.join(m)}" for g, (w, m) in sorted(lacking.items()))


@pytest.mark.parametrize("gpu", sorted(gpu_table()))
def test_every_class_serves_a_small_model(gpu):
    # Each class sizes and serves (no "no compute or memory-bandwidth specs"): Llama 3.2 1B
    # fits every card of 6 GB and more.
    result = serve(SizingRequest(model="llama-3.2-1b", gpu=gpu, count=1),
                   ServingSpec(prompt_tokens=1000, output_tokens=1000))
    assert result.output_tokens_per_s > 0


def test_every_figure_cites_a_source():
    data = json.loads((ROOT / "data" / "gpus.json").read_text("utf-8"))
    for item in data["gpus"]:
        specs = item["specs"]
        assert specs and specs["sources"], item["id"]
        for key in ("bf16_tflops", "memory_bandwidth_gbps", "scale_up_domain", "tdp_watts"):
            assert specs.get(key) is not None and specs[key] > 0, (item["id"], key)


def test_new_classes_and_their_figures():
    table = gpu_table()
    # Dense figures, stas00/ml-engineering compute/accelerator/README.md@744d01e tables.
    assert table["mi355x"].specs.fp4_tflops == 10100 and table["mi355x"].memory_gb == 288
    assert table["mi355x"].specs.fp4_formats == ("mxfp4",)
    assert table["gb300"].specs.fp4_tflops == 15000
    assert table["gb200"].specs.scale_up_domain == 72
    assert table["b200"].specs.scale_up_domain == 8
    assert table["h100-pcie"].specs.scale_up_domain == 1
    assert table["h800"].specs.link_gbps_unidirectional == 200
    # The driver's memory: 183359 MiB on B200 (NVIDIA/TensorRT-LLM#10278), 49140 MiB on an RTX
    # A6000, not memory_gb x 10^9.
    assert table["b200"].memory_bytes == 183359 * 2**20
    assert table["rtx-a6000"].memory_bytes == 49140 * 2**20
    assert canonical_gpu("AMD Instinct MI355X") == "mi355x"
    assert canonical_gpu("NVIDIA H800 80GB HBM3") == "h800"
    assert canonical_gpu("NVIDIA GB300") == "gb300"


def test_gpus_json_has_the_new_keys():
    result = CliRunner().invoke(cli, ["gpus", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    b200 = rows["b200"]
    assert list(b200)[:9] == ["id", "name", "memory_gb", "form_factor", "bf16_tflops",
                              "fp8_tflops", "memory_bandwidth_gbps", "tdp_watts", "aliases"]
    assert (b200["fp4_tflops"], b200["memory_bytes"], b200["scale_up_domain"],
            b200["scale_up_link"], b200["link_gbps_unidirectional"]) == (
        9000, 192265846784, 8, "nvlink5", 900)
    assert rows["a100-80gb"]["fp4_tflops"] is None
    assert rows["mi300x"]["memory_bytes"] == 192 * 10**9
    assert rows["mi300x"]["memory_bytes_measured"] is False
    assert all(r["sizeable"] for r in rows.values())


def test_check_coverage_passes_on_the_bundled_prices_and_names_a_class_it_cannot_size(
        any_db_url):
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", any_db_url, "demo"]).exit_code == 0
    ok = runner.invoke(cli, ["--db", any_db_url, "check", "coverage", "--format", "json"])
    assert ok.exit_code == 0, ok.output
    rows = json.loads(ok.stdout)
    assert {r["gpu"] for r in rows} >= {"b200", "mi300x", "h100-sxm"}
    assert all(r["sizeable"] and r["missing"] == [] for r in rows)
    # A class known by its memory only (as a [gpus.<id>] table may add one), with an offer.
    set_gpu_overrides({"bare-card": {"memory_gb": 24}})
    db = open_database(any_db_url)
    summary = ingest_records(db, "quotes", [obs("1.00", at("2026-11-30"), provider="acme",
                                                instance_type="bare-1", gpu_name="bare-card",
                                                gpu_count=1)], started_at=at("2026-11-30"))
    assert summary.status == "ok", summary
    db.close()
    bad = runner.invoke(cli, ["--db", any_db_url, "check", "coverage", "--format", "json",
                              "--as-of", (at("2026-11-30") + timedelta(days=1)).isoformat()])
    assert bad.exit_code == 1
    first = json.loads(bad.stdout)[0]
    assert (first["gpu"], first["sizeable"], first["missing"]) == (
        "bare-card", False, ["bf16_tflops", "memory_bandwidth_gbps"])
    assert "bare-card (1 offers) cannot be sized: no bf16_tflops or memory_bandwidth_gbps" \
        in bad.stderr


def test_coverage_rows_put_unsizeable_classes_first():
    set_gpu_overrides({"bare-card": {"memory_gb": 24}})
    rows = coverage_of({"h100-sxm": 5, "bare-card": 1, "mi300x": 2})
    assert [r.gpu for r in rows] == ["bare-card", "h100-sxm", "mi300x"]
    assert rows[2].fallbacks == ("memory_bytes (memory_gb x 10^9)",)


def test_sizing_names_the_missing_figure():
    set_gpu_overrides({"bare-card": {"memory_gb": 24}})
    with pytest.raises(InvalidInput, match=r"bare-card has no bf16_tflops and "
                       r"memory_bandwidth_gbps figure .*\[gpus.bare-card\]"):
        serve(SizingRequest(model="llama-3.2-1b", gpu="bare-card", count=1), ServingSpec())


def test_an_unknown_class_is_one_line_with_suggestions():
    with pytest.raises(NotFound, match=r"unknown GPU 'mi356x'; did you mean .*mi355x"):
        size_workload(SizingRequest(model="llama-3.1-8b", gpu="mi356x"))
    result = CliRunner().invoke(cli, ["size", "-m", "llama-3.1-8b", "--gpu", "b400"])
    assert result.exit_code != 0
    assert result.stderr.count("\n") == 1 and "did you mean" in result.stderr


# -- [gpus.<id>] in the configuration --------------------------------------------------------

def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_adds_a_class_and_overrides_a_figure(tmp_path):
    path = write(tmp_path, """
[gpus.my-card]
memory_gb = 64
bf16_tflops = 400
memory_bandwidth_gbps = 1500
aliases = ["mycard"]
sources = ["our bench, 2026-11"]

[gpus.mi300x]
memory_bytes = 206141652992
""")
    runner = CliRunner()
    listed = runner.invoke(cli, ["--config", str(path), "gpus", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert rows["my-card"]["from_config"] and rows["my-card"]["bf16_tflops"] == 400
    assert rows["mi300x"]["memory_bytes"] == 206141652992
    assert rows["mi300x"]["bf16_tflops"] == 1307  # the other figures stay the bundled ones
    sized = runner.invoke(cli, ["--config", str(path), "size", "-m", "llama-3.1-8b", "--gpu",
                                "mycard", "--format", "json"])
    assert sized.exit_code == 0, sized.output
    assert json.loads(sized.stdout)["gpu"] == "my-card"


@pytest.mark.parametrize(("text", "fragment"), [
    ("[gpus.h100-sxm]\nbf16_tflops = -1\n", "[gpus] h100-sxm.bf16_tflops: input should be "
                                             "greater than 0, got -1"),
    ("[gpus.new-card]\nmemory_gb = 32\nbf16_tflops = 100\n",
     "[gpus.new-card] memory_bandwidth_gbps: missing"),
    ("[gpus.h100-sxm]\nbf16 = 100\n", "[gpus.h100-sxm] unknown key 'bf16'"),
    ("[gpus.b200]\nscale_up_link = \"nvlink9\"\n", "b200.scale_up_link"),
])
def test_a_bad_gpu_table_is_one_line_naming_the_key(tmp_path, text, fragment):
    path = write(tmp_path, text)
    result = CliRunner().invoke(cli, ["--config", str(path), "gpus"])
    assert result.exit_code != 0
    assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr


# -- rack-scale NVLink domains ----------------------------------------------------------------

def test_tensor_parallelism_spans_an_nvl72_domain_not_only_the_host():
    # GB200 NVL72: 4 GPUs per compute tray (the host), 72 in one NVLink domain
    # (nvidia.com/en-us/data-center/gb200-nvl72). 405B in BF16 needs > 4 GPUs of 186 GB.
    res = size_workload(SizingRequest(model="llama-3.1-405b", gpu="gb200", context=8192,
                                      gpus_per_node=4))
    assert (res.tensor_parallel, res.pipeline_parallel) == (8, 1)
    tp16 = size_workload(SizingRequest(model="llama-3.1-405b", gpu="gb200", context=8192,
                                       gpus_per_node=4, count=16, tensor_parallel=16))
    assert tp16.fits and tp16.tensor_parallel == 16
    links = size_workload(SizingRequest(model="llama-3.1-8b", workload="pretrain",
                                        gpu="gb200", gpus_per_node=4, count=8,
                                        tokens=1e9)).to_json()["links"]
    assert (links["gpus_per_node"], links["scale_up_domain"], links["node_link"]) == (
        4, 72, "nvlink5")


def test_an_nvl72_class_plans_on_its_4_gpu_compute_tray_as_the_host():
    # A GB200/GB300 NVL72 rack is 18 compute trays of 4 GPUs (NVIDIA GB200 NVL Multi-Node
    # Tuning Guide: "18x 1RU Compute trays (4 GPUs per compute tray)"); the default host was
    # an HGX board's 8 for every class, so the plan's links said "hosts of 8" and 8 x 400G
    # between them. The NVLink domain stays 72; --gpus-per-node still overrides the host.
    def links(gpu: str, **extra) -> dict:
        return size_workload(SizingRequest(model="llama-3.1-8b", workload="pretrain",
                                           gpu=gpu, count=8, tokens=1e9, **extra)
                             ).to_json()["links"]

    gb200, gb300, h100 = links("gb200"), links("gb300"), links("h100-sxm")
    assert (gb200["gpus_per_node"], gb200["scale_up_domain"], gb200["cluster_gbps"]) == (
        4, 72, 1600.0)  # 4 GPUs x 400 Gb/s ConnectX-7 (Azure ND GB200 v6: "4x 400 Gb/s")
    assert (gb300["gpus_per_node"], gb300["scale_up_domain"], gb300["cluster_gbps"]) == (
        4, 72, 3200.0)  # 4 x 800 Gb/s ConnectX-8
    assert (h100["gpus_per_node"], h100["scale_up_domain"]) == (8, 8)
    assert links("gb200", gpus_per_node=8)["gpus_per_node"] == 8
    table = gpu_table()
    assert [g for g in table if table[g].specs and table[g].specs.host_gpus] == [
        "gb200", "gb300"]
    from tracker.answers.gpu_catalog import gpu_row

    assert (gpu_row(table["gb200"])["host_gpus"], gpu_row(table["b200"])["host_gpus"]) == (4, 8)


def test_the_clouds_4_gpu_nvl72_instances_carry_their_rack_domain_and_fabric():
    # Azure ND GB200 v6 has the RDMA 'r' and 4 x 400 Gb/s InfiniBand, 18 VMs per 72-GPU domain
    # (azure-compute-docs nd-gb200-v6-series-summary.md); the catch-all Azure row gave it no
    # InfiniBand, so compare never joined two of them. CoreWeave sells gb200-4x nodes in whole
    # racks of 18; AWS p6e-gb200.36xlarge is one of 9 or 18 instances of an UltraServer.
    from tracker.core.fabric import offer_network, offer_scale_up_domain

    cases = {("azure", "Standard_ND128isr_NDR_GB200_v6", "gb200"): ("infiniband", 1600.0, 72),
             ("azure", "Standard_ND128isr_GB300_v6", "gb300"): ("infiniband", 3200.0, 72),
             ("coreweave", "gb200-4x", "gb200"): ("infiniband", 1600.0, 72),
             ("coreweave", "gb300-4x", "gb300"): ("infiniband", 3200.0, 72),
             ("aws", "p6e-gb200.36xlarge", "gb200"): ("efa", 1600.0, 36)}
    for (provider, instance, gpu), (kind, gbps, domain) in cases.items():
        net = offer_network(provider, instance, gpu, 4)
        assert (net.cluster_network, net.cluster_gbps, net.node_link) == (kind, gbps, "nvlink5")
        assert offer_scale_up_domain(provider, instance) == domain
    # An HGX node of the same provider keeps the provider's row.
    assert offer_scale_up_domain("coreweave", "h100-8x") is None
    assert offer_network("coreweave", "h100-8x", "h100-sxm", 8).cluster_gbps == 3200.0


def test_an_offer_larger_than_its_class_host_is_several_hosts():
    # A whole NVL72 rack sold as one 72-GPU unit is 18 hosts of 4; an explicit
    # --gpus-per-node still caps, and an 8-GPU HGX instance stays one host of 8.
    from tests.economics.test_candidates import row
    from tracker.answers.candidates import offer_node

    assert offer_node(row(1, "x", "gb200", 72, "300")) == 4
    assert offer_node(row(2, "x", "gb200", 4, "40")) == 4
    assert offer_node(row(3, "x", "gb200", 72, "300"), 2) == 2
    assert offer_node(row(4, "x", "h100-sxm", 8, "30")) == 8


def test_blackwell_ultra_int8_is_a_small_peak_and_int8_weights_say_so():
    # Blackwell Ultra traded INT8 for NVFP4: ~0.32 POPS sparse per package against B200's
    # 4.5 dense (NVIDIA's Hot Chips 2025 table), HGX B300 "INT8 2 POPS" (sparse, 8 GPUs).
    # The data had B200's 4,500/5,000 TOPS. --precision int8 runs weight-only at the BF16
    # peak either way; on Blackwell Ultra the warning adds that W8A8 would be slower still.
    from tracker.sizing.memory import compute_peak

    table = gpu_table()
    b300, gb300, b200 = table["b300"].specs, table["gb300"].specs, table["b200"].specs
    assert (b300.int8_tops, gb300.int8_tops, b200.int8_tops) == (125, 160, 4500)
    assert b300.int8_tops < b300.bf16_tflops / 10 and gb300.int8_tops < gb300.bf16_tflops / 10
    peak, warning = compute_peak("int8", "b300", 2250e12, 4500e12, 12600e12, int8_ops=125e12)
    assert peak == 2250e12 and "INT8 tensor cores peak at 125 TOPS, below its 2,250 BF16" \
        in warning
    _peak, warning = compute_peak("int8", "b200", 2250e12, 4500e12, 9000e12, int8_ops=4500e12)
    assert "weight-only" in warning and "TOPS" not in warning
    served = serve(SizingRequest(model="llama-3.1-8b", gpu="b300", count=1, precision="int8"),
                   ServingSpec(prompt_tokens=1000, output_tokens=1000))
    assert any("peak at 125 TOPS" in w for w in served.warnings)


def test_a_board_domain_stays_inside_the_host():
    # HGX H100: TP stays at 8; 1-GPU instances of an HGX class never get TP across them.
    with pytest.raises(InvalidInput, match="--tp 16 is larger than --gpus-per-node 8"):
        size_workload(SizingRequest(model="llama-3.1-405b", gpu="h100-sxm", count=16,
                                    tensor_parallel=16))
    with pytest.raises(InvalidInput, match="--tp 4 is larger than --gpus-per-node 1"):
        size_workload(SizingRequest(model="llama-3.1-70b", gpu="a100-80gb", count=4,
                                    gpus_per_node=1, tensor_parallel=4))
    # An offer's fabric row gives the domain explicitly (data/fabric.json gcp a4x: 72).
    from tracker.core.fabric import offer_scale_up_domain

    assert offer_scale_up_domain("gcp", "a4x-highgpu-4g") == 72
    assert offer_scale_up_domain("oci", "BM.GPU.GB200.4") == 72
    assert offer_scale_up_domain("aws", "p5.48xlarge") is None
