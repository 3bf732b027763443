"""Workload alert rules size and price a workload once per check (issue 26): two rules on the
same workload (a cost level and a change) share one evaluation and one read of the prices,
and each gets the same facts it gets alone (`alerts test`)."""

from __future__ import annotations

from datetime import UTC, datetime

from tracker.config.schema import Config
from tracker.config.sections import DEFAULT_WORKLOADS
from tracker.market import alert_checks
from tracker.store.db import open_database

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def test_rules_on_one_workload_share_its_evaluation(bundled_db, monkeypatch):
    from tracker.answers import recommend
    from tracker.store import queries

    train, serve = DEFAULT_WORKLOADS[0]["name"], DEFAULT_WORKLOADS[1]["name"]
    config = Config.from_data({"alerts": {"rules": [
        {"name": "train", "workload": train},
        {"name": "train cheap", "workload": train, "cost_below": 10_000},
        {"name": "serve", "workload": serve},
        {"name": "serve cheap", "workload": serve, "cost_below": 5},
    ]}})
    db = open_database(bundled_db)
    alone = {name: alert_checks.try_rule(db, config, name, NOW)["message"]
             for name in ("train", "train cheap", "serve", "serve cheap")}
    evaluated: list[str] = []
    reads: list[object] = []
    evaluate_workload, price_rows = recommend.evaluate_workload, queries.price_rows

    def counted_evaluation(workload, *args, **kwargs):
        evaluated.append(workload.name)
        return evaluate_workload(workload, *args, **kwargs)

    def counted_read(*args, **kwargs):
        reads.append(kwargs.get("category"))
        return price_rows(*args, **kwargs)

    monkeypatch.setattr(recommend, "evaluate_workload", counted_evaluation)
    monkeypatch.setattr(queries, "price_rows", counted_read)
    results = alert_checks.check_alerts(db, config, NOW)
    db.close()
    assert sorted(evaluated) == sorted([train, serve])
    assert reads == ["on-demand"]
    assert {r.rule: r.message for r in results} == alone
    assert all(r.event != "error" for r in results)
