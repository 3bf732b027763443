"""Alerts end to end: a real SMTP server (aiosmtpd) and a webhook server on loopback; a rule
fires once, stays quiet while its condition holds, clears, and fires again; no secret in any
payload; a bad rule gets one line naming it."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.helpers import at, obs
from tests.loopback import Reply
from tests.market.conftest import HOOK_PATH, HOOK_TOKEN, SMTP_PASSWORD
from tracker.core.errors import InvalidInput
from tracker.market.alert_checks import check_alerts
from tracker.market.alerts import (
    AlertRule,
    Facts,
    alert_settings,
    evaluate,
    parse_rule,
    transition,
)

pytest.importorskip("aiosmtpd")


def write_config(tmp_path, port: int, hook_url: str, fmt: str = "json", rules: str = ""):
    import reports  # noqa: F401  (registers the [smtp] defaults)
    from tracker.config.schema import load_config

    path = tmp_path / "config.toml"
    path.write_text(
        "[smtp]\n"
        f'host = "127.0.0.1"\nport = {port}\nsecurity = "none"\nuser = "alerter"\n'
        'sender = "gpu-tracker@example.com"\n'
        "[alerts.mail]\n"
        'to = ["ops@example.com"]\n'
        "[alerts.webhook]\n"
        f'format = "{fmt}"\n'
        + (rules or '[[alerts.rules]]\nname = "h100 under 2"\ngpu = "h100"\ngpu_count = 8\n'
                    'below = 2.0\n'), encoding="utf-8")
    environ = {"GPU_TRACKER_SMTP_PASSWORD": SMTP_PASSWORD,
               "GPU_TRACKER_ALERTS_WEBHOOK_URL": hook_url}
    config = load_config(path, environ=environ)
    return config, alert_settings(config, environ)


def store_price(db, price: str, day: str, *, hour: int = 0) -> None:
    from tracker.store.ingest import ingest_records

    when = at(day, hour)
    summary = ingest_records(db, "test", [obs(price, when, provider="lambda",
                                              instance_type="gpu_8x_h100")], started_at=when)
    assert summary.status == "ok", summary.error


@pytest.fixture
def db_url(any_db_url):
    return any_db_url  # the rules run on both databases


def test_fires_once_stays_quiet_clears_and_fires_again(db, tmp_path, smtp_server, hook,
                                                      caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    path = HOOK_PATH

    def check(day: str, hour: int = 1):
        return check_alerts(db, config, at(day, hour), settings=settings)

    store_price(db, "17.60", "2026-11-01")  # 2.20 per GPU-hour: above the level
    (result,) = check("2026-11-01")
    assert (result.active, result.event) == (False, None)
    assert hook.hits(path) == 0 and inbox.messages == []

    store_price(db, "15.20", "2026-11-02")  # 1.90: fires
    (result,) = check("2026-11-02")
    assert (result.active, result.event, result.delivered) == (True, "fired",
                                                                ["mail", "webhook"])
    assert hook.hits(path) == 1 and len(inbox.messages) == 1
    body = hook.requests[-1].json()
    assert body["event"] == "fired" and body["rule"]["name"] == "h100 under 2"
    assert body["value"] == "1.9" and body["rule"]["level"] == "2"
    assert body["facts"]["offer"]["provider"] == "lambda"
    assert body["facts"]["offer"]["instance_type"] == "gpu_8x_h100"

    for hour in (2, 3):  # still below: quiet
        (result,) = check("2026-11-02", hour)
        assert (result.active, result.event) == (True, None)
    store_price(db, "15.20", "2026-11-02", hour=6)
    (result,) = check("2026-11-02", 7)
    assert result.event is None
    assert hook.hits(path) == 1 and len(inbox.messages) == 1

    store_price(db, "16.80", "2026-11-03")  # 2.10: clears, nothing sent
    (result,) = check("2026-11-03")
    assert (result.active, result.event) == (False, "cleared")
    assert hook.hits(path) == 1 and len(inbox.messages) == 1

    store_price(db, "14.40", "2026-11-04")  # 1.80: fires again
    (result,) = check("2026-11-04")
    assert (result.active, result.event) == (True, "fired")
    assert hook.hits(path) == 2 and len(inbox.messages) == 2

    from tracker.market.alert_checks import alert_history

    events = [e["event"] for e in reversed(alert_history(db))]
    assert events == ["fired", "cleared", "fired"]

    # No secret anywhere: webhook bodies, mails, stored events.
    stored = json.dumps(alert_history(db), default=str)
    assert "POST http://127.0.0.1/***" in caplog.text  # logged by httpx, URL redacted
    for blob in [r.body.decode() for r in hook.requests] + [
            m[2].decode(errors="replace") for m in inbox.messages] + [stored, caplog.text]:
        assert SMTP_PASSWORD not in blob
        assert HOOK_TOKEN not in blob and "XXXXhooktoken" not in blob


def test_slack_body_and_failed_delivery_is_retried(db, tmp_path, smtp_server, hook):
    _inbox, port = smtp_server
    path = HOOK_PATH
    config, settings = write_config(tmp_path, port, f"{hook.url}{path}", fmt="slack")
    settings = type(settings)(rules=settings.rules, webhook_url=settings.webhook_url,
                              webhook_format="slack")  # webhook only
    hook.route(path, [Reply(b"down", 500), Reply(b"ok")])
    store_price(db, "15.20", "2026-11-02")
    (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    # The firing is recorded; its undelivered webhook is retried at the next check.
    assert (result.active, result.event, result.undelivered) == (True, "failed", ["webhook"])
    assert "HTTP 500" in result.delivered[0] and HOOK_TOKEN not in result.delivered[0]
    (result,) = check_alerts(db, config, at("2026-11-02", 2), settings=settings)
    assert (result.active, result.event, result.undelivered) == (True, "retried", [])
    first, second = (r.json()["text"] for r in hook.requests[-2:])
    assert first == second  # the same firing, with the same id
    assert "h100 under 2" in second and "1.9000 USD/GPU-h" in second


def test_new_low_and_stale_source_rules(db, tmp_path, smtp_server, hook):
    _inbox, port = smtp_server
    rules = ('[[alerts.rules]]\nname = "low"\ngpu = "h100-sxm"\nnew_low = true\n'
             '[[alerts.rules]]\nname = "stale"\nsource_stale = "aws"\n')
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}",
                                    rules=rules)
    store_price(db, "17.60", "2026-11-01")
    store_price(db, "16.00", "2026-11-02")
    low, stale = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    assert low.active and "below the 90-day low 2.2000 USD" in low.message
    assert stale.active and "aws: never refreshed" in stale.message
    store_price(db, "17.60", "2026-11-03")  # back up: no longer a low
    low, _ = check_alerts(db, config, at("2026-11-03", 1), settings=settings)
    assert (low.active, low.event) == (False, "cleared")


def test_evaluate_and_transition_are_pure():
    rule = AlertRule(name="r", condition="above", gpu="h100-sxm", level=Decimal("9"))
    assert evaluate(rule, Facts(value=Decimal("9.5"))).active
    assert not evaluate(rule, Facts(value=Decimal("9"))).active
    assert not evaluate(rule, Facts()).active
    assert [transition(a, b) for a, b in ((False, True), (True, True), (True, False),
                                          (False, False))] == ["fired", None, "cleared", None]


@pytest.mark.parametrize("raw, message", [
    ({"gpu": "h100", "below": 2}, "needs a name"),
    ({"name": "x", "gpu": "h100"}, "'x': needs exactly one condition"),
    ({"name": "x", "gpu": "h100", "below": 2, "above": 3}, "'x': needs exactly one"),
    ({"name": "x", "below": 2}, "'x': needs a gpu"),
    ({"name": "x", "gpu": "h100", "below": -1}, "'x': below must be positive"),
    ({"name": "x", "gpu": "nope9000", "below": 1}, "'x': "),
    ({"name": "x", "gpu": "h100", "below": 1, "colour": "red"}, "'x': unknown key(s) colour"),
    ({"name": "x", "source_stale": "nosuchsource"}, "'x': unknown source"),
    ({"name": "x", "gpu": "h100", "below": "cheap"}, "'x': below is not a number"),
])
def test_a_bad_rule_gets_one_line_naming_it(raw, message):
    with pytest.raises(InvalidInput) as info:
        parse_rule(raw, 0, "USD")
    text = str(info.value)
    assert text.startswith("[[alerts.rules]]") and message in text and "\n" not in text


def test_cli_bad_rule_is_one_line_exit_1(tmp_path, sqlite_url):
    from click.testing import CliRunner

    from tracker.cli.main import cli

    path = tmp_path / "c.toml"
    path.write_text('[[alerts.rules]]\nname = "oops"\ngpu = "h100"\nbelow = 2\nabove = 1\n')
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "--config", str(path), "alerts",
                                      "list"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: [[alerts.rules]] 'oops': needs exactly one condition of below, above, "
        "index_move_pct, new_low, workload, source_stale, budget (got below, above)"]


def test_cli_test_rule_and_history(tmp_path, db):
    from click.testing import CliRunner

    from tracker.cli.main import cli

    store_price(db, "15.20", "2026-11-02")
    path = tmp_path / "c.toml"
    path.write_text('[[alerts.rules]]\nname = "cheap"\ngpu = "h100"\nbelow = 2\n')
    runner = CliRunner()
    out = runner.invoke(cli, ["--db", db.url, "--config", str(path), "alerts", "test",
                              "cheap", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["active"] is False  # now (2026-12) the price is stale
    out = runner.invoke(cli, ["--db", db.url, "--config", str(path), "alerts", "test",
                              "nope"])
    assert out.exit_code == 1 and "no alert rule named 'nope'" in out.output


def test_config_show_masks_the_webhook_url(tmp_path):
    from tracker.config.schema import load_config

    path = tmp_path / "c.toml"
    path.write_text(f'[alerts.webhook]\nurl = "https://hooks.example/{HOOK_TOKEN}"\n')
    masked = json.dumps(load_config(path, environ={}).masked())
    assert HOOK_TOKEN not in masked and '"url": "***"' in masked


def test_the_scheduler_checks_alerts_after_every_refresh(db, tmp_path, hook, monkeypatch):
    """A scheduled refresh (bundled prices, offline) is followed by an alerts check: the
    stale-source rule fires once over two refreshes."""
    from tracker.cli.scheduler import JobRunner, JobSpec
    from tracker.config.schema import load_config

    path = HOOK_PATH
    config_path = tmp_path / "config.toml"
    config_path.write_text('[[alerts.rules]]\nname = "aws stale"\nsource_stale = "aws"\n')
    # alert_settings reads the webhook URL from the environment, as in production.
    monkeypatch.setenv("GPU_TRACKER_ALERTS_WEBHOOK_URL", f"{hook.url}{path}")
    config = load_config(config_path)
    spec = JobSpec(id="refresh:bundled", kind="refresh", cron="0 * * * *", timezone="UTC",
                   sources=("bundled",))
    notes: list[str] = []
    runner = JobRunner(db, config, {spec.id: spec}, notify=notes.append)
    runner(spec.id)
    assert runner.wait_idle(30)  # alerts are checked off the refresh's thread
    runner(spec.id)
    assert runner.wait_idle(30)
    assert hook.hits(path) == 1
    assert hook.requests[0].json()["rule"]["name"] == "aws stale"
    assert any(n.startswith("alert aws stale: fired") for n in notes), notes


def test_a_workload_rule_must_name_a_configured_workload(tmp_path):
    from tracker.config.schema import load_config

    path = tmp_path / "c.toml"
    path.write_text('[[alerts.rules]]\nname = "ft"\nworkload = "nope"\ncost_below = 10\n')
    with pytest.raises(InvalidInput, match=r"^\[\[alerts.rules\]\] 'ft': no "
                       r"\[\[report.workloads\]\] entry named 'nope'"):
        alert_settings(load_config(path, environ={}), {})


def test_unchanged_states_are_written_in_one_transaction(db, tmp_path, smtp_server, hook):
    """A check writes the states of the rules with nothing to record or deliver together, in
    one transaction: each keeps its `since`, takes the check's time and its message."""
    from sqlalchemy import event

    from tracker.store.market import alert_states

    _inbox, port = smtp_server
    rules = "".join(f'[[alerts.rules]]\nname = "{name}"\ngpu = "h100"\n{level}\n'
                    for name, level in (("under 2", "below = 2.0"), ("under 3", "below = 3.0"),
                                        ("above 5", "above = 5.0")))
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}", rules=rules)
    store_price(db, "17.60", "2026-11-01")  # 2.20 per GPU-hour: only "under 3" fires
    first = check_alerts(db, config, at("2026-11-01", 1), settings=settings)
    assert [(r.rule, r.event) for r in first] == [("under 2", None), ("under 3", "fired"),
                                                  ("above 5", None)]
    writes: list[int] = []

    def record(conn, _cursor, statement, _parameters, _context, _many):
        if "alert_state" in statement and statement.lstrip().upper().startswith(
                ("UPDATE", "INSERT")):
            writes.append(id(conn.get_transaction()))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        second = check_alerts(db, config, at("2026-11-01", 2), settings=settings)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert [(r.rule, r.active, r.event) for r in second] == [
        ("under 2", False, None), ("under 3", True, None), ("above 5", False, None)]
    assert len(writes) == 1  # one UPDATE of the three rows (executemany), one transaction
    states = alert_states(db)
    for result in second:
        state = states[result.rule]
        assert (state.active, state.detail) == (result.active, result.message)
        assert (state.since, state.checked_at) == (at("2026-11-01", 1), at("2026-11-01", 2))
