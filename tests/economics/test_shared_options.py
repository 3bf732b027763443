"""Issue 23: one meaning per shared option (`--as-of`, `--currency`/`--price-currency`,
`--provider`, `--region`, `--category`), and issue 29's leftovers: `--region` checked by
`breakeven` and `spot`."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

import click
import pytest
from click.testing import CliRunner

from tests.helpers import row_counts
from tracker.cli.commands import COMMANDS, load_command
from tracker.cli.main import cli
from tracker.store.rates import rate_table

BREAKEVEN = ["breakeven", "--gpu", "h100-sxm", "--count", "8", "--utilization", "0.6",
             "--as-of", "2026-10-30", "--format", "json"]


def _run(args: list[str], env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, args, env={"GPU_TRACKER_CURRENCY": "", **(env or {})})


def _usd_in(code: str, day: date) -> Decimal:
    rate, _ = rate_table(None).rate("USD", code, day)
    return rate


def _leaves(command: click.Command, path: str = ""):
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _leaves(sub, f"{path} {name}".strip())
    else:
        yield path, command


def _all_options(name: str):
    for path, command in _leaves(load_command(name), name):
        for param in command.params:
            if isinstance(param, click.Option):
                yield path, param


# -- one declaration per shared option ---------------------------------------------------------


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_shared_options_read_the_same_everywhere(name: str) -> None:
    for path, param in _all_options(name):
        if "--as-of" in param.opts:
            assert param.help and "(UTC" in param.help and "Default:" in param.help, path
        if "--provider" in param.opts or "--region" in param.opts:
            # Many values everywhere: repeated or comma-separated.
            assert param.multiple and "comma-separated" in (param.help or ""), path
        if "--currency" in param.opts:
            assert param.envvar == "GPU_TRACKER_CURRENCY", path
            assert "Show money in this ISO currency" in (param.help or ""), path


def test_the_top_level_help_names_the_variables_instead_of_claiming_every_option() -> None:
    result = _run(["--help"])
    assert "Every option can also be set" not in result.output
    assert "[env var: GPU_TRACKER_QUIET]" in result.output
    assert "names an\n  environment variable" in result.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_option_with_a_variable_says_so_in_its_help(name: str) -> None:
    for path, param in _all_options(name):
        if param.envvar:
            assert param.show_envvar, f"{path} {param.opts[0]}"


def test_comma_separated_providers_are_repeated_providers(priced_db) -> None:
    def offers(*args: str) -> list[tuple[str, str]]:
        result = _run(["--db", priced_db, "prices", *args, "--format", "json"])
        assert result.exit_code == 0, result.output
        return [(r["provider"], r["instance_type"]) for r in json.loads(result.stdout)]

    both = offers("--provider", "aws", "--provider", "lambda")
    assert {p for p, _ in both} == {"aws", "lambda"}
    assert offers("--provider", "aws,lambda") == both
    assert offers("--provider", "AWS, lambda") == both


def test_cost_takes_several_providers_and_prices_from_any_of_them(priced_db) -> None:
    args = ["--db", priced_db, "cost", "--hours", "10", "--gpu", "h100-sxm", "--count", "8",
            "--as-of", "2026-11-09", "--format", "json"]
    one = json.loads(_run([*args, "--provider", "aws"]).stdout)
    either = _run([*args, "--provider", "aws,lambda"])
    assert either.exit_code == 0, either.output
    cheapest = json.loads(_run(args).stdout)
    assert one["offer"]["provider"] == "aws"
    assert json.loads(either.stdout)["offer"]["provider"] == cheapest["offer"]["provider"]


def test_a_given_price_is_billed_by_one_provider() -> None:
    result = _run(["cost", "--hours", "10", "--price-per-gpu-hour", "2", "--provider",
                   "aws,gcp"])
    assert result.exit_code == 2
    assert "give one provider for the billing rule of --price-per-gpu-hour" in result.stderr


# -- --currency is the display currency; typed amounts are in --price-currency ------------------


def test_gpu_tracker_currency_is_the_display_currency_of_cost(priced_db) -> None:
    # `GPU_TRACKER_CURRENCY=EUR gpu-tracker cost ...` printed USD: the variable was read by
    # `prices` only.
    args = ["--db", priced_db, "cost", "--hours", "10", "--gpu", "h100-sxm", "--count", "8",
            "--as-of", "2026-11-09", "--format", "json"]
    usd = json.loads(_run(args).stdout)
    result = _run(args, env={"GPU_TRACKER_CURRENCY": "EUR"})
    assert result.exit_code == 0, result.output
    eur = json.loads(result.stdout)
    assert eur["currency"] == "EUR" and usd["currency"] == "USD"
    fx = eur["offer"]["fx"]
    assert fx["from"] == "USD"
    expected = Decimal(usd["price_per_gpu_hour"]) * Decimal(fx["rate"])
    assert Decimal(eur["price_per_gpu_hour"]) == pytest.approx(expected, rel=Decimal("1e-5"))


def test_the_variable_alone_moving_typed_prices_says_so_in_one_line() -> None:
    args = ["cost", "--hours", "10", "--price-per-gpu-hour", "2", "--format", "json"]
    result = _run(args, env={"GPU_TRACKER_CURRENCY": "EUR"})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["currency"], data["price_per_gpu_hour"]) == ("EUR", "2")
    assert result.stderr.strip().splitlines() == [
        "warning: GPU_TRACKER_CURRENCY=EUR sets the display currency, and the amounts given "
        "(--price-per-gpu-hour) are read in it; give --price-currency USD for USD amounts"]
    # Said on the command line, or with --price-currency, there is nothing to warn about.
    assert _run([*args, "--currency", "EUR"]).stderr == ""
    assert _run([*args, "--price-currency", "USD"],
                env={"GPU_TRACKER_CURRENCY": "EUR"}).stderr == ""


def test_typed_prices_in_another_currency_are_converted_and_labelled() -> None:
    result = _run(["cost", "--hours", "10", "--price-per-gpu-hour", "2", "--currency", "EUR",
                   "--price-currency", "USD", "--as-of", "2026-10-30", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rate, _ = rate_table(None).rate("USD", "EUR", date(2026, 10, 30))
    assert data["currency"] == "EUR"
    assert Decimal(data["price_per_gpu_hour"]) == 2 * rate
    assert Decimal(data["cost"]) == (20 * rate).quantize(Decimal("0.01"))
    assert any(w.startswith("--price-per-gpu-hour converted from USD at 1 USD = ")
               for w in data["warnings"])


def test_breakeven_converts_its_usd_defaults_instead_of_relabelling_them() -> None:
    # `breakeven --currency JPY` took the 1,000 USD staff default as 1,000 JPY.
    usd = json.loads(_run([*BREAKEVEN, "--cloud-price-per-hour", "20"]).stdout)
    result = _run([*BREAKEVEN, "--currency", "JPY", "--cloud-price-per-hour", "3000"])
    assert result.exit_code == 0, result.output
    jpy = json.loads(result.stdout)
    rate = _usd_in("JPY", date(2026, 10, 30))
    assert rate > 100  # yen per dollar: a relabelled default would be 100x too small
    assert jpy["currency"] == "JPY"
    assert Decimal(jpy["monthly_staff"]) == (Decimal(usd["monthly_staff"]) * rate).quantize(
        Decimal("0.01"))
    assert Decimal(jpy["capex"]) == Decimal(usd["capex"]) * rate
    assert Decimal(jpy["monthly_power"]) == pytest.approx(
        Decimal(usd["monthly_power"]) * rate, rel=Decimal("1e-5"))
    assert any(w.startswith("the [economics] defaults converted from USD at 1 USD = ")
               for w in jpy["warnings"])
    # The sensitivity ranges of the money defaults move with them.
    kwh = next(r for r in jpy["sensitivity"] if r["input"] == "kwh_price")
    kwh_usd = next(r for r in usd["sensitivity"] if r["input"] == "kwh_price")
    assert Decimal(str(kwh["low"])) == pytest.approx(Decimal(str(kwh_usd["low"])) * rate)


def test_breakeven_in_the_defaults_currency_is_unchanged_and_needs_no_rates() -> None:
    result = _run([*BREAKEVEN, "--cloud-price-per-hour", "20"])
    data = json.loads(result.stdout)
    assert Decimal(data["monthly_staff"]) == 1000 and data["currency"] == "USD"
    assert not any("converted" in w for w in data["warnings"])


def test_breakeven_typed_amounts_in_price_currency() -> None:
    result = _run([*BREAKEVEN, "--currency", "EUR", "--price-currency", "USD",
                   "--cloud-price-per-hour", "20", "--staff-per-month", "500"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rate = _usd_in("EUR", date(2026, 10, 30))
    assert Decimal(data["cloud_price_per_hour"]) == 20 * rate
    assert Decimal(data["monthly_staff"]) == (500 * rate).quantize(Decimal("0.01"))


def test_a_bad_price_currency_is_a_usage_error() -> None:
    result = _run([*BREAKEVEN, "--price-currency", "XYZ", "--cloud-price-per-hour", "20"])
    assert result.exit_code == 2
    assert "currency 'XYZ' is not an ISO 4217 code" in result.stderr


# -- issue 29: --region checked by breakeven and spot -------------------------------------------


@pytest.mark.parametrize("args", [
    ["breakeven", "--gpu", "h100-sxm", "--count", "8", "--utilization", "0.6", "--region",
     "mars-1"],
    ["spot", "--gpu", "h100-sxm", "--count", "8", "--work-hours", "100",
     "--checkpoint-minutes", "5", "--restart-minutes", "10", "--region", "mars-1"],
    ["spot", "--instance", "p5.48xlarge", "--work-hours", "100", "--checkpoint-minutes", "5",
     "--restart-minutes", "10", "--region", "mars-1"],
], ids=["breakeven", "spot --gpu", "spot --instance"])
def test_an_unknown_region_is_one_line_naming_the_valid_ones(priced_db, args) -> None:
    tables = ("ingest_run", "price_span", "offer")
    before = row_counts(priced_db, *tables)
    result = _run(["--db", priced_db, *args])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, lines
    assert "--region 'mars-1' is in no offer in the store; regions: " in lines[0]
    assert "us-east-1" in lines[0]
    assert result.stdout == ""
    assert row_counts(priced_db, *tables) == before
