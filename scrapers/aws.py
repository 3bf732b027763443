"""AWS EC2 GPU prices: bulk price list CSV (on-demand, reserved), spot.js (spot), Spot Advisor.

- On-demand (and 1/3-year No Upfront standard reserved, `include_reserved`) come from the public
  per-region bulk price list `<url>/<region>/index.csv`, several GB for a big region. It is read
  with `HttpClient.stream_lines` and parsed line by line (`BulkCsvParser`): a few metadata lines,
  the `"SKU",...` header, then one quoted row per price. Lines are pre-filtered with cheap
  substring tests ("Linux", "Shared", a GPU family) before the csv module sees them, so only the
  few GPU lines are ever split into fields; nothing but the GPU offers is kept in memory.
  Kept rows: Operating System Linux, Tenancy Shared, CapacityStatus Used, no pre-installed
  software, MarketOption OnDemand (not Capacity Blocks), Unit Hrs.
- EC2 Instance Savings Plans (1/3-year No Upfront, `savings_plan_url`) come from the Savings
  Plans price list, its own offer: scrapers/aws_savings_plans.py, after each region's bulk
  CSV (whose GPU counts, vCPUs and RAM they take).
- The CSV has a GPU count column (`GPU`) but no GPU model column, so the model and the per-GPU
  memory come from `AWS_FAMILY_GPUS` (AWS instance-type docs; p4de and the L4 memory as gpuhunt
  and SkyPilot hardcode them). A configured family missing from the table is Rejected.
- Spot comes from the website's feed `spot.js` (JSONP `callback({...})`): one Linux price per
  instance type per region (the website's regional figure, not per availability zone; the EC2
  DescribeSpotPriceHistory API, which is per AZ, needs IAM credentials). Its region labels are
  partly legacy ("us-east", "eu-ireland", "apac-tokyo") and are mapped to API region codes.
- Interruption bands come from the Spot Instance Advisor JSON as `InterruptionFact`s; the band
  limits are read from the file's `ranges` (each band runs from the previous band's `max`).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar

from scrapers.aws_savings_plans import SavingsPlanCsvParser, read_preamble, region_csv_urls
from scrapers.base import (
    InterruptionFact,
    PriceObservation,
    Record,
    Rejected,
    Source,
    repeated_price,
)
from scrapers.http import HttpClient, parse_json
from tracker.core.errors import SourceError

PROVIDER = "aws"
GIB_IN_GB = 1.073741824


@dataclass(frozen=True, slots=True)
class FamilyGpu:
    gpu_name: str
    memory_gb: float | None  # per GPU, vendor GB


# Instance family -> GPU model and per-GPU memory (docs.aws.amazon.com/ec2/latest/instancetypes,
# "Accelerated computing"). AWS reports L4 memory as 22888 MiB; gpuhunt and SkyPilot force 24 GB.
# The Blackwell rows (p6-b300, p6e-gb200, g7e) follow docs.aws.amazon.com/ec2/latest/
# instancetypes/ac.html, "Performance specifications" (Accelerators, Accelerator memory), as
# stored in the research index in December 2026: p6-b300.48xlarge "8 x NVIDIA B300 GPU, 2148 GiB
# (8 x 268 GiB)"; p6e-gb200.36xlarge "4 x NVIDIA B200 GPU, 740 GiB (4 x 185 GiB)" on an "Nvidia
# Grace CPU"; g7e "NVIDIA RTX PRO Server 6000 GPU, 96 GiB" per GPU. AWS's per-GPU figures are the
# driver's GiB (B200 179 GiB = nvidia-smi's 183359 MiB), so memory_gb keeps the vendor GB as the
# other rows do: B300 288 (268 GiB = 287.8 GB), RTX PRO 6000 96.
# Not mapped, for want of a GPU count in that page: P6e-GB300 (p6e-gb300.*: AWS's launch post
# and EKS/PCS guides name the sizes, the specifications page lists no P6e-GB300 family); a row of
# it is rejected ("no GPU model known"), never guessed.
AWS_FAMILY_GPUS: dict[str, FamilyGpu] = {
    "p2": FamilyGpu("NVIDIA K80", 12),
    "p3": FamilyGpu("NVIDIA V100", 16),
    "p3dn": FamilyGpu("NVIDIA V100", 32),
    "p4d": FamilyGpu("NVIDIA A100", 40),
    "p4de": FamilyGpu("NVIDIA A100", 80),
    "p5": FamilyGpu("NVIDIA H100", 80),
    "p5e": FamilyGpu("NVIDIA H200", 141),
    "p5en": FamilyGpu("NVIDIA H200", 141),
    "p6-b200": FamilyGpu("NVIDIA B200", 180),
    "p6-b300": FamilyGpu("NVIDIA B300", 288),
    # A 4-GPU slice of a GB200 NVL72 UltraServer (P6e-GB200: Grace CPU, "only available as
    # UltraServers" of 36 or 72 GPUs, one NVLink domain). AWS's table calls the GPU "B200", but
    # it is the Blackwell GPU of a GB200 superchip: class gb200 (its own figures, 72-GPU domain;
    # data/fabric.json's p6e-gb200 row gives the offer its domain and EFA). 186 = NVIDIA's GB200
    # NVL72 13.4 TB / 72 GPUs (vendor GB; AWS's 185 GiB is the driver's figure, 198.6 GB).
    "p6e-gb200": FamilyGpu("NVIDIA GB200", 186),
    "g3": FamilyGpu("NVIDIA M60", 8),
    "g3s": FamilyGpu("NVIDIA M60", 8),
    "g4dn": FamilyGpu("NVIDIA T4", 16),
    "g4ad": FamilyGpu("AMD Radeon Pro V520", 8),
    "g5": FamilyGpu("NVIDIA A10G", 24),
    "g5g": FamilyGpu("NVIDIA T4G", 16),
    "g6": FamilyGpu("NVIDIA L4", 24),
    "gr6": FamilyGpu("NVIDIA L4", 24),
    "g6f": FamilyGpu("NVIDIA L4", 24),
    "gr6f": FamilyGpu("NVIDIA L4", 24),
    "g6e": FamilyGpu("NVIDIA L40S", 48),
    "g7e": FamilyGpu("NVIDIA RTX PRO Server 6000", 96),
}


def _sizes(family: str, counts: Mapping[str, float]) -> dict[str, float]:
    return {f"{family}.{size}": count for size, count in counts.items()}


_G_SIZES = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
            "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}
# GPUs per instance size, used only when a row (spot.js, or a CSV row with an empty GPU
# column) does not say it; the CSV's `GPU` column wins.
AWS_SIZE_GPU_COUNTS: dict[str, float] = {
    **_sizes("p3", {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    **_sizes("p3dn", {"24xlarge": 8}),
    **_sizes("p4d", {"24xlarge": 8}),
    **_sizes("p4de", {"24xlarge": 8}),
    **_sizes("p5", {"4xlarge": 1, "48xlarge": 8}),
    **_sizes("p5e", {"48xlarge": 8}),
    **_sizes("p5en", {"48xlarge": 8}),
    **_sizes("p6-b200", {"48xlarge": 8}),
    **_sizes("p6-b300", {"48xlarge": 8}),
    **_sizes("p6e-gb200", {"36xlarge": 4}),  # ac.html: 4 GPUs per instance
    **_sizes("g4dn", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
                      "12xlarge": 4, "metal": 8}),
    **_sizes("g5", _G_SIZES),
    **_sizes("g6", _G_SIZES),
    **_sizes("g6e", _G_SIZES),
    **_sizes("gr6", {"4xlarge": 1, "8xlarge": 1}),
    # ac.html "Performance specifications": 1 GPU up to 8xlarge, then 2, 4 and 8.
    **_sizes("g7e", {"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4,
                     "48xlarge": 8}),
}

# spot.js region labels that are not API region codes (ligoj plugin-prov-aws, ec2instances.info).
SPOT_REGION_LABELS: dict[str, str] = {
    "us-east": "us-east-1",
    "us-west": "us-west-1",
    "eu-ireland": "eu-west-1",
    "eu-frankfurt": "eu-central-1",
    "apac-sin": "ap-southeast-1",
    "apac-syd": "ap-southeast-2",
    "apac-tokyo": "ap-northeast-1",
}
_REGION_CODE_RE = re.compile(r"^[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+$")

REQUIRED_COLUMNS = (
    "TermType", "Unit", "PricePerUnit", "Currency", "Instance Type", "Tenancy",
    "Operating System", "CapacityStatus", "Pre Installed S/W",
)
_NOT_AVAILABLE = {"", "NA", "N/A", "N/A*"}


def instance_family(instance_type: str) -> str:
    """"p5.48xlarge" -> "p5", "p6-b200.48xlarge" -> "p6-b200"."""
    return instance_type.split(".", 1)[0]


def family_selected(family: str, families: Iterable[str]) -> bool:
    """A configured family matches itself and its dashed variants ("p6" covers "p6-b200")."""
    return any(family == f or family.startswith(f + "-") for f in families)


def spot_region_code(label: str) -> str | None:
    """The API region code of a spot.js region label, or None when it is not recognisable."""
    if label in SPOT_REGION_LABELS:
        return SPOT_REGION_LABELS[label]
    return label if _REGION_CODE_RE.match(label) else None


@dataclass(slots=True)
class InstanceSpec:
    """What the bulk CSV told about a GPU instance type (for the spot rows of the same run)."""

    gpu_count: float
    vcpus: float | None
    ram_gb: float | None


@dataclass(slots=True)
class BulkCsvParser:
    """Streaming parser of one AWS bulk price list CSV, fed an iterator of text lines.

    After `parse()` is exhausted, `metadata` holds the preamble ("Version", "Publication Date")
    and `instances` the GPU instance types seen (count, vCPUs, RAM), for the spot rows.
    """

    families: tuple[str, ...]
    fetched_at: datetime
    include_reserved: bool = True
    region: str | None = None
    source_url: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    instances: dict[str, InstanceSpec] = field(default_factory=dict)

    def parse(self, lines: Iterable[str]) -> Iterator[PriceObservation | Rejected]:
        it = iter(lines)
        header_line = read_preamble(it, self.metadata, "aws bulk CSV")
        header = next(csv.reader([header_line]))
        col = {name: i for i, name in enumerate(header)}
        missing = [c for c in REQUIRED_COLUMNS if c not in col]
        if missing:
            raise SourceError(f"aws bulk CSV: header lacks columns {', '.join(missing)}")
        keep = self._prefilter(quoted=header_line.startswith('"'))
        candidates = (line for line in it if keep(line))
        seen: dict[tuple[str, str], Decimal] = {}
        for row in csv.reader(candidates):
            yield from self._row(row, header, col, seen)

    # -- internals ------------------------------------------------------------------------
    def _prefilter(self, *, quoted: bool) -> Callable[[str], bool]:
        """A cheap line test: only lines that may be a Linux, Shared, GPU-family price pass."""
        q = '"' if quoted else ""
        linux, shared = f"{q}Linux{q}", f"{q}Shared{q}"
        names = "|".join(sorted({re.escape(f) for f in self.families}, key=len, reverse=True))
        # The instance type sits in its own field ("p5.48xlarge") and in usageType
        # ("USE1-BoxUsage:p5.48xlarge"); a dash also starts variants ("p6-b200.48xlarge").
        family_re = re.compile(rf'[",:](?:{names})[.-]')
        search = family_re.search

        def keep(line: str) -> bool:
            return linux in line and shared in line and search(line) is not None

        return keep

    def _row(
        self, row: list[str], header: list[str], col: dict[str, int],
        seen: dict[tuple[str, str], Decimal],
    ) -> Iterator[PriceObservation | Rejected]:
        if len(row) != len(header):
            yield Rejected(f"row has {len(row)} fields, header has {len(header)}",
                           row, PROVIDER)
            return

        def get(name: str) -> str:
            # Exact values, no strip(): the pre-filter matches the quoted values exactly too.
            index = col.get(name)
            return row[index] if index is not None else ""

        instance_type = get("Instance Type")
        family = instance_family(instance_type)
        if not instance_type or not family_selected(family, self.families):
            return
        if (get("Operating System") != "Linux" or get("Tenancy") != "Shared"
                or get("CapacityStatus") != "Used"
                or get("Pre Installed S/W") not in ("", "NA")
                or get("Unit") != "Hrs"):
            return
        region = get("Region Code") or (self.region or "")
        if self.region and region != self.region:
            return
        category = self._category(get)
        if category is None:
            return
        raw_price = get("PricePerUnit")
        try:
            price = Decimal(raw_price)
        except InvalidOperation:
            yield Rejected(f"PricePerUnit is not a number: {raw_price!r}",
                           dict(zip(header, row, strict=True)), PROVIDER)
            return
        if not price.is_finite():
            yield Rejected(f"PricePerUnit is not finite: {raw_price!r}",
                           dict(zip(header, row, strict=True)), PROVIDER)
            return
        currency = get("Currency")
        if not currency:
            yield Rejected("missing Currency", dict(zip(header, row, strict=True)), PROVIDER)
            return
        gpu = AWS_FAMILY_GPUS.get(family)
        if gpu is None:
            yield Rejected(f"no GPU model known for AWS family {family} (AWS_FAMILY_GPUS)",
                           dict(zip(header, row, strict=True)), PROVIDER)
            return
        count = _number(get("GPU")) or AWS_SIZE_GPU_COUNTS.get(instance_type)
        if not count:
            yield Rejected(f"no GPU count for {instance_type}",
                           dict(zip(header, row, strict=True)), PROVIDER)
            return
        conflict = repeated_price(seen, (instance_type, category), price)
        if conflict is not None:
            if conflict:
                yield Rejected(f"second {category} price for {instance_type} in {region}: "
                               f"{conflict}", dict(zip(header, row, strict=True)), PROVIDER)
            return
        vcpus = _number(get("vCPU"))
        ram_gb = _gib_to_gb(get("Memory"))
        self.instances.setdefault(instance_type, InstanceSpec(count, vcpus, ram_gb))
        attributes: dict[str, Any] = {"billing": "per-second"}
        version = self.metadata.get("Version")
        if version:
            attributes["price_list_version"] = version
        if category.startswith("reserved"):
            attributes["purchase_option"] = get("PurchaseOption")
            attributes["offering_class"] = get("OfferingClass")
            attributes["commitment_kind"] = "reserved-instance"
            attributes["term_months"] = 12 if category == "reserved-1y" else 36
        yield PriceObservation(
            provider=PROVIDER,
            instance_type=instance_type,
            gpu_name=gpu.gpu_name,
            gpu_count=count,
            category=category,
            price_per_hour=price,
            currency=currency,
            observed_at=self.fetched_at,
            region=region,
            gpu_memory_gb=gpu.memory_gb,
            vcpus=vcpus,
            ram_gb=ram_gb,
            source_url=self.source_url,
            attributes=attributes,
        )

    def _category(self, get: Callable[[str], str]) -> str | None:
        term = get("TermType")
        if term == "OnDemand":
            market = get("MarketOption")
            return "on-demand" if market in ("", "OnDemand") else None
        if term == "Reserved" and self.include_reserved:
            if get("PurchaseOption") != "No Upfront" or get("OfferingClass") != "standard":
                return None
            lease = get("LeaseContractLength").replace(" ", "")
            return {"1yr": "reserved-1y", "3yr": "reserved-3y"}.get(lease)
        return None


def parse_spot_js(body: bytes, url: str = "") -> Any:
    """The JSON inside spot.js's `callback(...)` (prices stay strings, numbers Decimal)."""
    start, end = body.find(b"("), body.rfind(b")")
    if start < 0 or end <= start:
        raise SourceError(f"{url or 'spot.js'}: not a JSONP callback(...) document")
    return parse_json(body[start + 1:end], url)


