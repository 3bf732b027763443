"""tracker.answers.pricing: store-backed price lookups for the economics answers."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from types import SimpleNamespace

import pytest

from tracker.answers import pricing
from tracker.core.errors import InvalidInput, NotFound
from tracker.economics.defaults import EconomicsSettings
from tracker.store.db import Database, open_database

from ..helpers import at
from .seed import seed_prices

D = Decimal
USD = {"provider": None, "region": None, "category": "on-demand", "currency": "USD"}
WORKLOAD = {"model": "llama-3.1-8b", "workload": "pretrain", "tokens": 1e9, "mfu": 0.4}


@pytest.fixture
def db(sqlite_url) -> Iterator[Database]:
    """H100 and A100 prices on two dates, and an AWS Spot Advisor band for p5.48xlarge."""
    database = open_database(sqlite_url)
    seed_prices(database)
    yield database
    database.close()


@pytest.fixture
def empty_db(tmp_path) -> Iterator[Database]:
    database = open_database(f"sqlite:///{tmp_path / 'empty.db'}")
    yield database
    database.close()


BILLING = EconomicsSettings().billing


def test_describe_gpu_prices_groups_by_provider_and_category():
    rows = [SimpleNamespace(provider=p, category=c, gpu_count=n)
            for p, c, n in (("lambda", "on-demand", 8), ("aws", "spot", 8),
                            ("lambda", "on-demand", 1), ("lambda", "on-demand", 0.5))]
    assert pricing.describe_gpu_prices(rows) == (
        "aws spot (8 GPUs); lambda on-demand (0.5, 1, 8 GPUs)")
    many = [SimpleNamespace(provider=f"p{i}", category="spot", gpu_count=1) for i in range(10)]
    assert pricing.describe_gpu_prices(many, limit=2) == (
        "p0 spot (1 GPUs); p1 spot (1 GPUs) and 8 more")


def test_priced_offer_is_the_cheapest_that_tiles_the_count(db):
    row, instances = pricing.priced_offer(db, gpu="h100-sxm", count=8, as_of=None, **USD)
    assert (row.provider, row.instance_type, instances) == ("lambda", "gpu_8x_h100_sxm5", 1)
    row, instances = pricing.priced_offer(db, gpu="h100-sxm", count=16, as_of=None,
                                          **{**USD, "category": "spot"})
    assert (row.provider, row.price_per_hour, instances) == ("aws", D("17.63"), 2)


def test_priced_offer_missing_says_what_exists(db):
    with pytest.raises(NotFound) as error:
        pricing.priced_offer(db, gpu="h100-sxm", count=8, as_of=None,
                             **{**USD, "provider": "azure"})
    assert str(error.value) == (
        "no on-demand price for 8x h100-sxm from azure as of now; h100-sxm prices exist for: "
        "aws on-demand (8 GPUs); aws spot (8 GPUs); lambda on-demand (1, 8 GPUs)")
    message = str(pricing.no_price(db, as_of=at("2026-10-15"), gpu="l4", count=1,
                                   provider=None, region="eu-west-1", category=None,
                                   currency="USD"))
    assert message == ("no any-category price for 1x l4 in eu-west-1 as of "
                       "2026-10-15T00:00:00Z; GPUs with USD prices: a100-80gb, h100-sxm")


def test_no_price_in_an_empty_store(empty_db):
    with pytest.raises(NotFound) as error:
        pricing.priced_offer(empty_db, gpu="h100-sxm", count=1, as_of=None, **USD)
    assert str(error.value) == ("no on-demand price for 1x h100-sxm as of now; the store has "
                                "no USD prices then (run `gpu-tracker refresh`)")


def test_offer_for_run_sizes_only_with_a_workload(db):
    row, instances, sized = pricing.offer_for_run(
        db, gpu="h100-sxm", count=8, workload=None, billing=BILLING, as_of=None, **USD)
    assert (row.provider, instances, sized) == ("lambda", 1, None)
    row, instances, sized = pricing.offer_for_run(
        db, gpu="h100-sxm", count=8, workload=WORKLOAD, billing=BILLING, as_of=None, **USD)
    assert row.provider == "lambda" and sized.fits and sized.wall_hours > 0


def test_cheapest_sized_offer_refuses_a_count_the_job_does_not_fit(db):
    with pytest.raises(InvalidInput, match="does not fit on 1 x h100-sxm"):
        pricing.cheapest_sized_offer(db, gpu="h100-sxm", count=1,
                                     workload={"model": "llama-3.1-8b", "workload": "pretrain",
                                               "tokens": 1e10},
                                     billing=BILLING, as_of=None, **USD)
    with pytest.raises(InvalidInput, match=r"whole GPU count, got 1\.5"):
        pricing.cheapest_sized_offer(db, gpu="h100-sxm", count=1.5, workload=WORKLOAD,
                                     billing=BILLING, as_of=None, **USD)


def test_cloud_price_is_for_all_the_gpus_as_of(db):
    price, row, named = pricing.cloud_price(db, gpu="h100-sxm", gpus=D(8), as_of=None,
                                            **{**USD, "provider": "aws"})
    assert price == D("55.04") and row.instance_type == "p5.48xlarge"
    assert named.startswith("aws p5.48xlarge") and "8 GPUs per instance x 1" in named
    older, _, _ = pricing.cloud_price(db, gpu="h100-sxm", gpus=D(8), as_of=at("2026-10-02"),
                                   **{**USD, "provider": "aws"})
    assert older == D("98.32")


def test_instance_price_takes_the_cheapest_zone(db):
    row = pricing.instance_price(db, provider="aws", region="us-east-1", instance="p5.48xlarge",
                                 category="spot", as_of=None, currency="USD")
    assert (row.zone, row.price_per_hour) == ("us-east-1a", D("17.63"))


@pytest.mark.parametrize(("instance", "region", "message"), [
    ("p4de.24xlarge", "us-east-1",
     "no spot price for p4de.24xlarge in aws us-east-1 as of now; it has: on-demand"),
    ("nope.large", None,
     "no spot price for nope.large in aws as of now; spot prices exist for: p5.48xlarge"),
    ("p5.48xlarge", "mars-1",
     "no spot prices from aws mars-1 as of now (run `gpu-tracker refresh`)"),
])
def test_instance_price_missing_says_what_exists(db, instance, region, message):
    with pytest.raises(NotFound) as error:
        pricing.instance_price(db, provider="aws", region=region, instance=instance,
                               category="spot", as_of=None, currency="USD")
    assert str(error.value) == message


def test_node_mtti_given_else_the_stored_band_else_the_provider_default(db):
    from tracker.answers.documents import node_mtti

    settings = EconomicsSettings()
    bands = pricing.interruption_bands(db, None)
    assert list(bands) == [("aws", "us-east-1", "p5.48xlarge")]
    p5 = {"provider": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge"}
    mtti, source = node_mtti(settings, bands, **p5)
    # '5-10%' at its midpoint as a monthly reclaim probability: λ = −ln(0.925)/720.
    assert mtti == pytest.approx(720 / 0.0779615, rel=1e-5)
    assert source == ("aws interruption band '5-10%' for p5.48xlarge in us-east-1 (as of "
                      "2026-10-01T00:00:00Z): 7.5% per 720 h as a probability")
    assert node_mtti(settings, bands, **p5, given=3.5) == (3.5, "given")
    default = settings.default_mtti_hours("aws")
    assert node_mtti(settings, bands, **{**p5, "instance_type": "p4de.24xlarge"}) == default
    assert node_mtti(settings, pricing.interruption_bands(db, at("2026-09-01")), **p5) == default
    assert node_mtti(settings, {}, provider="lambda", region="us-east-1",
                     instance_type="gpu_8x_h100_sxm5") == settings.default_mtti_hours("lambda")


def test_compare_runs_ranks_and_limits(db):
    rows, skipped = pricing.compare_runs(db, workload=WORKLOAD, billing=BILLING, max_gpus=64,
                                         as_of=None, currency="USD")
    assert skipped == []
    costs = [r["cost"] for r in rows]
    assert costs == sorted(costs)
    assert (rows[0]["gpu"], rows[0]["provider"], rows[0]["category"]) == (
        "h100-sxm", "aws", "spot")
    only, _ = pricing.compare_runs(db, workload=WORKLOAD, billing=BILLING, max_gpus=8,
                                   as_of=None, currency="USD", gpus=["h100-sxm"],
                                   categories=["on-demand"], limit=2)
    assert len(only) == 2 and {r["gpu"] for r in only} == {"h100-sxm"}
    assert all(r["category"] == "on-demand" and r["count"] <= 8 for r in only)


def test_compare_runs_without_prices(db, empty_db):
    with pytest.raises(NotFound) as error:
        pricing.compare_runs(db, workload=WORKLOAD, billing=BILLING, max_gpus=8, as_of=None,
                             currency="USD", gpus=["b200"])
    assert str(error.value) == ("no USD prices match for b200 as of now; GPUs with prices: "
                                "a100-80gb, h100-sxm")
    with pytest.raises(NotFound) as error:
        pricing.compare_runs(empty_db, workload=WORKLOAD, billing=BILLING, max_gpus=8,
                             as_of=None, currency="EUR")
    assert str(error.value) == ("the store has no EUR prices as of now "
                                "(run `gpu-tracker refresh`)")
