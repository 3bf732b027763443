"""SkyPilot's public catalog: one `vms.csv` (schema v8) per cloud, on-demand and spot per row.

Where it lives: `{url}/v8/{cloud}/vms.csv`, `url` defaulting to the hosted catalog root
`https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs`
(`HOSTED_CATALOG_DIR_URL` in skypilot `sky/skylet/constants.py`). The git history of that
repository is a price history; `tracker/collect/backfill.py` imports it with the same parser.

How a row becomes observations (`parse_vms_csv`):
- `Price` → an `on-demand` observation, `SpotPrice` → a `spot` observation (one row carries
  both). An empty field means "not offered"; a row with neither is rejected, a field that
  is not a number is rejected for that category.
- Spot is kept per zone when the file has an `AvailabilityZone` column (AWS zone ids such as
  `use1-az2`, GCP zones): `zone` is set and each zone is its own offer. On-demand is a
  regional price, repeated on every zone row: it is stored once per region (`zone=""`),
  unless the zones of a region disagree, then once per zone.
- `GpuInfo` is a Python-dict string (`{'Gpus': [...]}`, most fetchers) or JSON (spheron,
  verda); it is parsed with `json.loads`, then `ast.literal_eval` (never `eval`). Per-GPU
  memory comes from `Gpus[0].MemoryInfo.SizeInMiB` (MiB / 1024, i.e. the vendor's "GB",
  which are GiB: 81920 MiB → 80). `TotalGpuMemoryInMiB` is only a fallback and is divided
  by the GPU count, except on lambda where it holds the per-GPU memory already.
  How clouds fill `SizeInMiB` differs, and is read per cloud (`MEMORY_READING`): vast writes
  the total over all the instance's GPUs (2x A100 40 GB: 81920), runpod and shadeform write GB
  (80, 48), not MiB. Ingest checks the result against the canonical GPU's memory (±10 %).
- `gpu_name` is `AcceleratorName` as the catalog prints it. When that name carries no form
  factor but the instance type does (lambda `gpu_1x_h100_pcie` lists plain `H100`, and by
  Lambda's convention `gpu_1x_a100` is the 40 GB PCIe part), the form factor is appended
  (`H100 PCIe`, tracker.core.gpus.with_form_factor) so a PCIe card is not taken for an SXM part;
  the untouched name stays in `attributes["accelerator_name"]`.
- A `SpotPrice` of 0 is no spot market (vast writes `0.00` on every row), not a free GPU: no
  spot row. Vast regions (`"France, FR, EU"`, `", US, NA"`) become the country code the native
  vastai source uses (`FR`, `US`), so one provider's regions are spelled one way.
- CPU-only rows (empty or zero accelerator count) are skipped; so are accelerators that are
  not GPUs (`tpu-*`, AWS Inferentia/Trainium): they are outside the GPU table's coverage.
- GCP lists GPUs as accelerator-only rows (empty `InstanceType`, price of the GPUs alone, to
  be attached to a separately priced VM). They are kept with `instance_type` = `T4:2`
  (SkyPilot's accelerator notation) and `attributes["price_scope"] = "accelerator-only"`.
- `provider` is the cloud's directory name (`lambda`, `aws`, `nebius`, ...; `vast` becomes
  `vastai`, as the tracker names Vast.ai). Aggregators carry the underlying host in a
  `Provider` column (spheron: `data-crunch`, `sesterce`, `spheron-ai`, `massed-compute`): the
  provider stays the aggregator (that is who bills you) and the host becomes the `variant`
  (and `attributes["host_provider"]`), so two hosts listing the same type stay apart.
- `vcpus`/`ram_gb` are the catalog's `vCPUs`/`MemoryGiB` numbers as printed.

A cloud whose `vms.csv` answers HTTP 404 (dropped from the catalog, or misspelled in the
`clouds` setting) becomes one `Rejected` row naming the URL and the other clouds are still
read; every cloud 404 → `SourceError`. Any other failure (5xx after retries, a timeout, a
file without the v8 columns) fails the whole source: a partial snapshot would otherwise look
like offers that disappeared.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from scrapers.base import PriceObservation, Record, Rejected, Source, catalog_reader
from scrapers.http import HttpStatusError
from scrapers.vastai import country_of
from tracker.core.errors import SourceError
from tracker.core.gpus import with_form_factor

if TYPE_CHECKING:
    from scrapers.http import HttpClient

HOSTED_CATALOG_URL = "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs"
SCHEMA_VERSION = "v8"

# Clouds with GPU offers that publish `catalogs/v8/<cloud>/vms.csv` in
# skypilot-org/skypilot-catalog (checked against the repository's file list; azure is read
# by skypilot `sky/catalog/azure_catalog.py` from the hosted catalog). Not listed: daytona
# (sandboxes), kubernetes/slurm (no vms.csv), and clouds only present in older schemas
# (paperspace, do, fluidstack, ibm, scp: v5/v6).
DEFAULT_CLOUDS = [
    "aws", "azure", "gcp", "lambda", "runpod", "vast", "nebius", "verda", "shadeform",
    "cudo", "hyperbolic", "hyperstack", "seeweb", "mithril", "primeintellect", "spheron",
    "lium", "jarvislabs", "yotta", "oci",
]


# How a cloud's fetcher fills GpuInfo memory, where it is not "SizeInMiB per GPU":
# "total-mib": SizeInMiB is the sum over the instance's GPUs (vast: 2x H200 -> 287542);
# "gb": the field holds GB, not MiB (runpod, shadeform: 80 for an 80 GB card).
MEMORY_READING = {"vast": "total-mib", "runpod": "gb", "shadeform": "gb"}

REQUIRED_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
_NOT_GPUS = re.compile(r"^(tpu|inferentia|trainium)", re.IGNORECASE)


def catalog_url(root: str, cloud: str) -> str:
    return f"{root.rstrip('/')}/{SCHEMA_VERSION}/{cloud}/vms.csv"


def provider_id(cloud: str) -> str:
    from tracker.core.providers import provider_id as registry_id

    return registry_id(cloud)  # aliases in data/providers.json (SkyPilot: vast)


class SkypilotSource(Source):
    # skypilot-catalog's update workflows run every 7 hours and commit only when a file changed
    # (.github/workflows/update-lambda-catalog.yml: cron '00 */7 * * *', "No changes to
    # commit"), so an old version can be unchanged prices; a week without any change is
    # flagged as possibly stale. Version dates are known for backfilled versions (commit dates).
    CATALOG_MAX_AGE_HOURS = 7 * 24.0
    name = "skypilot"
    description = "SkyPilot's public catalog (vms.csv, schema v8) for many clouds, with spot."
    DEFAULTS = {
        # The catalog root under which v8/<cloud>/vms.csv lives.
        "url": HOSTED_CATALOG_URL,
        "clouds": list(DEFAULT_CLOUDS),
        # Used by `gpu-tracker backfill skypilot` (tracker/collect/backfill.py).
        "github_api_url": "https://api.github.com",
        "raw_url": "https://raw.githubusercontent.com/skypilot-org/skypilot-catalog",
        "repo": "skypilot-org/skypilot-catalog",
        "max_pages": 100,  # commit-list pages of 100 per cloud
        "rate_limit_max_wait": 120,  # seconds worth waiting for a GitHub rate-limit reset
    }
    SECRET_ENV = None

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        clouds = [c.strip() for c in self.settings["clouds"] if c and c.strip()]
        if not clouds:
            raise SourceError("source skypilot: the clouds setting is empty")
        missing: list[str] = []
        for cloud in clouds:
            url = catalog_url(self.settings["url"], cloud)
            lines = client.stream_lines(url)
            try:
                first = next(lines, None)
            except SourceError as exc:
                if not (isinstance(exc, HttpStatusError) and exc.status == 404):
                    raise
                missing.append(cloud)
                yield Rejected(
                    reason=f"no catalog for cloud {cloud!r}: {url} answered HTTP 404",
                    raw={"cloud": cloud, "url": url}, provider=provider_id(cloud))
                continue
            if first is None:
                raise SourceError(f"{url}: empty catalog file")
            yield from parse_vms_csv(
                _chain(first, lines), cloud=cloud, observed_at=fetched_at, source_url=url)
        if len(missing) == len(clouds):
            raise SourceError(
                f"source skypilot: no catalog found for any cloud ({', '.join(missing)})")


def _chain(first: str, rest: Iterator[str]) -> Iterator[str]:
    yield first
    yield from rest


# -- parsing (pure) -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GpuInfo:
    name: str | None
    memory_mib: float | None  # per GPU
    total_mib: float | None


def parse_gpu_info(text: str) -> GpuInfo | None:
    """Parse a `GpuInfo` cell in either dialect; None when it is empty or not a dict.

    Python-dict strings (`{'Gpus': [{'Name': 'A6000', ...}], 'TotalGpuMemoryInMiB': 49152}`)
    and JSON (`{"Gpus": [...]}`, spheron and verda) both parse. Plain strings such as
    RunPod's `A100-80GB` or GCP's `tpu-v2-8` carry no structure and give None.
    """
    text = (text or "").strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(data, Mapping):
        return None
    gpus = data.get("Gpus")
    first = gpus[0] if isinstance(gpus, list) and gpus and isinstance(gpus[0], Mapping) else {}
    raw_memory = first.get("MemoryInfo")
    memory: Mapping[str, Any] = raw_memory if isinstance(raw_memory, Mapping) else {}
    total = data.get("TotalGpuMemoryInMiB", first.get("TotalGpuMemoryInMiB"))
    name = first.get("Name")
    return GpuInfo(
        name=str(name) if name else None,
        memory_mib=_positive_float(memory.get("SizeInMiB")),
        total_mib=_positive_float(total),
    )


def per_gpu_memory_gb(info: GpuInfo | None, gpu_count: float, cloud: str) -> float | None:
    """Per-GPU memory in (vendor) GB from a parsed GpuInfo; see the module docstring."""
    if info is None:
        return None
    reading = MEMORY_READING.get(cloud)
    if info.memory_mib and reading == "gb":
        return round(info.memory_mib, 3)
    if info.memory_mib and reading == "total-mib":
        return round(info.memory_mib / max(gpu_count, 1) / 1024, 3)
    if info.memory_mib:
        return round(info.memory_mib / 1024, 3)
    if info.total_mib:
        # lambda writes the per-GPU size into the "total" field (fetch_lambda_cloud.py).
        per_gpu = info.total_mib if cloud == "lambda" or gpu_count <= 0 \
            else info.total_mib / gpu_count
        return round(per_gpu / 1024, 3)
    return None


def _positive_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 and number == number and number != float("inf") else None


def _decimal(text: str) -> Decimal | None:
    """Decimal from a CSV cell; None for empty. Raises ValueError when not a finite number."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    return value