def spot_prices(document: Any) -> Iterator[tuple[str, str, str, Any]]:
    """(region label, instance type, currency, raw price) for every Linux spot price."""
    try:
        regions = document["config"]["regions"]
    except (KeyError, TypeError):
        raise SourceError("spot.js: no config.regions list") from None
    for region in regions or []:
        label = str(region.get("region", ""))
        for group in region.get("instanceTypes") or []:
            for size in group.get("sizes") or []:
                for column in size.get("valueColumns") or []:
                    if column.get("name") != "linux":
                        continue
                    for currency, price in (column.get("prices") or {}).items():
                        yield label, str(size.get("size", "")), str(currency), price


def advisor_bands(document: Any) -> dict[int, tuple[str, float, float | None]]:
    """Band index -> (label, min %, max %) from the advisor's own `ranges`."""
    try:
        ranges = sorted(document["ranges"], key=lambda r: int(r["index"]))
    except (KeyError, TypeError, ValueError):
        raise SourceError("spot advisor: no usable ranges list") from None
    bands: dict[int, tuple[str, float, float | None]] = {}
    lower = 0.0
    for entry in ranges:
        upper = float(entry["max"])
        # The top band's max is 100: an open-ended ">20%" band, not a measured ceiling.
        bands[int(entry["index"])] = (str(entry["label"]), lower, None if upper >= 100 else upper)
        lower = upper
    return bands


