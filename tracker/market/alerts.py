"""Alerts on the GPU market: rules from the config, evaluated after every refresh, each firing
delivered once (mail and/or webhook) until its condition clears and returns.

Rules are `[[alerts.rules]]` tables with a `name`, the offers they watch (`gpu`, optional
`provider`, `region`, `category`, `gpu_count`) and exactly one condition:

- `below = 2.0` / `above = 9.0`: the cheapest matching price per GPU-hour (with
  `measure = "index"`: the day's index median) below / above the level;
- `index_move_pct = 10`: the index median moved at least this many percent week over week;
- `new_low = true`: the cheapest matching price is below every other matching price of the last
  `lookback_days` (default 90);
- `workload = "<name of a [[report.workloads]] entry>"`, with `cost_below = 150`: its cheapest
  cost per run (serve: per million tokens) is below the level; without `cost_below`: a fitting
  offer exists at all;
- `source_stale = "aws"` (or `true` for every `[refresh]` source): the source is stale or its
  latest run failed.

Levels are in the rule's `currency` (default `[alerts] currency`, else `[report] currency`);
prices in other currencies are converted at the ECB rate of the evaluation day.

`alert_settings` is the one place that reads and checks `[alerts]` (a bad rule gets one line
naming it); `evaluate` and `transition` are pure; `check_alerts` reads the store, records state
and events, and delivers.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.errors import InvalidInput, TrackerError

if TYPE_CHECKING:
    import httpx

    from tracker.config import Config
    from tracker.db import Database

log = logging.getLogger(__name__)

CONDITIONS = ("below", "above", "index_move_pct", "new_low", "workload", "source_stale")
RULE_KEYS = frozenset({"name", "gpu", "provider", "region", "category", "gpu_count", "currency",
                       "measure", "lookback_days", "cost_below", *CONDITIONS})
RULE_CATEGORIES = ("on-demand", "spot", "bid", "reserved-1y", "reserved-3y")
WEBHOOK_FORMATS = ("json", "slack")
WEBHOOK_URL_ENV = "GPU_TRACKER_ALERTS_WEBHOOK_URL"
ALERTS_LOCK = "alerts"


@dataclass(frozen=True)
class AlertRule:
    name: str
    condition: str  # one of CONDITIONS
    gpu: str | None = None
    provider: str | None = None
    region: str | None = None
    category: str = "on-demand"
    gpu_count: float | None = None
    currency: str = "USD"
    level: Decimal | None = None  # below / above / cost_below
    measure: str = "price"  # below / above: "price" or "index"
    move_pct: float | None = None
    lookback_days: int = 90
    workload: str | None = None
    source: str | None = None  # source_stale: a source name, or "*" for every refresh source

    def describe(self) -> str:
        """The rule in words (for `alerts list` and the messages)."""
        what = " ".join(x for x in (
            f"{self.gpu_count:g}x" if self.gpu_count else "", self.gpu or "",
            self.category if self.gpu else "", f"at {self.provider}" if self.provider else "",
            f"in {self.region}" if self.region else "") if x)
        if self.condition in ("below", "above"):
            measure = "index median" if self.measure == "index" else "cheapest price"
            return f"{measure} of {what} {self.condition} {self.level} {self.currency}/GPU-h"
        if self.condition == "index_move_pct":
            return f"index of {what} moves >= {self.move_pct:g}% week over week"
        if self.condition == "new_low":
            return f"new {self.lookback_days}-day low of {what}"
        if self.condition == "workload":
            if self.level is None:
                return f"an offer fits workload {self.workload!r}"
            return f"workload {self.workload!r} costs below {self.level} {self.currency}"
        return f"source {self.source if self.source != '*' else '(any)'} stale or failing"

    def public(self) -> dict[str, Any]:
        """The rule's fields for payloads and JSON (no delivery settings, nothing secret)."""
        from tracker.output import to_jsonable

        return {k: to_jsonable(v) for k, v in {
            "name": self.name, "condition": self.condition, "gpu": self.gpu,
            "provider": self.provider, "region": self.region, "category": self.category,
            "gpu_count": self.gpu_count, "currency": self.currency, "level": self.level,
            "measure": self.measure, "move_pct": self.move_pct, "workload": self.workload,
            "source": self.source, "description": self.describe()}.items() if v is not None}


@dataclass(frozen=True)
class AlertSettings:
    rules: tuple[AlertRule, ...] = ()
    mail_to: tuple[str, ...] = ()
    webhook_url: str = ""  # a secret (Slack webhook URLs carry a token): never printed
    webhook_format: str = "json"
    webhook_timeout: float = 10.0
    enabled: bool = True

    @property
    def channels(self) -> list[str]:
        return (["mail"] if self.mail_to else []) + (["webhook"] if self.webhook_url else [])

    def rule(self, name: str) -> AlertRule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        known = ", ".join(r.name for r in self.rules) or "none configured"
        raise InvalidInput(f"no alert rule named {name!r} (rules: {known})")


