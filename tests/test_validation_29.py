"""Issue 29 (b): typed names, validated inputs and the configuration, each bad value refused in
one line with exit 2 and nothing written; the hardening cases live in `BAD_INPUTS`."""

from __future__ import annotations

import json

import pytest

from tests.helpers import row_counts
from tracker.core.errors import NotFound
from tracker.core.gpus import resolve_gpu

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
    "xh100", "h100!!!", "h100-95x", "a100-96gb-pcie-pcie", "h100 pcie 94gb", "a100-120",
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

    from tracker.cli.main import cli

    for typed in ("xh100", "h100!!!"):
        res = CliRunner().invoke(cli, ["--db", f"sqlite:///{tmp_path}/t.db", "size", "-m",
                                       "llama-3.1-8b", "-g", typed])
        assert res.exit_code == 2
        assert res.stderr.strip().splitlines() == [
            f"Error: unknown GPU '{typed}'; did you mean h100, "
            + ("v100, p100, h800?" if typed == "xh100" else "h100nvl, v100, p100?")]
        assert res.stdout == ""


# -- bad values: one line naming the value and what is valid, exit 2, nothing written --------

_BAD_CONFIG_TOML = {
    "unknown-section": ("[refrsh]\nsources = []\n", "unknown section [refrsh]"),
    "not-utf8": (b"\xff\xfe[report]\n", "is not UTF-8 text"),
    "unknown-workload-model": (
        '[[report.workloads]]\nname = "chat"\nkind = "serve"\nmodel = "llama-9000"\n'
        "prompt_tokens = 1000\noutput_tokens = 1000\n",
        "[report] workloads #1 ('chat'): unknown model 'llama-9000'"),
    "unknown-workload-kind": ('[[report.workloads]]\nkind = "train"\nmodel = "llama-2-7b"\n',
                              "[report] workloads #1: workload ?: kind must be one of"),
}

