"""The canonical GPU table: provider names land on one model, user names resolve."""

from __future__ import annotations

import pytest

from tracker.core.errors import NotFound
from tracker.core.gpus import canonical_gpu, gpu_table, resolve_gpu

# Real names as the providers print them (reference: docs/sources.md §4 and the recorded fixtures).
PROVIDER_NAMES = [
    ("NVIDIA H100 80GB HBM3", None, "h100-sxm"),  # RunPod id
    ("H100 SXM", None, "h100-sxm"),  # RunPod displayName
    ("H100-SXM", None, "h100-sxm"),  # SkyPilot
    ("H100_SXM5", None, "h100-sxm"),
    ("nvidia-h100-80gb", None, "h100-sxm"),  # GCP accelerator type
    ("nvidia-h100-mega-80gb", None, "h100-sxm"),  # GCP a3-mega
    ("H100 80GB Plus", None, "h100-sxm"),  # GCP SKU text
    ("Standard_ND96isr_H100_v5", None, "h100-sxm"),  # Azure VM size
    ("H100-SXM-80GB", None, "h100-sxm"),  # Crusoe
    ("nvidia_h100", None, "h100-sxm"),  # DigitalOcean
    ("H100 PCIE", None, "h100-pcie"),  # Vast
    ("NVIDIA H100 PCIe", None, "h100-pcie"),
    ("H100 NVL", None, "h100-nvl"),
    ("H100NVL", None, "h100-nvl"),  # gpuhunt
    ("NVIDIA H200", 141, "h200"),
    ("GH200", 96, "gh200"),
    ("B200", None, "b200"),
    ("A100 SXM4", 40, "a100-40gb"),  # Vast, memory from gpu_ram
    ("A100 SXM4", 80, "a100-80gb"),
    ("NVIDIA A100-SXM4-80GB", None, "a100-80gb"),
    ("A100-80GB", None, "a100-80gb"),  # SkyPilot
    ("nvidia-tesla-a100", 40, "a100-40gb"),  # GCP
    ("nvidia-a100-80gb", None, "a100-80gb"),
    ("NVIDIA A100 80GB PCIe", None, "a100-80gb-pcie"),
    ("NVIDIA_A100", 40, "a100-40gb"),  # Vultr
    ("1x A10 (24 GB PCIe)", None, "a10"),  # Lambda description
    ("A10G", 24, "a10g"),
    ("L40S", 48, "l40s"),
    ("NVIDIA L40", None, "l40"),
    ("nvidia-l4", None, "l4"),
    ("L4", 22.35, "l4"),  # AWS reports 22888 MiB
    ("Tesla V100-SXM2-16GB", None, "v100-16gb"),
    ("V100-32GB", None, "v100-32gb"),
    ("nvidia-tesla-t4", None, "t4"),
    ("RTX 4090", None, "rtx-4090"),
    ("NVIDIA GeForce RTX 4090", None, "rtx-4090"),
    ("RTX4090", None, "rtx-4090"),
    ("RTX 6000 Ada", None, "rtx-6000-ada"),
    ("NVIDIA RTX 6000 Ada Generation", None, "rtx-6000-ada"),
    ("RTX A6000", None, "rtx-a6000"),
    ("RTX A5000", None, "rtx-a5000"),
    ("RTX PRO Server 6000", None, "rtx-pro-6000"),  # AWS
    ("RTX6000", None, "quadro-rtx-6000"),  # Lambda gpu_1x_rtx6000 (Turing)
    ("Quadro RTX 6000", None, "quadro-rtx-6000"),
    ("A16", 16, "a16"),
    ("MI300X", None, "mi300x"),
    ("amd_mi300x", None, "mi300x"),  # DigitalOcean
    ("AMD Instinct MI300X", None, "mi300x"),
    ("Gaudi 3", None, "gaudi3"),
]


@pytest.mark.parametrize(("raw", "memory", "expected"), PROVIDER_NAMES)
def test_provider_names_land_on_one_canonical_model(raw, memory, expected):
    assert canonical_gpu(raw, memory) == expected


def test_a100_sizes_stay_apart_and_nvl_is_not_sxm():
    assert canonical_gpu("A100", 40) != canonical_gpu("A100", 80)
    assert canonical_gpu("H100 NVL") != canonical_gpu("H100 SXM")
    assert canonical_gpu("L40") != canonical_gpu("L40S") != canonical_gpu("L4")
    assert canonical_gpu("GH200") != canonical_gpu("H200")
    assert canonical_gpu("RTX 6000 Ada") != canonical_gpu("RTX A6000")


@pytest.mark.parametrize("raw", ["Voodoo 5", "", "CPU only", "TPU v5e"])
def test_unknown_names_are_none(raw):
    assert canonical_gpu(raw) is None


@pytest.mark.parametrize(("name", "expected"), [
    ("h100", "h100-sxm"), ("H100-SXM", "h100-sxm"), ("a100-80gb", "a100-80gb"),
    ("h200", "h200"), ("rtx4090", "rtx-4090"), ("rtx-4090", "rtx-4090"),
    ("RTX-6000-Ada", "rtx-6000-ada"), ("mi300x", "mi300x"), ("gaudi3", "gaudi3"),
])
def test_user_names_resolve_case_insensitively(name, expected):
    assert resolve_gpu(name).gpu.id == expected


def test_ambiguous_name_picks_sxm_and_says_so():
    resolved = resolve_gpu("h100")
    assert resolved.gpu.id == "h100-sxm"
    assert resolved.warnings and "ambiguous" in resolved.warnings[0]
    assert resolve_gpu("h100-sxm").warnings == ()


def test_unknown_user_name_names_the_closest():
    with pytest.raises(NotFound, match=r"unknown GPU 'h1000'; did you mean h100"):
        resolve_gpu("h1000")


def test_table_is_consistent():
    table = gpu_table()
    assert len(table) >= 15
    aliases = {}
    for gpu in table.values():
        assert gpu.form_factor in {"SXM", "PCIe", "NVL", "OAM"}
        assert gpu.memory_gb > 0
        for alias in gpu.aliases:
            key = alias.lower().replace("-", "")
            assert aliases.setdefault(key, gpu.id) == gpu.id, alias