@dataclass(slots=True)
class _Row:
    instance_type: str
    region: str
    zone: str
    variant: str
    gpu_name: str
    gpu_count: float
    memory_gb: float | None
    vcpus: float | None
    ram_gb: float | None
    price: Decimal | None
    spot: Decimal | None
    attributes: dict[str, Any]
    raw: dict[str, str]


def parse_vms_csv(
    lines: Iterable[str], *, cloud: str, observed_at: datetime, source_url: str | None = None,
) -> Iterator[Record]:
    """Turn the lines of one cloud's `vms.csv` into observations and rejects (no I/O)."""
    provider = provider_id(cloud)
    reader = catalog_reader(lines, REQUIRED_COLUMNS, where=source_url or f"{cloud}/vms.csv",
                            what="SkyPilot v8 catalog")
    has_zone = "AvailabilityZone" in (reader.fieldnames or [])

    rows: list[_Row] = []
    for raw in reader:
        if None in raw:  # more cells than the header names
            extra = raw.pop(None)
            yield Rejected(f"row has {len(extra)} cells more than the header", raw, provider)
            continue
        parsed, problems = _parse_row(raw, cloud=cloud, provider=provider, has_zone=has_zone)
        yield from problems
        if parsed is not None:
            rows.append(parsed)

    yield from _observations(rows, provider=provider, observed_at=observed_at,
                             source_url=source_url)