# (arguments, what the one line says, exit code): each was accepted by the landed main.
BAD_INPUTS: list[tuple[tuple[str, ...], str, int]] = [
    (("breakeven", "--gpu", "h100-sxm", "--discount-rate", "-0.5"),
     "--discount-rate must be in [0, 10], got -0.5", 2),
    (("breakeven", "--gpu", "h100-sxm", "--discount-rate", "-0.01"),
     "--discount-rate must be in [0, 10], got -0.01", 2),
    (("prices", "--as-of", "2099-01-01"), "2099-01-01 is after today", 2),
    (("cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--as-of", "2099-01-01"),
     "2099-01-01 is after today", 2),
    (("spot", "--gpu", "h100-sxm", "--as-of", "2099-01-01T00:00Z"), "is after today", 2),
    (("report", "weekly", "--week", "1999-W01"),
     "week 1999-W01 has no prices in the store; give a week from ", 2),
    (("report", "weekly", "--week", "2099-W01"), "week 2099-W01 has no prices in the store", 2),
    (("report", "send", "--week", "1999-W01", "--to", "a@example.com"),
     "week 1999-W01 has no prices in the store", 2),
    (("backfill", "skypilot", "--cloud", "mars", "--since", "2025-06-01"),
     "--cloud 'mars': skypilot has no catalog for that cloud; known: aws, azure,", 2),
    (("backfill", "gpuhunt", "--cloud", "mars", "--version", "20250601-42"),
     "--cloud 'mars': gpuhunt has no catalog for that provider; known: aws, azure,", 2),
    (("backfill", "skypilot", "--cloud", "aws", "--since", "2026-02-01", "--until",
      "2026-01-01"), "--since 2026-02-01T00:00:00Z is after --until 2026-01-01T23:59:59Z", 2),
    (("check", "invoices", "--since", "2026-11-10", "--until", "2026-11-01"),
     "--since 2026-11-10T00:00:00Z is after --until 2026-11-01T23:59:59Z", 2),
    (("history", "--gpu", "h100-sxm", "--since", "2026-11-10", "--until", "2026-11-01"),
     "is after --until", 2),
    (("index", "--gpu", "h100-sxm", "--since", "2026-11-10", "--until", "2026-11-01"),
     "is after --until", 2),
    (("prices", "--region", "mars-1"),
     "--region 'mars-1' is in no offer in the store; regions: ", 2),
    (("history", "--gpu", "h100-sxm", "--region", "mars-1"), "--region 'mars-1' is in no offer", 2),
    (("cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--region", "mars-1"),
     "--region 'mars-1' is in no offer", 2),
    (("compare", "--model", "llama-3.1-8b", "--region", "mars-1"),
     "--region 'mars-1' is in no offer", 2),
    # --provider as --region: a usage error where no source uses the name, checked by
    # every command that prices from the store (compare and cost used to say "no prices").
    (("compare", "--model", "llama-3.1-8b", "--provider", "awss"),
     "unknown provider 'awss' (did you mean aws?); the store has: ", 2),
    (("cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--provider", "nosuch"),
     "unknown provider 'nosuch'; the store has: ", 2),
    (("spot", "--gpu", "h100-sxm", "--work-hours", "10", "--checkpoint-minutes", "5",
      "--restart-minutes", "5", "--provider", "nosuch"), "unknown provider 'nosuch'", 2),
    (("breakeven", "--gpu", "h100-sxm", "--utilization", "0.6", "--provider", "nosuch"),
     "unknown provider 'nosuch'", 2),
    # A provider the tracker knows with no offers in this store: not found, exit 1.
    (("prices", "--provider", "coreweave"),
     "no offers from provider 'coreweave' in the store; the store has: ", 1),
    (("prices", "--gpu", "xh100"), "unknown GPU 'xh100'; did you mean h100", 2),
    (("prices", "--gpu", "h100!!!"), "unknown GPU 'h100!!!'; did you mean h100", 2),
    (("cost", "--model", "llama-3.1-8b", "--gpu", "a100-96"), "unknown GPU 'a100-96'", 2),
    *[((f"--config={{{name}}}", "prices"), needle, 1)
      for name, (_, needle) in _BAD_CONFIG_TOML.items()],
    *[((f"--config={{{name}}}", "breakeven", "--gpu", "h100-sxm"), needle, 1)
      for name, (_, needle) in _BAD_CONFIG_TOML.items()],
    *[((f"--config={{{name}}}", "size", "-m", "llama-3.1-8b"), needle, 1)
      for name, (_, needle) in _BAD_CONFIG_TOML.items()],
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    from click.testing import CliRunner

    from tracker.cli.main import cli

    path = tmp_path_factory.mktemp("store") / "t.db"
    url = f"sqlite:///{path}"
    result = CliRunner().invoke(cli, ["--db", url, "refresh", "--source", "bundled"])
    assert result.exit_code == 0, result.output
    return url


@pytest.mark.parametrize(("args", "needle", "code"), BAD_INPUTS,
                         ids=[" ".join(a)[:60] for a, _, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_writes_nothing(store, tmp_path, args, needle, code) -> None:
    from click.testing import CliRunner

    from tracker.cli.main import cli

    files = {}
    for name, (text, _) in _BAD_CONFIG_TOML.items():
        files[name] = tmp_path / f"{name}.toml"
        if isinstance(text, bytes):
            files[name].write_bytes(text)
        else:
            files[name].write_text(text, "utf-8")
    args = tuple(a.format(**files) if a.startswith("--config=") else a for a in args)
    tables = ("ingest_run", "report_archive", "price_span")
    before = row_counts(store, *tables)
    out = tmp_path / "out"
    extra = ("--out", str(out)) if args[:1] == ("report",) else ()
    result = CliRunner().invoke(cli, ["--db", store, *args, *extra],
                                env={"GPU_TRACKER_DB": store})
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code, result.output
    assert len(lines) == 1 and needle in lines[0], lines
    assert result.stdout == ""
    assert row_counts(store, *tables) == before
    assert not out.exists()


def test_the_table_tries_this_many_bad_inputs() -> None:
    assert len(BAD_INPUTS) == 38


# -- Azure: sizes by the published tables and the size name, the rest counted ------------------


def test_azure_preview_rtx_pro_sizes_with_a_published_count_are_mapped() -> None:
    from scrapers.azure import gpu_for_size

    # azure-compute-docs nc-rtxpro6000-bse-v6-series.md@02773904, "Accelerators" tabs.
    for size, count in [("Standard_NC128lds_xl_RTXPRO6000BSE_v6", 1),
                        ("Standard_NC256lds_xl_RTXPRO6000BSE_v6", 2),
                        ("Standard_NC320ds_xl_RTXPRO6000BSE_v6", 2)]:
        gpu = gpu_for_size(size)
        assert gpu is not None and (gpu.count, gpu.memory_gb) == (count, 96)


def test_an_unmapped_azure_size_names_its_gpu_and_is_counted() -> None:
    from datetime import UTC, datetime

    from scrapers.azure import AzureSource, model_by_name

    assert model_by_name("Standard_NC324lds_xl_RTXPRO6000BSE_v6") == (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert model_by_name("Standard_NC8ads_A10_v4") == "NVIDIA A10"
    assert model_by_name("Standard_NC24ads_Z999_v9") is None
    source = AzureSource(AzureSource.DEFAULTS)
    item = {"armSkuName": "Standard_NC324lds_xl_RTXPRO6000BSE_v6", "productName": "Virtual "
            "Machines NCldsxlRTX6kv6", "meterName": "NC324lds xl RTX6kv6", "skuName": "x",
            "type": "Consumption", "armRegionName": "eastus2", "retailPrice": 30,
            "currencyCode": "USD", "unitOfMeasure": "1 Hour"}
    (record,) = source._parse_item(item, "NC", datetime(2026, 11, 2, tzinfo=UTC), {})
    assert record.unmapped is True
    assert record.reason == ("unmapped Azure GPU VM size Standard_NC324lds_xl_RTXPRO6000BSE_v6 "
                             "(NVIDIA RTX PRO 6000 Blackwell Server Edition by its name, but no "
                             "published GPU count)")


def test_refresh_line_says_how_many_rows_were_unmapped() -> None:
    from tracker.cli.commands.refresh import _line
    from tracker.store.ingest import RunSummary

    line = _line(RunSummary(source="azure", offers_seen=39, rejected=8, unmapped=8))
    assert line == ("azure: 39 offers, 0 prices changed, 0 new, 8 rejected (8 of an instance "
                    "type mapped to no GPU) (0.0s)")


def test_the_bundled_report_workloads_pass_the_start_up_check() -> None:
    from tracker.answers.workloads import Workload
    from tracker.config.sections import DEFAULT_WORKLOADS
    from tracker.sizing.models import resolve_model

    # check_workloads skips the defaults at start; this is the check it skips.
    for raw in DEFAULT_WORKLOADS:
        resolve_model(str(Workload.parse(raw).sizing["model"]))


def test_an_azure_size_that_varies_a_listed_one_only_in_feature_letters_is_mapped() -> None:
    from scrapers.azure import gpu_for_size

    variant = gpu_for_size("Standard_ND96isrf_H200_v5")  # ND96isr_H200_v5 with `f`
    assert variant is not None and (variant.gpu_name, variant.count) == ("NVIDIA H200 SXM", 8)
    adis = gpu_for_size("Standard_NC96adis_A100_v4")  # NC96ads_A100_v4 with `i`
    assert adis is not None and adis.count == 4 and adis.memory_gb == 80
    # No listed size with these vCPUs: a count is never guessed.
    assert gpu_for_size("Standard_NC132lds_xl_RTXPRO6000BSE_v6") is None
    assert gpu_for_size("Standard_NC8ads_A10_v4") is None


def test_a_providers_source_name_reads_as_its_id(store) -> None:
    """`--provider lambdalabs` (the name SkyPilot's catalog uses) filters Lambda's offers, as
    `--provider lambda` does, instead of being refused as unknown."""
    from click.testing import CliRunner

    from tracker.cli.main import cli

    answers = [CliRunner().invoke(cli, ["--db", store, "prices", "--provider", name,
                                        "--format", "json"])
               for name in ("lambdalabs", "lambda")]
    assert [a.exit_code for a in answers] == [0, 0]
    rows = [json.loads(a.stdout) for a in answers]
    assert rows[0] == rows[1] and rows[0]
    assert {row["provider"] for row in rows[0]} == {"lambda"}
