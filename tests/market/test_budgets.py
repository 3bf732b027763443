"""Budgets: spend to date from imported FOCUS usage, the forecast end-of-period spend, the
status, the `budget` alert condition, and bad budgets."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli
from tracker.market.alert_checks import check_alerts
from tracker.market.alerts import alert_settings
from tracker.market.budgets import period_bounds, remaining_cost, spend_and_rate, status_of
from tracker.market.focus import import_usage
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs

D = Decimal
HEADER = ("ProviderName,RegionId,x_GpuModel,x_GpuCount,ConsumedQuantity,ConsumedUnit,"
          "EffectiveCost,BillingCurrency,ChargePeriodStart,ChargePeriodEnd,Tags")


def usage_text(days: range, cost: str = "1056.00", team: str = "research") -> str:
    """8 H100 for 24 h a day on AWS us-east-1 at 5.50 per GPU-hour (1056 a day), tagged."""
    rows = [HEADER]
    for d in days:
        start = at("2026-11-01") + timedelta(days=d)
        tags = json.dumps({"team": team}).replace('"', '""')
        rows.append(f"AWS,us-east-1,H100,8,24,Hours,{cost},USD,{start.isoformat()},"
                    f"{(start + timedelta(days=1)).isoformat()},\"{tags}\"")
    return "\n".join(rows) + "\n"


@pytest.fixture
def db(any_db_url):
    database = open_database(any_db_url)
    import_usage(database, usage_text(range(10)), at("2026-11-11"))
    # 2 more days of another team, and a line in another currency: out of the H100 budget's
    # tag scope, and out of every USD budget
    import_usage(database, usage_text(range(10, 12), team="infra"), at("2026-11-13"))
    yield database
    database.close()


def config_file(tmp_path, body: str):
    path = tmp_path / "config.toml"
    path.write_text(body, encoding="utf-8")
    return str(path)


BUDGETS = """
[[budgets]]
name = "h100-research"
amount = "30000"
currency = "USD"
period = "month"
gpu = "h100"
tag = "team=research"

