"""An alert's delivery: the body of a firing (scrubbed, with the firing's id), and its
sending by mail (the report's SMTP settings) and by webhook (JSON, or a Slack-compatible body)
within a total deadline. Which firings to send, and their retries, are
tracker.market.alert_checks's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tracker.core.errors import TrackerError
from tracker.market.alerts import AlertSettings, Evaluation

if TYPE_CHECKING:
    from scrapers.http import Transport
    from tracker.config.schema import Config


def firing_id(rule: str, at: datetime) -> str:
    """The id of a rule's firing at `at`: the same for every delivery attempt of it."""
    import hashlib

    from tracker.core.serialization import iso_utc

    return "alert-" + hashlib.sha256(f"{rule}\n{iso_utc(at)}".encode()).hexdigest()[:24]


def payload(evaluation: Evaluation, event: str, at: datetime, *, test: bool = False,
            id: str | None = None) -> dict:
    """The webhook/mail body: the rule, what was found, when, and the firing's id. Built
    from the rule and the market facts only, and scrubbed: a key a provider echoed into an
    offer's name or a rule's detail does not reach a channel or the event history."""
    from tracker.core.secrets import scrub_tree
    from tracker.core.serialization import iso_utc, to_jsonable

    return scrub_tree({
        "id": id or firing_id(evaluation.rule.name, at), "event": event, "test": test,
        "rule": evaluation.rule.public(), "active": evaluation.active,
        "message": evaluation.message, "value": to_jsonable(evaluation.value),
        "facts": to_jsonable(evaluation.facts), "at": iso_utc(at), "source": "gpu-tracker"})


def slack_escape(text: str) -> str:
    """Text as Slack mrkdwn shows it literally: `&`, `<`, `>` as entities (Slack's
    "Escaping text" rules), so `<!channel>` or `<https://evil|click>` from a provider or quote
    name is shown, not obeyed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """Slack incoming-webhook body: `text` is required; every interpolated value escaped."""
    prefix = "[test] " if body.get("test") else ""
    icon = ":bell:" if body["event"] == "fired" else ":white_check_mark:"
    return {"text": f"{icon} {prefix}gpu-tracker alert *{slack_escape(body['rule']['name'])}* "
                    f"{slack_escape(body['event'])}: {slack_escape(body['message'])} "
                    f"(id {slack_escape(str(body.get('id', '')))})"}


def deliver(settings: AlertSettings, config: Config, body: dict[str, Any], *,
            transport: Transport | None = None,
            channels: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """Send `body` to the configured channels (or the given ones): (delivered, failures as
    one-line scrubbed strings `channel: error`)."""
    from tracker.core.secrets import scrub

    senders: dict[str, Callable[[], None]] = {}
    if settings.mail_to:
        senders["mail"] = lambda: _send_mail(settings, config, body)
    if settings.webhook_url:
        senders["webhook"] = lambda: _post_webhook(settings, body, transport)
    done: list[str] = []
    failed: list[str] = []
    for name in channels if channels is not None else list(senders):
        send = senders.get(name)
        if send is None:
            failed.append(f"{name}: no longer configured")
            continue
        try:
            send()
            done.append(name)
        except TrackerError as exc:
            failed.append(scrub(f"{name}: {_one_line(str(exc))}"))
    return done, failed


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 500 else line[:499] + "…"


def _send_mail(settings: AlertSettings, config: Config, body: Mapping[str, Any]) -> None:
    from email.message import EmailMessage
    from email.utils import format_datetime

    from tracker.core.secrets import learn, scrub
    from tracker.core.smtp import send_message

    smtp = config.smtp.settings()
    learn([smtp.password], short=True)  # an SMTP error echoing it is scrubbed
    sender = smtp.sender
    message = EmailMessage()
    prefix = "[test] " if body.get("test") else ""
    message["Subject"] = scrub(" ".join(
        f"{prefix}gpu-tracker alert {body['event']}: {body['rule']['name']}".split()))
    message["From"] = sender
    message["To"] = ", ".join(settings.mail_to)
    message["Date"] = format_datetime(datetime.fromisoformat(body["at"].replace("Z", "+00:00")))
    # The firing's id as the Message-ID: a retried mail is the same message to any
    # deduplicating server or client.
    domain = sender.rpartition("@")[2] or "localhost"
    message["Message-ID"] = f"<{body['id']}{'-test' if body.get('test') else ''}@{domain}>"
    message["X-GPU-Tracker-Alert-Id"] = str(body["id"])
    lines = [body["message"], "", f"rule: {body['rule']['description']}",
             f"event: {body['event']} at {body['at']}", f"id: {body['id']}"]
    message.set_content(scrub("\n".join(lines) + "\n"))
    message.add_attachment(scrub(json.dumps(body, indent=2, sort_keys=True)).encode(),
                           maintype="application", subtype="json", filename="alert.json")
    try:
        send_message(message, smtp, sender, list(settings.mail_to))
    except TrackerError as exc:
        raise TrackerError(scrub(str(exc))) from None


def _post_webhook(settings: AlertSettings, body: dict[str, Any],
                  transport: Transport | None) -> None:
    """POST the body within a total deadline (`[alerts.webhook] timeout` for connecting,
    sending and every read together: a peer that trickles its answer is cut off), to an
    address the webhook policy allows (tracker.market.alerts.check_webhook_address), one of
    those it checked (not the name resolved again), never following a redirect
    (scrapers.http.post_once)."""
    from urllib.parse import urlsplit

    from scrapers.http import post_once
    from tracker.market.alerts import check_webhook_address

    url = settings.webhook_url
    addresses = check_webhook_address(url)
    data = slack_body(body) if settings.webhook_format == "slack" else body
    status = post_once(url, data, timeout=settings.webhook_timeout,
                       headers={"Idempotency-Key": str(body["id"])}, transport=transport,
                       connect_to=addresses)
    if status >= 300:
        host = urlsplit(url).hostname or ""  # the URL is a secret: name the host only
        raise TrackerError(f"POST to {host} returned HTTP {status}"
                           + (" (redirects are not followed)" if 300 <= status < 400 else ""))
