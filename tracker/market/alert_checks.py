"""Alerts against the store: the facts each rule needs, the state that makes a firing be
delivered once with retries, and the event history. The rules and their pure evaluation are
in tracker.market.alerts; the bodies and their sending by mail and webhook in
tracker.market.alert_delivery.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from tracker.answers.freshness import source_states, stale_after_hours
from tracker.core.errors import InvalidInput, TrackerError
from tracker.market.alert_delivery import (
    deliver,
    firing_id,
    payload,
    slack_body,
    slack_escape,
)
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
    from scrapers.http import Transport
    from tracker.config.schema import Config
    from tracker.store.db import Database

log = logging.getLogger(__name__)

ALERTS_LOCK = "alerts"


# --------------------------------------------------------------------------------------------
# Facts from the store


def gather_facts(db: Database, config: Config, rule: AlertRule, now: datetime,
                 shared: dict[tuple, Any] | None = None) -> Facts:
    """The facts one rule needs. `shared` keeps what several rules of one check ask alike
    (a workload's cheapest cost: sized and priced once per check, not once per rule)."""
    from tracker.store.rates import priced_in

    day = now.date()
    if rule.condition == "source_stale":
        return _source_facts(db, config, rule, now, shared)
    if rule.condition == "workload":
        return _workload_facts(db, config, rule, now, {} if shared is None else shared)
    if rule.condition == "budget":
        return _budget_facts(db, config, rule, now)
    gpu = rule.gpu
    assert gpu is not None  # parse_rule requires a gpu for every other condition
    if rule.condition == "index_move_pct" or rule.measure == "index":
        stale = stale_after_hours(config)
        start = day - timedelta(days=7)
        points = _index_points(db, rule, start, day, stale, shared)
        by_day = {p.date: p for p in points if p.gpu == gpu}
        current, before = by_day.get(day), by_day.get(start)
        if rule.condition != "index_move_pct":
            return Facts(value=current.median if current else None,
                         detail=f"{current.providers} providers" if current else "no index")
        if current is None or before is None or before.median == 0:
            return Facts(detail="index missing on one of the two days")
        move = float((current.median - before.median) / before.median * 100)
        return Facts(value=round(move, 2), previous=before.median, detail=str(current.median))
    # A price its source has not confirmed within the staleness window is not the market.
    stale_after = timedelta(hours=stale_after_hours(config))
    listed, rows = _rule_rows(db, rule, now, now - stale_after, shared)
    if listed and not rows:
        return Facts(detail=f"{listed} matching price(s), none seen within "
                            f"{stale_after / timedelta(hours=1):g} h")
    # Converted where a row needs it (price_rows' order is the converted rows' order).
    rows = priced_in(db, rows, rule.currency, now)
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
    return Facts(value=price, previous=_prior_low(db, rule, now, best, shared), offer=offer,
                 detail=detail)


# The rules of a check (check_alerts puts them in `shared`): the first rule of a kind reads
# what every rule of that kind needs, in one statement.
_RULES = ("rules",)


def _rule_rows(db: Database, rule: AlertRule, now: datetime, seen_since: datetime,
               shared: dict[tuple, Any] | None) -> tuple[int, list[Any]]:
    """(how many prices match the rule, the matching ones seen since `seen_since`): of
    `price_rows(db, as_of=now, <the rule's filters>)`, in its order. In a check (`shared`
    with its rules), one read for every price rule of the check, whose rows are only those
    that can be a rule's cheapest (tracker.store.queries.watched_prices); else every row."""
    from tracker.store.queries import PriceWatch, price_rows, watched_prices

    rules = shared.get(_RULES) if shared is not None else None
    if shared is None or not rules or rule not in rules:
        rows = price_rows(db, as_of=now, gpu=rule.gpu, provider=rule.provider,
                          region=rule.region, category=rule.category, gpu_count=rule.gpu_count)
        return len(rows), [r for r in rows if r.last_seen >= seen_since]
    watched = shared.get(("watched",))
    if watched is None:
        priced = [r for r in rules if r.gpu is not None and r.measure != "index"
                  and r.condition in ("below", "above", "new_low")]
        found = watched_prices(db, [PriceWatch(r.gpu, r.category, r.currency, r.provider,
                                               r.region, r.gpu_count) for r in priced
                                    if r.gpu is not None],
                               as_of=now, seen_since=seen_since)
        watched = shared[("watched",)] = dict(zip(priced, found, strict=True))
    facts = watched[rule]
    return facts.listed, facts.rows


def _index_points(db: Database, rule: AlertRule, start: date, day: date, stale: float,
                  shared: dict[tuple, Any] | None) -> list[Any]:
    """The index points of [start, day] of the rule's offers: in a check (`shared` with its
    rules), one price_index for every index rule of the check with the same category,
    currency, provider and region, of all their GPUs (a class's index is its own spans')."""
    from tracker.market.index import price_index

    assert rule.gpu is not None
    rules = shared.get(_RULES) if shared is not None else None

    def key(r: AlertRule) -> tuple:
        return (r.category, r.currency, r.provider, r.region)

    if shared is None or not rules or rule not in rules:
        gpus = [rule.gpu]
    else:
        points = shared.get(("index", key(rule), start, day))
        if points is not None:
            return list(points)
        gpus = sorted({r.gpu for r in rules if r.gpu is not None and key(r) == key(rule) and (
            r.condition == "index_move_pct" or r.measure == "index")})
    result = price_index(db, gpus, since=start, until=day, currency=rule.currency,
                         categories=[rule.category], max_age_hours=stale,
                         providers=[rule.provider] if rule.provider else None,
                         regions=[rule.region] if rule.region else None)
    if shared is not None and rules and rule in rules:
        shared[("index", key(rule), start, day)] = result.points
    return list(result.points)


def _prior_low(db: Database, rule: AlertRule, now: datetime, best: Any,
               shared: dict[tuple, Any] | None = None) -> Decimal | None:
    """The lowest other matching price of the lookback window (the current price's own span
    left out, so the condition holds as long as the new low stands). In a check (`shared`
    with its rules), the spans of every new-low rule come from one read of their columns
    (`_shared_prior_low`)."""
    from tracker.store.queries import history
    from tracker.store.rates import rate_table

    assert rule.gpu is not None  # new_low rules have one (parse_rule)
    since = now - timedelta(days=rule.lookback_days)
    rules = shared.get(_RULES) if shared is not None else None
    if shared is not None and rules and rule in rules:
        return _shared_prior_low(db, rule, now, best, shared, rules)
    spans = history(db, [rule.gpu], provider=rule.provider, category=rule.category,
                    region=rule.region, since=since, until=now)
    rates = None
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




def _shared_prior_low(db: Database, rule: AlertRule, now: datetime, best: Any,
                      shared: dict[tuple, Any], rules: Sequence[AlertRule]) -> Decimal | None:
    """_prior_low's answer from the spans of every new-low rule of the check, read once
    (tracker.store.series.low_span_rows over the longest lookback): a span is in this rule's
    window when it began by `now` and had not ended by the window's start. Prices in the
    rule's currency are compared as floats first; only those within 1e-9 of the lowest are
    priced exactly (per_gpu), as history() prices them."""
    from tracker.store.queries import is_near_cheapest
    from tracker.store.rates import rate_table
    from tracker.store.series import low_span_rows, per_gpu

    every = shared.get(("new-low spans",))
    if every is None:
        lows = [r for r in rules if r.condition == "new_low" and r.gpu is not None]
        every = shared[("new-low spans",)] = low_span_rows(
            db, sorted({r.gpu for r in lows if r.gpu is not None}),
            categories=sorted({r.category for r in lows}),
            since=now - timedelta(days=max(r.lookback_days for r in lows)), until=now)
    since = now - timedelta(days=rule.lookback_days)
    excluded = (best.offer_id, best.observed_at)
    near: list[tuple[float, Any, float]] = []
    floor = float("inf")
    rates = None
    low: Decimal | None = None
    for (offer_id, gpu, category, provider, region, count, price, currency, first,
         valid_to) in every:
        if gpu != rule.gpu or category != rule.category or first > now or (
                valid_to is not None and valid_to <= since) or (
                rule.provider is not None and provider != rule.provider) or (
                rule.region is not None and region != rule.region) or (
                rule.gpu_count is not None and float(count) != rule.gpu_count) or (
                (offer_id, first) == excluded):
            continue
        if currency == rule.currency and count and count > 0:
            value = float(price) / count
            near.append((value, price, count))
            floor = min(floor, value)
            continue
        exact = per_gpu(Decimal(str(price)), count)
        if currency != rule.currency:
            rates = rates or rate_table(db)
            try:
                exact = rates.convert(exact, currency, rule.currency, first.date()).amount
            except InvalidInput:
                continue
        if low is None or exact < low:
            low = exact
    for value, price, count in near:
        if is_near_cheapest(value, floor):
            exact = per_gpu(Decimal(str(price)), count)
            if low is None or exact < low:
                low = exact
    return low.quantize(Decimal("0.0001")) if low is not None else None


def _workload_facts(db: Database, config: Config, rule: AlertRule, now: datetime,
                    shared: dict[tuple, Any]) -> Facts:
    if not _workloads(config, rule):
        raise InvalidInput(f"[[alerts.rules]] {rule.name!r}: no [[report.workloads]] entry "
                           f"named {rule.workload!r}")
    started = shared.get(("workload started", rule.workload, rule.currency))
    point = started.result() if started is not None else _workload_point(
        db, config, rule, now, shared)
    basis = "million tokens" if point.basis == "million_tokens" else "run"
    return Facts(value=point.cost, exists=point.cost is not None,
                 detail=basis if point.cost is None else
                 f"{basis}, {point.count}x {point.gpu} at {point.provider}")


def _workloads(config: Config, rule: AlertRule) -> list[dict[str, Any]]:
    return [w for w in config.report.workloads if str(w.get("name", "")) == rule.workload]


def _start_workloads(db: Database, config: Config, rules: Sequence[AlertRule], now: datetime,
                     shared: dict[tuple, Any]) -> ThreadPoolExecutor | None:
    """Start sizing and pricing the check's workloads (one `_workload_point` per workload and
    currency, in that order) in a second thread, whose futures `_workload_facts` takes from
    `shared`: while one thread waits on PostgreSQL's server, the other computes. None when
    there is nothing to overlap: no workload rule, only workload rules, or SQLite, whose
    reads run on this process's CPU (measured slower in two threads: GIL handoffs)."""
    if db.dialect != "postgresql":
        return None
    wanted: dict[tuple[str | None, str], AlertRule] = {}
    for rule in rules:
        if rule.condition == "workload" and _workloads(config, rule):
            wanted.setdefault((rule.workload, rule.currency), rule)
    if not wanted or all(rule.condition == "workload" for rule in rules):
        return None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alerts-workloads")
    own: dict[tuple, Any] = {}  # the worker's rows per currency (one worker: no races)
    for (workload, currency), rule in wanted.items():
        shared[("workload started", workload, currency)] = pool.submit(
            _workload_point, db, config, rule, now, own)
    return pool


def _workload_point(db: Database, config: Config, rule: AlertRule, now: datetime,
                    shared: dict[tuple, Any]) -> Any:
    """The workload's cheapest cost now (a tracker.market.index.JobPoint), once per workload
    and currency in `shared`."""
    from tracker.market.index import job_costs
    from tracker.store.rates import priced_in

    workloads = _workloads(config, rule)
    point = shared.get(("workload", rule.workload, rule.currency))
    if point is None:
        rows = shared.get(("on-demand", rule.currency))
        if rows is None:
            # job_costs prices the first row of each shape group only: the others are not read
            # into rows (price_rows_per_shape; in another currency, all are).
            from tracker.answers.candidates import by_instance
            from tracker.store.queries import price_rows_per_shape

            rows = price_rows_per_shape(db, currency=rule.currency, as_of=now,
                                        by_instance=by_instance(), named_unclustered=False,
                                        category="on-demand")
            rows = shared[("on-demand", rule.currency)] = priced_in(db, rows, rule.currency,
                                                                   now)
        (point,) = job_costs(workloads, rows, now.date(), rule.currency,
                             config.economics_values())
        shared[("workload", rule.workload, rule.currency)] = point
    return point


def _budget_facts(db: Database, config: Config, rule: AlertRule, now: datetime) -> Facts:
    """Fires while the budget's forecast P50 is above its amount, or its spend to date above
    `alert_spent_share` of it (tracker.market.budgets, the same status `budgets status`
    prints)."""
    from tracker.market.budgets import budget_status, budgets_from_config

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


def _source_facts(db: Database, config: Config, rule: AlertRule, now: datetime,
                  shared: dict[tuple, Any] | None = None) -> Facts:
    """`shared`: the sources' states read for an earlier rule of the check, reused when they
    cover this rule's sources (a source's state does not depend on the others asked)."""
    from tracker.collect.refresh import configured_sources
    from tracker.store.queries import source_statuses

    assert rule.source is not None  # parse_rule sets it for source_stale rules
    names = configured_sources(config) if rule.source == "*" else [rule.source]
    shared = {} if shared is None else shared
    states = shared.get(("sources",), {})
    if any(name not in states for name in names):  # read once for every configured source
        wanted = dict.fromkeys([*states, *configured_sources(config), *names])
        statuses = source_statuses(db, list(wanted))
        states = shared[("sources",)] = {row["source"]: row for row in source_states(
            statuses, now=now, stale_after_hours=stale_after_hours(config))}
    bad = [states[name] for name in names if states[name]["state"] != "fresh"]
    if not bad:
        return Facts(exists=False, detail=f"{', '.join(names)} fresh")
    state_words = {"never": "never refreshed", "stale": "stale", "failing": "failing"}
    text = "; ".join(f"{r['source']}: {state_words.get(r['state'], r['state'])}" + (
        f" ({r['age_hours']} h since the last success)" if r["age_hours"] is not None else "")
        for r in bad)
    return Facts(exists=True, detail=text)


# --------------------------------------------------------------------------------------------
# State, events, delivery
#
# A firing is one `alert_event` row (kind `fired`); its `delivered` column holds the state of
# each channel as JSON: {"channels": {"mail": {"status": "sent" | "pending" | "failed" |
# "superseded", "attempts": n, "last_attempt": ISO, "next_attempt": ISO | null, "error": ""}}}.
# A channel that fails is retried at later checks with exponential backoff (RETRY_BACKOFF
# seconds, doubling, at most MAX_BACKOFF) until RETRY_ATTEMPTS attempts, then given up
# (`failed`); a newer firing of the same rule supersedes what is still pending. Every payload
# carries the firing's id (`id`, the `Idempotency-Key` header, the mail's Message-ID), the
# same at every retry, so a receiver that got a POST whose answer was lost can drop the copy.

RETRY_ATTEMPTS = 5
RETRY_BACKOFF = 60.0
MAX_BACKOFF = 3600.0


@dataclass
class CheckResult:
    rule: str
    active: bool
    event: str | None
    message: str
    delivered: list[str]
    undelivered: list[str] = field(default_factory=list)
    id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "active": self.active, "event": self.event,
                "message": self.message, "delivered": self.delivered,
                "undelivered": self.undelivered, "id": self.id}


