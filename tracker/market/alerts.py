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
naming it); `evaluate` and `transition` are pure; tracker.market.alert_checks reads the store,
records state and events, and delivers (`check_alerts`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput, TrackerError

if TYPE_CHECKING:

    from tracker.config.schema import Config

log = logging.getLogger(__name__)

CONDITIONS = ("below", "above", "index_move_pct", "new_low", "workload", "source_stale",
              "budget")
RULE_KEYS = frozenset({"name", "gpu", "provider", "region", "category", "gpu_count", "currency",
                       "measure", "lookback_days", "cost_below", *CONDITIONS})
RULE_CATEGORIES = ("on-demand", "spot", "bid", "reserved-1y", "reserved-3y")
WEBHOOK_URL_ENV = "GPU_TRACKER_ALERTS_WEBHOOK_URL"


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
    budget: str | None = None  # budget: the `[[budgets]]` entry's name

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
        if self.condition == "budget":
            return (f"budget {self.budget!r} forecast above its amount, or its spend to date "
                    "above its alert share")
        return f"source {self.source if self.source != '*' else '(any)'} stale or failing"

    def public(self) -> dict[str, Any]:
        """The rule's fields for payloads and JSON (no delivery settings, nothing secret)."""
        from tracker.core.serialization import to_jsonable

        return {k: to_jsonable(v) for k, v in {
            "name": self.name, "condition": self.condition, "gpu": self.gpu,
            "provider": self.provider, "region": self.region, "category": self.category,
            "gpu_count": self.gpu_count, "currency": self.currency, "level": self.level,
            "measure": self.measure, "move_pct": self.move_pct, "workload": self.workload,
            "source": self.source, "budget": self.budget,
            "description": self.describe()}.items() if v is not None}


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
    from tracker.core.gpus import resolve_gpu
    from tracker.core.money import check_currency, to_decimal

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
        elif condition not in ("workload", "source_stale", "budget"):
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
        elif condition == "budget":
            if not isinstance(raw[condition], str) or not raw[condition].strip():
                raise InvalidInput("budget must name a [[budgets]] entry")
            fields_["budget"] = raw[condition].strip()
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
    section = config.alerts
    currency = section.currency or config.report.currency  # both checked by the schema
    rules = [parse_rule(raw, i, currency) for i, raw in enumerate(section.rules)]
    workload_rules = [r for r in rules if r.condition == "workload"]
    if workload_rules:
        workloads = [str(w.get("name", "")) for w in config.report.workloads]
        for rule in workload_rules:
            if rule.workload not in workloads:
                raise InvalidInput(f"[[alerts.rules]] {rule.name!r}: no [[report.workloads]] "
                                   f"entry named {rule.workload!r} (configured: "
                                   f"{'; '.join(workloads) or 'none'})")
    names = [r.name for r in rules]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise InvalidInput(f"[[alerts.rules]] {duplicate!r}: the name is used twice")
    from tracker.core.smtp import check_addresses

    to = check_addresses(section.mail.to)  # checked by the schema; deduplicated, sorted
    url = str(environ.get(WEBHOOK_URL_ENV) or section.webhook.url)
    from tracker.config.checks import http_url

    try:
        http_url(url)
    except ValueError as exc:
        raise InvalidInput(f"[alerts.webhook] url: {exc}") from None
    if url:
        from tracker.core.secrets import learn_url

        learn_url(url)  # the URL carries a token: masked in every output from now on
        check_webhook_url(url)
    return AlertSettings(rules=tuple(rules), mail_to=tuple(to), webhook_url=url,
                         webhook_format=section.webhook.format,
                         webhook_timeout=section.webhook.timeout, enabled=section.enabled)


# --------------------------------------------------------------------------------------------
# The webhook address policy
#
# The webhook URL is configured by the operator, but what it resolves to is checked at every
# delivery: https:// to any public or private address (an internal chat server is a normal
# target); plain http:// only to a loopback address (a local relay), since the URL's token
# would cross the network in clear; never a link-local address (169.254.0.0/16, fe80::/10:
# where cloud metadata services answer), a multicast, unspecified or reserved one. Redirects
# are never followed: a 3xx is a failed delivery.


def _host_addresses(host: str) -> list[Any]:
    import ipaddress
    import socket

    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return []  # unresolvable: a failed delivery (check_webhook_address)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def check_webhook_url(url: str) -> None:
    """The static part of the policy (scheme, a host), checked with the configuration."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port
    except ValueError as exc:
        raise InvalidInput(f"[alerts.webhook] url is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidInput("[alerts.webhook] url must be an http(s) URL with a host")


def check_webhook_address(url: str) -> list[str]:
    """The whole policy for one delivery (the host resolved now): the addresses to connect
    to, in the order the host resolves to them, every one of them allowed; TrackerError
    naming the host and the rule it breaks. The delivery connects to these addresses rather
    than resolving the name again, so a name that answers an allowed address to this check
    and a refused one (a metadata service's) to the connection cannot reach the second (DNS
    rebinding)."""
    from urllib.parse import urlsplit

    check_webhook_url(url)
    parts = urlsplit(url)
    host = parts.hostname or ""
    addresses = _host_addresses(host)
    if not addresses:
        raise TrackerError(f"webhook host {host} does not resolve")
    for address in addresses:
        if address.is_link_local or address.is_multicast or address.is_unspecified or \
                (address.is_reserved and not address.is_loopback):
            raise TrackerError(f"webhook host {host} resolves to {address}, a link-local, "
                               "multicast or reserved address: refused (README, Alerts)")
    if parts.scheme == "http" and not all(a.is_loopback for a in addresses):
        raise TrackerError(f"webhook {host}: plain http:// only to a loopback address; use "
                           "https:// (the URL carries a token)")
    return list(dict.fromkeys(map(str, addresses)))


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
    """Whether the rule's condition holds on these facts, and the message saying so; the
    evaluation carries the facts (offer, previous figure, detail) for the payload."""
    evaluation = _evaluate(rule, facts)
    evaluation.facts = {k: v for k, v in (("offer", facts.offer), ("previous", facts.previous),
                                          ("detail", facts.detail)) if v not in (None, "")}
    return evaluation


def _evaluate(rule: AlertRule, facts: Facts) -> Evaluation:
    value = facts.value
    cur = rule.currency
    if rule.condition in ("below", "above"):
        if value is None:
            return Evaluation(rule, False, f"{rule.name}: no matching price ({facts.detail})")
        assert rule.level is not None  # parse_rule sets the level of below/above rules
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


__all__ = ["AlertRule", "AlertSettings", "Evaluation", "Facts", "alert_settings", "evaluate",
           "parse_rule", "transition"]
