"""AWS EC2 Instance Savings Plans rates of GPU instances, from the Savings Plans price list.

The Savings Plans price list is its own offer (`AWSComputeSavingsPlan`, beside the EC2 offer the
bulk CSV comes from): `<url>` is its `region_index.json`, whose `regions[]` give each region's
`regionCode` and `versionUrl` (`/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/<version>/<region>/
index.json`); the same path ending `index.csv` is the CSV form, read here line by line like the
EC2 bulk CSV (a few metadata lines, a header starting with `SKU`, one row per rate). AWS
documents the layout ("Reading the service price list file for a Savings Plan", AWS Billing
user guide): a plan's rate for one discounted usage type (`BoxUsage:p5.48xlarge`, prefixed
`USE2-`... outside us-east-1), operation (`RunInstances` = Linux), the plan's term and payment
option. Header names are matched without regard to case (the CUR data-collection table lists
them lower-cased).

Kept: product family `EC2InstanceSavingsPlans` (the instance-family plans; Compute Savings
Plans are the same offer's other family and are skipped), No Upfront, 1 or 3 years, shared
tenancy Linux `BoxUsage` of a configured GPU family, hourly. The rate is what an hour of the
instance costs under the plan: stored as `reserved-1y` / `reserved-3y` with
`attributes["commitment_kind"] = "savings-plan"` (variant `savings-plan`, so an instance's
reserved-instance and savings-plan rates are two offers with their own history).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from scrapers.base import PriceObservation, Rejected, repeated_price
from tracker.core.errors import SourceError

PROVIDER = "aws"
PRODUCT_FAMILY = "EC2InstanceSavingsPlans"
REQUIRED = ("discountedrate", "currency", "discountedusagetype", "discountedoperation",
            "purchaseoption", "leasecontractlength", "product family")
_BOX_USAGE = re.compile(r"^(?:[A-Z0-9]+-)?BoxUsage:(?P<type>[a-z0-9.-]+)$")
_TERMS = {("1", "year"): ("reserved-1y", 12), ("3", "year"): ("reserved-3y", 36),
          ("1yr", ""): ("reserved-1y", 12), ("3yr", ""): ("reserved-3y", 36)}


def region_csv_urls(index: Any, base_url: str) -> dict[str, str]:
    """region code -> the absolute URL of its Savings Plans CSV, from `region_index.json`."""
    regions = index.get("regions") if isinstance(index, dict) else None
    if not isinstance(regions, list):
        raise SourceError("aws savings plans: region_index.json has no regions list")
    match = re.match(r"^(https?://[^/]+)", base_url)
    host = match.group(1) if match else ""
    out: dict[str, str] = {}
    for entry in regions:
        if not isinstance(entry, dict):
            continue
        code, path = entry.get("regionCode"), entry.get("versionUrl")
        if isinstance(code, str) and isinstance(path, str) and path.endswith(".json"):
            out[code] = (path if path.startswith("http") else host + path)[:-5] + ".csv"
    return out


@dataclass(slots=True)
class SavingsPlanCsvParser:
    """Streaming parser of one region's Savings Plans CSV; `spec` tells the GPUs, vCPUs and
    RAM of an instance type (the EC2 bulk CSV's, read first) or None when unknown."""

    families: tuple[str, ...]
    fetched_at: datetime
    region: str
    spec: Callable[[str], tuple[str, float | None, float, float | None, float | None] | None]
    source_url: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    def parse(self, lines: Iterable[str]) -> Iterator[PriceObservation | Rejected]:
        it = iter(lines)
        header = next(csv.reader([read_preamble(it, self.metadata, "aws savings plans CSV")]))
        col = {name.strip().lower(): i for i, name in enumerate(header)}
        missing = [c for c in REQUIRED if c not in col]
        if missing:
            raise SourceError(f"aws savings plans CSV: header lacks {', '.join(missing)}")
        # Cheap line tests before the csv module: the plan family and a GPU family's usage.
        names = "|".join(sorted({re.escape(f) for f in self.families}, key=len, reverse=True))
        usage = re.compile(rf"BoxUsage:(?:{names})[.-]").search
        candidates = (line for line in it if PRODUCT_FAMILY in line and usage(line))
        seen: dict[tuple[str, str], Decimal] = {}
        for row in csv.reader(candidates):
            yield from self._row(row, header, col, seen)

    def _row(self, row: list[str], header: list[str], col: Mapping[str, int],
             seen: dict[tuple[str, str], Decimal]) -> Iterator[PriceObservation | Rejected]:
        if len(row) != len(header):
            yield Rejected(f"row has {len(row)} fields, header has {len(header)}", row,
                           PROVIDER)
            return

        def get(name: str) -> str:
            index = col.get(name)
            return row[index].strip() if index is not None else ""

        found = _BOX_USAGE.match(get("discountedusagetype"))
        if (get("product family") != PRODUCT_FAMILY or found is None
                or get("discountedoperation") != "RunInstances"
                or get("purchaseoption") != "No Upfront"
                or get("unit") not in ("", "Hrs")):
            return
        instance_type = found.group("type")
        if not any(instance_type.split(".", 1)[0] == f
                   or instance_type.startswith(f + "-") for f in self.families):
            return
        term = _TERMS.get((get("leasecontractlength"),
                           get("leasecontractlengthunit").lower().rstrip("s")))
        if term is None:
            return
        category, months = term
        raw = dict(zip(header, row, strict=True))
        try:
            price = Decimal(get("discountedrate"))
        except InvalidOperation:
            yield Rejected(f"savings plan DiscountedRate of {instance_type} is not a number: "
                           f"{get('discountedrate')!r}", raw,
                           PROVIDER)
            return
        spec = self.spec(instance_type)
        if not price.is_finite() or spec is None or not get("currency"):
            why = "no GPU model or count known" if spec is None else "no finite rate/currency"
            yield Rejected(f"savings plan rate of {instance_type}: {why}", raw, PROVIDER)
            return
        conflict = repeated_price(seen, (instance_type, category), price)
        if conflict is not None:
            if conflict:
                yield Rejected(f"second {category} savings plan rate for {instance_type} in "
                               f"{self.region}: {conflict}", raw, PROVIDER)
            return
        gpu_name, memory_gb, count, vcpus, ram_gb = spec
        attributes: dict[str, Any] = {
            "billing": "per-second", "commitment_kind": "savings-plan",
            "savings_plan_type": "ec2-instance", "term_months": months,
            "purchase_option": "No Upfront"}
        if self.metadata.get("Version"):
            attributes["price_list_version"] = self.metadata["Version"]
        yield PriceObservation(
            provider=PROVIDER, instance_type=instance_type, gpu_name=gpu_name,
            gpu_count=count, category=category, price_per_hour=price,
            currency=get("currency"), observed_at=self.fetched_at, region=self.region,
            variant="savings-plan", gpu_memory_gb=memory_gb, vcpus=vcpus, ram_gb=ram_gb,
            source_url=self.source_url, attributes=attributes)


def read_preamble(it: Iterator[str], metadata: dict[str, str], what: str) -> str:
    """The header line of an AWS price list CSV; the metadata lines before it go into
    `metadata` ("Version", "Publication Date", ...)."""
    for line in it:
        if line.startswith(('"SKU"', "SKU,")):
            return line
        parts = next(csv.reader([line]), [])
        if len(parts) >= 2:
            metadata[parts[0]] = parts[1]
        if len(metadata) > 50:
            break
    raise SourceError(f'{what}: no header row ("SKU",...) after the metadata lines')