class AwsSource(Source):
    name: ClassVar[str] = "aws"
    description: ClassVar[str] = (
        "AWS EC2 GPU instances: bulk price list (on-demand, reserved), EC2 Instance Savings "
        "Plans, spot.js, Spot Advisor")
    DEFAULTS: ClassVar[dict[str, Any]] = {
        "url": "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current",
        "spot_url": "https://spot-price.s3.amazonaws.com/spot.js",  # "" turns spot off
        "advisor_url": "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json",
        "regions": ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
                    "ap-northeast-1"],
        # "p6" covers p6-b200 and p6-b300 (dashed variants); p6e-gb200 is its own family.
        "gpu_families": ["p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6", "p6e", "g4dn",
                         "g5", "g6", "g6e", "g7e", "gr6"],
        "include_reserved": True,  # 1 and 3 year, No Upfront, standard
        # EC2 Instance Savings Plans, 1 and 3 year No Upfront ("" turns them off)
        "savings_plan_url": "https://pricing.us-east-1.amazonaws.com/savingsPlan/v1.0/aws/"
                            "AWSComputeSavingsPlan/current/region_index.json",
        "max_csv_mb": 16384,  # the size cap for one region's bulk CSV
    }
    SECRET_ENV: ClassVar[str | None] = None

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        families = tuple(str(f).strip() for f in self.settings["gpu_families"] if str(f).strip())
        regions = [str(r).strip() for r in self.settings["regions"] if str(r).strip()]
        if self.settings.get("advisor_url"):
            yield from self._interruptions(client, fetched_at, families, set(regions))
        spot: dict[str, dict[str, dict[str, Any]]] = {}
        if self.settings.get("spot_url"):
            spot = self._spot_table(client, families, set(regions))
        plan_urls = self._savings_plan_urls(client)
        for region in regions:
            url = f"{str(self.settings['url']).rstrip('/')}/{region}/index.csv"
            parser = BulkCsvParser(
                families=families, fetched_at=fetched_at,
                include_reserved=bool(self.settings["include_reserved"]),
                region=region, source_url=url)
            lines = client.stream_lines(
                url, max_bytes=int(self.settings["max_csv_mb"]) * 1024 * 1024)
            yield from parser.parse(lines)
            yield from self._spot_rows(region, spot.get(region, {}), parser, fetched_at)
            if plan_urls.get(region):
                yield from self._savings_plans(client, region, plan_urls[region], parser,
                                               families, fetched_at)

    # -- EC2 Instance Savings Plans ---------------------------------------------------------
    def _savings_plan_urls(self, client: HttpClient) -> dict[str, str]:
        """Each region's Savings Plans CSV (none when `savings_plan_url` is "" or
        `include_reserved` is off: a savings plan is a commitment too)."""
        url = str(self.settings.get("savings_plan_url") or "")
        if not url or not self.settings["include_reserved"]:
            return {}
        return region_csv_urls(client.get_json(url), url)

    def _savings_plans(self, client: HttpClient, region: str, url: str, parser: BulkCsvParser,
                       families: tuple[str, ...], fetched_at: datetime) -> Iterator[Record]:
        def spec(instance_type: str) -> tuple[str, float | None, float, float | None,
                                              float | None] | None:
            gpu = AWS_FAMILY_GPUS.get(instance_family(instance_type))
            known = parser.instances.get(instance_type)
            count = known.gpu_count if known else AWS_SIZE_GPU_COUNTS.get(instance_type)
            if gpu is None or not count:
                return None
            return (gpu.gpu_name, gpu.memory_gb, count, known.vcpus if known else None,
                    known.ram_gb if known else None)

        plans = SavingsPlanCsvParser(families=families, fetched_at=fetched_at, region=region,
                                     spec=spec, source_url=url)
        yield from plans.parse(client.stream_lines(
            url, max_bytes=int(self.settings["max_csv_mb"]) * 1024 * 1024))

    # -- spot -----------------------------------------------------------------------------
    def _spot_table(
        self, client: HttpClient, families: tuple[str, ...], regions: set[str],
    ) -> dict[str, dict[str, dict[str, Any]]]:
        url = str(self.settings["spot_url"])
        document = parse_spot_js(client.get_bytes(url), url)
        table: dict[str, dict[str, dict[str, Any]]] = {}
        for label, instance_type, currency, price in spot_prices(document):
            region = spot_region_code(label)
            if region not in regions:
                continue
            if not family_selected(instance_family(instance_type), families):
                continue
            by_currency = table.setdefault(region, {}).setdefault(instance_type, {})
            by_currency.setdefault(currency, price)
        return table

    def _spot_rows(
        self, region: str, prices: Mapping[str, Mapping[str, Any]],
        parser: BulkCsvParser, fetched_at: datetime,
    ) -> Iterator[Record]:
        url = str(self.settings["spot_url"])
        for instance_type, entries in prices.items():
            for currency, raw in entries.items():
                raw_row = {"region": region, "size": instance_type, "currency": currency,
                           "price": raw}
                if isinstance(raw, str) and raw.strip() in _NOT_AVAILABLE:
                    continue  # "N/A*": not offered as spot there
                try:
                    price = Decimal(str(raw).strip())
                except InvalidOperation:
                    yield Rejected(f"spot price is not a number: {raw!r}", raw_row, PROVIDER)
                    continue
                family = instance_family(instance_type)
                gpu = AWS_FAMILY_GPUS.get(family)
                spec = parser.instances.get(instance_type)
                count = spec.gpu_count if spec else AWS_SIZE_GPU_COUNTS.get(instance_type)
                if gpu is None or not count:
                    yield Rejected(f"no GPU model or count known for {instance_type}",
                                   raw_row, PROVIDER)
                    continue
                yield PriceObservation(
                    provider=PROVIDER,
                    instance_type=instance_type,
                    gpu_name=gpu.gpu_name,
                    gpu_count=count,
                    category="spot",
                    price_per_hour=price,
                    currency=currency,
                    observed_at=fetched_at,
                    region=region,
                    gpu_memory_gb=gpu.memory_gb,
                    vcpus=spec.vcpus if spec else None,
                    ram_gb=spec.ram_gb if spec else None,
                    source_url=url,
                    attributes={"spot_basis": "regional (spot.js)"},
                )

    # -- interruption bands ---------------------------------------------------------------
    def _interruptions(
        self, client: HttpClient, fetched_at: datetime, families: tuple[str, ...],
        regions: set[str],
    ) -> Iterator[Record]:
        document = client.get_json(str(self.settings["advisor_url"]))
        bands = advisor_bands(document)
        advisor = document.get("spot_advisor") if isinstance(document, dict) else None
        if not isinstance(advisor, dict):
            raise SourceError("spot advisor: no spot_advisor object")
        for region in sorted(regions & set(advisor)):
            linux = (advisor[region] or {}).get("Linux") or {}
            for instance_type, stats in linux.items():
                if not family_selected(instance_family(instance_type), families):
                    continue
                band = stats.get("r") if isinstance(stats, dict) else None
                if band not in bands:
                    yield Rejected(f"interruption band {band!r} is not in the file's ranges",
                                   {"region": region, "instance_type": instance_type,
                                    "stats": stats}, PROVIDER)
                    continue
                label, low, high = bands[band]
                savings = stats.get("s")
                yield InterruptionFact(
                    provider=PROVIDER,
                    region=region,
                    instance_type=instance_type,
                    band=band,
                    band_label=label,
                    min_pct=low,
                    max_pct=high,
                    as_of=fetched_at,
                    savings_pct=float(savings) if savings is not None else None,
                    os="Linux",
                )


def _number(text: str) -> float | None:
    if text in _NOT_AVAILABLE:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


def _gib_to_gb(text: str) -> float | None:
    """AWS memory is "2048 GiB"; the tracker keeps GB."""
    amount, _, unit = text.partition(" ")
    value = _number(amount)
    if value is None:
        return None
    return round(value * GIB_IN_GB, 3) if unit == "GiB" else value
