"""Workload alert rules size and price a workload once per check (issue 26): two rules on the
same workload (a cost level and a change) share one evaluation and one read of the prices,
and each gets the same facts it gets alone (`alerts test`). A check reads the prices of all
its price rules at once, and of its workloads once per currency."""

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
    evaluate_workload, per_shape = recommend.evaluate_workload, queries.price_rows_per_shape

    def counted_evaluation(workload, *args, **kwargs):
        evaluated.append(workload.name)
        return evaluate_workload(workload, *args, **kwargs)

    def counted_read(*args, **kwargs):
        reads.append(kwargs.get("category"))
        return per_shape(*args, **kwargs)

    monkeypatch.setattr(recommend, "evaluate_workload", counted_evaluation)
    monkeypatch.setattr(queries, "price_rows_per_shape", counted_read)
    monkeypatch.setattr(queries, "price_rows", None)  # no read of every price
    results = alert_checks.check_alerts(db, config, NOW)
    db.close()
    assert sorted(evaluated) == sorted([train, serve])
    assert reads == ["on-demand"]  # one read of the prices, shared by the check's rules
    assert {r.rule: r.message for r in results} == alone
    assert all(r.event != "error" for r in results)


def test_a_check_reads_the_prices_once_for_all_its_rules(bundled_db, monkeypatch):
    """Level, spot and new-low rules: one read of the prices they watch for the check (one
    per rule before); a workload rule its own read
    (the first price of each shape); source rules: one read of the sources' states. Each rule
    has the facts and message it gets alone."""
    from tracker.store import queries

    train = DEFAULT_WORKLOADS[0]["name"]
    rules = [{"name": f"{gpu} below", "gpu": gpu, "below": 3}
             for gpu in ("h100-sxm", "a100-80gb", "l4")]
    rules += [{"name": "h100 spot above", "gpu": "h100-sxm", "category": "spot", "above": 1},
              {"name": "h100 aws", "gpu": "h100-sxm", "provider": "aws", "below": 100},
              {"name": "h100 x8", "gpu": "h100-sxm", "gpu_count": 8, "below": 100},
              {"name": "h100 region", "gpu": "h100-sxm", "region": "us-east-1", "below": 100},
              {"name": "a100 new low", "gpu": "a100-80gb", "new_low": True},
              {"name": "train", "workload": train},
              {"name": "aws stale", "source_stale": "aws"},
              {"name": "gcp stale", "source_stale": "gcp"},
              {"name": "lambda stale", "source_stale": "lambda"}]
    config = Config.from_data({"alerts": {"rules": rules}})
    db = open_database(bundled_db)
    alone = {r["name"]: alert_checks.try_rule(db, config, r["name"], NOW)["message"]
             for r in rules}
    reads: list[str] = []
    states: list[object] = []

    def counted(name):
        original = getattr(queries, name)

        def read(*args, **kwargs):
            reads.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(queries, name, read)

    for name in ("watched_prices", "price_rows_per_shape"):
        counted(name)
    source_statuses = queries.source_statuses

    def counted_states(*args, **kwargs):
        states.append(args)
        return source_statuses(*args, **kwargs)

    monkeypatch.setattr(queries, "price_rows", None)  # no read of every price
    monkeypatch.setattr(queries, "source_statuses", counted_states)
    results = alert_checks.check_alerts(db, config, NOW)
    db.close()
    assert reads.count("watched_prices") == reads.count("price_rows_per_shape") == 1
    assert len(states) == 1  # every configured source's state, read for the first rule
    assert {r.rule: r.message for r in results} == alone
    assert all(r.event != "error" for r in results)
    assert sum("nothing listed" not in m for m in alone.values()) >= 6  # rules with prices


def test_workloads_are_sized_beside_the_other_rules(any_db_url, monkeypatch):
    """With other rules in the check on PostgreSQL, its workloads are sized and priced in a
    second thread while the first waits on the server for the other rules' prices (on SQLite
    in the one thread): each rule has the facts it gets alone."""
    import threading

    from tracker.market import index

    train, serve = DEFAULT_WORKLOADS[0]["name"], DEFAULT_WORKLOADS[1]["name"]
    rules = [{"name": "h100 below", "gpu": "h100-sxm", "below": 3},
             {"name": "train", "workload": train},
             {"name": "a100 new low", "gpu": "a100-80gb", "new_low": True},
             {"name": "serve cheap", "workload": serve, "cost_below": 5},
             {"name": "train cheap", "workload": train, "cost_below": 10_000},
             {"name": "aws stale", "source_stale": "aws"}]
    config = Config.from_data({"alerts": {"rules": rules}})
    from tracker.collect.refresh import refresh_sources
    from tracker.config.schema import load_config

    db = open_database(any_db_url)
    refresh_sources(db, load_config(environ={}), ["bundled"], environ={})
    alone = {r["name"]: alert_checks.try_rule(db, config, r["name"], NOW)["message"]
             for r in rules}
    threads: list[str] = []
    job_costs = index.job_costs

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return job_costs(*args, **kwargs)

    monkeypatch.setattr(index, "job_costs", recorded)
    results = alert_checks.check_alerts(db, config, NOW)
    db.close()
    by_rule = {r.rule: r for r in results}
    assert {name: by_rule[name].message for name in alone} == alone
    assert all(by_rule[name].event != "error" for name in alone)
    worker = db.dialect == "postgresql"
    assert len(threads) == 2
    assert all(t.startswith("alerts-workloads") == worker for t in threads)
