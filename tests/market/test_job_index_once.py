"""The cost-per-job index reads the prices once per window and sizes each shape once
(issue #26): the same points as a read and a sizing per day, with less work."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from tests.helpers import at, obs

WORKLOADS = [
    {"name": "ft", "kind": "finetune", "model": "llama-3.1-8b", "tokens": 2_000_000_000},
    {"name": "serve", "kind": "serve", "model": "llama-3.1-8b", "prompt_tokens": 1000,
     "output_tokens": 500, "max_tpot_ms": 50},
]
DAYS = [date(2026, 11, 1) + timedelta(days=i) for i in range(5)]


@pytest.fixture
def db(sqlite_url):
    """Daily refreshes: lambda's price moves on the 3rd, runpod's offer is last seen on the
    2nd (stale after that with a max age) and vastai's appears on the 4th."""
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    database = open_database(sqlite_url)
    for i, day in enumerate(d.isoformat() for d in DAYS):
        rows = [obs("23.92" if i < 2 else "21.50", at(day), provider="lambda",
                    instance_type="gpu_8x_h100"),
                obs("98.32", at(day), provider="aws")]
        if i < 2:
            rows.append(obs("2.39", at(day), provider="runpod", instance_type="1x",
                            gpu_count=1))
        if i >= 3:
            rows.append(obs("1.89", at(day), provider="vastai", instance_type="1x-H100",
                            gpu_count=1))
        assert ingest_records(database, "test", rows, started_at=at(day)).status == "ok"
    yield database
    database.close()


def test_price_rows_over_equals_price_rows_at_each_instant(db):
    from tracker.market.index import sample_instant
    from tracker.store.queries import price_rows, price_rows_over

    instants = [sample_instant(d) for d in DAYS]
    for category in (None, "on-demand"):
        each = [price_rows(db, as_of=t, category=category) for t in instants]
        assert price_rows_over(db, instants, category=category) == each
    assert [len(rows) for rows in each] == [3, 3, 3, 4, 4]
    assert price_rows_over(db, []) == []


def _per_day(db, workloads, days, **kwargs):
    """The index as it was computed: each day on its own read and sizing."""
    from tracker.core.fx import rows_in_currency
    from tracker.market.index import job_costs, sample_instant
    from tracker.store.queries import price_rows

    points = []
    for day in days:
        rows = price_rows(db, as_of=sample_instant(day), category="on-demand")
        if kwargs.get("max_age_hours") is not None:
            oldest = sample_instant(day) - timedelta(hours=kwargs["max_age_hours"])
            rows = [r for r in rows if r.last_seen >= oldest]
        points += job_costs(workloads, rows_in_currency(rows, "USD", None, sample_instant(day)),
                            day, "USD")
    return points


@pytest.mark.parametrize("max_age_hours", [None, 30.0])
def test_job_index_reads_once_and_sizes_each_shape_once(db, monkeypatch, max_age_hours):
    import tracker.answers.candidates as candidates_module  # noqa: F401
    import tracker.sizing
    import tracker.sizing.serving
    import tracker.store.queries as queries
    from tracker.market.index import job_index

    days = [DAYS[4], DAYS[0], DAYS[2], DAYS[2], DAYS[1], DAYS[3]]  # any order, repeats kept
    expected = _per_day(db, WORKLOADS, days, max_age_hours=max_age_hours)
    assert [p.cost is not None for p in expected].count(True) >= 8

    reads, sized, served = [], [], []
    real_rows, real_size, real_serve = (queries._price_rows, tracker.sizing.size_workload,
                                        tracker.sizing.serving.serve)
    monkeypatch.setattr(queries, "_price_rows",
                        lambda *a, **k: reads.append(1) or real_rows(*a, **k))
    monkeypatch.setattr(tracker.sizing, "size_workload",
                        lambda request: sized.append(request) or real_size(request))
    monkeypatch.setattr(tracker.sizing.serving, "serve",
                        lambda *a, **k: served.append(a) or real_serve(*a, **k))
    got = job_index(db, WORKLOADS, days, max_age_hours=max_age_hours)
    assert got == expected
    assert len(reads) == 1  # one read of the five days' spans, not one per day
    # Each (GPU, count, links) question asked once over the five days.
    keys = [(r.gpu, r.count, r.gpus_per_node, r.node_link, r.cluster_gbps) for r in sized
            if r.gpu is not None]  # not the workload's check without a GPU, once a day
    assert sized and len(keys) == len(set(keys))
    serve_keys = [(r.gpu, r.count, r.gpus_per_node, r.node_link, r.cluster_gbps,
                   r.scale_up_domain) for r, *_ in served]
    assert served and len(serve_keys) == len(set(serve_keys))


def test_windows_of_a_month(db, monkeypatch):
    import tracker.store.queries as queries
    from tracker.market.index import job_index

    reads = []
    real_rows = queries._price_rows
    monkeypatch.setattr(queries, "_price_rows",
                        lambda *a, **k: reads.append(1) or real_rows(*a, **k))
    days = [DAYS[0] + timedelta(days=20 * i) for i in range(4)]  # 60 days: two windows
    points = job_index(db, WORKLOADS[:1], days)
    assert [p.date for p in points] == days
    assert len(reads) == 2


def test_the_job_costs_from_the_first_row_per_shape_are_every_rows(sqlite_url, monkeypatch):
    """job_costs (the alerts' workload rules, the job index) prices the first row of each shape
    group only: on a 2,000-offer market, the same points as from every row."""
    from tools.synthetic_market import build_market_store
    from tracker.config.sections import DEFAULT_WORKLOADS
    from tracker.market.index import job_costs
    from tracker.store import queries
    from tracker.store.db import open_database

    build_market_store(sqlite_url, offers=2000, days=2, seed=26, end=date(2026, 11, 30))
    database = open_database(sqlite_url)
    rows = [r for r in queries.price_rows(database) if r.category == "on-demand"]
    database.close()
    kept: list[int] = []
    first_per_shape = queries.first_per_shape
    monkeypatch.setattr(queries, "first_per_shape",
                        lambda *a, **k: kept.append(len(found := first_per_shape(*a, **k)))
                        or found)
    shipped = job_costs(DEFAULT_WORKLOADS, rows, date(2026, 11, 30), "USD")
    monkeypatch.setattr(queries, "first_per_shape", lambda rows, *a, **k: list(rows))
    every = job_costs(DEFAULT_WORKLOADS, rows, date(2026, 11, 30), "USD")
    assert shipped == every
    assert all(point.cost is not None for point in shipped)
    assert kept and kept[0] < len(rows)
