"""`plan commitments` through the CLI: the JSON contract, the back-test against a hand sum
over the stored spans, usage files (plain CSV and FOCUS) and bad input."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs, store_p5_prices

D = Decimal
LINE_KEYS = {"gpu", "region", "provider", "commit_gpus", "term", "committed_price_per_gpu_hour",
             "on_demand_gpu_hours", "spot_gpu_hours", "expected_monthly_cost"}


def seed(url: str) -> None:
    db = open_database(url)
    store_p5_prices(db)
    db.close()


@pytest.fixture
def db_url(any_db_url) -> str:
    seed(any_db_url)
    return any_db_url


def usage_csv(tmp_path, rows=None, name="usage.csv"):
    """8 H100s all the time, 8 more in hours 0-5 of each day, 2026-10-01..04."""
    if rows is None:
        rows = [f"h100,us-east-1,aws,2026-10-0{d}T{h:02d}:00:00Z,{16 if h < 6 else 8}"
                for d in range(1, 5) for h in range(24)]
    path = tmp_path / name
    path.write_text("gpu,region,provider,hour,gpu_hours\n" + "\n".join(rows) + "\n")
    return str(path)


def run(db, *args):
    return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)


def plan_json(db, *args):
    result = run(db, "plan", "commitments", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_and_backtest_against_a_hand_sum(db_url, tmp_path):
    doc = plan_json(db_url, "--usage", usage_csv(tmp_path), "--as-of", "2026-10-04")
    assert doc["kind"] == "commitment-plan" and doc["horizon_months"] == 12
    (line,) = doc["lines"]
    assert set(line) >= LINE_KEYS
    # ratio 4 / 6.88 = 0.58: the base 8 GPUs (busy 100%) pay, the burst (25%) does not
    assert (line["gpu"], line["provider"], line["commit_gpus"], line["term"]) == \
        ("h100-sxm", "aws", 8, "reserved-1y")
    assert D(line["committed_price_per_gpu_hour"]) == D("4")
    assert line["break_even_utilization"] == pytest.approx(4 / 6.88, abs=1e-4)
    # 48 GPU-h a day overflow over 4 days, scaled to 730 h a month: 48 * 4 * 730 / 96
    assert line["on_demand_gpu_hours"] == pytest.approx(1460.0)
    assert D(line["expected_monthly_cost"]) == (D(8 * 730 * 4) + D(1460) * D("6.88"))
    assert set(doc["totals"]) >= {"plan", "all_on_demand", "all_spot", "saving_pct"}
    bt = doc["backtest"]
    assert set(bt) >= {"months", "plan_cost", "all_on_demand_cost", "all_spot_cost"}
    assert bt["months"] == ["2026-10"]
    # The stored spans: on-demand 12.29 per GPU-h on 1-2 Oct, 6.88 on 3-4 Oct; reserved 4.
    committed = 4 * D(8 * 24 * 4)
    overflow = D(48) * 2 * D("12.29") + D(48) * 2 * D("6.88")
    assert D(bt["plan_cost"]) == committed + overflow == D("4912.32")
    assert D(bt["all_on_demand_cost"]) == D(240) * 2 * (D("12.29") + D("6.88")) == D("9201.60")
    assert D(bt["all_spot_cost"]) == D(240) * 4 * D("2.5")
    assert [d["on_demand_price_per_gpu_hour"] for d in bt["days"]] == \
        ["12.29", "12.29", "6.88", "6.88"]


def test_backtest_months_before_replay_the_usage(db_url, tmp_path):
    doc = plan_json(db_url, "--usage", usage_csv(tmp_path), "--as-of", "2026-10-04",
                    "--backtest-months", "1")
    bt = doc["backtest"]
    assert bt["since"] == "2026-09-01"
    assert bt["unpriced_line_days"] == 30  # nothing is stored before 1 October
    assert D(bt["plan_cost"]) == D("4912.32")
    assert any("without a stored price" in w for w in doc["warnings"])


def test_interruptible_share_needs_the_spot_engine_inputs(db_url, tmp_path):
    result = run(db_url, "plan", "commitments", "--usage", usage_csv(tmp_path),
                 "--interruptible-share", "0.5")
    assert result.exit_code == 2  # flags missing: a usage error
    assert "--checkpoint-minutes" in result.stderr
    doc = plan_json(db_url, "--usage", usage_csv(tmp_path), "--as-of", "2026-10-04",
                    "--interruptible-share", "0.5", "--checkpoint-minutes", "5",
                    "--restart-minutes", "10", "--mtti-hours", "20")
    (line,) = doc["lines"]
    assert line["spot_gpu_hours"] == pytest.approx(730.0)
    assert 0 < line["spot_overhead"] < 0.5


def test_day_usage_is_spread_over_its_hours(db_url, tmp_path):
    path = tmp_path / "days.csv"
    path.write_text("gpu,region,day,gpu_hours\nH100,us-east-1,2026-10-01,192\n"
                    "H100,us-east-1,2026-10-02,192\n")
    doc = plan_json(db_url, "--usage", str(path), "--as-of", "2026-10-04")
    (line,) = doc["lines"]
    assert line["commit_gpus"] == 8 and line["provider"] == "aws"


def test_focus_usage_file(db_url, tmp_path):
    path = tmp_path / "focus.csv"
    rows = ["ProviderName,RegionId,x_InstanceType,ConsumedQuantity,ConsumedUnit,EffectiveCost,"
            "BillingCurrency,ChargePeriodStart,ChargePeriodEnd"]
    for d in range(1, 4):
        rows.append(f"AWS,us-east-1,p5.48xlarge,24,Hours,1321,USD,2026-10-0{d}T00:00:00Z,"
                    f"2026-10-0{d + 1}T00:00:00Z")
    path.write_text("\n".join(rows) + "\n")
    doc = plan_json(db_url, "--usage", str(path), "--as-of", "2026-10-04")
    (line,) = doc["lines"]
    assert (line["commit_gpus"], line["gpu_hours_per_month"]) == (8, pytest.approx(8 * 730))


def test_focus_usage_with_an_unknown_gpu_names_it_with_suggestions(db_url, tmp_path):
    path = tmp_path / "focus.csv"
    path.write_text("ProviderName,RegionId,x_GpuModel,x_GpuCount,ConsumedQuantity,ConsumedUnit,"
                    "EffectiveCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd\n"
                    "AWS,us-east-1,H10O,8,24,Hours,10,USD,2026-10-01T00:00:00Z,"
                    "2026-10-02T00:00:00Z\n")
    result = run(db_url, "plan", "commitments", "--usage", str(path))
    assert result.exit_code == 1
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert "line 2: unknown GPU 'H10O'; did you mean" in line and "nothing planned" in line


def test_imported_usage_is_the_default(db_url, tmp_path):
    result = run(db_url, "plan", "commitments")
    assert result.exit_code == 1 and "import focus-usage" in result.stderr


@pytest.mark.parametrize(("row", "message"), [
    ("h100,us-east-1,aws,2026-10-01T00:00:00Z,-3", "must be 0 or more"),
    ("h100,us-east-1,aws,2026-10-01T00:00:00Z,lots", "is not a number"),
    ("h10o,us-east-1,aws,2026-10-01T00:00:00Z,3", "unknown GPU 'h10o'; did you mean"),
    ("h100,us-east-1,aws,yesterday,3", "not an ISO date"),
])
def test_bad_usage_is_one_line_and_plans_nothing(db_url, tmp_path, row, message):
    result = run(db_url, "plan", "commitments", "--usage",
                 usage_csv(tmp_path, ["h100,us-east-1,aws,2026-10-01T01:00:00Z,8", row]))
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "line 3" in lines[0]
    assert result.stdout == ""


def test_horizon_other_than_12_or_36_is_a_usage_error(db_url, tmp_path):
    result = run(db_url, "plan", "commitments", "--usage", usage_csv(tmp_path),
                 "--horizon-months", "24")
    assert result.exit_code == 2
    assert len([x for x in result.stderr.splitlines() if x.strip()]) == 1


def test_table_and_csv(db_url, tmp_path):
    result = run(db_url, "plan", "commitments", "--usage", usage_csv(tmp_path), "--as-of",
                 "2026-10-04", "--days")
    assert result.exit_code == 0, result.output
    assert "back-test 2026-10-01" in result.stdout and "reserved-1y" in result.stdout
    result = run(db_url, "plan", "commitments", "--usage", usage_csv(tmp_path), "--as-of",
                 "2026-10-04", "--format", "csv")
    assert result.stdout.splitlines()[0].startswith("gpu,region,provider,commit_gpus,term")


# --------------------------------------------------------------------------------------------
# --workload NAME: a report workload on its schedule as the usage

def workload_config(tmp_path, **entries):
    """[[report.workloads]]: serve Llama 3.1 8B online `hours` a month (one entry per name)
    and a fine-tune with no schedule."""
    text = ""
    for name, hours in entries.items():
        text += (f'[[report.workloads]]\nname = "{name}"\nkind = "serve"\n'
                 'model = "llama-3.1-8b"\nprompt_tokens = 1000\noutput_tokens = 200\n'
                 f'max_tpot_ms = 100\nhours_per_month = {hours}\n')
    text += ('[[report.workloads]]\nname = "once"\nkind = "finetune"\nmodel = "llama-3.1-8b"\n'
             'tokens = 2000000000\n')
    path = tmp_path / "c.toml"
    path.write_text(text)
    return str(path)


def test_workload_online_all_month_commits_all_its_gpus(db_url, tmp_path):
    config = workload_config(tmp_path, always=730, half=365, most=500)
    result = run(db_url, "--config", config, "plan", "commitments", "--workload", "always",
                 "--as-of", "2026-10-04", "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (line,) = doc["lines"]
    gpus = line["gpu_hours_per_month"] / 730
    assert gpus == int(gpus) >= 1 and doc["usage"]["hours"] == 28 * 24
    assert doc["usage"]["start"] == "2026-09-07T00:00:00Z"
    assert doc["usage"]["source"].startswith(f"workload 'always': {int(gpus)}x h100-sxm at aws")
    # busy every hour: each GPU's utilization 1 >= 4 / 6.88, so every GPU is committed
    assert (line["commit_gpus"], line["term"], line["on_demand_gpu_hours"]) == \
        (gpus, "reserved-1y", 0)
    assert D(line["expected_monthly_cost"]) == D(int(gpus) * 730 * 4)


@pytest.mark.parametrize(("name", "commit"), [("half", False), ("most", True)])
def test_workload_schedule_sets_the_commitment_by_the_price_ratio(db_url, tmp_path, name,
                                                                  commit):
    """Online 365 of 730 hours: each GPU busy 50% < 4 / 6.88 = 58%, nothing committed;
    500 of 730 hours: 68% >= 58%, every GPU committed."""
    config = workload_config(tmp_path, always=730, half=365, most=500)
    result = run(db_url, "--config", config, "plan", "commitments", "--workload", name,
                 "--as-of", "2026-10-04", "--format", "json")
    assert result.exit_code == 0, result.output
    (line,) = json.loads(result.stdout)["lines"]
    gpus = line["gpu_hours_per_month"] / {"half": 365, "most": 500}[name]
    assert gpus == pytest.approx(round(gpus)) and gpus >= 1
    assert line["commit_gpus"] == (round(gpus) if commit else 0)


@pytest.mark.parametrize(("args", "message", "code"), [
    (["--workload", "alwys"], "no [[report.workloads]] entry named 'alwys'; did you mean "
                              "'always'", 2),  # a typed name, as a typed GPU
    (["--workload", "once"], "has no schedule: set runs_per_month", 1),
    (["--workload", "always", "--usage", "X"], "not both", 2),
])
def test_bad_workload_is_one_line(db_url, tmp_path, args, message, code):
    config = workload_config(tmp_path, always=730)
    if "X" in args:
        args[args.index("X")] = usage_csv(tmp_path)
    result = run(db_url, "--config", config, "plan", "commitments", *args)
    assert result.exit_code == code, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0] and result.stdout == ""


@pytest.mark.parametrize(("quantity", "message"), [
    ("-24", "line 3: usage quantity must be in (0,"),
    ("lots", "line 3: ConsumedQuantity 'lots' is not a number"),
])
def test_bad_focus_hours_are_one_line_and_store_nothing(db_url, tmp_path, quantity, message):
    """The same bad FOCUS line refused by `plan commitments --usage` (one line, nothing
    planned) and by `import focus-usage` (nothing imported: the plan still finds no usage)."""
    path = tmp_path / "focus.csv"
    rows = ["ProviderName,RegionId,x_InstanceType,ConsumedQuantity,ConsumedUnit,EffectiveCost,"
            "BillingCurrency,ChargePeriodStart,ChargePeriodEnd",
            "AWS,us-east-1,p5.48xlarge,24,Hours,1321,USD,2026-10-01T00:00:00Z,"
            "2026-10-02T00:00:00Z",
            f"AWS,us-east-1,p5.48xlarge,{quantity},Hours,1321,USD,2026-10-02T00:00:00Z,"
            "2026-10-03T00:00:00Z"]
    path.write_text("\n".join(rows) + "\n")
    result = run(db_url, "plan", "commitments", "--usage", str(path))
    assert result.exit_code == 1, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0] and "nothing planned" in lines[0]
    imported = run(db_url, "import", "focus-usage", str(path))
    assert imported.exit_code == 1 and message in imported.stderr
    assert "import focus-usage" in run(db_url, "plan", "commitments").stderr  # none stored


def test_a_cheaper_ec2_instance_savings_plan_is_the_committed_offer(db_url, tmp_path):
    """An AWS EC2 Instance Savings Plan rate (reserved-1y, variant savings-plan, as the aws
    source stores it) beside the reserved instance: the plan commits at the cheaper one and
    says which kind it is."""
    db = open_database(db_url)
    when = at("2026-10-01")
    ingest_records(db, "aws-plans", [obs("30.40", when, category="reserved-1y",
                                         variant="savings-plan",
                                         attributes={"commitment_kind": "savings-plan",
                                                     "term_months": 12})], started_at=when)
    db.close()
    doc = plan_json(db_url, "--usage", usage_csv(tmp_path), "--as-of", "2026-10-04")
    (line,) = doc["lines"]
    assert (line["commit_gpus"], line["term"], line["commitment_kind"]) == \
        (8, "reserved-1y", "savings-plan")
    assert D(line["committed_price_per_gpu_hour"]) == D("3.8")  # 30.40 / 8


def test_a_line_warning_is_shown_beside_the_table(db_url, tmp_path):
    """The interruptible share with no spot price in the line's region stays on-demand: the
    JSON line said so, the table said nothing."""
    db = open_database(db_url)
    when = at("2026-09-01")
    ingest_records(db, "catalog", [obs("55.04", when, region="us-west-2")], started_at=when)
    db.close()
    rows = [f"h100,us-west-2,aws,2026-10-0{d}T{h:02d}:00:00Z,8" for d in range(1, 4)
            for h in range(24)]
    result = run(db_url, "plan", "commitments", "--usage", usage_csv(tmp_path, rows), "--as-of",
                 "2026-10-04", "--interruptible-share", "0.5", "--checkpoint-minutes", "5",
                 "--restart-minutes", "10", "--mtti-hours", "20")
    assert result.exit_code == 0, result.output
    assert "warning: h100-sxm us-west-2 aws: no spot price: the interruptible share stays " \
        "on-demand" in result.stderr
