"""One spot plan rule (issue 23): MTTI given, else the stored interruption band, else the
provider's default, where the provider of a bare --instance comes from the data (the
instance families of data/fabric.json, else the stored offers), never a hard-coded "aws"."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tracker.cli.main import cli
from tracker.economics.defaults import EconomicsSettings

JOB = ["spot", "--work-hours", "100", "--checkpoint-minutes", "5", "--restart-minutes", "10",
       "--format", "json"]


def spot(db: str, *args: str):
    return CliRunner().invoke(cli, ["--db", db, *JOB, *args])


def test_a_lambda_instance_is_priced_and_defaulted_as_lambdas(priced_db):
    # Before, a bare --instance was taken as AWS's: "no on-demand price for gpu_8x_h100_sxm5
    # in aws us-east-1".
    result = spot(priced_db, "--instance", "gpu_8x_h100_sxm5", "--region", "us-east-1",
                  "--spot-price", "12")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["on_demand_offer"]["provider"] == "lambda"
    assert data["on_demand_price_per_hour"] == "31.92"
    mtti, source = EconomicsSettings().default_mtti_hours("lambda")
    assert (data["mtti_hours"], data["mtti_source"]) == (mtti, source)


def test_an_aws_instance_family_needs_no_store_lookup(priced_db):
    result = spot(priced_db, "--instance", "p5.48xlarge", "--region", "us-east-1")
    data = json.loads(result.stdout)
    assert data["spot_offer"]["provider"] == "aws" and "5-10%" in data["mtti_source"]


def test_an_instance_nothing_names_is_a_usage_error(priced_db):
    result = spot(priced_db, "--instance", "mystery-8x", "--spot-price", "1",
                  "--on-demand-price", "3")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: --instance mystery-8x: no stored offer or known instance family names it; "
        "give --provider"]
