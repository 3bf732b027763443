"""Lambda Cloud on-demand GPU prices from the instance-types API (API key).

`GET /api/v1/instance-types` returns `{"data": {<name>: {"instance_type": {...},
"regions_with_capacity_available": [{"name", "description"}]}}}`; prices are integer cents per
hour for the whole instance (`price_cents_per_hour`), specs carry `vcpus`, `memory_gib`,
`storage_gib` and `gpus`, and `gpu_description` names one GPU ("H100 (80 GB SXM5)").

Regions: one observation per region that has capacity now. An instance type with no capacity
anywhere is still recorded once, with region "" and `{"capacity": false}`: the price list is
what we track, and it should not vanish whenever Lambda sells out (SkyPilot goes further and
copies every row to a hardcoded region list; we do not invent regions).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from scrapers.base import PriceObservation, Record, Rejected, Source, in_gpu_families, json_number
from scrapers.http import HttpClient
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.money import to_decimal

PROVIDER = "lambda"
INSTANCE_TYPES_URL = "https://cloud.lambdalabs.com/api/v1/instance-types"
_COUNT_PREFIX = re.compile(r"^\s*(\d+)\s*x\s+", re.IGNORECASE)
_MEMORY = re.compile(r"\((\d+(?:\.\d+)?)\s*GB", re.IGNORECASE)


def _count(specs: Mapping[str, Any], description: str) -> int | None:
    gpus = specs.get("gpus")
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        return gpus
    match = _COUNT_PREFIX.match(description)
    return int(match.group(1)) if match else None


class LambdaSource(Source):
    name = "lambda"
    description = "Lambda Cloud instance types and on-demand prices (API key)"
    DEFAULTS = {
        "url": INSTANCE_TYPES_URL,
        "regions": [],  # empty: every region with capacity
        "gpu_families": [],
    }
    SECRET_ENV = "GPU_TRACKER_LAMBDA_API_KEY"

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        url = str(self.settings["url"])
        # Lambda's docs recommend a Bearer header (Basic with the key as user also works).
        payload = client.get_json(url, headers={"Authorization": f"Bearer {self._secret or ''}"})
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            error = payload["error"]
            raise SourceError(
                f"lambda: API error {error.get('code', '?')}: {error.get('message', '')}".strip())
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, dict):
            raise SourceError("lambda: response has no 'data' object of instance types")
        for name, entry in data.items():
            if not isinstance(entry, dict):
                yield Rejected(f"lambda {name}: entry is not an object", entry, PROVIDER)
                continue
            yield from self._offers(str(name), entry, url, fetched_at)

    def _offers(self, name: str, entry: Mapping[str, Any], url: str,
                fetched_at: datetime) -> Iterator[Record]:
        itype = entry.get("instance_type")
        if not isinstance(itype, dict):
            yield Rejected(f"lambda {name}: no instance_type object", dict(entry), PROVIDER)
            return
        raw_specs = itype.get("specs")
        specs: Mapping[str, Any] = raw_specs if isinstance(raw_specs, dict) else {}
        description = str(itype.get("description") or "")
        count = _count(specs, description)
        if count == 0:
            return  # CPU-only instance type
        if count is None:
            if name.startswith("cpu_"):
                return
            yield Rejected(f"lambda {name}: no GPU count (specs.gpus or 'Nx' description)",
                           dict(entry), PROVIDER)
            return
        gpu_name = str(itype.get("gpu_description") or _COUNT_PREFIX.sub("", description)).strip()
        if not gpu_name:
            yield Rejected(f"lambda {name}: no GPU description", dict(entry), PROVIDER)
            return
        memory_match = _MEMORY.search(gpu_name) or _MEMORY.search(description)
        memory_gb = float(memory_match.group(1)) if memory_match else None
        if not in_gpu_families(gpu_name, memory_gb, list(self.settings["gpu_families"] or [])):
            return
        cents = itype.get("price_cents_per_hour")
        if cents is None:
            yield Rejected(f"lambda {name}: price_cents_per_hour is missing", dict(entry),
                           PROVIDER)
            return
        try:
            price = to_decimal(cents, what="price_cents_per_hour") / Decimal(100)
        except InvalidInput as exc:
            yield Rejected(f"lambda {name}: {exc}", dict(entry), PROVIDER)
            return
        regions = [r for r in entry.get("regions_with_capacity_available") or []
                   if isinstance(r, dict) and r.get("name")]
        wanted = {str(r) for r in self.settings["regions"] or []}
        # The fields every region's observation shares, spread into PriceObservation.
        base: dict[str, Any] = {
            "provider": PROVIDER, "instance_type": str(itype.get("name") or name),
            "gpu_name": gpu_name, "gpu_count": count, "category": "on-demand",
            "price_per_hour": price, "currency": "USD", "observed_at": fetched_at,
            "gpu_memory_gb": memory_gb, "vcpus": json_number(specs.get("vcpus")),
            "ram_gb": json_number(specs.get("memory_gib")), "source_url": url,
        }
        if not regions:
            yield PriceObservation(**base, region="", attributes={"capacity": False})
            return
        for region in regions:
            if wanted and region["name"] not in wanted:
                continue
            attributes: dict[str, Any] = {"capacity": True}
            if region.get("description"):
                attributes["region_description"] = str(region["description"])
            yield PriceObservation(**base, region=str(region["name"]), attributes=attributes)


