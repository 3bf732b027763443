"""RunPod GPU pod prices from the GraphQL API (`POST https://api.runpod.io/graphql`).

RunPod prices per GPU: `securePrice` (Secure Cloud) and `communityPrice` (Community Cloud),
plus `secureSpotPrice` / `communitySpotPrice` for interruptible pods. One `gpuTypes` query is
sent per configured GPU count N, with `lowestPrice(input: {gpuCount: N})`, whose `stockStatus`
("High", "Medium", "Low") tells whether an N-GPU pod of that type is offered at all; `null`
means it is not (RunPod's own reading, followed by gpuhunt), so that (type, N) yields nothing.
RunPod's GraphQL docs (runpod/docs `sdks/graphql/manage-pods.mdx`) also list the *string*
`"None"` among the values: it means no stock too, not a stock level.

MIG slices (`NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 1g.24gb`) are fractions of their
parent GPU (tracker.core.gpus.mig_slice): N slices of 1g.24gb are `gpu_count` N x 24/96 of an
RTX PRO 6000 with the parent's 96 GB per GPU; the profile stays in `attributes["mig_profile"]`.

Each offer is `N x per-GPU price`; Secure and Community stay apart as `variant` "secure" /
"community". Spot is a `spot` row only where the spot price is present and non-zero: RunPod is
discontinuing spot pods (gpuhunt commit 249b01c), so a null or 0 spot price means no spot market,
not a free GPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from scrapers.base import PriceObservation, Record, Rejected, Source, in_gpu_families, json_number
from scrapers.http import HttpClient
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.gpus import canonical_gpu, gpu_table, mig_slice
from tracker.core.money import decimal_to_str, to_decimal

PROVIDER = "runpod"
GRAPHQL_URL = "https://api.runpod.io/graphql"

# Field names as in the runpod-python SDK (runpod/api/queries/gpus.py) and gpuhunt's queries.
GPU_TYPES_QUERY = """
query GpuTypes($lowestPriceInput: GpuLowestPriceInput) {
  gpuTypes {
    id
    displayName
    manufacturer
    memoryInGb
    secureCloud
    communityCloud
    securePrice
    communityPrice
    secureSpotPrice
    communitySpotPrice
    maxGpuCount
    lowestPrice(input: $lowestPriceInput) {
      minimumBidPrice
      uninterruptablePrice
      minVcpu
      minMemory
      stockStatus
    }
  }
}
""".strip()

# stockStatus values meaning "not offered" besides null (lower-cased).
_NO_STOCK = {"none", ""}

_CLOUD_FIELDS = {
    "secure": ("secureCloud", "securePrice", "secureSpotPrice"),
    "community": ("communityCloud", "communityPrice", "communitySpotPrice"),
}


def _int_list(values: Any, setting: str) -> list[int]:
    result = []
    for value in values or []:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise InvalidInput(f"runpod setting {setting}: {value!r} is not an integer") from None
        if number < 1:
            raise InvalidInput(f"runpod setting {setting}: GPU counts start at 1, got {number}")
        result.append(number)
    return sorted(set(result))


class RunpodSource(Source):
    name = "runpod"
    description = "RunPod Secure and Community Cloud GPU pods from the GraphQL API (API key)"
    DEFAULTS = {
        "url": GRAPHQL_URL,
        "gpu_counts": [1, 2, 4, 8],
        "clouds": ["secure", "community"],
        "gpu_families": [],
        "include_spot": True,
    }
    SECRET_ENV = "GPU_TRACKER_RUNPOD_API_KEY"

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        url = str(self.settings["url"])
        counts = _int_list(self.settings["gpu_counts"], "gpu_counts")
        clouds = [str(c).strip().lower() for c in self.settings["clouds"] or []]
        unknown = [c for c in clouds if c not in _CLOUD_FIELDS]
        if unknown:
            raise InvalidInput(
                f"runpod setting clouds: unknown {', '.join(unknown)} (known: secure, community)")
        headers = {"Authorization": f"Bearer {self._secret or ''}"}
        for count in counts:
            payload = {"query": GPU_TYPES_QUERY,
                       "variables": {"lowestPriceInput": {"gpuCount": count}}}
            response = client.post_json(url, payload, headers=headers)
            for gpu_type in _gpu_types(response, self._secret):
                yield from self._offers(gpu_type, count, clouds, url, fetched_at)

    def _offers(self, gpu_type: Mapping[str, Any], count: int, clouds: list[str], url: str,
                fetched_at: datetime) -> Iterator[Record]:
        gpu_id = gpu_type.get("id")
        if not gpu_id:
            yield Rejected("runpod gpu type without an id", dict(gpu_type), PROVIDER)
            return
        max_count = gpu_type.get("maxGpuCount")
        if isinstance(max_count, int) and count > max_count:
            return
        lowest = gpu_type.get("lowestPrice")
        stock = lowest.get("stockStatus") if isinstance(lowest, dict) else None
        if not isinstance(lowest, dict) or stock is None or str(stock).strip().lower() in _NO_STOCK:
            return  # no pod with `count` GPUs of this type is offered
        memory = gpu_type.get("memoryInGb")
        memory_gb = float(memory) if isinstance(memory, (int, Decimal)) and memory else None
        gpu_name, gpu_count, extra = str(gpu_id), float(count), {}
        mig = mig_slice(gpu_name)
        if mig is not None:
            parent = canonical_gpu(mig.parent_name)
            if parent is None:
                yield Rejected(f"runpod {gpu_id}: MIG slice of an unknown GPU", dict(gpu_type),
                               PROVIDER)
                return
            parent_memory = gpu_table()[parent].memory_gb
            gpu_name, memory_gb = mig.parent_name, float(parent_memory)
            gpu_count = count * mig.memory_gb / parent_memory
            extra = {"mig_profile": mig.profile, "fractional_gpu": True}
        if not in_gpu_families(gpu_name, memory_gb, list(self.settings["gpu_families"] or [])):
            return
        # The fields every observation of this type shares, spread into PriceObservation.
        base: dict[str, Any] = {
            "provider": PROVIDER, "instance_type": f"{count}x {gpu_id}", "gpu_name": gpu_name,
            "gpu_count": gpu_count, "currency": "USD", "observed_at": fetched_at,
            "gpu_memory_gb": memory_gb, "vcpus": json_number(lowest.get("minVcpu")),
            "ram_gb": json_number(lowest.get("minMemory")), "source_url": url,
        }
        for cloud in clouds:
            flag, on_demand_field, spot_field = _CLOUD_FIELDS[cloud]
            offered = gpu_type.get(flag)
            if offered is False:
                continue
            per_gpu = gpu_type.get(on_demand_field)
            if per_gpu is None:
                if offered is True:
                    yield Rejected(
                        f"runpod {gpu_id} x{count} {cloud}: {flag} is true but "
                        f"{on_demand_field} is null", dict(gpu_type), PROVIDER)
                continue
            per_gpu_price = _price(per_gpu, on_demand_field, f"{gpu_id} x{count} {cloud}", gpu_type)
            if isinstance(per_gpu_price, Rejected):
                yield per_gpu_price
                continue
            attributes = {"stock_status": str(stock), "price_per_gpu":
                          decimal_to_str(per_gpu_price), "billing": "per-second", **extra}
            if gpu_type.get("displayName"):
                attributes["display_name"] = str(gpu_type["displayName"])
            yield PriceObservation(**base, category="on-demand", variant=cloud,
                                   price_per_hour=per_gpu_price * count, attributes=attributes)
            if not self.settings["include_spot"]:
                continue
            spot = gpu_type.get(spot_field)
            if spot is None:
                continue
            spot_price = _price(spot, spot_field, f"{gpu_id} x{count} {cloud} spot", gpu_type)
            if isinstance(spot_price, Rejected):
                yield spot_price
                continue
            if spot_price == 0:
                continue  # no spot market for this type (spot is being discontinued)
            yield PriceObservation(
                **base, category="spot", variant=cloud, price_per_hour=spot_price * count,
                attributes={**attributes, "price_per_gpu": decimal_to_str(spot_price)})


def _price(value: Any, field: str, offer: str, gpu_type: Mapping[str, Any]) -> Decimal | Rejected:
    """A price field as a Decimal, or the row rejected with the offer and the reason."""
    try:
        return to_decimal(value, what=field)
    except InvalidInput as exc:
        return Rejected(f"runpod {offer}: {exc}", dict(gpu_type), PROVIDER)


def _gpu_types(response: Any, secret: str | None) -> list[Mapping[str, Any]]:
    if not isinstance(response, dict):
        raise SourceError("runpod: GraphQL response is not a JSON object")
    errors = response.get("errors")
    if errors:
        first = errors[0] if isinstance(errors, list) and errors else errors
        message = str(first.get("message") if isinstance(first, dict) else first)
        if secret:
            message = message.replace(secret, "***")  # never echo the key, even if the API does
        raise SourceError(f"runpod: GraphQL error: {message}")
    data = response.get("data")
    gpu_types = data.get("gpuTypes") if isinstance(data, dict) else None
    if not isinstance(gpu_types, list):
        raise SourceError("runpod: response has no data.gpuTypes list")
    return [g for g in gpu_types if isinstance(g, dict)]


