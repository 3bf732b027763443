"""Vast.ai marketplace prices from the offers search, bucketed into offer classes.

The search (`POST https://console.vast.ai/api/v0/bundles/`, a JSON body of field filters
`{field: {op: value}}` plus `limit`, `type` and `order`) returns thousands of individual host
offers. Tracking each would make a price history of hosts coming and going, so offers are
grouped into classes and each class becomes one offer:

    class = (gpu_name, num_gpus, country from `geolocation` "City, CC", verified or not)

- `on-demand` price: the class's cheapest `dph_total` ($/h for the whole offer, GPU plus the
  default storage), or the `price_percentile` setting's nearest-rank percentile (e.g. 50 for
  the median). Nearest-rank picks a price some host actually asks, so no value is invented;
- `bid` price: the same statistic over the class's `min_bid` (the interruptible floor for the
  whole offer, as gpuhunt and SkyPilot read it); classes with no bids get no bid row;
- attributes count the offers in the class and give the spread (min/max) of the asks.

Offers with a null, unparseable or non-positive `dph_total` are rejected one by one instead of
entering a class: a zero would otherwise become the class's "cheapest" price. `cpu_cores` can be
null (gpuhunt a78bf9d); then the host RAM share is unknown and `ram_gb` is left empty.
The search needs no key (gpuhunt calls it without one); if `GPU_TRACKER_VASTAI_API_KEY` is set it
is sent as a Bearer token, as Vast's docs show.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Self

from scrapers.base import PriceObservation, Record, Rejected, Source, in_gpu_families, json_number
from scrapers.http import HttpClient
from tracker.core.bounds import MAX_GPUS_PER_OFFER
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.money import decimal_to_str, to_decimal

PROVIDER = "vastai"
BUNDLES_URL = "https://console.vast.ai/api/v0/bundles/"
OPTIONAL_KEY_ENV = "GPU_TRACKER_VASTAI_API_KEY"
_COUNTRY = re.compile(r"[A-Za-z]{2}")


def country_of(geolocation: Any) -> str:
    """The country code of a Vast location, the one spelling of Vast regions in the tracker.

    'Texas, US' -> 'US' (the search API's `geolocation`); 'France, FR, EU' and ', US, NA' ->
    'FR', 'US' (SkyPilot's vast catalog adds the continent). Without a two-letter code the
    location is kept as written."""
    if not geolocation:
        return ""
    parts = [p.strip() for p in str(geolocation).split(",")]
    code = parts[-2] if len(parts) >= 3 else parts[-1]
    return code.upper() if _COUNTRY.fullmatch(code) else str(geolocation).strip()


def nearest_rank(values: list[Decimal], percentile: int) -> Decimal:
    """The nearest-rank percentile of sorted values; 0 is the minimum."""
    rank = math.ceil(percentile / 100 * len(values))
    return values[min(max(rank - 1, 0), len(values) - 1)]


@dataclass(frozen=True, slots=True)
class Offer:
    offer_id: Any
    gpu_name: str
    num_gpus: int
    country: str
    verified: bool
    dph_total: Decimal
    min_bid: Decimal | None
    gpu_memory_gb: float | None
    vcpus: float | None
    ram_gb: float | None


def parse_offer(raw: Mapping[str, Any]) -> Offer | str | None:
    """An Offer, or the reason it is rejected, or None when it is not a rentable GPU offer."""
    if raw.get("rentable") is False or raw.get("rented") is True:
        return None
    gpu_name = str(raw.get("gpu_name") or "").strip()
    if not gpu_name:
        return "gpu_name is missing"
    num_gpus = raw.get("num_gpus")
    if num_gpus is None or isinstance(num_gpus, bool):
        return "num_gpus is missing"
    number = json_number(num_gpus)
    if number is None and isinstance(num_gpus, str):
        try:
            number = json_number(float(num_gpus))
        except ValueError:
            number = None
    if number is None or not number.is_integer() or abs(number) > MAX_GPUS_PER_OFFER:
        return f"num_gpus {str(num_gpus)[:40]!r} is not a whole GPU count"
    count = int(number)
    if count <= 0:
        return None  # no GPU in the offer
    total = raw.get("dph_total")
    what = "dph_total"
    if total is None:
        # Some real offers carry no dph_total; the CLI's own total is search.totalHour (GPU
        # plus storage, equal to dph_total where both are present).
        search = raw.get("search")
        total = search.get("totalHour") if isinstance(search, Mapping) else None
        what = "search.totalHour"
        if total is None:
            return "no dph_total and no search.totalHour"
    try:
        dph_total = to_decimal(total, what=what)
    except InvalidInput as exc:
        return str(exc)
    if dph_total <= 0:
        return f"{what} is {dph_total}, not a price"
    min_bid = None
    if raw.get("min_bid") is not None:
        try:
            min_bid = to_decimal(raw["min_bid"], what="min_bid")
        except InvalidInput:
            min_bid = None
        if min_bid is not None and min_bid <= 0:
            min_bid = None
    gpu_ram = json_number(raw.get("gpu_ram"))  # MiB per GPU
    cores, effective, cpu_ram = (json_number(raw.get(k)) for k in
                                 ("cpu_cores", "cpu_cores_effective", "cpu_ram"))
    ram_gb = None
    if cores and effective is not None and cpu_ram is not None:
        # cpu_ram is the host's MB; the offer gets the share of its effective cores (gpuhunt).
        ram_gb = round(cpu_ram * effective / cores / 1000, 1)
    verified = raw.get("verified")
    if verified is None:
        verified = raw.get("verification") == "verified"
    return Offer(
        offer_id=raw.get("id"), gpu_name=gpu_name, num_gpus=count,
        country=country_of(raw.get("geolocation")), verified=bool(verified),
        dph_total=dph_total, min_bid=min_bid,
        gpu_memory_gb=round(gpu_ram / 1024, 1) if gpu_ram else None,
        vcpus=effective, ram_gb=ram_gb,
    )


class VastaiSource(Source):
    name = "vastai"
    description = "Vast.ai marketplace offers, bucketed by GPU, count, country and verification"
    DEFAULTS = {
        "url": BUNDLES_URL,
        "regions": [],  # country codes ("US", "CA"); empty: all
        "gpu_families": [],
        "limit": 5000,
        "price_percentile": 0,  # 0: cheapest offer of each class; 50: median
        "verified_only": False,
        "datacenter_only": False,
    }
    SECRET_ENV = None  # the search works without a key; see OPTIONAL_KEY_ENV

    @classmethod
    def from_config(cls, file_settings: Mapping[str, Any] | None = None,
                    environ: Mapping[str, str] | None = None) -> Self:
        environ = os.environ if environ is None else environ
        source = super().from_config(file_settings, environ)
        source._secret = environ.get(OPTIONAL_KEY_ENV) or None
        from tracker.core.secrets import learn

        learn([source._secret])
        return source

    def request_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "limit": int(self.settings["limit"]),
            "type": "on-demand",
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "order": [["dph_total", "asc"]],
        }
        if self.settings["verified_only"]:
            body["verified"] = {"eq": True}
        if self.settings["datacenter_only"]:
            body["datacenter"] = {"eq": True}
        return body

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        url = str(self.settings["url"])
        percentile = int(self.settings["price_percentile"])
        if not 0 <= percentile <= 100:
            raise InvalidInput(f"vastai setting price_percentile must be 0..100, got {percentile}")
        headers = {"Authorization": f"Bearer {self._secret}"} if self._secret else None
        response = client.post_json(url, self.request_body(), headers=headers)
        offers = _offers(response)
        regions = {str(r).strip().upper() for r in self.settings["regions"] or []}
        families = [str(f) for f in self.settings["gpu_families"] or []]
        buckets: dict[tuple[str, int, str, bool], list[Offer]] = {}
        for raw in offers:
            if not isinstance(raw, dict):
                yield Rejected("vastai offer is not an object", raw, PROVIDER)
                continue
            parsed = parse_offer(raw)
            if parsed is None:
                continue
            if isinstance(parsed, str):
                yield Rejected(f"vastai offer {raw.get('id')}: {parsed}", raw, PROVIDER)
                continue
            if regions and parsed.country.upper() not in regions:
                continue
            if not in_gpu_families(parsed.gpu_name, parsed.gpu_memory_gb, families):
                continue
            key = (parsed.gpu_name, parsed.num_gpus, parsed.country, parsed.verified)
            buckets.setdefault(key, []).append(parsed)
        for key in sorted(buckets):
            yield from self._bucket_offers(buckets[key], percentile, url, fetched_at)

    def _bucket_offers(self, offers: list[Offer], percentile: int, url: str,
                       fetched_at: datetime) -> Iterator[PriceObservation]:
        basis = "cheapest" if percentile == 0 else f"p{percentile}"
        asks = sorted(offers, key=lambda o: o.dph_total)
        ask_price = nearest_rank([o.dph_total for o in asks], percentile)
        chosen = next(o for o in asks if o.dph_total == ask_price)
        first = asks[0]
        # The fields both observations share, spread into PriceObservation(**base, ...).
        base: dict[str, Any] = {
            "provider": PROVIDER, "instance_type": f"{first.num_gpus}x {first.gpu_name}",
            "gpu_name": first.gpu_name, "gpu_count": first.num_gpus, "currency": "USD",
            "observed_at": fetched_at, "region": first.country,
            "variant": "verified" if first.verified else "unverified",
            "gpu_memory_gb": chosen.gpu_memory_gb, "vcpus": chosen.vcpus,
            "ram_gb": chosen.ram_gb, "source_url": url,
        }
        yield PriceObservation(**base, category="on-demand", price_per_hour=ask_price, attributes={
            "offers": len(asks), "price_basis": basis, "offer_id": chosen.offer_id,
            "dph_total_min": decimal_to_str(asks[0].dph_total),
            "dph_total_max": decimal_to_str(asks[-1].dph_total),
            "verified": first.verified, "billing": "per-second",
        })
        bid_offers = [(o.min_bid, o) for o in offers if o.min_bid is not None]
        if not bid_offers:
            return
        bid_offers.sort(key=lambda pair: pair[0])
        bids = [o for _, o in bid_offers]
        bid_price = nearest_rank([b for b, _ in bid_offers], percentile)
        bid_offer = next(o for b, o in bid_offers if b == bid_price)
        yield PriceObservation(
            **{**base, "gpu_memory_gb": bid_offer.gpu_memory_gb, "vcpus": bid_offer.vcpus,
               "ram_gb": bid_offer.ram_gb},
            category="bid", price_per_hour=bid_price, attributes={
                "offers": len(bids), "price_basis": basis, "offer_id": bid_offer.offer_id,
                "min_bid_min": decimal_to_str(bid_offers[0][0]),
                "min_bid_max": decimal_to_str(bid_offers[-1][0]),
                "verified": first.verified, "billing": "per-second",
            })


def _offers(response: Any) -> list[Any]:
    if not isinstance(response, dict):
        raise SourceError("vastai: search response is not a JSON object")
    if response.get("success") is False:
        message = response.get("msg") or response.get("error") or "request refused"
        raise SourceError(f"vastai: search failed: {message}")
    offers = response.get("offers")
    if not isinstance(offers, list):
        raise SourceError("vastai: response has no 'offers' list")
    return offers


