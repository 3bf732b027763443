"""Google Cloud (Compute Engine) GPU prices from the Cloud Billing Catalog API.

The catalog prices a GPU machine by parts: a per-GPU SKU plus, for the machine's series, a
per-vCPU "Instance Core" SKU and a per-GiB "Instance Ram" SKU. This source walks every page of
Compute Engine SKUs (`services/6F81-5844-456A/skus`, API key in the query string), keeps the GPU,
core and RAM rates per region and capacity type, and yields one observation per accelerator-
optimized machine type, region and category:

    price = gpu_rate * gpus + core_rate * vCPUs + ram_rate * GiB

Rules taken from the two public anchors (SkyPilot `fetch_gcp.py`, gpuhunt `providers/gcp.py`):
- `usageType` OnDemand and Preemptible; Reserved, Custom, Premium, Sole Tenancy, suspended and
  DWS (Calendar Mode) SKUs are not prices of an ordinary VM and are skipped;
- committed-use discounts (`commitments`, on by default): `usageType` Commit1Yr / Commit3Yr
  with descriptions "Commitment v1: Nvidia L4 GPU in Iowa for 1 Year", "Commitment v1: A2 Cpu
  in Americas for 3 Years", "Commitment v1: A2 Ram in ... for 1 Year" price the same parts per
  hour under a resource-based commitment; a machine's committed price is the committed GPU,
  core and RAM rates combined as above, category `reserved-1y` / `reserved-3y`
  (`attributes["commitment_kind"] = "committed-use-discount"`). A machine whose GPU has a
  commitment rate in a region but whose core or RAM commitment rate is missing is rejected
  with the reason;
- spot is `usageType == "Preemptible"` OR "Preemptible" in the description: B200 spot slices are
  published with usageType OnDemand and a "Spot Preemptible ..." description;
- B200 (A4) is priced per "1 gpu slice" with no separate core/RAM SKUs, so that rate already
  covers the host;
- a machine whose core or RAM SKU is missing in a region cannot be priced there and is rejected
  with the reason (both anchors drop such rows);
- A3 High with fewer than 8 GPUs, A3 Ultra and A4 are not sold on demand (GCP consumption-option
  table, followed by gpuhunt), so only their spot prices are emitted.

N1 machines with attachable T4/V100/P100/P4 GPUs are not emitted: their VM shape is the user's
choice, so there is no single machine price to track.

Not emitted for want of a confirmed source (checked December 2026; see MACHINE_TYPES):
- A4X (`a4x-highgpu-4g`, 4 GB200, 140 vCPUs, 884 GB) and A4X Max (`a4x-maxgpu-4g-metal`, 4
  GB300): Google's docs give the shapes, but no catalog SKU description of their GPU or slice
  price was found (gpuhunt prices A4 only, from "A4 Nvidia B200 (1 gpu slice)"), so a price
  could not be assembled. Their SKUs are kept away from the B200 rate (`gpu_key`).
- G4 (`g4-standard-48/96/192/384`, 1/2/4/8 RTX PRO 6000): the GPU counts are public (SkyPilot's
  catalog tests), but only g4-standard-48's memory (180 GiB) was found, in secondary notes, and
  the GPU SKU's exact description ("RTX 6000 96GB", as gpuhunt matches it) in no capture.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from scrapers.base import PriceObservation, Record, Rejected, Source, in_gpu_families
from scrapers.http import HttpClient
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.money import check_currency, decimal_to_str, to_decimal

PROVIDER = "gcp"
SKUS_URL = "https://cloudbilling.googleapis.com/v1/services/6F81-5844-456A/skus"


@dataclass(frozen=True, slots=True)
class MachineType:
    """An accelerator-optimized machine type: fixed GPU count, vCPUs and memory (GiB)."""

    name: str
    gpu: str  # GCP accelerator type name, kept as the raw GPU name
    gpu_count: int
    vcpus: int
    ram_gib: int
    series: str | None  # core/RAM SKU series ("a2", "a3plus", ...); None: GPU rate covers the host
    on_demand: bool = True  # False where GCP sells the machine only as spot / DWS


def _machines(gpu: str, series: str | None, rows: list[tuple[str, int, int, int]],
              on_demand: tuple[str, ...] | None = None) -> list[MachineType]:
    return [MachineType(name, gpu, count, vcpus, ram, series,
                        on_demand is None or name in on_demand)
            for name, count, vcpus, ram in rows]


# vCPUs and memory from the SkyPilot GCP catalog (skypilot-org/skypilot-catalog
# catalogs/v8/gcp/vms.csv, columns vCPUs and MemoryGiB = memoryMb / 1024) and the GCP
# accelerator-optimized machine docs; G2 GPU counts from the same docs (24 -> 2, 48 -> 4, 96 -> 8).
MACHINE_TYPES: dict[str, MachineType] = {m.name: m for m in [
    *_machines("nvidia-tesla-a100", "a2", [
        ("a2-highgpu-1g", 1, 12, 85), ("a2-highgpu-2g", 2, 24, 170),
        ("a2-highgpu-4g", 4, 48, 340), ("a2-highgpu-8g", 8, 96, 680),
        ("a2-megagpu-16g", 16, 96, 1360)]),
    *_machines("nvidia-a100-80gb", "a2", [
        ("a2-ultragpu-1g", 1, 12, 170), ("a2-ultragpu-2g", 2, 24, 340),
        ("a2-ultragpu-4g", 4, 48, 680), ("a2-ultragpu-8g", 8, 96, 1360)]),
    *_machines("nvidia-h100-80gb", "a3", [
        ("a3-highgpu-1g", 1, 26, 234), ("a3-highgpu-2g", 2, 52, 468),
        ("a3-highgpu-4g", 4, 104, 936), ("a3-highgpu-8g", 8, 208, 1872),
        ("a3-edgegpu-8g", 8, 208, 1872)],
        on_demand=("a3-highgpu-8g", "a3-edgegpu-8g")),
    *_machines("nvidia-h100-mega-80gb", "a3plus", [("a3-megagpu-8g", 8, 208, 1872)]),
    *_machines("nvidia-h200-141gb", "a3ultra", [("a3-ultragpu-8g", 8, 224, 2952)], on_demand=()),
    *_machines("nvidia-b200", None, [("a4-highgpu-8g", 8, 224, 3968)], on_demand=()),
    *_machines("nvidia-l4", "g2", [
        ("g2-standard-4", 1, 4, 16), ("g2-standard-8", 1, 8, 32),
        ("g2-standard-12", 1, 12, 48), ("g2-standard-16", 1, 16, 64),
        ("g2-standard-24", 2, 24, 96), ("g2-standard-32", 1, 32, 128),
        ("g2-standard-48", 4, 48, 192), ("g2-standard-96", 8, 96, 384)]),
]}

# Per-GPU memory (GB) of each accelerator type, as GCP documents it.
GPU_MEMORY_GB: dict[str, float] = {
    "nvidia-tesla-a100": 40, "nvidia-a100-80gb": 80, "nvidia-h100-80gb": 80,
    "nvidia-h100-mega-80gb": 80, "nvidia-h200-141gb": 141, "nvidia-b200": 180, "nvidia-l4": 24,
}

_SERIES = {m.series for m in MACHINE_TYPES.values() if m.series}
_SKIP_WORDS = ("commitment", "reserved", "sole tenancy", "custom", "premium", "suspended",
               "dws", "calendar mode")
_EXPECTED_UNIT = {"gpu": "h", "core": "h", "ram": "GiBy.h"}
_TAIL = re.compile(r" (?:attached to|running in)\b.*$")


@dataclass(frozen=True, slots=True)
class Component:
    """What one SKU prices: a GPU, a vCPU or a GiB of RAM, for one capacity type."""

    kind: str  # "gpu" | "core" | "ram"
    key: str  # accelerator type for a GPU, series ("a2", "g2", ...) for core and RAM
    category: str  # "on-demand" | "spot"


@dataclass(frozen=True, slots=True)
class Rate:
    price: Decimal
    sku_id: str
    effective_time: str | None


def gpu_key(text: str) -> str | None:
    """The accelerator type a GPU SKU description names, for the GPUs our machines carry."""
    t = text.lower().replace("nvidia", " ").replace("tesla", " ")
    if re.search(r"gb[23]00", t):
        # A4X (GB200) and A4X Max (GB300) GPUs are not B200s: a SKU naming them must not price
        # the A4 B200 machine ("b200" is inside "gb200"). No A4X machine is in MACHINE_TYPES.
        return None
    if "b200" in t:
        return "nvidia-b200"
    if "h200" in t:
        return "nvidia-h200-141gb"
    if "h100" in t:
        # "H100 80GB Mega", "H100 Mega 80GB" and "H100 80GB Plus" all name the A3 Mega GPU.
        return "nvidia-h100-mega-80gb" if ("mega" in t or "plus" in t) else "nvidia-h100-80gb"
    if "a100" in t:
        return "nvidia-a100-80gb" if "80gb" in t.replace(" ", "") else "nvidia-tesla-a100"
    if re.search(r"(?<![a-z0-9])l4(?![0-9])", t):
        return "nvidia-l4"
    return None


COMMIT_USAGE = {"Commit1Yr": ("reserved-1y", 12), "Commit3Yr": ("reserved-3y", 36)}
_COMMIT_PREFIX = "commitment v1: "
_COMMIT_TERM = re.compile(r" for [13] years?$")
_COMMIT_TAIL = re.compile(r" (?:attached to|running in|in)\b.*$")


def classify_commitment(sku: Mapping[str, Any]) -> Component | None:
    """The machine component a committed-use SKU prices ("Commitment v1: A2 Cpu in Americas
    for 1 Year"), or None."""
    category = sku.get("category") or {}
    known = COMMIT_USAGE.get(str(category.get("usageType")))
    if category.get("resourceFamily") != "Compute" or known is None:
        return None
    low = str(sku.get("description") or "").lower()
    if not low.startswith(_COMMIT_PREFIX):
        return None
    what = _COMMIT_TERM.sub("", low.removeprefix(_COMMIT_PREFIX))
    if any(word in what for word in _SKIP_WORDS):
        return None
    what = _COMMIT_TAIL.sub("", what).strip()
    if what.endswith(" gpu") or category.get("resourceGroup") == "GPU":
        key = gpu_key(what)
        return Component("gpu", key, known[0]) if key else None
    for suffix, kind in ((" cpu", "core"), (" core", "core"), (" ram", "ram")):
        if what.endswith(suffix):
            return Component(kind, what[: -len(suffix)].replace(" ", ""), known[0])
    return None


def classify(sku: Mapping[str, Any], *, commitments: bool = False) -> Component | None:
    """Which machine component a SKU prices, or None when it is not an ordinary VM rate (nor,
    with `commitments`, a committed-use rate)."""
    category = sku.get("category") or {}
    if category.get("resourceFamily") != "Compute":
        return None
    usage = category.get("usageType")
    if commitments and usage in COMMIT_USAGE:
        return classify_commitment(sku)
    if usage not in ("OnDemand", "Preemptible"):
        return None  # Commit1Yr / Commit3Yr and other commitment usage types
    description = str(sku.get("description") or "")
    low = description.lower()
    if any(word in low for word in _SKIP_WORDS):
        return None
    spot = usage == "Preemptible" or "preemptible" in low
    what = re.sub(r"^(?:spot preemptible |preemptible )", "", low)
    what = _TAIL.sub("", what).strip()
    kind_category = "spot" if spot else "on-demand"
    if "(1 gpu slice)" in what or category.get("resourceGroup") == "GPU" or what.endswith(" gpu"):
        key = gpu_key(what)
        return Component("gpu", key, kind_category) if key else None
    for suffix, kind in ((" instance core", "core"), (" instance ram", "ram")):
        if what.endswith(suffix):
            series = what[: -len(suffix)].replace(" ", "")
            return Component(kind, series, kind_category)
    return None


def pick_tier(tiers: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The tier that prices ordinary usage: the one starting at 0, unless it is a free allowance.

    GPU, core and RAM SKUs carry one tier; a SKU whose first tier is $0 followed by a paid
    tier (a free-usage allowance) is priced by the first paid tier.
    """
    ordered = sorted(tiers, key=_tier_start)
    first = ordered[0]
    if len(ordered) > 1 and _tier_price(first) == 0:
        return ordered[1]
    return first


def _tier_start(tier: Mapping[str, Any]) -> Decimal:
    try:
        return to_decimal(tier.get("startUsageAmount") or 0, what="startUsageAmount")
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None


def _tier_price(tier: Mapping[str, Any]) -> Decimal:
    unit_price = tier.get("unitPrice") or {}
    units = unit_price.get("units", "0")  # int64 serialized as a string; omitted when 0
    nanos = unit_price.get("nanos", 0)  # omitted when 0
    if isinstance(units, bool) or isinstance(nanos, bool):
        raise ValueError("units/nanos are not numbers")
    try:
        # Bounded first: int() of a number like 1e999999999 would build a billion digits.
        whole, fraction = to_decimal(units, what="units"), to_decimal(nanos, what="nanos")
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    if fraction != fraction.to_integral_value() or abs(fraction) >= 1_000_000_000:
        raise ValueError(f"nanos {str(nanos)[:40]!r} is not a whole number below 10^9")
    return whole + fraction.scaleb(-9)


def unit_price(sku: Mapping[str, Any], kind: str, currency: str) -> tuple[Decimal, str | None]:
    """`units + nanos/1e9` of the SKU's current price; ValueError with the reason if unusable."""
    infos = sku.get("pricingInfo") or []
    if not infos:
        raise ValueError("no pricingInfo")
    info = infos[0]
    expression = info.get("pricingExpression") or {}
    unit = expression.get("usageUnit")
    if unit != _EXPECTED_UNIT[kind]:
        raise ValueError(f"usageUnit {unit!r}, expected {_EXPECTED_UNIT[kind]!r}")
    tiers = expression.get("tieredRates") or []
    if not tiers:
        raise ValueError("no tieredRates")
    tier = pick_tier(tiers)
    code = (tier.get("unitPrice") or {}).get("currencyCode")
    try:
        code = check_currency(code or "")
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    if code != currency:
        raise ValueError(f"currency {code}, asked for {currency}")
    try:
        price = _tier_price(tier)
    except (ArithmeticError, TypeError, ValueError):
        raise ValueError(f"unparseable unitPrice {tier.get('unitPrice')!r}") from None
    return price, info.get("effectiveTime")


class GcpSource(Source):
    name = "gcp"
    description = "Google Cloud GPU machines from the Cloud Billing Catalog API (API key)"
    DEFAULTS = {
        "url": SKUS_URL,
        "regions": [],  # empty: every region the SKUs list
        "gpu_families": [],  # empty: every GPU in the machine table
        "max_pages": 40,
        "page_size": 5000,
        "currency": "USD",
        "commitments": True,  # committed-use discount SKUs -> reserved-1y / reserved-3y
    }
    SECRET_ENV = "GPU_TRACKER_GCP_API_KEY"

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        url = str(self.settings["url"])
        currency = check_currency(str(self.settings["currency"]))
        max_pages = int(self.settings["max_pages"])
        rates: dict[tuple[str, str, str, str], Rate] = {}
        commitments = bool(self.settings.get("commitments", True))
        for sku in self._skus(client, url, currency, max_pages):
            component = classify(sku, commitments=commitments)
            if component is None:
                continue
            if component.kind != "gpu" and component.key not in _SERIES:
                continue  # core/RAM of a series no GPU machine uses
            try:
                price, effective = unit_price(sku, component.kind, currency)
            except ValueError as exc:
                yield Rejected(f"gcp SKU {sku.get('skuId')} ({sku.get('description')}): {exc}",
                               dict(sku), PROVIDER)
                continue
            for region in sku.get("serviceRegions") or []:
                key = (component.kind, component.key, component.category, str(region))
                # The first SKU seen for a component and region wins; later duplicates
                # (e.g. "H100 80GB Mega" and "H100 80GB Plus") name the same rate.
                rates.setdefault(key, Rate(price, str(sku.get("skuId")), effective))
        yield from self._machine_offers(rates, currency, url, fetched_at)

    def _skus(self, client: HttpClient, url: str, currency: str,
              max_pages: int) -> Iterator[Mapping[str, Any]]:
        params: dict[str, Any] = {"key": self._secret or "", "currencyCode": currency,
                                  "pageSize": int(self.settings["page_size"])}
        seen_tokens: set[str] = set()
        pages = 0
        while True:
            pages += 1
            if pages > max_pages:
                raise SourceError(f"gcp: more than max_pages={max_pages} pages of SKUs")
            page = client.get_json(url, params=params)
            if not isinstance(page, dict):
                raise SourceError("gcp: SKU page is not a JSON object")
            skus = page.get("skus") or []
            if not isinstance(skus, list):
                raise SourceError("gcp: 'skus' is not a list")
            for sku in skus:
                if isinstance(sku, dict):
                    yield sku
            token = page.get("nextPageToken") or ""
            if not token:
                return
            if token in seen_tokens:
                raise SourceError("gcp: nextPageToken repeats; the catalog pagination loops")
            seen_tokens.add(token)
            params = {**params, "pageToken": token}

    def _machine_offers(self, rates: Mapping[tuple[str, str, str, str], Rate], currency: str,
                        url: str, fetched_at: datetime) -> Iterator[Record]:
        regions_wanted = {str(r) for r in self.settings["regions"] or []}
        families = [str(f) for f in self.settings["gpu_families"] or []]
        gpu_rates: dict[tuple[str, str], dict[str, Rate]] = {}
        for (kind, key, category, region), rate in rates.items():
            if kind == "gpu":
                gpu_rates.setdefault((key, category), {})[region] = rate
        for machine in MACHINE_TYPES.values():
            memory = GPU_MEMORY_GB.get(machine.gpu)
            if not in_gpu_families(machine.gpu, memory, families):
                continue
            for category in ("on-demand", "spot", "reserved-1y", "reserved-3y"):
                if category == "on-demand" and not machine.on_demand:
                    continue
                by_region = gpu_rates.get((machine.gpu, category), {})
                for region in sorted(by_region):
                    if regions_wanted and region not in regions_wanted:
                        continue
                    yield self._offer(machine, category, region, by_region[region], rates,
                                      currency, url, fetched_at)

    def _offer(self, machine: MachineType, category: str, region: str, gpu: Rate,
               rates: Mapping[tuple[str, str, str, str], Rate], currency: str, url: str,
               fetched_at: datetime) -> Record:
        attributes: dict[str, Any] = {
            "billing": "per-second",
            "gpu_sku": gpu.sku_id,
            "gpu_price_per_gpu": decimal_to_str(gpu.price),
            "effective_time": gpu.effective_time,
        }
        if category in ("reserved-1y", "reserved-3y"):
            attributes["commitment_kind"] = "committed-use-discount"
            attributes["term_months"] = 12 if category == "reserved-1y" else 36
        price = gpu.price * machine.gpu_count
        if machine.series is None:
            attributes["host_included"] = True
        else:
            core = rates.get(("core", machine.series, category, region))
            ram = rates.get(("ram", machine.series, category, region))
            if core is None or ram is None:
                missing = [what for what, rate in (("Core", core), ("Ram", ram)) if rate is None]
                # The SKU's own spelling: "A3Plus Instance Ram", "G2 Instance Core".
                series = machine.series.upper().replace("PLUS", "Plus").replace("ULTRA", "Ultra")
                names = " and ".join(f"{series} Instance {what}" for what in missing)
                return Rejected(
                    f"gcp {machine.name} {category} in {region}: no {names} SKU in the "
                    "catalog, so the machine cannot be priced",
                    {"machine_type": machine.name, "region": region, "category": category,
                     "gpu_sku": gpu.sku_id}, PROVIDER)
            price += core.price * machine.vcpus + ram.price * machine.ram_gib
            attributes.update({
                "core_sku": core.sku_id, "core_price": decimal_to_str(core.price),
                "ram_sku": ram.sku_id, "ram_price_per_gib": decimal_to_str(ram.price),
            })
        return PriceObservation(
            provider=PROVIDER, instance_type=machine.name, gpu_name=machine.gpu,
            gpu_count=machine.gpu_count, category=category, price_per_hour=price,
            currency=currency, observed_at=fetched_at, region=region,
            gpu_memory_gb=GPU_MEMORY_GB.get(machine.gpu), vcpus=machine.vcpus,
            ram_gb=machine.ram_gib, source_url=url, attributes=attributes,
        )
