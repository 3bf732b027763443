"""tools/market_model.py and tools/synthetic_market.py: the benchmark's market is shaped as
the model's docstring says, is the same for the same seed, and the fast bulk path writes
exactly the rows ingest writes."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import numpy as np
import pytest
from sqlalchemy import create_engine, select

from tools.market_model import CATEGORY_SHARE, COUNT_SHARE, change_rates, generate_market
from tools.synthetic_market import build_market_store
from tracker.core.fabric import offer_scale_up_domain
from tracker.core.gpus import gpu_table


@pytest.fixture(scope="module")
def market():
    return generate_market(offers=20_000, providers=40, days=60, seed=5)


def test_the_market_has_every_class_the_providers_and_the_mix(market):
    assert market.offers == 20_000
    assert len(set(market.provider)) == 40
    assert set(market.gpu) == set(gpu_table())
    shares = Counter(market.category)
    for category, share in CATEGORY_SHARE.items():
        assert shares[category] / market.offers == pytest.approx(share, abs=0.01)
    counts = Counter(market.count)
    for count, share in COUNT_SHARE.items():
        assert counts[count] / market.offers == pytest.approx(share, abs=0.02)
    nvl72 = {(p, i) for p, i, g in zip(market.provider, market.instance_type, market.gpu,
                                       strict=True) if g in ("gb200", "gb300")
             and offer_scale_up_domain(p, i) == 72}
    assert nvl72, "some GB200/GB300 offers are slices of an NVL72 domain"
    sizes = Counter(market.source)
    assert max(sizes, key=sizes.__getitem__) == "gpuhunt"
    assert sizes["gpuhunt"] / market.offers == pytest.approx(0.2, abs=0.02)
    identities = set(zip(market.source, market.provider, market.region, market.zone,
                         market.instance_type, market.variant, market.category, strict=True))
    assert len(identities) == market.offers


def test_about_five_percent_of_the_listed_prices_change_a_day(market):
    changes = np.ones(len(market.event_offer), dtype=bool)
    changes[0] = False
    changes[1:] = market.event_offer[1:] == market.event_offer[:-1]
    listed_days = int(np.sum(np.minimum(market.end_day, market.days)
                             - np.maximum(market.start_day, 1)).clip(0))
    # Rounding to 4 decimals swallows a few of the moves (a move to the same price).
    assert changes.sum() / listed_days == pytest.approx(0.05, abs=0.004)
    rates = change_rates(0.05)
    mean = sum(CATEGORY_SHARE[c] * rates[c] for c in CATEGORY_SHARE)
    assert mean == pytest.approx(0.05, abs=1e-9)


def test_the_same_seed_gives_the_same_market_and_another_seed_another():
    a = generate_market(offers=500, providers=12, days=30, seed=1)
    b = generate_market(offers=500, providers=12, days=30, seed=1)
    c = generate_market(offers=500, providers=12, days=30, seed=2)
    assert a.instance_type == b.instance_type and a.gpu == b.gpu
    assert np.array_equal(a.event_price, b.event_price)
    assert a.gpu != c.gpu


def _plain(value: object) -> object:
    return value.normalize() if isinstance(value, Decimal) else value


def _dump(url: str) -> dict[str, list]:
    """Everything both paths must agree on (row ids aside: ingest numbers spans as it goes),
    read through the tables' own types so SQLite and PostgreSQL give the same values."""
    from tracker.store.models import IngestRun, Offer, PriceSpan, SourceScope

    o, s = Offer.__table__, PriceSpan.__table__
    r, sc = IngestRun.__table__, SourceScope.__table__
    engine = create_engine(url)
    identity = [o.c.source, o.c.provider, o.c.region, o.c.zone, o.c.instance_type,
                o.c.variant, o.c.category]
    with engine.connect() as conn:
        offers = {row[0]: tuple(map(_plain, row[1:])) for row in conn.execute(select(
            o.c.id, *identity, o.c.gpu_id, o.c.gpu_raw, o.c.gpu_count, o.c.fractional,
            o.c.gpu_memory_gb, o.c.attributes, o.c.first_seen, o.c.node_link,
            o.c.node_link_gbps, o.c.cluster_network, o.c.cluster_gbps, o.c.network_note))}
        spans = sorted([(offers[row[0]][:7], *map(_plain, row[1:])) for row in conn.execute(
            select(s.c.offer_id, s.c.price_per_hour, s.c.currency, s.c.first_seen,
                   s.c.last_seen, s.c.valid_to, s.c.run_id))], key=repr)
        newest = sorted((offers[row[0]][:7], row[1]) for row in conn.execute(
            select(o.c.id, s.c.first_seen).join_from(o, s, s.c.id == o.c.latest_span_id)))
        runs = sorted(tuple(row) for row in conn.execute(select(
            r.c.id, r.c.source, r.c.trigger, r.c.host, r.c.started_at, r.c.status,
            r.c.offers_seen, r.c.prices_changed, r.c.new_offers, r.c.offers_closed,
            r.c.rejected)))
        scope = sorted(tuple(row) for row in conn.execute(select(sc)))
        kept = sorted(_kept(conn, offers))
    engine.dispose()
    return {"offers": sorted(offers.values(), key=repr), "spans": spans, "newest": newest,
            "runs": runs, "scope": scope, "kept": kept}


def _kept(conn, offers: dict) -> list[tuple]:
    """What each source's last run kept for the next (tracker/store/ingest/kept_state.py),
    offer by offer and in no order (ingest keeps its last listing's order, the bulk path the
    offers' order)."""
    from tracker.store.ingest import kept_state
    from tracker.store.models import SourceState

    rows: dict[str, dict[str, tuple]] = {}
    for source, part, run_id, body in conn.execute(select(SourceState.__table__)):
        rows.setdefault(source, {})[part] = (run_id, body)
    kept_rows = []
    for source, parts in rows.items():
        kept = kept_state.decode(parts["offers"][1], parts["prices"][1], parts["offers"][0])
        assert kept is not None
        for i, key in enumerate(kept.keys()):
            identity = (source, *key.split("\x1f"))
            assert offers[kept.offer_id(i)][:7] == identity
            kept_rows.append((identity, parts["prices"][0], _plain(Decimal(kept.prices[i])),
                              kept.currencies[i], kept.open[i]))
    return kept_rows


def test_the_bulk_path_writes_what_ingest_writes(any_db_url, tmp_path):
    # The ingest store is a SQLite file beside it (one PostgreSQL schema holds one store).
    other = f"sqlite:///{tmp_path / 'by-ingest.db'}"
    kwargs = {"offers": 600, "providers": 40, "days": 40, "seed": 11}
    bulk = build_market_store(any_db_url, path="bulk", **kwargs)
    by_ingest = build_market_store(other, path="ingest", **kwargs)
    assert bulk.spans == by_ingest.spans > 600  # some prices changed
    a, b = _dump(any_db_url), _dump(other)
    for table in a:
        assert a[table] == b[table], table
    assert any(row[6] is not None for row in a["spans"]), "some offers left"
    assert any(row[9] for row in a["runs"]), "and their runs closed them"


def test_a_store_that_holds_offers_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    build_market_store(url, offers=50, providers=5, days=3)
    with pytest.raises(ValueError, match="already holds offers"):
        build_market_store(url, offers=50, providers=5, days=3)