def _rule_error(index: int, name: str, message: str) -> InvalidInput:
    label = f"{name!r}" if name else f"#{index + 1}"
    return InvalidInput(f"[[alerts.rules]] {label}: {message}")


def parse_rule(raw: Mapping[str, Any], index: int, default_currency: str) -> AlertRule:
    """One `[[alerts.rules]]` table, checked; InvalidInput names the rule."""
    from tracker.gpus import resolve_gpu
    from tracker.money import check_currency, to_decimal

    if not isinstance(raw, Mapping):
        raise _rule_error(index, "", "must be a table")
    name = str(raw.get("name") or "").strip()
    if not name:
        raise _rule_error(index, "", "needs a name")
    unknown = sorted(set(raw) - RULE_KEYS)
    if unknown:
        raise _rule_error(index, name, f"unknown key(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(RULE_KEYS))})")
    given = [c for c in CONDITIONS if c in raw and raw[c] is not False]
    if len(given) != 1:
        raise _rule_error(index, name, f"needs exactly one condition of {', '.join(CONDITIONS)}"
                          f" (got {', '.join(given) or 'none'})")
    condition = given[0]
    try:
        currency = check_currency(str(raw.get("currency") or default_currency))
        gpu = None
        if raw.get("gpu"):
            gpu = resolve_gpu(str(raw["gpu"])).gpu.id
        elif condition not in ("workload", "source_stale"):
            raise InvalidInput("needs a gpu")
        category = str(raw.get("category") or "on-demand")
        if category not in RULE_CATEGORIES:
            raise InvalidInput(f"category must be one of {', '.join(RULE_CATEGORIES)}")
        count = raw.get("gpu_count")
        if count is not None and (isinstance(count, bool) or float(count) <= 0):
            raise InvalidInput("gpu_count must be a positive number")
        fields_: dict[str, Any] = {}
        if condition in ("below", "above"):
            fields_["level"] = _positive(to_decimal(raw[condition], what=condition), condition)
            measure = str(raw.get("measure") or "price")
            if measure not in ("price", "index"):
                raise InvalidInput("measure must be price or index")
            fields_["measure"] = measure
        elif condition == "index_move_pct":
            move = raw[condition]
            if isinstance(move, bool) or float(move) <= 0:
                raise InvalidInput("index_move_pct must be a positive percentage")
            fields_["move_pct"] = float(move)
        elif condition == "new_low":
            if raw[condition] is not True:
                raise InvalidInput("new_low must be true")
        elif condition == "workload":
            fields_["workload"] = str(raw[condition])
            if raw.get("cost_below") is not None:
                fields_["level"] = _positive(to_decimal(raw["cost_below"], what="cost_below"),
                                             "cost_below")
        elif condition == "source_stale":
            value = raw[condition]
            if value is True:
                fields_["source"] = "*"
            else:
                from scrapers import load_source

                load_source(str(value))
                fields_["source"] = str(value)
        if "cost_below" in raw and condition != "workload":
            raise InvalidInput("cost_below goes with workload")
        lookback = int(raw.get("lookback_days") or 90)
        if lookback < 1:
            raise InvalidInput("lookback_days must be at least 1")
    except (InvalidInput, TrackerError, TypeError, ValueError) as exc:
        raise _rule_error(index, name, str(exc)) from None
    return AlertRule(name=name, condition=condition, gpu=gpu,
                     provider=str(raw["provider"]) if raw.get("provider") else None,
                     region=str(raw["region"]) if raw.get("region") else None,
                     category=category, gpu_count=float(count) if count is not None else None,
                     currency=currency, lookback_days=lookback, **fields_)


def _positive(value: Decimal, what: str) -> Decimal:
    if value <= 0:
        raise InvalidInput(f"{what} must be positive")
    return value