def _parse_row(raw: dict[str, str], *, cloud: str, provider: str,
               has_zone: bool) -> tuple[_Row | None, list[Rejected]]:
    """(row, rejects): row None for skipped or rejected rows."""
    cell = {k: (v or "").strip() for k, v in raw.items()}
    accelerator = cell.get("AcceleratorName", "")
    count_text = cell.get("AcceleratorCount", "")
    if not accelerator:
        return None, []  # CPU-only
    try:
        gpu_count = float(count_text) if count_text else 0.0
    except ValueError:
        reason = f"AcceleratorCount is not a number: {count_text!r}"
        return None, [Rejected(reason, raw, provider)]
    if not gpu_count > 0:
        return None, []  # CPU-only (nebius writes 0)
    if _NOT_GPUS.match(accelerator):
        return None, []  # TPUs, Inferentia, Trainium: not GPUs
    region = cell.get("Region", "")
    if cloud == "vast":
        region = country_of(region)
    if not region:
        return None, [Rejected("missing Region", raw, provider)]
    try:
        price = _decimal(cell.get("Price", ""))
    except ValueError as exc:
        return None, [Rejected(f"Price {exc}", raw, provider)]
    problems: list[Rejected] = []
    try:
        spot = _decimal(cell.get("SpotPrice", ""))
    except ValueError as exc:
        problems.append(Rejected(f"SpotPrice {exc}", raw, provider))
        spot = None  # the row's on-demand price may still be good
    if spot == 0:
        spot = None  # no spot market (vast writes 0.00 on every row), not a free GPU
    if price is None and spot is None:
        return None, problems or [Rejected("no Price and no SpotPrice", raw, provider)]

    instance_type = cell.get("InstanceType", "")
    attributes: dict[str, Any] = {}
    if not instance_type:
        instance_type = f"{accelerator}:{gpu_count:g}"
        attributes["price_scope"] = "accelerator-only"
    info = parse_gpu_info(cell.get("GpuInfo", ""))
    gpu_name = with_form_factor(accelerator, provider, instance_type)
    if gpu_name != accelerator:
        attributes["accelerator_name"] = accelerator
    variant = cell.get("Provider", "")
    if variant:
        attributes["host_provider"] = variant
    for column, key in (("Arch", "arch"), ("Generation", "generation"),
                        ("OperatingSystem", "os"), ("SpheronInstanceType", "offer_type")):
        if cell.get(column):
            attributes[key] = cell[column]
    return _Row(
        instance_type=instance_type, region=region,
        zone=cell.get("AvailabilityZone", "") if has_zone else "", variant=variant,
        gpu_name=gpu_name, gpu_count=gpu_count,
        memory_gb=per_gpu_memory_gb(info, gpu_count, cloud),
        vcpus=_positive_float(cell.get("vCPUs")), ram_gb=_positive_float(cell.get("MemoryGiB")),
        price=price, spot=spot, attributes=attributes, raw=raw,
    ), problems


