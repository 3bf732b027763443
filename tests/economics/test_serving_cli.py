"""Serving through the CLI: size/cost/compare -w inference, their flags, bad values, JSON keys,
and the parity of the one workload option set across the three commands."""

from __future__ import annotations

from decimal import Decimal

import click
import pytest

from tracker.answers.serving_documents import SERVING_API_KEYS, SERVING_COST_KEYS
from tracker.answers.workloads import DEFAULT_WORKLOAD
from tracker.cli.commands.workload import workload_param_names
from tracker.cli.main import cli
from tracker.sizing.serving import SERVING_KEYS

from .test_cli import one_line_error, run, run_json

D = Decimal
SHAPE = ("--prompt-tokens", "1000", "--output-tokens", "1000")
SEVENTY = ("--model", "llama-3.1-70b", *SHAPE)


def _command(name: str) -> click.Command:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, name)
    assert command is not None
    return command


# one set of workload options -------------------------------------------------------------------

@pytest.mark.parametrize("name", ["size", "cost", "compare"])
def test_every_workload_option_is_on_size_cost_and_compare(name):
    params = {p.name: p for p in _command(name).params}
    names = workload_param_names()
    assert set(names) <= set(params)
    # Same choices and defaults everywhere.
    size_params = {p.name: p for p in _command("size").params}
    for key in names:
        mine, theirs = params[key], size_params[key]
        assert mine.default == theirs.default, key
        assert getattr(mine.type, "choices", None) == getattr(theirs.type, "choices", None), key
        assert mine.opts == theirs.opts, key
    assert params["workload"].default == DEFAULT_WORKLOAD == "inference"
    if name != "compare":  # compare filters by any number of GPUs
        assert params["gpu"].opts == ["--gpu", "-g"] and params["count"].opts == ["--count",
                                                                                   "-n"]
    assert "adamw-fp32grad" in params["optimizer"].type.choices


@pytest.mark.parametrize("bad", [
    ("--sharding", "zero4"), ("--optimizer", "lion"), ("--precision", "fp6"),
    ("--workload", "serve"), ("--prompt-tokens", "-5"), ("--output-tokens", "0"),
    ("--concurrency", "0"), ("--max-tpot-ms", "-1"), ("--params", "seven"),
    ("--attention-parallel", "tp"), ("--attention-parallel", ""),
])
def test_a_bad_workload_flag_exits_2_on_all_three(bad):
    base = {"size": ("size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"),
            "cost": ("cost", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                     "--price-per-gpu-hour", "4"),
            "compare": ("compare", "--model", "llama-3.1-8b")}
    for argv in base.values():
        result = run(*argv, *bad)
        assert result.exit_code == 2, (argv, bad, result.output)


def test_params_with_a_g_suffix_works_on_all_three(priced_db):
    size = run_json("size", "--params", "7g", "-w", "pretrain")
    assert size["params"] == pytest.approx(7e9, rel=0.05)
    cost = run_json("cost", "--params", "7g", "-w", "pretrain", "--tokens", "1e9", "--mfu",
                    "0.4", "--gpu", "h100-sxm", "--count", "8", "--price-per-gpu-hour", "4")
    assert cost["flops"] == pytest.approx(6 * 7e9 * 1e9)
    rows = run_json("compare", "--params", "7g", "-w", "pretrain", "--tokens", "1e9",
                    "--mfu", "0.4", db=priced_db)
    assert rows


def test_serving_flags_need_the_inference_workload():
    message = one_line_error(run("size", "--model", "llama-3.1-8b", "-w", "pretrain",
                                 "--max-tpot-ms", "50"))
    assert "--max-tpot-ms is a serving option; use --workload inference" in message


# size -w inference ----------------------------------------------------------------------------

def test_size_serving_object_has_the_documented_keys():
    data = run_json("size", *SEVENTY, "--gpu", "h100-sxm", "--count", "8",
                    "--max-tpot-ms", "50")
    serving = data["serving"]
    assert list(serving)[:len(SERVING_KEYS)] == list(SERVING_KEYS)
    assert serving["meets_slo"] is True and serving["tpot_s"] <= 0.050
    assert serving["bound"] in ("compute", "memory", "kv-capacity")
    assert serving["tensor_parallel"] * serving["replicas"] <= 8
    assert serving["output_tokens_per_s"] == pytest.approx(
        serving["output_tokens_per_s_per_gpu"] * serving["gpus"], rel=1e-5)
    assert serving["total_tokens_per_s"] == pytest.approx(2 * serving["output_tokens_per_s"],
                                                          rel=1e-5)
    # Every TP degree inside the node was tried: 8 GPUs = TP8x1, TP4x2, TP2x4 (TP1 cannot
    # hold 141 GB of BF16 weights).
    assert {(p["tensor_parallel"], p["replicas"]) for p in serving["plans"]} == {
        (2, 4), (4, 2), (8, 1)}
    assert serving["calibration"]["calibrated"] is True


