"""The one GPU-name table (data/gpus.json): patterns, memory sanity, MIG slices, form factors."""

from __future__ import annotations

import json
import re
from importlib import resources

from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import at, obs
from tracker.core.gpus import (
    canonical_gpu,
    form_factor_of_instance,
    gpu_table,
    memory_mismatch,
    mig_slice,
    with_form_factor,
)
from tracker.store.ingest import validate

GPU_IDS = sorted(gpu_table())


def test_patterns_live_in_data_and_every_family_has_a_gpu() -> None:
    data = json.loads(resources.files("data").joinpath("gpus.json").read_text("utf-8"))
    families = {g["family"] for g in data["gpus"]}
    pattern_families = [p["family"] for p in data["name_patterns"]]
    assert len(pattern_families) == len(set(pattern_families))
    assert set(pattern_families) <= families
    for item in data["name_patterns"]:  # compiled only when first tried: each must compile
        re.compile(item["pattern"])


@given(gpu_id=st.sampled_from(GPU_IDS), ratio=st.floats(min_value=0.9, max_value=1.1))
def test_memory_within_ten_percent_is_accepted(gpu_id: str, ratio: float) -> None:
    memory = gpu_table()[gpu_id].memory_gb * ratio
    if abs(memory - gpu_table()[gpu_id].memory_gb) <= 0.1 * gpu_table()[gpu_id].memory_gb:
        assert memory_mismatch(gpu_id, memory) is None


@given(gpu_id=st.sampled_from(GPU_IDS),
       ratio=st.one_of(st.floats(min_value=0.01, max_value=0.89),
                       st.floats(min_value=1.11, max_value=20)))
def test_memory_off_by_more_is_a_reason(gpu_id: str, ratio: float) -> None:
    reason = memory_mismatch(gpu_id, gpu_table()[gpu_id].memory_gb * ratio)
    assert reason is not None and gpu_id in reason


@given(slices=st.integers(min_value=1, max_value=7),
       memory=st.sampled_from([5, 10, 12, 20, 24, 40, 48]))
def test_mig_profiles_parse_and_keep_the_parent_name(slices: int, memory: int) -> None:
    name = f"NVIDIA A100-SXM4-80GB MIG {slices}g.{memory}gb"
    found = mig_slice(name)
    assert found is not None
    assert (found.parent_name, found.profile, found.memory_gb) == (
        "NVIDIA A100-SXM4-80GB", f"{slices}g.{memory}gb", float(memory))
    assert mig_slice("NVIDIA A100-SXM4-80GB") is None


def test_a_misread_memory_is_rejected_never_reclassed() -> None:
    # SkyPilot's vast catalog before the per-cloud reading: 2x A100 40 GB as 80 GB "per GPU"
    # would snap to a100-80gb; with the name saying 40GB the check names the disagreement.
    row = obs("1.49", at("2026-09-14"), gpu_name="A100 40GB SXM4", gpu_count=2,
              gpu_memory_gb=80.0)
    assert validate(row) == (None, "memory 80 GB per GPU disagrees with a100-40gb (40 GB) by "
                                   "more than 10%")
    h200 = obs("20.0", at("2026-09-14"), gpu_name="H200", gpu_count=8,
               gpu_memory_gb=1123.2)
    assert validate(h200)[1].startswith("memory 1123.2 GB per GPU disagrees with h200")


def test_form_factor_from_instance_names() -> None:
    assert form_factor_of_instance("lambda", "gpu_1x_h100_pcie") == "PCIe"
    assert form_factor_of_instance("lambda", "gpu_2x_a100") == "PCIe"
    assert form_factor_of_instance("lambda", "gpu_8x_a100") is None
    assert form_factor_of_instance("vastai", "2x-A100_SXM4-32-65536") == "SXM"
    assert form_factor_of_instance("aws", "gpu_2x_a100") is None  # a Lambda convention only
    assert with_form_factor("H100", "lambda", "gpu_1x_h100_pcie") == "H100 PCIe"
    assert with_form_factor("H100 SXM5", "lambda", "gpu_1x_h100_pcie") == "H100 SXM5"
    assert canonical_gpu(with_form_factor("A100", "lambda", "gpu_1x_a100"), 40) == \
        "a100-40gb-pcie"


@given(st.text(max_size=40))
def test_canonical_gpu_never_raises(name: str) -> None:
    result = canonical_gpu(name)
    assert result is None or result in gpu_table()