[[budgets]]
name = "everything"
amount = 40000
period = "quarter"
"""


def test_period_bounds():
    start, end = period_bounds("month", at("2026-11-15", 12))
    assert (start, end) == (at("2026-11-01"), at("2026-12-01"))
    start, end = period_bounds("quarter", at("2026-11-15"))
    assert (start, end) == (at("2026-10-01"), at("2027-01-01"))
    assert period_bounds("month", at("2026-12-31"))[1] == at("2027-01-01")


def test_pure_forecast_sum_and_status():
    assert remaining_cost({"h100-sxm": 192.0}, {"h100-sxm": D("5.5")}, {}, 3) == \
        (D("3168.0"), D("3168.0"))
    path = {"h100-sxm": [(0.5, 1.0), (1.0, 2.0)]}  # a third day falls back to flat
    p50, p90 = remaining_cost({"h100-sxm": 10.0}, {"h100-sxm": D("2")}, path, 3)
    assert (p50, p90) == (D("50.0"), D("80.0"))
    assert status_of(D(100), D(10), D(90), D(99)) == "under"
    assert status_of(D(100), D(10), D(90), D(120)) == "at-risk"
    assert status_of(D(100), D(10), D(101), D(120)) == "over"
    assert status_of(D(100), D(101), D(101), D(101)) == "over"


def test_status_spend_equals_the_imported_rows_and_flat_forecast(db, tmp_path):
    url = str(db.engine.url.render_as_string(hide_password=False))
    result = CliRunner().invoke(cli, ["--db", url, "--config", config_file(tmp_path, BUDGETS),
                                      "budgets", "status", "--as-of", "2026-11-12T12:00:00Z",
                                      "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    research, everything = json.loads(result.stdout)
    # the research lines of 1-10 November: 10 x 1056.00
    assert D(research["spent"]) == 10 * D("1056.00")
    assert research["usage_lines"] == 10
    assert research["run_rate_gpu_hours_per_day"] == {"h100-sxm": 192.0}
    assert D(research["paid_per_gpu_hour"]["h100-sxm"]) == D("5.5")
    # no price history: flat; the import stops at 11 November, so the forecast runs at 1056 a
    # day from there: the 20 days not yet spent, not only the 18 after the as-of day
    assert research["price_forecast"] == "flat"
    assert research["spent_until"] == "2026-11-11T00:00:00Z"
    assert research["remaining_days"] == 20
    assert D(research["forecast_p50"]) == D(30 * 1056) == D(research["forecast_p90"])
    assert research["status"] == "over" and D(research["remaining_p50"]) == D("-1680.00")
    # the quarter budget has every USD line: 11 days and the half of 12 November before noon,
    # and 49.5 days after the as-of instant left
    assert D(everything["spent"]) == D("11.5") * D("1056.00")
    assert everything["spent_until"] == "2026-11-12T12:00:00Z"
    assert everything["remaining_days"] == 49.5
    assert D(everything["forecast_p50"]) == D(61 * 1056)
    assert everything["status"] == "over"  # 61 days of 1056 > 40000
    assert set(research) >= {"name", "amount", "spent", "forecast_p50", "forecast_p90",
                             "status"}


def test_the_price_forecast_moves_the_remaining_spend(db):
    # A falling market (a price every 2 days for 120 days: the forecast extrapolates a trend
    # only over 90 days or more) pulls the P50 below the flat forecast.
    for i in range(0, 120, 2):
        when = at("2026-07-14") + timedelta(days=i)
        price = D("70") - D(i) * D("0.2")
        ingest_records(db, "catalog", [obs(price, when)], started_at=when)
    from tracker.market.budgets import Budget, budget_status

    budget = Budget(name="h", amount=D("30000"), currency="USD", period="month",
                    gpus=("h100-sxm",), gpu_label="h100")
    doc = budget_status(db, budget, at("2026-11-12", 12))
    assert doc["price_forecast"].startswith("issue-27 forecast engine")
    flat = D(30 * 1056)  # 11.5 days spent to noon on 12 November (both teams), 18.5 to go
    assert D(doc["spent"]) == D("11.5") * D("1056.00")
    assert D(doc["spent"]) < D(doc["forecast_p50"]) < flat
    assert D(doc["forecast_p90"]) > D(doc["forecast_p50"])


def test_budget_alert_fires_once_and_clears(db, tmp_path):
    from tracker.config.schema import load_config

    rules = ('[[alerts.rules]]\nname = "research budget"\nbudget = "h100-research"\n')
    tight = BUDGETS.replace('amount = "30000"', 'amount = "20000"')
    config = load_config(config_file(tmp_path, tight + rules), environ={})
    settings = alert_settings(config, {})
    (first,) = check_alerts(db, config, at("2026-11-12", 12), settings=settings)
    assert (first.active, first.event) == (True, "fired")
    assert "forecast 31680.00" in first.message and "over" in first.message
    (again,) = check_alerts(db, config, at("2026-11-12", 13), settings=settings)
    assert (again.active, again.event) == (True, None)  # fires once
    roomy = load_config(config_file(tmp_path, BUDGETS.replace('"30000"', '"50000"') + rules),
                        environ={})
    (cleared,) = check_alerts(db, roomy, at("2026-11-12", 14), settings=alert_settings(roomy, {}))
    assert (cleared.active, cleared.event) == (False, "cleared")


def test_spent_share_alone_fires_the_alert(db, tmp_path):
    from tracker.config.schema import load_config

    body = ('[[budgets]]\nname = "b"\namount = "11000"\nalert_spent_share = 0.5\n'
            'period = "quarter"\n[[alerts.rules]]\nname = "r"\nbudget = "b"\n')
    config = load_config(config_file(tmp_path, body), environ={})
    (result,) = check_alerts(db, config, at("2026-11-06", 12),
                             settings=alert_settings(config, {}))
    assert result.active  # 6 days spent (6336) > half of 11000


@pytest.mark.parametrize(("body", "message"), [
    ('[[budgets]]\nname = "x"\ncurrency = "USD"\n', "[[budgets]] entry 1: amount is required"),
    ('[[budgets]]\nname = "x"\namount = -5\n', "amount must be a positive number"),
    ('[[budgets]]\nname = "x"\namount = 5\nperiod = "week"\n', "[[budgets]] entry 1: period"),
    ('[[budgets]]\nname = "x"\namount = 5\ngpu = "h10o"\n', "unknown GPU 'h10o'"),
    ('[[budgets]]\nname = "x"\namount = 5\n[[budgets]]\nname = "x"\namount = 6\n',
     "two budgets have this name"),
])
def test_a_bad_budget_is_one_line(tmp_path, db, body, message):
    url = str(db.engine.url.render_as_string(hide_password=False))
    result = CliRunner().invoke(cli, ["--db", url, "--config", config_file(tmp_path, body),
                                      "budgets", "status"])
    assert result.exit_code == 1, result.output
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""


def test_spend_and_rate_ignore_lines_outside_the_period():
    from tracker.market.focus import parse_usage

    lines, errors, _ = parse_usage(usage_text(range(3)), {})
    assert not errors
    spent, rate, paid, days, until = spend_and_rate(lines, at("2026-11-02"), at("2026-11-30"))
    assert spent == 2 * D("1056.00") and days == 2 and rate == {"h100-sxm": 192.0}
    assert until == at("2026-11-04")
    assert paid == {"h100-sxm": D("5.5")}


def test_mid_day_as_of_spends_to_the_instant_and_forecasts_the_rest_of_the_period(any_db_url):
    """Hourly lines (8 H100 at 5.50: 44.00 an hour) imported for the whole of 1-12 November,
    asked at 10:30 on 12 November: spend is the 274.5 hours before 10:30 (half of the 10:00
    line), and the flat forecast adds the other 445.5 hours of the month, so constant usage
    forecasts exactly the month's 720 hours. Charging the whole as-of day's start as spent
    and forecasting only from the next day dropped 12 November's lines after 10:00."""
    from tracker.market.budgets import Budget, budget_status

    rows = [HEADER]
    for hour in range(12 * 24):
        start = at("2026-11-01") + timedelta(hours=hour)
        rows.append(f"AWS,us-east-1,H100,8,1,Hours,44.00,USD,{start.isoformat()},"
                    f"{(start + timedelta(hours=1)).isoformat()},")
    database = open_database(any_db_url)
    try:
        import_usage(database, "\n".join(rows) + "\n", at("2026-11-13"))
        budget = Budget(name="h", amount=D("40000"), currency="USD", period="month",
                        gpus=("h100-sxm",), gpu_label="h100")
        doc = budget_status(database, budget, at("2026-11-12", 10) + timedelta(minutes=30))
    finally:
        database.close()
    assert D(doc["spent"]) == D("274.5") * D("44.00")
    assert doc["spent_until"] == at("2026-11-12", 10) + timedelta(minutes=30)
    assert doc["remaining_days"] == pytest.approx(445.5 / 24)
    assert doc["run_rate_gpu_hours_per_day"] == {"h100-sxm": 192.0}
    assert D(doc["forecast_p50"]) == D(720) * D("44.00") == D(doc["forecast_p90"])


def test_a_bare_as_of_date_is_the_end_of_that_day(db, tmp_path):
    """`--as-of 2026-11-05` counts the spend of 5 November, as a bare date means the end of
    that day in every other command (it used to stop at 00:00 and leave the day out)."""
    url = str(db.engine.url.render_as_string(hide_password=False))

    def spent(as_of: str) -> D:
        result = CliRunner().invoke(cli, ["--db", url, "--config",
                                          config_file(tmp_path, BUDGETS), "budgets", "status",
                                          "--as-of", as_of, "--format", "json"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return D(json.loads(result.stdout)[0]["spent"])

    assert spent("2026-11-05") == 5 * D("1056.00")
    assert spent("2026-11-05T00:00:00Z") == 4 * D("1056.00")
