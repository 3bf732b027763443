"""The priced store that the economics CLI and pricing tests share."""

from __future__ import annotations

from scrapers.base import InterruptionFact
from tracker.store.db import Database
from tracker.store.ingest import ingest_records

from ..helpers import at, obs


def seed_prices(db: Database) -> None:
    """H100 and A100 prices on two dates, and an AWS Spot Advisor band for p5.48xlarge."""
    early, late = at("2026-10-01"), at("2026-11-01")
    for when, p5 in ((early, "98.32"), (late, "55.04")):
        ingest_records(db, "catalog", [
            obs(p5, when),  # aws p5.48xlarge on-demand, 8x H100
            obs("17.63", when, category="spot", zone="us-east-1a"),
            obs("21.15", when, category="spot", zone="us-east-1b"),
            obs("27.447", when, instance_type="p4de.24xlarge", gpu_name="A100",
                gpu_memory_gb=80),
        ], started_at=when)
        ingest_records(db, "lambda", [
            obs("31.92", when, provider="lambda", instance_type="gpu_8x_h100_sxm5",
                region="us-east-1"),
            obs("4.29", when, provider="lambda", instance_type="gpu_1x_h100_sxm5", gpu_count=1,
                region="us-east-1"),
        ], started_at=when)
    ingest_records(db, "spot-advisor", [InterruptionFact(
        provider="aws", region="us-east-1", instance_type="p5.48xlarge", band=1,
        band_label="5-10%", min_pct=5, max_pct=10, as_of=early)], started_at=early)