def _new_channels(channels: Sequence[str]) -> dict[str, dict[str, Any]]:
    return {name: {"status": "pending", "attempts": 0, "last_attempt": None,
                   "next_attempt": None, "error": ""} for name in channels}


def _attempt(settings: AlertSettings, config: Config, body: dict[str, Any],
             channels: dict[str, dict[str, Any]], now: datetime,
             transport: Transport | None, *, due_only: bool) -> list[str]:
    """Try every pending channel (due ones only with `due_only`); update their states in
    place; returns the one-line outcomes (`mail`, `webhook: HTTP 500, retry 2/5 at ...`)."""
    from tracker.core.serialization import iso_utc

    outcomes: list[str] = []
    for name, state in channels.items():
        if state["status"] != "pending":
            continue
        due = state.get("next_attempt")
        if due_only and due and datetime.fromisoformat(due.replace("Z", "+00:00")) > now:
            continue
        done, failed = deliver(settings, config, body, transport=transport, channels=[name])
        state["attempts"] = int(state.get("attempts") or 0) + 1
        state["last_attempt"] = iso_utc(now)
        if done:
            state.update(status="sent", next_attempt=None, error="")
            outcomes.append(name)
            continue
        state["error"] = failed[0].partition(": ")[2]
        if state["attempts"] >= RETRY_ATTEMPTS:
            state.update(status="failed", next_attempt=None)
            outcomes.append(f"{failed[0]} (gave up after {state['attempts']} attempts)")
        else:
            wait = min(RETRY_BACKOFF * 2 ** (state["attempts"] - 1), MAX_BACKOFF)
            state["next_attempt"] = iso_utc(now + timedelta(seconds=wait))
            outcomes.append(f"{failed[0]} (attempt {state['attempts']}/{RETRY_ATTEMPTS}, "
                            f"retry at {state['next_attempt']})")
    return outcomes


