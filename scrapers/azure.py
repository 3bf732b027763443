"""Azure Retail Prices API: pay-as-you-go, Spot and committed prices of the GPU (N-series) VMs.

Endpoint `GET https://prices.azure.com/api/retail/prices` (no auth). One OData `$filter` per
configured VM family (and per region when regions are configured):

    serviceName eq 'Virtual Machines' and (priceType eq 'Consumption' or priceType eq
    'Reservation') and contains(armSkuName, 'Standard_NC') [and armRegionName eq 'eastus']

(`priceType eq 'Consumption'` alone with `commitments = false`.)

Pages are followed through `NextPageLink` until it is null. The link's query string is replayed
against the configured `url` (so a loopback mirror stays a loopback mirror, and a link never
sends us to another host); a link seen twice, or more than `max_pages` pages for one query,
fails the whole source with SourceError.

Row rules (Linux, per VM size, per region):
- Windows products (`productName` contains "Windows") and "Low Priority" meters are skipped;
  "Spot" meters become category `spot`, the rest `on-demand`.
- The retail API names no GPU: model, count and per-GPU memory come from `AZURE_GPU_SIZES`,
  a table of the N-series sizes, or from a listed size that differs only in its feature
  letters (`gpu_for_size`). Any other N-series size is Rejected as unmapped, with the GPU its
  name points to (`model_by_name`) in the reason and `unmapped=True`, so each run counts them;
  a count is never guessed.
- Committed prices (`commitments`, on by default) become categories `reserved-1y` and
  `reserved-3y`, each with `attributes["commitment_kind"]`:
  - `type: Reservation` rows (`reservationTerm` "1 Year" / "3 Years"): `retailPrice` is the
    price of the whole term, paid upfront or monthly (learn.microsoft.com/rest/api/
    cost-management/retail-prices/azure-retail-prices, "reservation prices"; its example row
    prices an E64 v4 year at 25007.0 with `unitOfMeasure` "1 Hour"). The stored price is the
    hourly equivalent, term price / (8,760 h × years), to 10 decimals; the term price is kept
    as `attributes["upfront_total"]` and the term as `term_months`. Variant `reservation`.
  - the `savingsPlan` list of a Consumption row (api-version 2023-01-01-preview): an hourly
    commitment rate per term, stored as it is. Variant `savings-plan`.
- Zero prices are yielded as they are: ingest validates prices centrally and quarantines them.
- `observed_at` is `fetched_at` for every row. The meter's `effectiveStartDate` (often years
  old, different per meter) is kept in `attributes["effective_start"]`: ingest treats each
  distinct `observed_at` as one complete snapshot, so per-meter dates would split one fetch
  into many partial snapshots.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any, ClassVar
from urllib.parse import urlsplit

from scrapers.base import PriceObservation, Record, Rejected, Source, repeated_price
from scrapers.http import HttpClient
from tracker.core.errors import SourceError

PROVIDER = "azure"
API_VERSION = "2023-01-01-preview"
# "1 Year" / "3 Years" (reservationTerm, savingsPlan[].term) -> category and months.
TERMS = {"1 year": ("reserved-1y", 12), "3 years": ("reserved-3y", 36)}
HOURS_PER_YEAR = 8760  # 365 days: Azure's reservation term hours
HOURLY_PLACES = Decimal("1e-10")


@dataclass(frozen=True, slots=True)
class AzureGpu:
    """What an Azure VM size carries: GPU model, GPUs per VM (may be a fraction), GB per GPU."""

    gpu_name: str
    count: float
    memory_gb: float | None
    series: str


def _series(gpu_name: str, memory_gb: float | None, series: str,
            sizes: Mapping[str, float]) -> dict[str, AzureGpu]:
    return {size.lower(): AzureGpu(gpu_name, count, memory_gb, series)
            for size, count in sizes.items()}


# VM size -> GPU, from the Microsoft Learn size pages of each series (sizes/gpu-accelerated/*),
# cross-checked with gpuhunt providers/azure.py (VM-name regexes, fractional A10 memory n/36) and
# SkyPilot fetch_azure.py (FAMILY_NAME_TO_SKYPILOT_GPU_NAME, NV{6,12,18}ads_A10_v5 = vCPU/36).
# Fractional sizes carry a fraction of one GPU: memory_gb stays the whole GPU's memory, so the
# VRAM a VM gets is count * memory_gb (NV6ads_A10_v5: 1/6 * 24 GB = 4 GB).
AZURE_GPU_SIZES: dict[str, AzureGpu] = {
    **_series("NVIDIA Tesla K80", 12, "NC (retired)", {
        "Standard_NC6": 1, "Standard_NC12": 2, "Standard_NC24": 4, "Standard_NC24r": 4}),
    **_series("NVIDIA Tesla P100", 16, "NCv2 (retired)", {
        "Standard_NC6s_v2": 1, "Standard_NC12s_v2": 2, "Standard_NC24s_v2": 4,
        "Standard_NC24rs_v2": 4}),
    **_series("NVIDIA Tesla V100", 16, "NCv3", {
        "Standard_NC6s_v3": 1, "Standard_NC12s_v3": 2, "Standard_NC24s_v3": 4,
        "Standard_NC24rs_v3": 4}),
    **_series("NVIDIA T4", 16, "NCasT4_v3", {
        "Standard_NC4as_T4_v3": 1, "Standard_NC8as_T4_v3": 1, "Standard_NC16as_T4_v3": 1,
        "Standard_NC64as_T4_v3": 4}),
    **_series("NVIDIA A100 80GB PCIe", 80, "NC A100 v4", {
        "Standard_NC24ads_A100_v4": 1, "Standard_NC48ads_A100_v4": 2,
        "Standard_NC96ads_A100_v4": 4}),
    **_series("NVIDIA H100 NVL", 94, "NCads H100 v5", {
        "Standard_NC40ads_H100_v5": 1, "Standard_NC80adis_H100_v5": 2}),
    **_series("NVIDIA H100 NVL", 94, "NCCads H100 v5 (confidential)", {
        "Standard_NCC40ads_H100_v5": 1}),
    **_series("NVIDIA Tesla P40", 24, "ND (retired)", {
        "Standard_ND6s": 1, "Standard_ND12s": 2, "Standard_ND24s": 4, "Standard_ND24rs": 4}),
    **_series("NVIDIA Tesla V100", 32, "NDv2", {"Standard_ND40rs_v2": 8}),
    **_series("NVIDIA A100 40GB SXM4", 40, "ND A100 v4", {"Standard_ND96asr_v4": 8}),
    **_series("NVIDIA A100 80GB SXM4", 80, "NDm A100 v4", {"Standard_ND96amsr_A100_v4": 8}),
    **_series("NVIDIA H100 SXM", 80, "ND H100 v5", {"Standard_ND96isr_H100_v5": 8}),
    **_series("NVIDIA H200 SXM", 141, "ND H200 v5", {"Standard_ND96isr_H200_v5": 8}),
    **_series("AMD Instinct MI300X", 192, "ND MI300X v5", {"Standard_ND96isr_MI300X_v5": 8}),
    **_series("NVIDIA Tesla M60", 8, "NV / NVv2 (retired)", {
        "Standard_NV6": 1, "Standard_NV12": 2, "Standard_NV24": 4,
        "Standard_NV6s_v2": 1, "Standard_NV12s_v2": 2, "Standard_NV24s_v2": 4}),
    **_series("NVIDIA Tesla M60", 8, "NVv3", {
        "Standard_NV12s_v3": 1, "Standard_NV24s_v3": 2, "Standard_NV48s_v3": 4}),
    **_series("AMD Radeon Instinct MI25", 16, "NVv4 (fractional)", {
        "Standard_NV4as_v4": 1 / 8, "Standard_NV8as_v4": 1 / 4, "Standard_NV16as_v4": 1 / 2,
        "Standard_NV32as_v4": 1}),
    # Variants of ND H100 v5 / ND A100 v4 / NDv2 in the real price file (no InfiniBand `noIB`,
    # `flex`, `f`, `s` without `r`): the same 8 GPUs (ndh100v5-series.md, ndasra100v4-series.md).
    **_series("NVIDIA H100 SXM", 80, "ND H100 v5", {
        "Standard_ND96is_H100_v5": 8, "Standard_ND96is_noIB_H100_v5": 8,
        "Standard_ND96is_flex_H100_v5": 8, "Standard_ND96isf_H100_v5": 8,
        "Standard_ND96isrf_H100_v5": 8}),
    **_series("NVIDIA A100 40GB SXM4", 40, "ND A100 v4", {"Standard_ND96asr_A100_v4": 8}),
    **_series("NVIDIA A100 80GB SXM4", 80, "NDm A100 v4", {"Standard_ND96ams_A100_v4": 8}),
    **_series("NVIDIA Tesla V100", 32, "NDv2", {"Standard_ND40s_v2": 8}),
    **_series("AMD Instinct MI300X", 192, "ND MI300X v5", {"Standard_ND96is_MI300X_v5": 8}),
    **_series("NVIDIA GB200", 192, "ND GB200 v6", {"Standard_ND128isr_NDR_GB200_v6": 4}),
    # ND GB300 v6: 4 Blackwell Ultra GPUs of 288 GB per VM, 18 VMs to a 72-GPU NVLink domain
    # (the Accelerators tab of MicrosoftDocs/azure-compute-docs articles/virtual-machines/sizes/
    # gpu-accelerated/nd-gb300-v6-series.md@0c72655c: Standard_ND128isr_GB300_v6 and
    # Standard_ND128isrG5_GB300_v6, "4 | 288"). data/fabric.json's ND128isr(G5)?_GB300_v6 row
    # gives them their domain and 4 x 800 Gb/s InfiniBand.
    **_series("NVIDIA GB300", 288, "ND GB300 v6", {
        "Standard_ND128isr_GB300_v6": 4, "Standard_ND128isrG5_GB300_v6": 4}),
    # Promo sizes are the retired NV (M60) and NC (K80) sizes at a promotional price.
    **_series("NVIDIA Tesla M60", 8, "NV Promo (retired)", {
        "Standard_NV6_Promo": 1, "Standard_NV12_Promo": 2, "Standard_NV24_Promo": 4}),
    **_series("NVIDIA Tesla K80", 12, "NC Promo (retired)", {
        "Standard_NC6_Promo": 1, "Standard_NC12_Promo": 2, "Standard_NC24_Promo": 4,
        "Standard_NC24r_Promo": 4}),
    # Fractional AMD sizes: nvadsv710-v5-series.md and ngadsv620-series.md "Accelerators" tabs.
    **_series("AMD Radeon PRO V710", 28, "NVads V710 v5 (fractional below NV24)", {
        "Standard_NV4ads_V710_v5": 1 / 6, "Standard_NV8ads_V710_v5": 1 / 3,
        "Standard_NV12ads_V710_v5": 1 / 2, "Standard_NV24ads_V710_v5": 1,
        "Standard_NV28adms_V710_v5": 1}),
    **_series("AMD Radeon PRO V620", 32, "NGads V620 (fractional below NG32)", {
        "Standard_NG8ads_V620_v1": 1 / 4, "Standard_NG16ads_V620_v1": 1 / 2,
        "Standard_NG32ads_V620_v1": 1, "Standard_NG32adms_V620_v1": 1,
        "Standard_NG32adms_V620": 1}),
    # NC RTX PRO 6000 BSE v6 (GA sizes): 1/4, 1/2, 1 and 2 GPUs, as listed in the GA size table
    # of Microsoft's "Azure NCv6 virtual machines: enhancements and GA transition" post (linked
    # from nc-rtxpro6000-bse-v6-series-overview.md) and Azure/AKS's list of GRID v20 sizes.
    # The price file also lists preview sizes (NC32/64/128/132/256/264/320/324...) that no
    # published table gives a GPU count for: they stay unmapped (rejected), never guessed.
    **_series("NVIDIA RTX PRO 6000 Blackwell Server Edition", 96, "NC RTX PRO 6000 BSE v6", {
        "Standard_NC24lds_xl_RTXPRO6000BSE_v6": 1 / 4,
        "Standard_NC36ds_xl_RTXPRO6000BSE_v6": 1 / 4,
        "Standard_NC36lds_xl_RTXPRO6000BSE_v6": 1 / 4,
        "Standard_NC72ds_xl_RTXPRO6000BSE_v6": 1 / 2,
        "Standard_NC72lds_xl_RTXPRO6000BSE_v6": 1 / 2,
        "Standard_NC144ds_xl_RTXPRO6000BSE_v6": 1,
        "Standard_NC144lds_xl_RTXPRO6000BSE_v6": 1,
        "Standard_NC288ds_xl_RTXPRO6000BSE_v6": 2,
        "Standard_NC288lds_xl_RTXPRO6000BSE_v6": 2}),
    # Preview sizes with a published count: the "Accelerators" tabs of
    # MicrosoftDocs/azure-compute-docs articles/virtual-machines/sizes/gpu-accelerated/
    # nc-rtxpro6000-bse-v6-series.md@02773904 (NC128 1 GPU, NC256 and NC320 2 GPUs, ds and lds).
    **_series("NVIDIA RTX PRO 6000 Blackwell Server Edition", 96, "NC RTX PRO 6000 BSE v6", {
        "Standard_NC128ds_xl_RTXPRO6000BSE_v6": 1, "Standard_NC128lds_xl_RTXPRO6000BSE_v6": 1,
        "Standard_NC256ds_xl_RTXPRO6000BSE_v6": 2, "Standard_NC256lds_xl_RTXPRO6000BSE_v6": 2,
        "Standard_NC320ds_xl_RTXPRO6000BSE_v6": 2, "Standard_NC320lds_xl_RTXPRO6000BSE_v6": 2}),
    # Not mapped for want of a published GPU count: NCads A10 v4 (NC8ads_A10_v4 in the price file).
    **_series("NVIDIA A10", 24, "NVadsA10 v5 (fractional below NV36)", {
        "Standard_NV6ads_A10_v5": 1 / 6, "Standard_NV12ads_A10_v5": 1 / 3,
        "Standard_NV18ads_A10_v5": 1 / 2, "Standard_NV36ads_A10_v5": 1,
        "Standard_NV36adms_A10_v5": 1, "Standard_NV72ads_A10_v5": 2}),
}

# Windows VMs are separate products ("... Series Windows"; SkyPilot also drops " Win").
_WINDOWS_RE = re.compile(r"\bWin(?:dows)?\b")
# Azure size names put the vCPU count right after the family letters (ND96isr -> 96 vCPUs).
_VCPUS_RE = re.compile(r"^Standard_[A-Za-z]+?(\d+)")


def gpu_for_size(arm_sku_name: str) -> AzureGpu | None:
    """The GPU of an Azure VM size: from the table, else from a listed size it is a variant of
    (the same family, vCPUs, accelerator and version, other feature letters: `ND96isrf_H200_v5`
    beside `ND96isr_H200_v5`), else None."""
    found = AZURE_GPU_SIZES.get(arm_sku_name.strip().lower())
    if found is not None:
        return found
    key = _variant_key(arm_sku_name)
    return _variants().get(key) if key is not None else None


# Azure's size names: family letters, vCPUs, additive-feature letters (a AMD, d disk, i isolated,
# l low memory, m memory, r RDMA, s premium storage, ...), then `_<accelerator>_v<version>`
# (MicrosoftDocs/azure-compute-docs articles/virtual-machines/vm-naming-conventions.md). That the
# feature letters leave the GPUs of a size alone is derived from the published tables (every
# listed pair of sizes differing only in them has the same GPUs: NV36ads/NV36adms_A10_v5,
# ND96isr/ND96is_noIB_H100_v5, NC128ds/NC128lds_xl_RTXPRO6000BSE_v6), not stated by Microsoft;
# such a size is marked `mapped_from_variant` in its attributes.
_SIZE_PARTS_RE = re.compile(r"^standard_(?P<family>[a-z]+?)(?P<vcpus>\d+)[a-z_]*?"
                            r"_(?P<token>[a-z][a-z0-9]*\d[a-z0-9]*)_v(?P<version>\d+)$")


def _variant_key(arm_sku_name: str) -> tuple[str, str, str, str] | None:
    match = _SIZE_PARTS_RE.match(arm_sku_name.strip().lower())
    if match is None:
        return None
    return (match["family"], match["vcpus"], match["token"], match["version"])


@cache
def _variants() -> dict[tuple[str, str, str, str], AzureGpu]:
    """Listed sizes by (family, vCPUs, accelerator, version), where all of them agree."""
    groups: dict[tuple[str, str, str, str], set[AzureGpu]] = {}
    for size, gpu in AZURE_GPU_SIZES.items():
        key = _variant_key(size)
        if key is not None:
            groups.setdefault(key, set()).add(gpu)
    return {key: next(iter(gpus)) for key, gpus in groups.items() if len(gpus) == 1}


# The accelerator token Azure puts before the version in a size name (`_H100_v5`,
# `_RTXPRO6000BSE_v6`, `_A10_v4`); its GPU is the one the table's sizes with that token have.
_GPU_TOKEN_RE = re.compile(r"_(?P<token>[A-Za-z][A-Za-z0-9]*\d[A-Za-z0-9]*)_v\d+$")


def gpu_token(arm_sku_name: str) -> str | None:
    match = _GPU_TOKEN_RE.search(arm_sku_name.strip())
    return match.group("token").lower() if match else None


def model_by_name(arm_sku_name: str) -> str | None:
    """The GPU a size's name points to (through the table's sizes with the same accelerator
    token), or None; it gives the model, never a count, so an unmapped size stays unmapped
    but its rejection says which GPU it is."""
    token = gpu_token(arm_sku_name)
    if token is None:
        return None
    names = {gpu.gpu_name for size, gpu in AZURE_GPU_SIZES.items() if gpu_token(size) == token}
    return names.pop() if len(names) == 1 else None


def _vcpus(arm_sku_name: str) -> float | None:
    match = _VCPUS_RE.match(arm_sku_name)
    return float(match.group(1)) if match else None


class AzureSource(Source):
    name: ClassVar[str] = "azure"
    description: ClassVar[str] = "Azure Retail Prices API: N-series GPU VMs, pay-as-you-go and Spot"
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "url": "https://prices.azure.com/api/retail/prices",
        "regions": [],  # empty: every region the API lists
        "families": ["NC", "ND", "NV"],  # prefixes after "Standard_" (NC also covers NCC)
        "max_pages": 200,  # per query; the API serves up to 1000 items a page
        "currency": "USD",
        "commitments": True,  # reservations and savings plans (reserved-1y / reserved-3y)
    }
    SECRET_ENV: ClassVar[str | None] = None

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        families = [str(f).strip() for f in self.settings["families"] if str(f).strip()]
        regions = [str(r).strip() for r in self.settings["regions"] if str(r).strip()]
        seen: dict[tuple[str, str, str], Decimal] = {}
        for family in families:
            # No configured region: one unfiltered query (odata_filter's region=None).
            scopes: list[str | None] = list(regions) if regions else [None]
            for region in scopes:
                odata = odata_filter(family, region,
                                     reservations=bool(self.settings["commitments"]))
                for item in self._walk(client, odata):
                    yield from self._parse_item(item, family, fetched_at, seen)

    # -- paging ---------------------------------------------------------------------------
    def _walk(self, client: HttpClient, odata: str) -> Iterator[Any]:
        base = str(self.settings["url"])
        max_pages = int(self.settings["max_pages"])
        params: dict[str, str] | None = {
            "api-version": API_VERSION,
            "currencyCode": f"'{self.settings['currency']}'",
            "meterRegion": "'primary'",
            "$filter": odata,
        }
        url = base
        links_seen: set[str] = set()
        pages = 0
        while True:
            pages += 1
            if pages > max_pages:
                raise SourceError(
                    f"azure: more than max_pages={max_pages} pages for one query; "
                    "raise the setting or narrow regions/families")
            page = client.get_json(url, params=params)
            if not isinstance(page, dict) or not isinstance(page.get("Items"), list):
                raise SourceError(f"azure: page {pages} has no Items list")
            yield from page["Items"]
            link = page.get("NextPageLink")
            if not link:
                return
            if not isinstance(link, str):
                raise SourceError(f"azure: NextPageLink on page {pages} is not a string")
            if link in links_seen:
                raise SourceError(f"azure: NextPageLink repeats on page {pages}; stopping a loop")
            links_seen.add(link)
            url = rebase_link(link, base)
            params = None  # the link carries the filter, version, currency and $skip

    # -- rows -----------------------------------------------------------------------------
    def _parse_item(
        self, item: Any, family: str, fetched_at: datetime,
        seen: dict[tuple[str, str, str], Decimal],
    ) -> Iterator[Record]:
        if not isinstance(item, dict):
            yield Rejected("item is not an object", item, PROVIDER)
            return
        product = str(item.get("productName") or "")
        meter = str(item.get("meterName") or "")
        sku_label = str(item.get("skuName") or "")
        if _WINDOWS_RE.search(product) or "Cloud Services" in product:
            return
        if "Low Priority" in meter or "Low Priority" in sku_label:
            return
        kind = item.get("type", "Consumption")
        if kind not in ("Consumption", "Reservation"):
            return
        if kind == "Reservation" and not self.settings.get("commitments", True):
            return
        if item.get("isPrimaryMeterRegion") is False:
            return  # the same meter is listed again under its primary region
        size = str(item.get("armSkuName") or "").strip()
        if not size:
            yield Rejected("missing armSkuName", item, PROVIDER)
            return
        if not size.lower().startswith(f"standard_{family.lower()}"):
            return  # contains() also matches mid-name; keep the family the query asked for
        gpu = gpu_for_size(size)
        if gpu is None:
            model = model_by_name(size)
            what = (f"{model} by its name, but no published GPU count" if model
                    else "not in AZURE_GPU_SIZES")
            yield Rejected(f"unmapped Azure GPU VM size {size} ({what})", item, PROVIDER,
                           unmapped=True)
            return
        region = str(item.get("armRegionName") or "").strip()
        if not region:
            yield Rejected("missing armRegionName", item, PROVIDER)
            return
        price = item.get("retailPrice")
        if price is None or isinstance(price, bool) or not isinstance(price, (int, Decimal)):
            yield Rejected(f"retailPrice is missing or not a number: {price!r}", item, PROVIDER)
            return
        currency = str(item.get("currencyCode") or "").strip()
        if not currency:
            yield Rejected("missing currencyCode", item, PROVIDER)
            return
        unit = str(item.get("unitOfMeasure") or "")
        attributes: dict[str, Any] = {
            "meter_id": item.get("meterId"),
            "meter_name": meter,
            "product_name": product,
            "series": gpu.series,
        }
        if item.get("effectiveStartDate"):
            attributes["effective_start"] = item["effectiveStartDate"]
        if gpu.count < 1:
            attributes["fractional_gpu"] = True
        if size.lower() not in AZURE_GPU_SIZES:
            attributes["mapped_from_variant"] = True
        common: dict[str, Any] = {
            "instance_type": size, "gpu_name": gpu.gpu_name, "gpu_count": gpu.count,
            "currency": currency, "observed_at": fetched_at, "region": region,
            "gpu_memory_gb": gpu.memory_gb, "vcpus": _vcpus(size),
            "source_url": str(self.settings["url"])}
        if kind == "Reservation":
            yield from self._reservation(item, Decimal(price), unit, attributes, common, seen)
            return
        if unit != "1 Hour":
            yield Rejected(f"unexpected unitOfMeasure {unit!r} (want '1 Hour')", item, PROVIDER)
            return
        category = "spot" if ("Spot" in meter or sku_label.endswith(" Spot")) else "on-demand"
        amount = Decimal(price)
        if category == "on-demand" and self.settings.get("commitments", True):
            yield from self._savings_plans(item, attributes, common, seen)
        conflict = repeated_price(seen, (size.lower(), region, category), amount)
        if conflict is not None:
            if conflict:
                yield Rejected(f"second {category} meter for {size} in {region} with a "
                               f"different price ({conflict})", item, PROVIDER)
            return
        yield PriceObservation(provider=PROVIDER, category=category, price_per_hour=amount,
                               attributes=attributes, **common)

    def _reservation(self, item: Mapping[str, Any], total: Decimal, unit: str,
                     attributes: dict[str, Any], common: dict[str, Any],
                     seen: dict[tuple[str, str, str], Decimal]) -> Iterator[Record]:
        """A reservation row: the term's price as its hourly equivalent."""
        term = str(item.get("reservationTerm") or "")
        known = TERMS.get(term.strip().lower())
        if known is None:
            yield Rejected(f"unknown reservationTerm {term!r} (want '1 Year' or '3 Years')",
                           item, PROVIDER)
            return
        if unit not in ("1 Hour", "1 Year", "3 Years", "1/Year", "1/3 Years"):
            yield Rejected(f"unexpected unitOfMeasure {unit!r} for a reservation", item,
                           PROVIDER)
            return
        category, months = known
        hourly = (total / (HOURS_PER_YEAR * months // 12)).quantize(HOURLY_PLACES).normalize()
        key = (f"{str(common['instance_type']).lower()}|reservation", str(common["region"]),
               category)
        conflict = repeated_price(seen, key, hourly)
        if conflict is not None:
            if conflict:
                yield Rejected(f"second {term} reservation for {common['instance_type']} in "
                               f"{common['region']} with a different price ({conflict})", item,
                               PROVIDER)
            return
        yield PriceObservation(
            provider=PROVIDER, category=category, price_per_hour=hourly, variant="reservation",
            attributes={**attributes, "commitment_kind": "reservation", "term_months": months,
                        "upfront_total": str(total), "hourly_basis":
                        f"term price / {HOURS_PER_YEAR * months // 12} h"},
            **common)

    def _savings_plans(self, item: Mapping[str, Any], attributes: dict[str, Any],
                       common: dict[str, Any],
                       seen: dict[tuple[str, str, str], Decimal]) -> Iterator[Record]:
        """The hourly savings-plan rates a pay-as-you-go row lists, one per term."""
        plans = item.get("savingsPlan")
        if not plans:
            return
        if not isinstance(plans, list):
            yield Rejected("savingsPlan is not a list", item, PROVIDER)
            return
        for plan in plans:
            term = str((plan or {}).get("term") or "") if isinstance(plan, dict) else ""
            known = TERMS.get(term.strip().lower())
            rate = plan.get("retailPrice") if isinstance(plan, dict) else None
            if known is None or rate is None or isinstance(rate, bool) \
                    or not isinstance(rate, (int, Decimal)):
                yield Rejected(f"unusable savingsPlan entry {plan!r}", item, PROVIDER)
                continue
            category, months = known
            amount = Decimal(rate)
            key = (f"{str(common['instance_type']).lower()}|savings-plan",
                   str(common["region"]), category)
            if key in seen:
                continue  # a second meter of the same size lists the same plan
            seen[key] = amount
            yield PriceObservation(
                provider=PROVIDER, category=category, price_per_hour=amount,
                variant="savings-plan",
                attributes={**attributes, "commitment_kind": "savings-plan",
                            "term_months": months}, **common)


def odata_filter(family: str, region: str | None = None, *,
                 reservations: bool = False) -> str:
    """The `$filter` for one VM family (e.g. "NC"), optionally one region; with
    `reservations` the reservation rows too."""
    clauses = [
        "serviceName eq 'Virtual Machines'",
        "(priceType eq 'Consumption' or priceType eq 'Reservation')" if reservations
        else "priceType eq 'Consumption'",
        f"contains(armSkuName, 'Standard_{_odata_quote(family)}')",
    ]
    if region:
        clauses.append(f"armRegionName eq '{_odata_quote(region)}'")
    return " and ".join(clauses)


def rebase_link(link: str, base: str) -> str:
    """The NextPageLink's query string on the configured endpoint."""
    query = urlsplit(link).query
    return f"{base}?{query}" if query else base


def _odata_quote(value: str) -> str:
    return value.replace("'", "''")
