"""Issue 29 (b): typed names, validated inputs and the configuration, each bad value refused in
one line with exit 2 and nothing written; the hardening cases live in `BAD_INPUTS`."""

from __future__ import annotations

import pytest

from tracker.errors import NotFound
from tracker.gpus import resolve_gpu

# -- typed GPU names: the alias table or an exact pattern, nothing else ------------------------


@pytest.mark.parametrize(("typed", "expected"), [
    ("a100-80", "a100-80gb"), ("a100 80", "a100-80gb"), ("A100 80GB", "a100-80gb"),
    ("a100-40", "a100-40gb"), ("a100 pcie 80gb", "a100-80gb-pcie"),
    ("h100-94", "h100-nvl"), ("H100 NVL 94GB", "h100-nvl"), ("h100 pcie", "h100-pcie"),
    ("NVIDIA H100 SXM 80GB", "h100-sxm"), ("v100 32gb", "v100-32gb"), ("h200 nvl", "h200-nvl"),
    ("amd mi300x", "mi300x"), ("tesla t4", "t4"), ("gaudi 3", "gaudi3"),
])
def test_typed_names_with_memory_or_form_factor_name_that_part(typed: str,
                                                               expected: str) -> None:
    assert resolve_gpu(typed).gpu.id == expected


@pytest.mark.parametrize("typed", [
    "xh100", "h100!!!", "h100-95x", "a100-81gb-pcie-pcie", "h100 pcie 94gb", "a100-120",
    "h1000", "h100.", "rtx40900", "", "   ", "b200 sxm 80gb", "a10-80",
])
def test_typed_names_that_name_no_gpu_are_unknown(typed: str) -> None:
    with pytest.raises(NotFound, match=r"^unknown GPU "):
        resolve_gpu(typed)


def test_an_ambiguous_typed_size_says_which_part_it_took() -> None:
    resolved = resolve_gpu("a100-80")
    assert resolved.warnings == ("'a100-80' is ambiguous; using a100-80gb (NVIDIA A100 SXM 80GB)"
                                 "; also: a100-80gb-pcie",)


def test_unknown_typed_gpu_is_a_usage_error(tmp_path) -> None:
    from click.testing import CliRunner

    from tracker.cli import cli

    for typed in ("xh100", "h100!!!"):
        res = CliRunner().invoke(cli, ["--db", f"sqlite:///{tmp_path}/t.db", "size", "-m",
                                       "llama-3.1-8b", "-g", typed])
        assert res.exit_code == 2
        assert res.stderr.strip().splitlines() == [
            f"Error: unknown GPU '{typed}'; did you mean h100, "
            + ("v100, p100, h200?" if typed == "xh100" else "h100nvl, v100, p100?")]
        assert res.stdout == ""