def _undelivered(channels: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [name for name, state in channels.items() if state.get("status") != "sent"]


def check_alerts(db: Database, config: Config, now: datetime, *,
                 transport: Transport | None = None,
                 settings: AlertSettings | None = None) -> list[CheckResult]:
    """Evaluate every rule, record transitions, deliver each firing to every channel once.

    Each channel of a firing is tracked on its own: one that fails is retried at later
    checks (with backoff, up to RETRY_ATTEMPTS) while the others are not sent again. A
    result's `undelivered` lists the channels of the rule's current firing not delivered yet
    (`alerts check` exits 1 while any is); a rule whose facts cannot be read is reported and
    left as it was.
    """
    from tracker.store.locks import hold_locks
    from tracker.store.market import save_alert_states

    settings = settings or alert_settings(config)
    if not settings.rules or not settings.enabled:
        return []
    with hold_locks(db, [ALERTS_LOCK], wait=60) as got:
        if not got.held:
            raise TrackerError("another alerts check is running")
        states = load_states(db)
        open_firings = latest_firings(db)
        results = []
        shared: dict[tuple, Any] = {_RULES: tuple(settings.rules)}
        # The states of rules with nothing to record or deliver, written together at the end
        # (one transaction, not one a rule); a rule with an event writes its own at once.
        unchanged: list[tuple[str, bool, str, bool]] = []
        pool = _start_workloads(db, config, settings.rules, now, shared)
        try:
            for rule in settings.rules:
                try:
                    evaluation = evaluate(rule, gather_facts(db, config, rule, now, shared))
                except (InvalidInput, TrackerError) as exc:
                    results.append(CheckResult(rule.name, states.get(rule.name, False),
                                               "error", f"{rule.name}: {exc}", []))
                    continue
                results.append(_check_rule(db, config, settings, rule.name, evaluation,
                                           states.get(rule.name, False),
                                           open_firings.get(rule.name), now, transport,
                                           unchanged))
        finally:
            if pool is not None:
                pool.shutdown()  # its connection back before the states are written
            save_alert_states(db, unchanged, now)
    return results


def _check_rule(db: Database, config: Config, settings: AlertSettings, rule: str,
                evaluation: Evaluation, was: bool, firing: dict[str, Any] | None,
                now: datetime, transport: Transport | None,
                unchanged: list[tuple[str, bool, str, bool]]) -> CheckResult:
    """Record and deliver what the rule's evaluation changed; its state is written at once,
    or (no event, nothing delivered) appended to `unchanged` for the caller to write."""
    from tracker.core.secrets import scrub
    from tracker.store.market import save_alert_state

    event = transition(was, evaluation.active)
    message = scrub(evaluation.message)
    outcomes: list[str] = []
    if event == "fired":
        body = payload(evaluation, event, now)
        if firing is not None:
            _supersede(db, firing)
        channels = _new_channels(settings.channels)
        event_id = record_event(db, rule, event, now, message, body, channels)
        outcomes = _attempt(settings, config, body, channels, now, transport, due_only=False)
        update_deliveries(db, event_id, channels)
        firing = {"id": event_id, "body": body, "channels": channels}
        if channels and not any(c["status"] == "sent" for c in channels.values()):
            event = "failed"  # no channel took it (yet): retried at the next checks
    elif event == "cleared":
        if firing is not None:
            _supersede(db, firing)  # a firing that cleared before delivery is not sent late
        record_event(db, rule, event, now, message, payload(evaluation, event, now), {})
    elif firing is not None and evaluation.active and _undelivered(firing["channels"]):
        outcomes = _attempt(settings, config, firing["body"], firing["channels"], now,
                            transport, due_only=True)
        if outcomes:
            update_deliveries(db, firing["id"], firing["channels"])
            event = "retried"
    if event is None and not outcomes:
        unchanged.append((rule, evaluation.active, message, False))
    else:
        save_alert_state(db, rule, evaluation.active, now, message,
                         since_changed=event in ("fired", "failed", "cleared"))
    for outcome in outcomes:
        if ": " in outcome:
            log.warning("alert %s: delivery failed: %s", rule, outcome)
    undelivered = (_undelivered(firing["channels"])
                   if firing is not None and evaluation.active else [])
    return CheckResult(rule, evaluation.active, event, message, outcomes, undelivered,
                       firing["body"].get("id") if firing is not None else None)


def try_rule(db: Database, config: Config, name: str, now: datetime, *, send: bool = False,
              transport: Transport | None = None) -> dict[str, Any]:
    """Evaluate one rule now without touching its state; with `send`, deliver a [test]."""
    from tracker.core.secrets import scrub

    settings = alert_settings(config)
    rule = settings.rule(name)
    evaluation = evaluate(rule, gather_facts(db, config, rule, now))
    result = {"rule": rule.name, "active": evaluation.active,
              "message": scrub(evaluation.message), "description": scrub(rule.describe()),
              "delivered": []}
    if send:
        if not settings.channels:
            raise InvalidInput("no alert channel configured: set [alerts.mail] to or "
                               "[alerts.webhook] url")
        body = payload(evaluation, "fired", now, test=True,
                       id=firing_id(rule.name, now) + "-test")
        done, failed = deliver(settings, config, body, transport=transport)
        result["delivered"] = done + failed
        if failed:
            raise TrackerError("; ".join(failed))
    return result


def load_states(db: Database) -> dict[str, bool]:
    from tracker.store.market import alert_states

    return {rule: bool(row.active) for rule, row in alert_states(db).items()}


def record_event(db: Database, rule: str, kind: str, at: datetime, message: str,
                 body: Mapping[str, Any], channels: Mapping[str, Any]) -> int:
    """Store a transition with its (scrubbed) payload and its channels' delivery states."""
    from tracker.core.secrets import scrub, scrub_tree
    from tracker.store.market import insert_alert_event

    return insert_alert_event(db, rule, kind, at, scrub(message),
                              json.dumps(scrub_tree(dict(body)), sort_keys=True),
                              _deliveries_json(channels))


def _deliveries_json(channels: Mapping[str, Any]) -> str:
    from tracker.core.secrets import scrub_tree

    return json.dumps({"channels": scrub_tree(dict(channels))}, sort_keys=True) \
        if channels else ""


def update_deliveries(db: Database, event_id: int, channels: Mapping[str, Any]) -> None:
    from tracker.store.market import set_alert_delivered

    set_alert_delivered(db, event_id, _deliveries_json(channels))


def _supersede(db: Database, firing: dict[str, Any]) -> None:
    """A newer firing of the rule replaces what its previous one still had pending."""
    changed = False
    for state in firing["channels"].values():
        if state.get("status") == "pending":
            state.update(status="superseded", next_attempt=None)
            changed = True
    if changed:
        update_deliveries(db, firing["id"], firing["channels"])


def parse_deliveries(text: str) -> dict[str, dict[str, Any]]:
    """The channel states of a stored event; rows written before per-channel tracking
    (`mail; webhook: error`) read as sent or failed channels."""
    if not text:
        return {}
    if text.startswith("{"):
        try:
            return dict(json.loads(text).get("channels") or {})
        except (ValueError, AttributeError):
            return {}
    channels: dict[str, dict[str, Any]] = {}
    for part in text.split("; "):
        name, _, error = part.partition(": ")
        channels[name] = {"status": "failed" if error else "sent", "attempts": 1,
                          "error": error}
    return channels


def describe_deliveries(channels: Mapping[str, Mapping[str, Any]]) -> str:
    """`mail: sent; webhook: pending (2 attempts: HTTP 500), next 2026-11-02T03:00:00Z`."""
    parts = []
    for name, state in sorted(channels.items()):
        status = str(state.get("status"))
        text = f"{name}: {status}"
        attempts = int(state.get("attempts") or 0)
        if status != "sent" and (attempts or state.get("error")):
            text += f" ({attempts} attempt{'s' if attempts != 1 else ''}"
            text += f": {state['error']})" if state.get("error") else ")"
        if status == "pending" and state.get("next_attempt"):
            text += f", next {state['next_attempt']}"
        parts.append(text)
    return "; ".join(parts)


def latest_firings(db: Database) -> dict[str, dict[str, Any]]:
    """Each rule's newest `fired` event: its id, payload and channel states."""
    from tracker.store.market import newest_fired_events

    firings = {}
    for row in newest_fired_events(db):
        try:
            body = json.loads(row.payload or "{}")
        except ValueError:
            body = {}
        firings[row.rule] = {"id": row.id, "body": body,
                             "channels": parse_deliveries(row.delivered or "")}
    return firings


def alert_history(db: Database, rule: str | None = None, limit: int = 50) -> list[dict]:
    from tracker.store.market import alert_events

    history = []
    for r in alert_events(db, rule, limit):
        channels = parse_deliveries(r.delivered or "")
        try:
            event_id = json.loads(r.payload or "{}").get("id")
        except (ValueError, AttributeError):
            event_id = None
        history.append({"at": r.at, "rule": r.rule, "event": r.kind, "message": r.message,
                        "delivered": describe_deliveries(channels), "channels": channels,
                        "id": event_id})
    return history


def rule_rows(db: Database, settings: AlertSettings) -> list[dict[str, Any]]:
    """`alerts list`: each rule in words with its current state."""
    from tracker.store.market import alert_states

    states = alert_states(db)
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


__all__ = ["CheckResult", "alert_history", "check_alerts", "deliver", "firing_id", "gather_facts",
           "payload", "rule_rows", "slack_body", "slack_escape", "try_rule"]