def test_context_alone_is_split_into_prompt_and_output():
    data = run_json("size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--context",
                    "5500", "--concurrency", "4")
    assert (data["serving"]["prompt_tokens"], data["serving"]["output_tokens"]) == (4500, 1000)
    assert data["serving"]["concurrency"] == 4
    bad = one_line_error(run("size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                             "--context", "5500", *SHAPE))
    assert "is not --prompt-tokens 1000 + --output-tokens 1000" in bad


def test_an_slo_no_plan_meets_names_the_best_tpot():
    message = one_line_error(run("size", *SEVENTY, "--gpu", "h100-sxm", "--count", "8",
                                 "--max-tpot-ms", "2"))
    assert "no plan on h100-sxm meets the service level" in message
    assert "best TPOT reachable is" in message and "TP 8" in message


def test_load_sets_the_replicas():
    light = run_json("size", *SEVENTY, "--gpu", "h100-sxm", "--max-tpot-ms", "50",
                     "--output-tokens-per-day", "10M")["serving"]
    heavy = run_json("size", *SEVENTY, "--gpu", "h100-sxm", "--max-tpot-ms", "50",
                     "--output-tokens-per-day", "5000M")["serving"]
    assert light["meets_load"] and heavy["meets_load"]
    assert heavy["gpus"] > light["gpus"]
    assert heavy["output_tokens_per_s"] >= 5000e6 / 86400


def test_extrapolated_gpu_warns():
    # A100 80 GB SXM is calibrated now (the ampere class); the PCIe part is extrapolated.
    data = run_json("size", "--model", "llama-3.1-8b", "--gpu", "a100-80gb-pcie", *SHAPE)
    assert data["serving"]["calibration"]["calibrated"] is False
    assert data["serving"]["calibration"]["gpu_class"] == "ampere"
    assert any("extrapolated" in w for w in data["serving"]["warnings"])


# cost -w inference ----------------------------------------------------------------------------

def test_cost_per_million_tokens_with_a_given_price():
    data = run_json("cost", *SEVENTY, "--gpu", "h100-sxm", "--count", "8",
                    "--price-per-gpu-hour", "2.50", "--max-tpot-ms", "50",
                    "--output-tokens-per-day", "50M")
    assert set(SERVING_COST_KEYS) <= set(data)
    serving = data["serving"]
    per_hour = D("2.50") * 8
    tokens_per_hour = D(repr(serving["output_tokens_per_s"])) * 3600
    # price ÷ tokens per hour × 10⁶ (the serving object's throughput is rounded to 6 digits).
    expected = per_hour / tokens_per_hour * 10**6
    assert abs(D(data["cost_per_million_output_tokens"]) - expected) <= expected * D("1e-5")
    assert D(data["cost_per_million_tokens"]) == pytest.approx(
        D(data["cost_per_million_output_tokens"]) / 2, rel=D("1e-5"))
    assert D(data["cost_per_month"]) == per_hour * 730
    # Measured deployments of a 70B model run well under $1 per million output tokens.
    assert D(data["cost_per_million_output_tokens"]) < 1


def test_cost_api_breakeven():
    data = run_json("cost", *SEVENTY, "--gpu", "h100-sxm", "--count", "8",
                    "--price-per-gpu-hour", "2.50", "--max-tpot-ms", "50",
                    "--output-tokens-per-day", "500M", "--api-price-per-million-input", "0.88",
                    "--api-price-per-million-output", "0.88")
    assert set(SERVING_API_KEYS) <= set(data)
    assert D(data["api_cost_per_million_output_tokens"]) == D("1.76")
    replica = data["serving"]["tensor_parallel"]
    # One replica all day costs what the API bills for the breakeven volume.
    day = D("2.50") * replica * 24
    assert data["breakeven_output_tokens_per_day"] == int((day / D("1.76") * 10**6)
                                                          .to_integral_value())
    month_api = D(repr(500e6 / 86400)) * 3600 * 730 * D("1.76") / 10**6
    assert D(data["monthly_saving_vs_api"]) == (month_api - D(data["cost_per_month"])
                                                ).quantize(D("0.01"))


def test_cost_serving_from_the_store(priced_db):
    data = run_json("cost", *SEVENTY, "--gpu", "h100-sxm", "--count", "8", "--max-tpot-ms",
                    "50", db=priced_db)
    assert data["offer"]["provider"] in ("lambda", "aws")
    assert D(data["price_per_gpu_hour"]) == D("3.99")  # lambda 31.92 / 8
    assert data["serving"]["meets_slo"]


# compare -w inference -------------------------------------------------------------------------

def test_compare_serving_ranks_by_cost_per_million_output_tokens(priced_db):
    rows = run_json("compare", *SEVENTY, "--max-tpot-ms", "50", db=priced_db)
    costs = [D(r["cost_per_million_output_tokens"]) for r in rows]
    assert costs == sorted(costs)
    for r in rows:
        assert r["tokens_per_s_per_user"] >= 20 * (1 - 1e-6)
        per_hour = D(r["price_per_gpu_hour"]) * r["count"]
        expected = per_hour / (D(repr(r["output_tokens_per_s"])) * 3600) * 10**6
        assert abs(D(r["cost_per_million_output_tokens"]) - expected) <= expected * D("1e-5")
    # One-GPU instances cannot run TP across the network: lambda's 1x H100 offer appears only
    # where a single GPU holds the model (never for 70B BF16).
    assert all(r["instance_type"] != "gpu_1x_h100_sxm5" for r in rows)
    table = run("compare", *SEVENTY, "--max-tpot-ms", "50", db=priced_db)
    assert table.exit_code == 0
    assert table.stdout.split()[:5] == ["gpu", "count", "provider", "category",
                                        "cost_per_million_output_tokens"]


def test_compare_serving_with_a_load_gives_the_monthly_cost(priced_db):
    rows = run_json("compare", *SEVENTY, "--max-tpot-ms", "50", "--output-tokens-per-day",
                    "100M", db=priced_db)
    assert rows and all(r["cost_per_month"] is not None for r in rows)
    for r in rows:
        assert r["output_tokens_per_s"] >= 100e6 / 86400


def test_cost_of_a_deployment_that_cannot_carry_the_load_says_so(priced_db):
    data = run_json("cost", *SEVENTY, "--gpu", "h100-sxm", "--count", "8", "--max-tpot-ms",
                    "50", "--output-tokens-per-day", "5000M", db=priced_db)
    assert data["serving"]["meets_load"] is False
    assert any("below the load" in w for w in data["warnings"])
    # A deployment below the load costs what it costs per token at full use, no less.
    assert data["cost_per_million_output_tokens_at_load"] == \
        data["cost_per_million_output_tokens"]


def test_serving_money_is_exact_on_both_databases(priced_any_db):
    rows = run_json("compare", *SEVENTY, "--max-tpot-ms", "50", "--output-tokens-per-day",
                    "100M", "--api-price-per-million-output", "0.88", db=priced_any_db)
    best = rows[0]
    assert (best["provider"], best["category"], best["price_per_gpu_hour"]) == (
        "aws", "spot", "2.20375")  # 17.63 / 8, exact from the store
    per_hour = D("2.20375") * best["count"]
    tokens = D(repr(best["output_tokens_per_s"])) * 3600
    assert abs(D(best["cost_per_million_output_tokens"]) - per_hour / tokens * 10**6) \
        <= D("0.000002")
    assert D(best["cost_per_month"]) == (per_hour * 730).quantize(D("0.01"))


def test_without_a_count_or_load_one_replica_of_the_most_efficient_tp():
    serving = run_json("size", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--context",
                       "131072", "--concurrency", "1")["serving"]
    assert serving["replicas"] == 1
    per_gpu = {p["tensor_parallel"]: p["output_tokens_per_s"] / p["tensor_parallel"]
               for p in serving["plans"]}
    assert serving["tensor_parallel"] == max(per_gpu, key=per_gpu.get)


def test_requests_per_day_is_a_load_of_output_tokens():
    serving = run_json("size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--prompt-tokens", "500", "--output-tokens", "250",
                       "--requests-per-day", "1M", "--max-tpot-ms", "40")["serving"]
    assert serving["load_output_tokens_per_s"] == pytest.approx(1e6 * 250 / 86400, rel=1e-6)
    assert serving["meets_load"] is True
    assert serving["requests_per_s"] >= 1e6 / 86400
    both = run("size", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--requests-per-day",
               "1M", "--output-tokens-per-day", "1M")
    assert both.exit_code == 1 and "not both" in both.stderr


# --attention-parallel ---------------------------------------------------------------------------

QWEN3 = ("--model", "qwen3-235b-a22b", "--precision", "fp8", *SHAPE)


def _layout(serving: dict) -> tuple[int, int, int]:
    return (serving["tensor_parallel"], serving["attention_data_parallel"],
            serving["expert_parallel"])


def test_attention_parallel_forces_the_serving_layout():
    """DeepSeek-V3 FP8 on 8 x H200: auto keeps attention DP 8 x EP 8 (the MLA latent is whole
    on every TP rank, so TP 8 holds an eighth of the sequences); tensor forces TP 8 and only
    TP plans, at a third of the throughput; data plans only attention DP."""
    args = ("size", "--model", "deepseek-v3", "--precision", "fp8", *SHAPE, "--gpu", "h200",
            "--count", "8")
    auto, tensor, data = (run_json(*args, "--attention-parallel", a)["serving"]
                          for a in ("auto", "tensor", "data"))
    assert _layout(auto) == _layout(data) == (1, 8, 8)
    assert _layout(tensor) == (8, 1, 8)
    assert {p["attention_data_parallel"] for p in auto["plans"]} == {1, 8}
    assert {p["attention_data_parallel"] for p in tensor["plans"]} == {1}
    assert {p["attention_data_parallel"] for p in data["plans"]} == {8}
    assert data["output_tokens_per_s"] == auto["output_tokens_per_s"]
    assert tensor["output_tokens_per_s"] < auto["output_tokens_per_s"] / 2
    assert tensor["max_concurrency_by_kv"] < auto["max_concurrency_by_kv"] / 4
    # The default is auto, in any case
    assert run_json(*args, "--attention-parallel", "DATA")["serving"] == data
    assert run_json(*args)["serving"] == auto


def test_attention_parallel_prices_the_forced_layout():
    """cost: the forced layout's throughput sets the price per token, and the API breakeven
    counts the attention-DP replica's 8 GPUs (one GPU before: a breakeven 8 times too low)."""
    args = ("cost", *QWEN3, "--gpu", "h100-sxm", "--count", "8", "--price-per-gpu-hour",
            "2.50", "--api-price-per-million-output", "0.60")
    data = run_json(*args, "--attention-parallel", "data")
    tensor = run_json(*args, "--attention-parallel", "tensor")
    assert _layout(data["serving"]) == (1, 8, 8) and _layout(tensor["serving"])[:2] == (8, 1)
    for doc in (data, tensor):
        per_m = D("2.50") * 8 / (D(repr(doc["serving"]["output_tokens_per_s"])) * 3600) * 10**6
        assert abs(D(doc["cost_per_million_output_tokens"]) - per_m) <= per_m * D("1e-5")
        # One replica of 8 GPUs all day costs what the API bills for the breakeven volume.
        assert doc["breakeven_output_tokens_per_day"] == 800_000_000  # 8 x 2.50 x 24 / 0.60
    assert D(tensor["cost_per_million_output_tokens"]) > \
        D(data["cost_per_million_output_tokens"]) * D("1.2")


def test_compare_ranks_only_the_forced_layout(priced_db):
    tensor = run_json("compare", *QWEN3, "--attention-parallel", "tensor", db=priced_db)
    data = run_json("compare", *QWEN3, "--attention-parallel", "data", db=priced_db)
    assert tensor and data
    assert all(r["attention_data_parallel"] == 1 and r["tensor_parallel"] > 1 for r in tensor)
    assert all(r["attention_data_parallel"] > 1 and r["tensor_parallel"] == 1 and
               r["expert_parallel"] == r["attention_data_parallel"] for r in data)
    assert {r["output_tokens_per_s"] for r in tensor}.isdisjoint(
        r["output_tokens_per_s"] for r in data)


@pytest.mark.parametrize("command", [
    ("size", "--gpu", "h100-sxm"),
    ("cost", "--gpu", "h100-sxm", "--count", "8", "--price-per-gpu-hour", "4"),
    ("compare",),
])
def test_attention_data_parallel_on_a_dense_model_is_a_usage_error(command, priced_db):
    message = one_line_error(run(*command, *SEVENTY, "--attention-parallel", "data",
                                 db=priced_db), code=2)
    assert "--attention-parallel data is for a mixture of experts" in message
    assert "llama-3.1-70b is dense" in message


def test_attention_parallel_is_a_serving_option():
    train = ("size", "--model", "qwen3-30b-a3b", "-w", "pretrain", "--tokens", "1e9", "--gpu",
             "h100-sxm")
    message = one_line_error(run(*train, "--attention-parallel", "data"))
    assert "--attention-parallel is a serving option; use --workload inference" in message
    # auto, the default, is no request for a layout
    assert run(*train, "--attention-parallel", "auto").exit_code == 0
