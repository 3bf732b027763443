"""Alert delivery under attack and failure (issue #30, part a): each channel tracked on its own
and retried with backoff, a non-zero exit while one is undelivered, the firing's id in every
payload, scrubbed payloads and errors, Slack mrkdwn escaped, a total deadline on the webhook,
the webhook address policy, and the scheduler not held by a slow peer.

A real SMTP server (aiosmtpd) and HTTP servers on loopback stand in for the peers.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

from tests.helpers import at, obs
from tests.loopback import Reply, TrickleServer
from tests.market.conftest import HOOK_PATH, HOOK_TOKEN, SMTP_PASSWORD
from tests.market.test_alerts import store_price, write_config
from tracker.market.alert_checks import (
    RETRY_ATTEMPTS,
    alert_history,
    check_alerts,
    slack_body,
    slack_escape,
)

pytest.importorskip("aiosmtpd")

KEY = "lk-SECRET-echoed-9f8e7d6c"


def _firing(db):
    """The stored channel states of the newest firing."""
    return next(e for e in alert_history(db) if e["event"] == "fired")


def test_mail_sent_webhook_500_is_retried_alone_with_backoff_until_delivered(
        db, tmp_path, smtp_server, hook):
    inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    hook.route(HOOK_PATH, [Reply(b"down", 500), Reply(b"down", 500), Reply(b"ok")])
    store_price(db, "15.20", "2026-11-02")
    t0 = at("2026-11-02", 1)

    (result,) = check_alerts(db, config, t0, settings=settings)
    assert (result.event, result.undelivered) == ("fired", ["webhook"])
    assert result.delivered[0] == "mail" and "HTTP 500" in result.delivered[1]
    assert _firing(db)["channels"]["mail"]["status"] == "sent"
    assert _firing(db)["channels"]["webhook"]["status"] == "pending"

    # Before the backoff has passed: nothing is tried, still undelivered.
    (result,) = check_alerts(db, config, t0 + timedelta(seconds=30), settings=settings)
    assert (result.event, result.undelivered) == (None, ["webhook"])
    assert hook.hits(HOOK_PATH) == 1
    # After it: the webhook alone is tried again (the mail is not sent twice).
    (result,) = check_alerts(db, config, t0 + timedelta(seconds=61), settings=settings)
    assert (result.event, result.undelivered) == ("retried", ["webhook"])
    assert "attempt 2/" in result.delivered[0]
    # The second wait doubles: 120 s after the second attempt.
    (result,) = check_alerts(db, config, t0 + timedelta(seconds=61 + 100), settings=settings)
    assert result.event is None and hook.hits(HOOK_PATH) == 2
    (result,) = check_alerts(db, config, t0 + timedelta(seconds=61 + 121), settings=settings)
    assert (result.event, result.undelivered) == ("retried", [])
    assert hook.hits(HOOK_PATH) == 3 and len(inbox.messages) == 1
    ids = {r.json()["id"] for r in hook.requests} | {r.headers["idempotency-key"]
                                                     for r in hook.requests}
    assert len(ids) == 1 and next(iter(ids)).startswith("alert-")
    assert f"<{next(iter(ids))}@example.com>" in inbox.messages[0][2].decode()
    assert _firing(db)["channels"]["webhook"] | {"last_attempt": None} == {
        "status": "sent", "attempts": 3, "last_attempt": None, "next_attempt": None,
        "error": ""}
    # Quiet afterwards: delivered everywhere once.
    (result,) = check_alerts(db, config, t0 + timedelta(hours=5), settings=settings)
    assert (result.event, result.undelivered) == (None, []) and hook.hits(HOOK_PATH) == 3


def test_a_channel_is_given_up_after_the_retry_limit(db, tmp_path, smtp_server, hook):
    _inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    hook.route(HOOK_PATH, Reply(b"down", 503))
    store_price(db, "15.20", "2026-11-02")
    when = at("2026-11-02", 1)
    for _ in range(RETRY_ATTEMPTS + 2):
        (result,) = check_alerts(db, config, when, settings=settings)
        when += timedelta(hours=2)
    assert hook.hits(HOOK_PATH) == RETRY_ATTEMPTS
    webhook = _firing(db)["channels"]["webhook"]
    assert (webhook["status"], webhook["attempts"]) == ("failed", RETRY_ATTEMPTS)
    assert result.undelivered == ["webhook"]  # still reported while the firing is current
    assert "webhook: failed (5 attempts: POST to 127.0.0.1 returned HTTP 503)" in \
        _firing(db)["delivered"]


def test_alerts_check_exits_1_while_a_channel_is_undelivered(tmp_path, smtp_server, hook,
                                                             sqlite_url, monkeypatch):
    from click.testing import CliRunner

    from tracker.cli.main import cli
    from tracker.store.db import open_database

    _inbox, port = smtp_server
    write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    hook.route(HOOK_PATH, Reply(b"down", 500))
    db = open_database(sqlite_url)
    now = __import__("datetime").datetime.now(__import__("datetime").UTC)
    from tracker.store.ingest import ingest_records

    ingest_records(db, "test", [obs("15.20", now, provider="lambda",
                                    instance_type="gpu_8x_h100")], started_at=now)
    env = {"GPU_TRACKER_CONFIG": str(tmp_path / "config.toml"),
           "GPU_TRACKER_SMTP_PASSWORD": SMTP_PASSWORD,
           "GPU_TRACKER_ALERTS_WEBHOOK_URL": f"{hook.url}{HOOK_PATH}"}
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "alerts", "check", "--format",
                                      "json"], env=env, catch_exceptions=False)
    assert result.exit_code == 1, result.output
    (row,) = json.loads(result.stdout)
    assert row["undelivered"] == ["webhook"] and row["delivered"][0] == "mail"
    assert "not delivered yet" in result.stderr and HOOK_TOKEN not in result.output


def test_a_webhook_that_times_out_after_the_post_gets_the_same_id(db, tmp_path, smtp_server,
                                                                  hook):
    _inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    settings = type(settings)(rules=settings.rules, webhook_url=settings.webhook_url,
                              webhook_timeout=0.5)
    hook.route(HOOK_PATH, [Reply(b"ok", delay=1.5), Reply(b"ok")])
    store_price(db, "15.20", "2026-11-02")
    (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    assert result.undelivered == ["webhook"]
    (result,) = check_alerts(db, config, at("2026-11-02", 3), settings=settings)
    assert result.undelivered == []
    first, second = hook.requests[0], hook.requests[-1]
    assert first.json() == second.json()
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"] == \
        first.json()["id"]


# A peer that answers with header bytes one at a time, forever.
SLOW_HEADERS = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000


def test_a_trickling_webhook_is_cut_off_at_its_total_deadline(db, tmp_path, smtp_server):
    from tracker.market.alerts import AlertSettings

    _inbox, port = smtp_server
    slow = TrickleServer(SLOW_HEADERS, forever=True)
    try:
        config, settings = write_config(tmp_path, port, f"{slow.url}{HOOK_PATH}")
        settings = AlertSettings(rules=settings.rules, webhook_url=f"{slow.url}{HOOK_PATH}",
                                 webhook_timeout=1.0)
        store_price(db, "15.20", "2026-11-02")
        start = time.monotonic()
        (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
        elapsed = time.monotonic() - start
    finally:
        slow.close()
    assert elapsed < 5, elapsed  # a read timeout alone would never fire (a byte each 0.1 s)
    assert result.undelivered == ["webhook"] and "cut off" in result.delivered[0]


def test_the_scheduler_refresh_is_not_held_by_a_slow_webhook(db, tmp_path, monkeypatch):
    """The refresh fires the rule; its webhook trickles for the whole 8 s deadline. The
    refresh job returns while the check still posts, and the next refresh runs meanwhile."""
    from tracker.cli.scheduler import JobRunner, JobSpec
    from tracker.config.schema import load_config

    slow = TrickleServer(SLOW_HEADERS, interval=0.2, forever=True)
    try:
        config_path = tmp_path / "config.toml"
        config_path.write_text('[alerts.webhook]\ntimeout = 8\n'
                               '[[alerts.rules]]\nname = "aws stale"\nsource_stale = "aws"\n')
        monkeypatch.setenv("GPU_TRACKER_ALERTS_WEBHOOK_URL", f"{slow.url}{HOOK_PATH}")
        config = load_config(config_path)
        spec = JobSpec(id="refresh:bundled", kind="refresh", cron="0 * * * *",
                       timezone="UTC", sources=("bundled",))
        notes: list[str] = []
        runner = JobRunner(db, config, {spec.id: spec}, notify=notes.append)
        start = time.monotonic()
        runner(spec.id)
        runner(spec.id)  # the next refresh, while the first one's alerts check posts
        both = time.monotonic() - start
        still_posting = runner.active
        assert runner.wait_idle(30)
        total = time.monotonic() - start
    finally:
        slow.close()
    assert still_posting == 1, (both, total)  # the check, not a refresh, is in flight
    assert total >= 8 and both < total
    # Both refreshes were done (the second skips the slot the first did) before the slow
    # delivery ended.
    assert [n.split(":")[0] for n in notes] == ["refresh", "refresh", "alert aws stale"], notes


# -- scrubbing -----------------------------------------------------------------------------

def test_a_key_echoed_in_offer_data_reaches_no_channel_or_event(db, tmp_path, smtp_server,
                                                                 hook):
    from tracker.core import secrets
    from tracker.store.ingest import ingest_records

    inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    secrets.learn([KEY])
    when = at("2026-11-02")
    ingest_records(db, "test", [obs("15.20", when, provider="lambda",
                                    instance_type=f"gpu_8x_h100-{KEY}")], started_at=when)
    (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    assert result.event == "fired" and result.undelivered == []
    body = hook.requests[-1].body.decode()
    assert "***" in body
    stored = json.dumps(alert_history(db), default=str)
    from tracker.store.db import open_database  # noqa: F401

    with db.engine.connect() as conn:
        rows = [tuple(map(str, r)) for r in conn.exec_driver_sql(
            "SELECT message, payload, delivered FROM alert_event")]
    for blob in [body, inbox.messages[0][2].decode(errors="replace"), stored,
                 json.dumps(rows), result.message]:
        assert KEY not in blob and KEY.upper() not in blob


def test_an_smtp_password_echoed_in_a_server_error_is_not_stored(db, tmp_path, smtp_server,
                                                                  hook, monkeypatch):
    import tracker.core.smtp
    from tracker.core.smtp import MailError

    _inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")

    def echoing(*_args, **_kwargs):
        raise MailError(f"cannot send via 127.0.0.1:{port}: SMTPDataError: 554 bad "
                        f"credentials alerter/{SMTP_PASSWORD}")

    monkeypatch.setattr(tracker.core.smtp, "send_message", echoing)
    store_price(db, "15.20", "2026-11-02")
    (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    assert result.undelivered == ["mail"]
    with db.engine.connect() as conn:
        stored = " ".join(str(r) for r in conn.exec_driver_sql(
            "SELECT delivered, payload, message FROM alert_event"))
    assert "bad credentials" in stored and SMTP_PASSWORD not in stored
    assert all(SMTP_PASSWORD not in line for line in result.delivered)


# -- Slack ---------------------------------------------------------------------------------

def test_slack_text_escapes_mrkdwn_control_sequences(db, tmp_path, smtp_server, hook):
    assert slack_escape("<!channel> & <https://evil|click>") == \
        "&lt;!channel&gt; &amp; &lt;https://evil|click&gt;"
    body = slack_body({"event": "fired", "id": "alert-1", "message": "<!here> 1.9 <@U1>",
                       "rule": {"name": "<https://evil.example|click me>"}})
    assert "<" not in body["text"] and ">" not in body["text"]
    assert "&lt;!here&gt;" in body["text"] and "alert-1" in body["text"]

    _inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}", fmt="slack")
    when = at("2026-11-02")
    from tracker.store.ingest import ingest_records

    ingest_records(db, "test", [obs("15.20", when, provider="lambda",
                                    instance_type="<!channel>",
                                    region="<https://evil.example|click>")], started_at=when)
    check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    text = hook.requests[-1].json()["text"]
    assert "<!channel>" not in text and "<https://evil" not in text
    assert "&lt;!channel&gt;" in text


# -- the webhook address policy ------------------------------------------------------------

@pytest.mark.parametrize(("url", "message"), [
    ("http://169.254.169.254/latest/meta-data", "link-local"),
    ("https://[fe80::1]/hook", "link-local"),
    ("http://10.0.0.5/hook", "only to a loopback"),
    ("http://224.0.0.1/hook", "multicast"),
    ("https://0.0.0.0/hook", "link-local, multicast or reserved"),
])
def test_webhook_addresses_outside_the_policy_are_refused(url: str, message: str):
    from tracker.core.errors import TrackerError
    from tracker.market.alerts import check_webhook_address

    with pytest.raises(TrackerError, match=message):
        check_webhook_address(url)


@pytest.mark.parametrize("location", ["{url}/elsewhere", "file:///etc/passwd"])
def test_a_webhook_redirect_is_not_followed(db, tmp_path, smtp_server, hook, location):
    """A 3xx is reported as the status it is, wherever it points: the shared client's
    redirect policy (scrapers.http.check_redirect) is for redirects it follows."""
    _inbox, port = smtp_server
    config, settings = write_config(tmp_path, port, f"{hook.url}{HOOK_PATH}")
    hook.route(HOOK_PATH, Reply(b"", 307, headers={"Location": location.format(url=hook.url)}))
    hook.route("/elsewhere", Reply(b"ok"))
    store_price(db, "15.20", "2026-11-02")
    (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    assert result.undelivered == ["webhook"]
    assert "returned HTTP 307 (redirects are not followed)" in result.delivered[1]
    assert hook.hits("/elsewhere") == 0


def _name_resolving_to(monkeypatch, name: str, answers) -> list[str]:
    """Patch the resolver: `name` resolves to the IP addresses `answers(n)` gives on its n-th
    question (other names as before). Returns the list of its questions, as they come."""
    import socket

    real = socket.getaddrinfo
    asked: list[str] = []

    def resolve(host, *args, **kwargs):
        if host != name:
            return real(host, *args, **kwargs)
        asked.append(host)
        port = args[0] or 0
        return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, port, 0, 0))
                if ":" in a else
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, port))
                for a in answers(len(asked))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return asked


def _fire_at_named_hook(db, tmp_path, smtp_server, hook, name: str):
    """One firing delivered to the loopback hook under the host `name` (its port, its path):
    (the check's result, the port)."""
    port = int(hook.url.rsplit(":", 1)[1])
    _inbox, smtp_port = smtp_server
    config, settings = write_config(tmp_path, smtp_port, f"http://{name}:{port}{HOOK_PATH}")
    store_price(db, "15.20", "2026-11-02")
    (result,) = check_alerts(db, config, at("2026-11-02", 1), settings=settings)
    return result, port


def test_a_webhook_connects_to_the_address_it_checked(db, tmp_path, smtp_server, hook,
                                                      monkeypatch, caplog):
    """DNS rebinding: a name that resolves to an allowed address for the policy check and
    to another for the connection. The delivery connects to the checked address (127.0.0.1,
    the hook), naming the host in its Host header; the second answer (127.0.0.2, where
    nothing listens, standing in for a metadata service) is never asked for. The URL as sent
    to the address is redacted in httpx's log like the URL itself."""
    import logging

    asked = _name_resolving_to(monkeypatch, "hooks.rebind.test",
                               lambda n: ["127.0.0.1" if n == 1 else "127.0.0.2"])
    with caplog.at_level(logging.INFO, logger="httpx"):
        result, port = _fire_at_named_hook(db, tmp_path, smtp_server, hook, "hooks.rebind.test")
    assert result.undelivered == []
    assert asked == ["hooks.rebind.test"]  # resolved once, by the check
    (request,) = [r for r in hook.requests if r.path == HOOK_PATH]
    assert request.headers["host"] == f"hooks.rebind.test:{port}"
    assert json.loads(request.body)["event"] == "fired"
    assert HOOK_TOKEN not in caplog.text


def test_a_webhook_host_that_does_not_resolve_is_a_failed_delivery(monkeypatch):
    import socket

    from tracker.core.errors import TrackerError
    from tracker.market.alerts import check_webhook_address

    def nowhere(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", nowhere)
    with pytest.raises(TrackerError, match=r"hooks\.example\.com does not resolve"):
        check_webhook_address("https://hooks.example.com/T0/B1/secret")


def test_a_pinned_https_post_names_its_host_for_tls():
    """Over https the request goes to the checked address and still names the host: its Host
    header and the TLS server name (httpcore's `sni_hostname`), against which the
    certificate is checked."""
    import httpx

    from scrapers.http import post_once

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    status = post_once("https://hooks.example.com:8443/T0/B1/secret", {"a": 1}, timeout=5.0,
                       transport=httpx.MockTransport(answer), connect_to=["2001:db8::7"])
    assert status == 204
    (request,) = seen
    assert (request.url.host, request.url.port, request.url.path) == ("2001:db8::7", 8443,
                                                                      "/T0/B1/secret")
    assert request.headers["host"] == "hooks.example.com:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.com"


def test_a_webhook_tries_the_checked_addresses_in_order(db, tmp_path, smtp_server, hook,
                                                        monkeypatch):
    """As a resolved name's addresses are (socket.create_connection): a relay named
    "localhost" that listens on 127.0.0.1 only is reached after ::1 refuses the connection.
    Every address is checked by the policy first, and the name is resolved once."""
    asked = _name_resolving_to(monkeypatch, "relay.loopback.test",
                               lambda n: ["::1", "127.0.0.1"])
    result, _port = _fire_at_named_hook(db, tmp_path, smtp_server, hook, "relay.loopback.test")
    assert result.undelivered == []
    assert asked == ["relay.loopback.test"]
    assert hook.hits(HOOK_PATH) == 1
