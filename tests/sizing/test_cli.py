"""`gpu-tracker size` and `gpu-tracker models` through click's CliRunner (no database)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli
from tracker.sizing import JSON_KEYS, TIME_KEYS


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_size_json_example_from_the_issue():
    res = invoke("size", "--model", "llama-3.1-70b", "--workload", "inference", "--precision",
                 "bf16", "--context", "131072", "--concurrency", "1", "--gpu", "h100-sxm",
                 "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert list(data)[: len(JSON_KEYS)] == list(JSON_KEYS)
    assert data["kv_cache_bytes"] == 42_949_672_960
    assert data["kv_cache_bytes_per_token"] == 327_680
    assert data["fits_single_gpu"] is False
    assert (data["gpus_needed"], data["tensor_parallel"]) == (4, 4)
    assert data["warnings"] == []


def test_size_json_with_tokens_has_the_time_keys():
    res = invoke("size", "-m", "llama-3.1-8b", "-w", "full-finetune", "--sharding", "zero3",
                 "-g", "h100-sxm", "-n", "8", "--tokens", "2B", "--format", "json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    for key in TIME_KEYS:
        assert key in data
    assert data["flops"] == pytest.approx(6 * data["active_params"] * 2e9)
    assert data["gpu_hours"] == pytest.approx(8 * data["wall_hours"])


def test_size_table_labels_gb_and_gib():
    res = invoke("size", "-m", "llama-3.1-70b", "--context", "131072", "-g", "h100")
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "total GB" in out and "total GiB" in out and "per GPU GiB" in out
    assert "GB = 10^9 bytes, GiB = 2^30 bytes" in out
    assert "141.11" in out and "131.42" in out  # weights in GB and in GiB
    assert "42.95" in out and "40.00" in out  # KV in GB and in GiB
    assert "ambiguous" in out  # the warning for "h100"


def test_size_csv_is_one_row_with_the_documented_columns():
    res = invoke("size", "-m", "mistral-7b", "--context", "8192", "-g", "l4", "--format", "csv")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 1
    assert set(JSON_KEYS) <= set(rows[0])
    assert rows[0]["kv_cache_bytes_per_token"] == "131072"


def test_size_rough_and_architecture_paths():
    rough = json.loads(invoke("size", "--params", "7e9", "-w", "qlora", "-g", "rtx4090",
                              "--recompute", "full", "--format", "json").stdout)
    assert rough["params"] == 7_000_000_000 and rough["gpu"] == "rtx-4090"
    arch = json.loads(invoke("size", "--layers", "32", "--hidden", "4096", "--heads", "32",
                             "--kv-heads", "8", "--intermediate", "14336", "--vocab", "128256",
                             "--context", "4096", "--format", "json").stdout)
    assert arch["params"] == 8_030_261_248


@pytest.mark.parametrize(("args", "needle"), [
    (("-m", "llama-9000"), "unknown model"),
    (("-m", "llama-3.1-8b", "-g", "h900"), "unknown GPU"),
    (("-m", "llama-3.1-8b", "--context", "200000"), "maximum context"),
    (("-m", "llama-3.1-8b", "-g", "h100-sxm", "--tp", "3"), "does not divide"),
    (("-m", "llama-3.1-8b", "-w", "pretrain", "--precision", "int4"), "cannot be trained"),
    (("--params", "7B", "-m", "llama-3.1-8b"), "only one of"),
])
def test_bad_inputs_exit_1_with_one_line(args, needle):
    res = CliRunner().invoke(cli, ["size", *args])
    # a typed name or a clash of the model flags is a usage error, as a bad flag is
    usage = needle in ("unknown GPU", "unknown model", "only one of")
    assert res.exit_code == (2 if usage else 1)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert res.stdout == ""


@pytest.mark.parametrize("args", [("-m", "llama-3.1-8b", "-w", "training"),
                                  ("-m", "llama-3.1-8b", "--tokens", "lots"),
                                  ("-m", "llama-3.1-8b", "--mfu", "40")])
def test_malformed_options_are_usage_errors(args):
    res = CliRunner().invoke(cli, ["size", *args])
    assert res.exit_code == 2
    assert "Error" in res.stderr


def test_models_lists_presets_with_computed_params():
    res = invoke("models", "--format", "json")
    assert res.exit_code == 0
    rows = {r["id"]: r for r in json.loads(res.stdout)}
    assert rows["llama-2-7b"]["params"] == 6_738_415_616
    assert rows["mixtral-8x7b"]["active_params"] < rows["mixtral-8x7b"]["params"]
    table = invoke("models").stdout
    assert "llama-3.1-405b" in table and "405.853 B" in table
    rows_csv = list(csv.DictReader(io.StringIO(invoke("models", "--format", "csv").stdout)))
    assert len(rows_csv) == len(rows)


def test_size_does_not_import_heavy_libraries():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracker.cli.main import cli\n"
        "r = CliRunner().invoke(cli, ['size', '-m', 'llama-3.1-8b', '-g', 'h100-sxm',"
        " '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = [m for m in ('pandas', 'sqlalchemy', 'sqlmodel', 'scrapers', 'matplotlib')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("command", [("size", "-g", "h100-sxm"), ("cost", "-g", "h100-sxm"),
                                     ("compare",),
                                     ("cost", "-g", "h100-sxm", "-w", "full-finetune",
                                      "--tokens", "1e9"),
                                     ("compare", "-w", "full-finetune", "--tokens", "1e9")])
@pytest.mark.parametrize(("model", "needle"), [
    (("-m", "llama-9000"), "unknown model 'llama-9000'"),
    (("-m", "llama-3.1-8b", "--params", "7B"), "give only one of --model"),
    (("--layers", "4"), "architecture flags need at least"),
])
def test_a_bad_model_is_a_usage_error_on_every_command(bundled_db, command, model, needle):
    """cost and compare used to price each offer with the bad flags and answer, exit 1,
    "cannot serve this workload: h100-sxm in instances of 1: give only one of ...": the
    user's flags read as an offer's failure."""
    res = CliRunner().invoke(cli, ["--db", bundled_db, *command, *model])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert "instances of" not in lines[0] and "cannot s" not in lines[0]
    assert res.stdout == ""


def test_the_links_line_names_a_rack_scale_domain_and_the_host():
    """GB200 NVL72: tensor parallelism may span the 72-GPU NVLink domain; the table said only
    "inside a node of 8" (the JSON had scale_up_domain 72). The host is the rack's 4-GPU
    compute tray (data/gpus.json host_gpus; it said "hosts of 8" before), 4 x 400 Gb/s."""
    res = invoke("size", "-m", "llama-3.1-405b", "-g", "gb200", "-n", "16")
    assert res.exit_code == 0, res.output
    (links,) = [x for x in res.stdout.splitlines() if x.startswith("links: ")]
    assert links.startswith("links: nvlink5 900 GB/s per GPU inside a domain of 72 GPUs "
                            "(hosts of 4), 1600 Gb/s per node between nodes"), links
    h100 = invoke("size", "-m", "llama-3.1-8b", "-g", "h100-sxm")
    assert "inside a node of 8, " in h100.stdout


def test_the_uncalibrated_mfu_warning_quotes_the_range_the_table_shows():
    """At FP8 the default range is scaled to the FP8 peak (0.26-0.31 on an H800); the warning
    quoted the BF16 range (0.38-0.46) beside it."""
    data = json.loads(invoke("size", "-m", "llama-3.1-8b", "-w", "pretrain", "-g", "h800",
                             "-n", "8", "--precision", "fp8", "--tokens", "1e9",
                             "--format", "json").stdout)
    low, high = data["mfu_range"]
    assert high < 0.4  # scaled to the FP8 peak
    (warning,) = [w for w in data["warnings"] if "uncalibrated assumption" in w]
    assert f"({low:.2f}-{high:.2f})" in warning, (warning, data["mfu_range"])


def test_runners_up_say_they_are_modeled_when_mfu_is_given():
    """With --mfu the chosen plan is timed at it (52.86 h) and the runners-up by the model
    (45.97 h): a runner-up looked faster than the pick with nothing saying why."""
    out = invoke("size", "-m", "llama-3.1-8b", "-w", "pretrain", "-g", "h100-sxm", "-n", "64",
                 "--tokens", "1e11", "--mfu", "0.4").stdout
    lines = out.splitlines()
    note = lines.index("  runners-up timed by the model; --mfu 0.4 times only the chosen plan")
    assert lines[note + 1].startswith("  runner-up: ")
    modeled = invoke("size", "-m", "llama-3.1-8b", "-w", "pretrain", "-g", "h100-sxm", "-n",
                     "64", "--tokens", "1e11").stdout
    assert "runners-up timed by the model" not in modeled and "runner-up: " in modeled