def alert_settings(config: Config, environ: Mapping[str, str] | None = None) -> AlertSettings:
    """`[alerts]`, `[alerts.mail]`, `[alerts.webhook]` and `[[alerts.rules]]`, checked.

    The webhook URL may come from `GPU_TRACKER_ALERTS_WEBHOOK_URL` (it usually holds a token).
    """
    environ = os.environ if environ is None else environ
    section = dict(config["alerts"] or {})
    known = {"enabled", "currency", "mail", "webhook", "rules"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise InvalidInput(f"[alerts]: unknown key(s) {', '.join(unknown)} "
                           f"(known: {', '.join(sorted(known))})")
    from tracker.money import check_currency

    report_currency = (config["report"] or {}).get("currency") or "USD"
    try:
        currency = check_currency(str(section.get("currency") or report_currency))
    except InvalidInput as exc:
        raise InvalidInput(f"[alerts] currency: {exc}") from None
    raw_rules = section.get("rules") or []
    if not isinstance(raw_rules, list):
        raise InvalidInput("[alerts] rules must be [[alerts.rules]] tables")
    rules = [parse_rule(raw, i, currency) for i, raw in enumerate(raw_rules)]
    workload_rules = [r for r in rules if r.condition == "workload"]
    if workload_rules:
        from reports.settings import report_settings

        known = [str(w.get("name", "")) for w in report_settings(config)["workloads"] or []]
        for rule in workload_rules:
            if rule.workload not in known:
                raise InvalidInput(f"[[alerts.rules]] {rule.name!r}: no [[report.workloads]] "
                                   f"entry named {rule.workload!r} (configured: "
                                   f"{'; '.join(known) or 'none'})")
    names = [r.name for r in rules]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InvalidInput(f"[[alerts.rules]] {duplicate!r}: the name is used twice")
    mail = dict(section.get("mail") or {})
    to = mail.get("to") or []
    if isinstance(to, str):
        to = [to]
    if to:
        from reports.mail import check_addresses

        try:
            to = check_addresses(to)
        except InvalidInput as exc:
            raise InvalidInput(f"[alerts.mail] to: {exc}") from None
    webhook = dict(section.get("webhook") or {})
    url = str(environ.get(WEBHOOK_URL_ENV) or webhook.get("url") or "")
    if url and not url.startswith(("http://", "https://")):
        raise InvalidInput("[alerts.webhook] url must be an http(s) URL")
    fmt = str(webhook.get("format") or "json")
    if fmt not in WEBHOOK_FORMATS:
        raise InvalidInput(f"[alerts.webhook] format must be json or slack, got {fmt!r}")
    return AlertSettings(rules=tuple(rules), mail_to=tuple(to), webhook_url=url,
                         webhook_format=fmt,
                         webhook_timeout=float(webhook.get("timeout") or 10.0),
                         enabled=bool(section.get("enabled", True)))


# --------------------------------------------------------------------------------------------
# Evaluation (pure)


@dataclass
class Facts:
    """What the store says for one rule at one instant (gathered by `gather_facts`)."""

    value: Decimal | float | None = None  # price, index median, move %, cost
    previous: Decimal | None = None  # index a week before; the prior low
    offer: dict[str, Any] | None = None
    detail: str = ""
    exists: bool = False  # workload: a fitting offer exists; source_stale: the condition


@dataclass
class Evaluation:
    rule: AlertRule
    active: bool
    message: str
    value: Any = None
    facts: dict[str, Any] = field(default_factory=dict)


def evaluate(rule: AlertRule, facts: Facts) -> Evaluation:
    """Whether the rule's condition holds on these facts, and the message saying so."""
    value = facts.value
    cur = rule.currency
    if rule.condition in ("below", "above"):
        if value is None:
            return Evaluation(rule, False, f"{rule.name}: no matching price ({facts.detail})")
        active = value < rule.level if rule.condition == "below" else value > rule.level
        where = f" ({facts.detail})" if facts.detail else ""
        return Evaluation(rule, active, f"{rule.name}: {_label(rule)} at {value} {cur}/GPU-h"
                          f"{where} is {'' if active else 'not '}{rule.condition} "
                          f"{rule.level} {cur}", value)
    if rule.condition == "index_move_pct":
        if value is None:
            return Evaluation(rule, False, f"{rule.name}: no index a week apart ({facts.detail})")
        active = abs(float(value)) >= float(rule.move_pct or 0)
        return Evaluation(rule, active, f"{rule.name}: index of {_label(rule)} moved "
                          f"{float(value):+.2f}% week over week (from {facts.previous} to "
                          f"{facts.detail} {cur})", value)
    if rule.condition == "new_low":
        if value is None:
            return Evaluation(rule, False, f"{rule.name}: no matching price")
        active = facts.previous is None or value < facts.previous
        prior = (f"below the {rule.lookback_days}-day low {facts.previous} {cur}"
                 if facts.previous is not None else "the first price seen")
        return Evaluation(rule, active, f"{rule.name}: {_label(rule)} at {value} {cur}/GPU-h "
                          f"({facts.detail}) is {prior if active else 'not a new low'}", value)
    if rule.condition == "workload":
        if value is None:
            return Evaluation(rule, False, f"{rule.name}: no priced offer fits workload "
                              f"{rule.workload!r}")
        active = facts.exists if rule.level is None else value < rule.level
        what = "run" if "run" in facts.detail or not facts.detail else facts.detail
        return Evaluation(rule, active, f"{rule.name}: workload {rule.workload!r} costs {value} "
                          f"{cur} per {what}" + (f" (level {rule.level} {cur})"
                                                 if rule.level is not None else ""), value)
    return Evaluation(rule, facts.exists, f"{rule.name}: {facts.detail}")


def _label(rule: AlertRule) -> str:
    parts = [f"{rule.gpu_count:g}x" if rule.gpu_count else "", rule.gpu or "", rule.category]
    if rule.provider:
        parts.append(f"at {rule.provider}")
    if rule.region:
        parts.append(f"in {rule.region}")
    return " ".join(p for p in parts if p)


def transition(was_active: bool, is_active: bool) -> str | None:
    """`fired` when the condition starts to hold, `cleared` when it stops; else None."""
    if is_active and not was_active:
        return "fired"
    if was_active and not is_active:
        return "cleared"
    return None


# --------------------------------------------------------------------------------------------
# Facts from the store


def gather_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    from tracker.market.fx import rate_table
    from tracker.market.index import converted_rows
    from tracker.store import price_rows

    day = now.date()
    if rule.condition == "source_stale":
        return _source_facts(db, config, rule, now)
    if rule.condition == "workload":
        return _workload_facts(db, config, rule, now)
    if rule.condition == "index_move_pct" or rule.measure == "index":
        from tracker.market.index import price_index

        stale = float(config.get("refresh", "stale_after_hours") or 48)
        start = day - timedelta(days=7)
        result = price_index(db, [rule.gpu], since=start, until=day, currency=rule.currency,
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
    stale_after = timedelta(hours=float(config.get("refresh", "stale_after_hours") or 48))
    listed = len(rows)
    rows = [r for r in rows if r.last_seen >= now - stale_after]
    if listed and not rows:
        return Facts(detail=f"{listed} matching price(s), none seen within "
                            f"{stale_after / timedelta(hours=1):g} h")
    rates = rate_table(db) if any(r.currency != rule.currency for r in rows) else None
    rows = converted_rows(rows, rule.currency, rates, day)
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
    from reports.settings import report_settings
    from tracker.market.fx import rate_table
    from tracker.market.index import converted_rows, job_costs
    from tracker.store import price_rows

    workloads = [w for w in report_settings(config)["workloads"] or []
                 if str(w.get("name", "")) == rule.workload]
    if not workloads:
        raise InvalidInput(f"[[alerts.rules]] {rule.name!r}: no [[report.workloads]] entry "
                           f"named {rule.workload!r}")
    rows = price_rows(db, as_of=now, category="on-demand")
    rates = rate_table(db) if any(r.currency != rule.currency for r in rows) else None
    rows = converted_rows(rows, rule.currency, rates, now.date())
    (point,) = job_costs(workloads, rows, now.date(), rule.currency,
                         config["economics"] or None)
    basis = "million tokens" if point.basis == "million_tokens" else "run"
    return Facts(value=point.cost, exists=point.cost is not None,
                 detail=basis if point.cost is None else
                 f"{basis}, {point.count}x {point.gpu} at {point.provider}")


def _source_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    from tracker.commands.schedule import freshness
    from tracker.refresh import configured_sources
    from tracker.store import source_statuses

    names = configured_sources(config) if rule.source == "*" else [rule.source]
    threshold = float(config.get("refresh", "stale_after_hours") or 48)
    rows = freshness(source_statuses(db, names), now=now, stale_after_hours=threshold)
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
    from tracker.output import iso_utc, to_jsonable

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


Sender = Callable[[str, dict[str, Any]], None]


def deliver(settings: AlertSettings, config: Config, body: dict[str, Any], *,
            transport: httpx.BaseTransport | None = None) -> tuple[list[str], list[str]]:
    """Send `body` to every configured channel: (delivered, failures as one-line strings)."""
    done: list[str] = []
    failed: list[str] = []
    if settings.mail_to:
        try:
            _send_mail(settings, config, body)
            done.append("mail")
        except TrackerError as exc:
            failed.append(f"mail: {exc}")
    if settings.webhook_url:
        try:
            _post_webhook(settings, body, transport)
            done.append("webhook")
        except TrackerError as exc:
            failed.append(f"webhook: {exc}")
    return done, failed


def _send_mail(settings: AlertSettings, config: Config, body: Mapping[str, Any]) -> None:
    from email.message import EmailMessage
    from email.utils import format_datetime, make_msgid

    from reports.mail import send_message
    from reports.settings import smtp_settings

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


__all__ = ["AlertRule", "AlertSettings", "CheckResult", "Evaluation", "Facts", "alert_history",
           "alert_settings", "check_alerts", "deliver", "evaluate", "gather_facts",
           "parse_rule", "payload", "rule_rows", "slack_body", "transition", "try_rule"]
