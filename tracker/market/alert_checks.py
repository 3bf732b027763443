"""Alerts against the store: the facts each rule needs, the state that makes a firing be
delivered once, the event history, and delivery by mail (the report's SMTP settings) and
webhook (JSON, or a Slack-compatible body). The rules and their pure evaluation are in
tracker.market.alerts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.errors import InvalidInput, TrackerError
from tracker.freshness import source_states, stale_after_hours
from tracker.market.alerts import (
    AlertRule,
    AlertSettings,
    Evaluation,
    Facts,
    alert_settings,
    evaluate,
    transition,
)

if TYPE_CHECKING:
    import httpx

    from tracker.config import Config
    from tracker.db import Database

log = logging.getLogger(__name__)

ALERTS_LOCK = "alerts"


# --------------------------------------------------------------------------------------------
# Facts from the store


def gather_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    from tracker.market.fx import rate_table, rows_in_currency
    from tracker.store import price_rows

    day = now.date()
    if rule.condition == "source_stale":
        return _source_facts(db, config, rule, now)
    if rule.condition == "workload":
        return _workload_facts(db, config, rule, now)
    if rule.condition == "budget":
        return _budget_facts(db, config, rule, now)
    gpu = rule.gpu
    assert gpu is not None  # parse_rule requires a gpu for every other condition
    if rule.condition == "index_move_pct" or rule.measure == "index":
        from tracker.market.index import price_index

        stale = stale_after_hours(config)
        start = day - timedelta(days=7)
        result = price_index(db, [gpu], since=start, until=day, currency=rule.currency,
                             categories=[rule.category], max_age_hours=stale,
                             providers=[rule.provider] if rule.provider else None,
                             regions=[rule.region] if rule.region else None)
        by_day = {p.date: p for p in result.points}
        current, before = by_day.get(day), by_day.get(start)
        if rule.condition != "index_move_pct":
            return Facts(value=current.median if current else None,
                         detail=f"{current.providers} providers" if current else "no index")
        if current is None or before is None or before.median == 0:
            return Facts(detail="index missing on one of the two days")
        move = float((current.median - before.median) / before.median * 100)
        return Facts(value=round(move, 2), previous=before.median, detail=str(current.median))
    rows = price_rows(db, as_of=now, gpu=rule.gpu, provider=rule.provider, region=rule.region,
                      category=rule.category, gpu_count=rule.gpu_count)
    # A price its source has not confirmed within the staleness window is not the market.
    stale_after = timedelta(hours=stale_after_hours(config))
    listed = len(rows)
    rows = [r for r in rows if r.last_seen >= now - stale_after]
    if listed and not rows:
        return Facts(detail=f"{listed} matching price(s), none seen within "
                            f"{stale_after / timedelta(hours=1):g} h")
    rates = rate_table(db) if any(r.currency != rule.currency for r in rows) else None
    rows = rows_in_currency(rows, rule.currency, rates, now)
    if not rows:
        return Facts(detail="nothing listed")
    best = rows[0]
    offer = {"provider": best.provider, "region": best.region,
             "instance_type": best.instance_type, "gpu_count": float(best.gpu_count),
             "category": best.category, "price_per_gpu_hour": best.price_per_gpu_hour,
             "currency": best.currency, "observed_at": best.observed_at}
    detail = f"{best.provider} {best.region} {best.instance_type}".replace("  ", " ").strip()
    price = best.price_per_gpu_hour.quantize(Decimal("0.0001"))
    if rule.condition != "new_low":
        return Facts(value=price, offer=offer, detail=detail)
    return Facts(value=price, previous=_prior_low(db, rule, now, best, rates), offer=offer,
                 detail=detail)


def _prior_low(db: Database, rule: AlertRule, now: datetime, best: Any,
               rates: Any) -> Decimal | None:
    """The lowest other matching price of the lookback window (the current price's own span
    left out, so the condition holds as long as the new low stands)."""
    from tracker.market.fx import rate_table
    from tracker.store import history

    assert rule.gpu is not None  # new_low rules have one (parse_rule)
    spans = history(db, [rule.gpu], provider=rule.provider, category=rule.category,
                    region=rule.region, since=now - timedelta(days=rule.lookback_days),
                    until=now)
    low: Decimal | None = None
    for span in spans:
        if (span.offer_id, span.valid_from) == (best.offer_id, best.observed_at):
            continue
        if rule.gpu_count is not None and float(span.gpu_count) != rule.gpu_count:
            continue
        price = span.price_per_gpu_hour
        if span.currency != rule.currency:
            rates = rates or rate_table(db)
            try:
                price = rates.convert(price, span.currency, rule.currency,
                                      span.valid_from.date()).amount
            except InvalidInput:
                continue
        if low is None or price < low:
            low = price
    return low.quantize(Decimal("0.0001")) if low is not None else None


def _workload_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    from tracker.market.fx import rate_table, rows_in_currency
    from tracker.market.index import job_costs
    from tracker.report_settings import report_settings
    from tracker.store import price_rows

    workloads = [w for w in report_settings(config)["workloads"] or []
                 if str(w.get("name", "")) == rule.workload]
    if not workloads:
        raise InvalidInput(f"[[alerts.rules]] {rule.name!r}: no [[report.workloads]] entry "
                           f"named {rule.workload!r}")
    rows = price_rows(db, as_of=now, category="on-demand")
    rates = rate_table(db) if any(r.currency != rule.currency for r in rows) else None
    rows = rows_in_currency(rows, rule.currency, rates, now)
    (point,) = job_costs(workloads, rows, now.date(), rule.currency,
                         config["economics"] or None)
    basis = "million tokens" if point.basis == "million_tokens" else "run"
    return Facts(value=point.cost, exists=point.cost is not None,
                 detail=basis if point.cost is None else
                 f"{basis}, {point.count}x {point.gpu} at {point.provider}")


def _budget_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    """Fires while the budget's forecast P50 is above its amount, or its spend to date above
    `alert_spent_share` of it (tracker.answers.budgets, the same status `budgets status`
    prints)."""
    from tracker.answers.budgets import budget_status, budgets_from_config

    found = [b for b in budgets_from_config(config) if b.name == rule.budget]
    if not found:
        raise InvalidInput(f"[[alerts.rules]] {rule.name!r}: no [[budgets]] entry named "
                           f"{rule.budget!r}")
    budget = found[0]
    doc = budget_status(db, budget, now)
    forecast_over = doc["forecast_p50"] > budget.amount
    spent_over = doc["spent"] > budget.amount * Decimal(repr(budget.alert_spent_share))
    cur = budget.currency
    detail = (f"budget {budget.name!r} ({budget.period} from "
              f"{doc['period_start'].date().isoformat()}): spent {doc['spent']} of "
              f"{budget.amount} {cur}, forecast {doc['forecast_p50']} (P90 "
              f"{doc['forecast_p90']}) {cur}: {doc['status']}")
    return Facts(value=doc["forecast_p50"], exists=forecast_over or spent_over, detail=detail,
                 previous=doc["spent"])


def _source_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    from tracker.refresh import configured_sources
    from tracker.store import source_statuses

    assert rule.source is not None  # parse_rule sets it for source_stale rules
    names = configured_sources(config) if rule.source == "*" else [rule.source]
    threshold = stale_after_hours(config)
    rows = source_states(source_statuses(db, names), now=now, stale_after_hours=threshold)
    bad = [r for r in rows if r["source"] in names and r["state"] != "fresh"]
    if not bad:
        return Facts(exists=False, detail=f"{', '.join(names)} fresh")
    state_words = {"never": "never refreshed", "stale": "stale", "failing": "failing"}
    text = "; ".join(f"{r['source']}: {state_words.get(r['state'], r['state'])}" + (
        f" ({r['age_hours']} h since the last success)" if r["age_hours"] is not None else "")
        for r in bad)
    return Facts(exists=True, detail=text)


# --------------------------------------------------------------------------------------------
# State, events, delivery


@dataclass
class CheckResult:
    rule: str
    active: bool
    event: str | None
    message: str
    delivered: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "active": self.active, "event": self.event,
                "message": self.message, "delivered": self.delivered}


def payload(evaluation: Evaluation, event: str, at: datetime, *, test: bool = False) -> dict:
    """The webhook/mail body: the rule, what was found, when. Built only from the rule and
    the market facts, so no setting (SMTP password, webhook URL) can leak into it."""
    from tracker.serialization import iso_utc, to_jsonable

    return {"event": event, "test": test, "rule": evaluation.rule.public(),
            "active": evaluation.active, "message": evaluation.message,
            "value": to_jsonable(evaluation.value), "facts": to_jsonable(evaluation.facts),
            "at": iso_utc(at), "source": "gpu-tracker"}


def slack_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """Slack incoming-webhook body: `text` is required, mrkdwn allowed."""
    prefix = "[test] " if body.get("test") else ""
    icon = ":bell:" if body["event"] == "fired" else ":white_check_mark:"
    return {"text": f"{icon} {prefix}gpu-tracker alert *{body['rule']['name']}* "
                    f"{body['event']}: {body['message']}"}


def deliver(settings: AlertSettings, config: Config, body: dict[str, Any], *,
            transport: httpx.BaseTransport | None = None) -> tuple[list[str], list[str]]:
    """Send `body` to every configured channel: (delivered, failures as one-line strings)."""
    channels: list[tuple[str, Callable[[], None]]] = []
    if settings.mail_to:
        channels.append(("mail", lambda: _send_mail(settings, config, body)))
    if settings.webhook_url:
        channels.append(("webhook", lambda: _post_webhook(settings, body, transport)))
    done: list[str] = []
    failed: list[str] = []
    for name, send in channels:
        try:
            send()
            done.append(name)
        except TrackerError as exc:
            failed.append(f"{name}: {exc}")
    return done, failed


def _send_mail(settings: AlertSettings, config: Config, body: Mapping[str, Any]) -> None:
    from email.message import EmailMessage
    from email.utils import format_datetime, make_msgid

    from tracker.report_settings import smtp_settings
    from tracker.smtp import send_message

    smtp = smtp_settings(config)
    sender = str(smtp.get("sender") or "gpu-tracker@localhost")
    message = EmailMessage()
    prefix = "[test] " if body.get("test") else ""
    message["Subject"] = " ".join(
        f"{prefix}gpu-tracker alert {body['event']}: {body['rule']['name']}".split())
    message["From"] = sender
    message["To"] = ", ".join(settings.mail_to)
    message["Date"] = format_datetime(datetime.fromisoformat(body["at"].replace("Z", "+00:00")))
    message["Message-ID"] = make_msgid("gpu-alert", domain=sender.rpartition("@")[2] or "local")
    lines = [body["message"], "", f"rule: {body['rule']['description']}",
             f"event: {body['event']} at {body['at']}"]
    message.set_content("\n".join(lines) + "\n")
    message.add_attachment(json.dumps(body, indent=2, sort_keys=True).encode(),
                           maintype="application", subtype="json", filename="alert.json")
    send_message(message, smtp, sender, list(settings.mail_to))


def _post_webhook(settings: AlertSettings, body: dict[str, Any],
                  transport: httpx.BaseTransport | None) -> None:
    import httpx

    data = slack_body(body) if settings.webhook_format == "slack" else body
    redact = _Redact(settings.webhook_url)
    httpx_log = logging.getLogger("httpx")
    httpx_log.addFilter(redact)  # httpx logs each request's full URL at INFO
    try:
        with httpx.Client(timeout=settings.webhook_timeout, transport=transport) as client:
            response = client.post(settings.webhook_url, json=data)
    except httpx.HTTPError as exc:
        # The URL is a secret: name the host only.
        host = httpx.URL(settings.webhook_url).host
        raise TrackerError(f"POST to {host} failed: {type(exc).__name__}") from None
    finally:
        httpx_log.removeFilter(redact)
    if response.status_code >= 300:
        raise TrackerError(f"POST to {response.request.url.host} returned "
                           f"HTTP {response.status_code}")


class _Redact(logging.Filter):
    """Replace the webhook URL (a secret) in log records with its host."""

    def __init__(self, url: str) -> None:
        super().__init__()
        import httpx

        self.url = url
        self.shown = f"{httpx.URL(url).scheme}://{httpx.URL(url).host}/***"

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.url in message:
            record.msg = message.replace(self.url, self.shown)
            record.args = ()
        return True


def check_alerts(db: Database, config: Config, now: datetime, *,
                 transport: httpx.BaseTransport | None = None,
                 settings: AlertSettings | None = None) -> list[CheckResult]:
    """Evaluate every rule, record transitions, deliver each firing once.

    A firing none of the configured channels accepted is not recorded as active, so the next
    check tries again; a rule whose facts cannot be read is reported and left as it was.
    """
    from tracker.locks import hold_locks

    settings = settings or alert_settings(config)
    if not settings.rules or not settings.enabled:
        return []
    with hold_locks(db, [ALERTS_LOCK], wait=60) as got:
        if not got.held:
            raise TrackerError("another alerts check is running")
        states = load_states(db)
        results = []
        for rule in settings.rules:
            try:
                evaluation = evaluate(rule, gather_facts(db, config, rule, now))
            except (InvalidInput, TrackerError) as exc:
                results.append(CheckResult(rule.name, states.get(rule.name, False), "error",
                                           f"{rule.name}: {exc}", []))
                continue
            was = states.get(rule.name, False)
            event = transition(was, evaluation.active)
            delivered: list[str] = []
            failures: list[str] = []
            active = evaluation.active
            if event == "fired":
                body = payload(evaluation, event, now)
                delivered, failures = deliver(settings, config, body, transport=transport)
                if failures and not delivered:
                    active = False  # try again at the next check
                    event = "failed"
                record_event(db, rule.name, event, now, evaluation.message, body,
                             delivered + failures)
            elif event == "cleared":
                record_event(db, rule.name, event, now, evaluation.message,
                             payload(evaluation, event, now), [])
            save_state(db, rule.name, active, now, evaluation.message,
                       since_changed=event in ("fired", "cleared"))
            for failure in failures:
                log.warning("alert %s: delivery failed: %s", rule.name, failure)
            results.append(CheckResult(rule.name, active, event, evaluation.message,
                                       delivered + failures))
    return results


def try_rule(db: Database, config: Config, name: str, now: datetime, *, send: bool = False,
              transport: httpx.BaseTransport | None = None) -> dict[str, Any]:
    """Evaluate one rule now without touching its state; with `send`, deliver a [test]."""
    settings = alert_settings(config)
    rule = settings.rule(name)
    evaluation = evaluate(rule, gather_facts(db, config, rule, now))
    result = {"rule": rule.name, "active": evaluation.active, "message": evaluation.message,
              "description": rule.describe(), "delivered": []}
    if send:
        if not settings.channels:
            raise InvalidInput("no alert channel configured: set [alerts.mail] to or "
                               "[alerts.webhook] url")
        done, failed = deliver(settings, config,
                               payload(evaluation, "fired", now, test=True),
                               transport=transport)
        result["delivered"] = done + failed
        if failed and not done:
            raise TrackerError("; ".join(failed))
    return result


def load_states(db: Database) -> dict[str, bool]:
    from sqlalchemy import select

    from tracker.models import AlertState

    t = AlertState.__table__
    with db.engine.connect() as conn:
        return {r.rule: bool(r.active) for r in conn.execute(select(t.c.rule, t.c.active))}


def save_state(db: Database, rule: str, active: bool, now: datetime, detail: str, *,
               since_changed: bool) -> None:
    from sqlalchemy import select

    from tracker.models import AlertState

    t = AlertState.__table__
    with db.write() as conn:
        exists = conn.execute(select(t.c.rule).where(t.c.rule == rule)).first()
        values: dict[str, Any] = {"active": active, "checked_at": now, "detail": detail}
        if since_changed or not exists:
            values["since"] = now
        if exists:
            conn.execute(t.update().where(t.c.rule == rule).values(**values))
        else:
            conn.execute(t.insert().values(rule=rule, **values))


def record_event(db: Database, rule: str, kind: str, at: datetime, message: str,
                 body: Mapping[str, Any], delivered: Sequence[str]) -> None:
    from tracker.models import AlertEvent

    with db.write() as conn:
        conn.execute(AlertEvent.__table__.insert().values(
            rule=rule, kind=kind, at=at, message=message,
            payload=json.dumps(body, sort_keys=True), delivered="; ".join(delivered)))


def alert_history(db: Database, rule: str | None = None, limit: int = 50) -> list[dict]:
    from sqlalchemy import select

    from tracker.models import AlertEvent

    t = AlertEvent.__table__
    query = select(t).order_by(t.c.at.desc(), t.c.id.desc()).limit(limit)
    if rule:
        query = query.where(t.c.rule == rule)
    with db.engine.connect() as conn:
        return [{"at": r.at, "rule": r.rule, "event": r.kind, "message": r.message,
                 "delivered": r.delivered} for r in conn.execute(query)]


def rule_rows(db: Database, settings: AlertSettings) -> list[dict[str, Any]]:
    """`alerts list`: each rule in words with its current state."""
    from sqlalchemy import select

    from tracker.models import AlertState

    t = AlertState.__table__
    with db.engine.connect() as conn:
        states = {r.rule: r for r in conn.execute(select(t))}
    rows = []
    for rule in settings.rules:
        state = states.get(rule.name)
        rows.append({"rule": rule.name, "condition": rule.condition,
                     "description": rule.describe(),
                     "active": bool(state.active) if state else False,
                     "since": state.since if state else None,
                     "checked_at": state.checked_at if state else None,
                     "channels": ", ".join(settings.channels) or "none"})
    return rows


__all__ = ["CheckResult", "alert_history", "check_alerts", "deliver", "gather_facts", "payload",
           "rule_rows", "slack_body", "try_rule"]