def _observations(rows: list[_Row], *, provider: str, observed_at: datetime,
                  source_url: str | None) -> Iterator[Record]:
    # On-demand is regional: collapse the per-zone repeats when the zones agree.
    on_demand: dict[tuple[str, str, str], list[_Row]] = {}
    for row in rows:
        if row.price is not None:
            on_demand.setdefault((row.instance_type, row.region, row.variant), []).append(row)
    for group in on_demand.values():
        prices = {r.price for r in group}
        if len(prices) == 1:
            first = group[0]
            yield _observation(first, "on-demand", first.price, "", provider, observed_at,
                               source_url)
        else:
            seen_zones: set[str] = set()
            for row in group:
                if row.zone in seen_zones:
                    continue
                seen_zones.add(row.zone)
                yield _observation(row, "on-demand", row.price, row.zone, provider,
                                   observed_at, source_url)
    seen_spot: set[tuple[str, str, str, str]] = set()
    for row in rows:
        if row.spot is None:
            continue
        key = (row.instance_type, row.region, row.zone, row.variant)
        if key in seen_spot:
            continue
        seen_spot.add(key)
        yield _observation(row, "spot", row.spot, row.zone, provider, observed_at, source_url)


def _observation(row: _Row, category: str, price: Decimal | None, zone: str, provider: str,
                 observed_at: datetime, source_url: str | None) -> PriceObservation:
    assert price is not None
    return PriceObservation(
        provider=provider, instance_type=row.instance_type, gpu_name=row.gpu_name,
        gpu_count=row.gpu_count, category=category, price_per_hour=price, currency="USD",
        observed_at=observed_at, region=row.region, zone=zone, variant=row.variant,
        gpu_memory_gb=row.memory_gb, vcpus=row.vcpus, ram_gb=row.ram_gb,
        source_url=source_url, attributes=dict(row.attributes), raw=row.raw,
    )
