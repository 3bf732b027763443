"""The synthetic market that tools/synthetic_market.py writes into a store: offers of
providers and their daily prices, generated reproducibly from a seed (issue #26).

What the market looks like, and where each figure comes from
------------------------------------------------------------
- GPU classes: every class in data/gpus.json (all 68 have the sizing figures, bf16 TFLOPS and
  memory bandwidth). Consumer GeForce cards (rtx-30xx/40xx/50xx) are listed by marketplaces
  only; GB200/GB300 come as 4-GPU slices of an NVL72 rack where data/fabric.json knows the
  shape (GCP `a4x-highgpu-4g`, OCI `BM.GPU.GB200.4`: scale-up domain 72).
- Pricing categories, share of offers: on-demand 0.765, spot 0.196, bid 0.02, reserved 0.02
  (half 1-year, half 3-year). Derived from the bundled snapshot data/prices/2026-11-23.csv
  (102 rows: 78 on-demand, 20 spot, 2 bid, 1 reserved-1y, 1 reserved-3y).
- GPUs per instance: 1: 0.414, 2: 0.204, 4: 0.147, 8: 0.235. Derived from the GPU rows of the
  SkyPilot v8 catalogs in tests/fixtures/skypilot/v8/ and the public SkyPilot catalog
  (skypilot-org/skypilot-catalog, the catalogs/v8 GPU files)
  (770 rows with 1, 2, 4 or 8 GPUs: 319, 157, 113, 181; 7 rows of 5, 7, 10 or 16 GPUs left out).
- On-demand price per GPU-hour of a class: the median over the bundled 2026-11-23 on-demand
  rows of the 16 classes it prices (`BUNDLED_MEDIAN`); the other classes from a log-linear fit
  to those 16 medians, price = exp(-2.6533) x bf16_TFLOPS^0.1559 x memory_GB^0.6057 (least
  squares in logs; rms error of the fit 0.38 in log price, i.e. about x1.46), which is also
  the spread of one offer around its class's price (a lognormal with sigma 0.38).
- Provider kind factor on that price: hyperscaler 1.4, neocloud 1.0, marketplace 0.7 (the
  bundled H100 SXM rows: AWS/Azure/GCP 5.6-6.9 a GPU-hour, Lambda/Nebius/Crusoe 2.9-3.9,
  RunPod/Vast.ai 2.0-2.7; rounded).
- Category factor on the on-demand price: spot 0.348 (median spot/on-demand ratio of the 20
  bundled spot rows with an on-demand twin; range 0.11-0.69), bid 0.4 (the two bundled Vast.ai
  bids against their classes' medians, 0.14 and 0.69, rounded to their mean), reserved-1y 0.832
  and reserved-3y 0.617 (the bundled Azure NC48ads_A100_v4 savings-plan rows over its
  pay-as-you-go price, 6.1148104 and 4.5317474 over 7.346).
- How often a price changes a day: on-demand 0.00069 (the bundled snapshots 2026-09-28,
  10-19, 11-09, 11-23: 3 changes in 4,347 offer-days of on-demand rows), reserved 0 (no change
  in the bundled rows), spot x and bid 2x (bids move faster than spot: assumed), x solved so
  that all offers together change `change_rate` (5%) of their prices a day, the issue's
  benchmark figure: x = 0.21 at 5%. A change moves the price by a lognormal step (sigma 0.05
  for spot and bid, 0.10 for on-demand and reserved: list-price changes are rarer and larger,
  e.g. the bundled AWS P5 cut of 44% and Lambda's 8x H100 from 23.92 to 31.92 between the two
  SkyPilot lambda catalogs) pulled 30% back towards the offer's base (a mean-reverting walk,
  as bench/report_scale.py's).
- Churn: 10% of the offers appear on a day after the first, 5% leave before the last; the
  first offer of each (source, provider, region) stays all year, so a refresh always lists its
  region and closes exactly the offers that left (as ingest closes them).
- Sources: AWS, GCP and Azure their own APIs (zones for AWS spot), Lambda, RunPod and Vast.ai
  their own, OCI and a part of the neoclouds through `skypilot`, the rest through `gpuhunt`
  (sized to be the largest source, about 10,000 offers at 50,000: the cron refresh of the
  benchmark refreshes it).

The provider mix, regions and instance names are invented where no real capture names them;
the figures above are what the captures show, and only they are meant to be realistic.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

CATEGORY_SHARE = {"on-demand": 0.765, "spot": 0.196, "bid": 0.02, "reserved-1y": 0.01,
                  "reserved-3y": 0.01}
COUNT_SHARE = {1: 0.414, 2: 0.204, 4: 0.147, 8: 0.235}
BUNDLED_MEDIAN = {
    "l4": 1.323, "l40s": 1.32, "a100-40gb": 2.897, "a100-80gb": 2.79, "h100-sxm": 4.14,
    "h200": 4.545, "b200": 6.89, "a100-80gb-pcie": 3.673, "h100-nvl": 2.89,
    "a100-40gb-pcie": 1.45, "mi300x": 3.45, "a10": 1.645, "rtx-a6000": 1.09, "gh200": 2.29,
    "h100-pcie": 2.89, "rtx-4090": 0.45,
}
FIT = (-2.6533, 0.1559, 0.6057)  # log price = a + b log bf16 TFLOPS + c log memory GB
OFFER_SIGMA = 0.38
KIND_FACTOR = {"hyperscaler": 1.4, "neocloud": 1.0, "marketplace": 0.7}
CATEGORY_FACTOR = {"on-demand": 1.0, "spot": 0.348, "bid": 0.4, "reserved-1y": 0.832,
                   "reserved-3y": 0.617}
ON_DEMAND_CHANGE = 0.00069
STEP_SIGMA = {"on-demand": 0.10, "reserved-1y": 0.10, "reserved-3y": 0.10, "spot": 0.05,
              "bid": 0.05}
LATE_SHARE, LEAVE_SHARE = 0.10, 0.05

# provider -> (kind, source, weight, regions, categories it lists besides on-demand)
_KNOWN = [
    ("aws", "hyperscaler", "aws", 12, 16, ("spot", "reserved-1y", "reserved-3y")),
    ("gcp", "hyperscaler", "gcp", 8, 12, ("spot", "reserved-1y", "reserved-3y")),
    ("azure", "hyperscaler", "azure", 8, 12, ("spot", "reserved-1y", "reserved-3y")),
    ("oci", "hyperscaler", "skypilot", 4, 8, ("reserved-1y",)),
    ("vastai", "marketplace", "vastai", 12, 24, ("bid",)),
    ("runpod", "marketplace", "runpod", 7, 10, ("spot",)),
    ("lambda", "neocloud", "lambda", 2, 6, ("reserved-1y",)),
    ("nebius", "neocloud", "skypilot", 2, 3, ("spot", "reserved-1y")),
    ("coreweave", "neocloud", "skypilot", 2, 4, ("reserved-1y",)),
    ("crusoe", "neocloud", "skypilot", 1.5, 2, ("spot",)),
    ("tensordock", "marketplace", "skypilot", 2, 8, ()),
    ("spheron", "marketplace", "skypilot", 2, 6, ("spot",)),
]
_GPUHUNT_HOSTS = [
    "paperspace", "digitalocean", "hyperbolic", "fluidstack", "together", "vultr",
    "datacrunch", "verda", "cudo", "denvr", "hyperstack", "massedcompute", "scaleway",
    "sesterce", "excesssupply", "latitude", "voltagepark", "lambdalabs-reseller",
    "genesiscloud", "ovhcloud", "jarvislabs", "vagon", "gcore", "seeweb", "koyeb",
    "oblivus", "tenstorrent-cloud", "civo",
]
_AWS_REGIONS = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
                "ap-northeast-1", "ap-southeast-2", "ca-central-1", "sa-east-1", "eu-north-1",
                "ap-south-1", "us-west-1", "eu-west-2", "ap-northeast-2", "ap-southeast-1",
                "eu-west-3"]
# Real instance names where the bundled snapshot or data/fabric.json has one:
# (provider, GPU, count) -> instance type.
_REAL_NAMES = {
    ("aws", "a100-40gb", 8): "p4d.24xlarge", ("aws", "a100-80gb", 8): "p4de.24xlarge",
    ("aws", "h100-sxm", 8): "p5.48xlarge", ("aws", "h200", 8): "p5e.48xlarge",
    ("aws", "b200", 8): "p6-b200.48xlarge", ("aws", "h100-sxm", 1): "p5.4xlarge",
    ("aws", "l4", 1): "g6.2xlarge", ("aws", "l4", 4): "g6.24xlarge", ("aws", "l4", 8):
    "g6.48xlarge", ("aws", "a10g", 1): "g5.2xlarge", ("aws", "a10g", 4): "g5.12xlarge",
    ("aws", "a10g", 8): "g5.48xlarge", ("aws", "l40s", 1): "g6e.2xlarge",
    ("aws", "t4", 1): "g4dn.xlarge", ("gcp", "a100-40gb", 8): "a2-highgpu-8g",
    ("gcp", "a100-80gb", 8): "a2-ultragpu-8g", ("gcp", "h100-sxm", 8): "a3-highgpu-8g",
    ("gcp", "h200", 8): "a3-ultragpu-8g", ("gcp", "b200", 8): "a4-highgpu-8g",
    ("gcp", "gb200", 4): "a4x-highgpu-4g", ("gcp", "l4", 1): "g2-standard-8",
    ("azure", "a100-80gb", 8): "Standard_ND96amsr_A100_v4",
    ("azure", "h100-sxm", 8): "Standard_ND96isr_H100_v5",
    ("azure", "h200", 8): "Standard_ND96isr_H200_v5",
    ("azure", "mi300x", 8): "Standard_ND96isr_MI300X_v5",
    ("azure", "a100-80gb-pcie", 2): "Standard_NC48ads_A100_v4",
    ("oci", "a100-80gb", 8): "BM.GPU.A100-v2.8", ("oci", "h100-sxm", 8): "BM.GPU.H100.8",
    ("oci", "h200", 8): "BM.GPU.H200.8", ("oci", "b200", 8): "BM.GPU.B200.8",
    ("oci", "gb200", 4): "BM.GPU.GB200.4",
}
_NVL72 = {"gcp": "a4x-{gpu}-4g", "oci": "BM.GPU.{GPU}.4"}  # GB200/GB300 4-GPU slices
_CONSUMER = re.compile(r"^rtx-[345]0\d\d")

START_HOUR = 6  # every refresh at 06:00 UTC


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    id: str
    kind: str
    source: str
    weight: float
    regions: tuple[str, ...]
    categories: tuple[str, ...]


@dataclass
class Market:
    """The offers (column arrays, one entry per offer) and their daily price history."""

    providers: list[ProviderSpec]
    days: int
    end: date
    source: list[str] = field(default_factory=list)
    provider: list[str] = field(default_factory=list)
    region: list[str] = field(default_factory=list)
    zone: list[str] = field(default_factory=list)
    instance_type: list[str] = field(default_factory=list)
    variant: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    gpu: list[str] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    start_day: Any = None  # numpy int arrays, per offer
    end_day: Any = None  # the day it is first missing; `days` = still listed
    # The price events, sorted by offer then day: offer index, day, price x 10^4 (an int).
    event_offer: Any = None
    event_day: Any = None
    event_price: Any = None

    @property
    def offers(self) -> int:
        return len(self.provider)

    def instant(self, day: int) -> datetime:
        """When the refresh of `day` (0 = the first) ran."""
        first = self.end - timedelta(days=self.days)
        return datetime.combine(first + timedelta(days=day), time(START_HOUR), tzinfo=UTC)

    @property
    def sources(self) -> list[str]:
        return sorted(set(self.source))


@dataclass(frozen=True)
class MarketSummary:
    offers: int
    providers: int
    days: int
    spans: int
    sources: dict[str, int]  # offers per source
    first_refresh: datetime
    last_refresh: datetime
    build_s: float
    path: str

    def largest_source(self) -> str:
        return max(self.sources, key=lambda s: (self.sources[s], s))


def provider_specs(n: int) -> list[ProviderSpec]:
    """`n` providers: the known ones first, then catalog hosts (all through gpuhunt)."""
    if n < 1:
        raise ValueError("providers must be at least 1")
    specs = []
    for pid, kind, source, weight, n_regions, cats in _KNOWN[:n]:
        regions = (_AWS_REGIONS[:n_regions] if pid == "aws"
                   else tuple(f"{pid}-r{i + 1}" for i in range(n_regions)))
        specs.append(ProviderSpec(pid, kind, source, weight, tuple(regions),
                                  ("on-demand", *cats)))
    hosts = _GPUHUNT_HOSTS + [f"host{i:02d}" for i in range(max(0, n - len(_KNOWN)
                                                                 - len(_GPUHUNT_HOSTS)))]
    extra = n - len(specs)
    for i, pid in enumerate(hosts[:extra]):
        # gpuhunt together about 20% of the offers (the benchmark's 10,000-offer source).
        kind = "marketplace" if i % 4 == 3 else "neocloud"
        cats = ("bid",) if kind == "marketplace" and i % 8 == 7 else ("spot",) if i % 3 == 0 \
            else ()
        specs.append(ProviderSpec(pid, kind, "gpuhunt", 19.0 / max(extra, 1), tuple(
            f"{pid}-r{j + 1}" for j in range(1 + i % 4)), ("on-demand", *cats)))
    return specs


def _base_price(gpu_id: str) -> float:
    """On-demand price per GPU-hour of a class (module docstring)."""
    if gpu_id in BUNDLED_MEDIAN:
        return BUNDLED_MEDIAN[gpu_id]
    from tracker.core.gpus import get_gpu

    gpu = get_gpu(gpu_id)
    assert gpu.specs is not None and gpu.specs.bf16_tflops
    a, b, c = FIT
    return math.exp(a + b * math.log(gpu.specs.bf16_tflops) + c * math.log(gpu.memory_gb))


def change_rates(change_rate: float) -> dict[str, float]:
    """The daily change probability per category whose offer-weighted mean is `change_rate`."""
    rest = change_rate - CATEGORY_SHARE["on-demand"] * ON_DEMAND_CHANGE
    spot = max(0.0, rest) / (CATEGORY_SHARE["spot"] + 2 * CATEGORY_SHARE["bid"])
    return {"on-demand": ON_DEMAND_CHANGE, "reserved-1y": 0.0, "reserved-3y": 0.0,
            "spot": min(1.0, spot), "bid": min(1.0, 2 * spot)}


def generate_market(*, offers: int = 50_000, providers: int = 40, days: int = 365,
                    seed: int = 0, change_rate: float = 0.05,
                    end: date = date(2026, 11, 30)) -> Market:
    """The offers and their price history (no database): deterministic in its arguments."""
    import numpy as np

    from tracker.core.gpus import gpu_table

    if offers < 1 or days < 1:
        raise ValueError("offers and days must be at least 1")
    rng = np.random.default_rng(seed)
    specs = provider_specs(providers)
    market = Market(providers=specs, days=days, end=end)
    gpus = sorted(gpu_table())
    categories = list(CATEGORY_SHARE)
    cat_p = np.array([CATEGORY_SHARE[c] for c in categories])
    cat_p /= cat_p.sum()
    counts = list(COUNT_SHARE)
    count_p = np.array([COUNT_SHARE[c] for c in counts])
    count_p /= count_p.sum()
    # More offers of the classes the market prices (the bundled ones) than of the rest.
    gpu_w = np.array([4.0 if g in BUNDLED_MEDIAN else 1.0 for g in gpus])
    by_category = {c: [s for s in specs if c in s.categories] or specs for c in categories}
    cumulative = {c: np.cumsum([s.weight for s in pool]) for c, pool in by_category.items()}
    seen: set[tuple] = set()
    # Marketplace offers so far: spreads AWS spot offers over zones a, b and c.
    marketplace_offers = 0
    bases: list[float] = []
    batch = max(offers, 1024)
    while market.offers < offers:
        cats = rng.choice(len(categories), size=batch, p=cat_p)
        picks = rng.random(batch)
        gpu_picks = rng.choice(len(gpus), size=batch, p=gpu_w / gpu_w.sum())
        count_picks = rng.choice(len(counts), size=batch, p=count_p)
        region_picks = rng.random(batch)
        spreads = rng.lognormal(0.0, OFFER_SIGMA, size=batch)
        for k in range(batch):
            if market.offers >= offers:
                break
            category = categories[cats[k]]
            pool, weights = by_category[category], cumulative[category]
            spec = pool[min(int(np.searchsorted(weights, picks[k] * weights[-1], side="right")),
                            len(pool) - 1)]
            gpu = gpus[gpu_picks[k]]
            if _CONSUMER.match(gpu) and spec.kind != "marketplace":
                continue
            count = counts[count_picks[k]]
            name = None
            if gpu in ("gb200", "gb300") and spec.id in _NVL72:
                count = 4
                name = _NVL72[spec.id].format(gpu=gpu, GPU=gpu.upper())
            region = spec.regions[int(region_picks[k] * len(spec.regions))]
            zone = (f"{region}{'abc'[marketplace_offers % 3]}"
                    if spec.id == "aws" and category == "spot" else "")
            if spec.kind == "marketplace":
                marketplace_offers += 1
                # Named by size, as the marketplaces' own scrapers name them
                # (scrapers/vastai.py: "{GPUs}x {GPU}" per GPU, count, country and
                # verification; scrapers/runpod.py: "{GPUs}x {GPU type}"): one name for
                # every machine of a size, so the offers of a region are its variants.
                name = f"{count}x-{gpu}"
            name = name or _REAL_NAMES.get((spec.id, gpu, count)) or (
                f"gpu_{count}x_{gpu}" if spec.kind == "neocloud" else f"{spec.id}-{gpu}-{count}g")
            variant = ""
            key = (spec.source, spec.id, region, zone, name, variant, category)
            serial = 1
            while key in seen:
                serial += 1
                variant = f"v{serial}"
                key = (*key[:5], variant, category)
            seen.add(key)
            market.source.append(spec.source)
            market.provider.append(spec.id)
            market.region.append(region)
            market.zone.append(zone)
            market.instance_type.append(name)
            market.variant.append(variant)
            market.category.append(category)
            market.gpu.append(gpu)
            market.count.append(count)
            bases.append(_base_price(gpu) * KIND_FACTOR[spec.kind]
                         * CATEGORY_FACTOR[category] * float(spreads[k]))
    _history(market, np.array(bases), rng, change_rate)
    return market


def _history(market: Market, base: Any, rng: Any, change_rate: float) -> None:
    """Start and end days, and the price events of each offer (vectorised over offers)."""
    import numpy as np

    n, days = market.offers, market.days
    start = np.zeros(n, dtype=np.int64)
    end = np.full(n, days, dtype=np.int64)
    if days > 2:
        late = rng.random(n) < LATE_SHARE
        start[late] = rng.integers(1, days - 1, size=int(late.sum()))
        leave = rng.random(n) < LEAVE_SHARE
        end[leave] = np.maximum(start[leave] + 1, rng.integers(1, days, size=int(leave.sum())))
    # The first offer of each (source, provider, region) is listed every day.
    first_of: dict[tuple[str, str, str], int] = {}
    for i in range(n):
        first_of.setdefault((market.source[i], market.provider[i], market.region[i]), i)
    keep = np.fromiter(first_of.values(), dtype=np.int64)
    start[keep], end[keep] = 0, days
    market.start_day, market.end_day = start, end

    rates = change_rates(change_rate)
    p = np.array([rates[c] for c in market.category])
    sigma = np.array([STEP_SIGMA[c] for c in market.category])
    count = np.array(market.count, dtype=np.float64)
    floor = base * 0.3
    level = base.copy()
    price = np.rint(level * count * 1e4).astype(np.int64)
    offers_, days_, prices_ = [np.arange(n)], [start.copy()], [price.copy()]
    for day in range(1, days):
        moved = (rng.random(n) < p) & (start < day) & (end > day)
        idx = np.nonzero(moved)[0]
        if not len(idx):
            continue
        step = rng.normal(0.0, 1.0, size=len(idx))
        new = level[idx] + 0.3 * (base[idx] - level[idx]) + level[idx] * sigma[idx] * step
        level[idx] = np.maximum(new, floor[idx])
        new_price = np.rint(level[idx] * count[idx] * 1e4).astype(np.int64)
        changed = new_price != price[idx]
        idx, new_price = idx[changed], new_price[changed]
        price[idx] = new_price
        offers_.append(idx)
        days_.append(np.full(len(idx), day, dtype=np.int64))
        prices_.append(new_price)
    offer_ids = np.concatenate(offers_)
    day_ids = np.concatenate(days_)
    order = np.lexsort((day_ids, offer_ids))
    market.event_offer = offer_ids[order]
    market.event_day = day_ids[order]
    market.event_price = np.concatenate(prices_)[order]
