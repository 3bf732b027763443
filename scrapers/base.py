"""The contract every price source implements, and the records a fetch yields.

A source is a class with a `name`, its settings (`DEFAULTS`, every one overridable in the
config file `[sources.<name>]` and by `GPU_TRACKER_SOURCE_<NAME>_<SETTING>`), the environment
variable holding its key (`SECRET_ENV`, or None), and `fetch()`, which yields records.
A source parses; it never touches the database and never reads the clock: `fetched_at` is
passed in, and ingest (tracker/store/ingest/) validates, canonicalizes GPU names and stores.
"""

from __future__ import annotations

import csv
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

from tracker.core.categories import CATEGORIES
from tracker.core.errors import InvalidInput, MissingCredentials, SourceError

__all__ = ["CATEGORIES", "InterruptionFact", "PriceObservation", "Record", "Rejected", "Source",
           "in_gpu_families", "json_number", "settings_model"]

if TYPE_CHECKING:
    from pydantic import BaseModel

    from scrapers.http import HttpClient


@dataclass(frozen=True, slots=True)
class PriceObservation:
    """One offer's price at one instant, as the provider lists it (per instance, per hour).

    `gpu_name` is the provider's own name (kept as the raw name); ingest maps it to the
    canonical GPU with `gpu_memory_gb` (per GPU) as a hint. `price_per_hour` is for the whole
    instance of `gpu_count` GPUs; sources that price per GPU multiply before yielding.
    """

    provider: str
    instance_type: str
    gpu_name: str
    gpu_count: float
    category: str
    price_per_hour: Decimal
    currency: str
    observed_at: datetime
    region: str = ""
    zone: str = ""
    variant: str = ""  # distinguishes offers sharing an instance type (RunPod secure/community)
    gpu_memory_gb: float | None = None
    vcpus: float | None = None
    ram_gb: float | None = None
    source_url: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] | None = None  # kept only if the row is rejected


@dataclass(frozen=True, slots=True)
class Rejected:
    """A row the source could not turn into an observation, with why and the raw payload."""

    reason: str
    raw: Any
    provider: str = ""
    # An instance type the source cannot map to a GPU (a new SKU): counted per run, so a new
    # size shows up as a number in the refresh summary rather than a silent drop.
    unmapped: bool = False


@dataclass(frozen=True, slots=True)
class InterruptionFact:
    """A spot interruption-frequency band for an instance in a region (AWS Spot Advisor)."""

    provider: str
    region: str
    instance_type: str
    band: int  # index into the source's own ranges, 0 = least frequent
    band_label: str  # e.g. "<5%"
    min_pct: float
    max_pct: float | None
    as_of: datetime
    savings_pct: float | None = None
    os: str = "Linux"


@dataclass(frozen=True, slots=True)
class CatalogVersion:
    """Which version of a published catalog a fetch read, and when that version was made.

    Catalog sources (gpuhunt, SkyPilot) republish a provider's prices on a cadence; a version
    much older than the cadence means the publisher stopped, and its prices are that old."""

    provider: str
    version: str
    published_at: datetime | None  # aware UTC; None when the catalog does not say


@dataclass(frozen=True, slots=True)
class ExchangeRateFact:
    """A euro reference rate: 1 EUR buys `rate` units of `currency` on ECB day `rate_date`."""

    currency: str
    rate_date: date
    rate: Decimal


Record = PriceObservation | Rejected | InterruptionFact | ExchangeRateFact | CatalogVersion


def json_number(value: Any) -> float | None:
    """A hardware figure (GPU count, memory, vCPUs) from a JSON API as a float; None when the
    field is missing or not a finite number (booleans are not numbers). Never for prices."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    # JSON's Infinity and NaN, or 1e999 (inf as a float), are no hardware figure.
    return number if math.isfinite(number) else None


def repeated_price(seen: dict[Any, Decimal], key: Any, price: Decimal) -> str | None:
    """A listing's first price for `key` wins: None for a new key (its price is kept in
    `seen`); for a repeat, "" when it lists the same price (the row is dropped quietly), or
    "<price> vs <first price>" when it differs (the row is rejected with that)."""
    if key not in seen:
        seen[key] = price
        return None
    return "" if seen[key] == price else f"{price} vs {seen[key]}"


def in_gpu_families(raw: str, memory_gb: float | None, families: list[str]) -> bool:
    """Coverage filter shared by sources: no families configured means all; otherwise the
    GPU's canonical family (`h100`) or id (`h100-sxm`) must be listed."""
    from tracker.core.gpus import canonical_gpu, gpu_table

    if not families:
        return True
    gpu_id = canonical_gpu(raw, memory_gb)
    if gpu_id is None:
        return False
    wanted = {f.strip().lower() for f in families}
    return gpu_id in wanted or gpu_table()[gpu_id].family in wanted


def catalog_reader(lines: Iterable[str], required: Sequence[str], *, where: str,
                   what: str) -> csv.DictReader[str]:
    """A CSV catalog's rows by column name; SourceError naming the file (`where`), what it
    should be and the missing columns when a required column is absent."""
    reader = csv.DictReader(lines)
    header = reader.fieldnames or []
    absent = [c for c in required if c not in header]
    if absent:
        raise SourceError(f"{where}: not a {what} (missing columns: {', '.join(absent)})")
    return reader


def settings_model(name: str, defaults: Mapping[str, Any]) -> type[BaseModel]:
    """A source's settings as a pydantic model, typed like its `DEFAULTS` (bool, int, float,
    str, list). The config schema (tracker/config/schema.py) and the environment use the same
    conversion: strings become numbers and booleans, a string where a list is expected is a
    comma-separated list."""
    from pydantic import BeforeValidator, ConfigDict, create_model

    from tracker.core.serialization import comma_list

    fields: dict[str, Any] = {}
    for key, default in defaults.items():
        if isinstance(default, (list, tuple)):
            item = type(default[0]) if default else str
            kind: Any = Annotated[list[item], BeforeValidator(comma_list)]  # type: ignore[valid-type]
        elif isinstance(default, float):
            kind = float
        else:
            kind = type(default)
        fields[key] = (kind, default)
    return create_model(f"{name}_settings", __config__=ConfigDict(extra="forbid"), **fields)


class Source(ABC):
    """Base class for price sources; subclasses set the class attributes and `fetch`."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    SECRET_ENV: ClassVar[str | None] = None
    # Whether a valid listing with nothing in it is a normal answer (your own quotes file);
    # for a provider's price list it is a failure, never a run that makes the source fresh.
    MAY_BE_EMPTY: ClassVar[bool] = False

    def __init__(self, settings: Mapping[str, Any], secret: str | None = None) -> None:
        self.settings = dict(settings)
        self._secret = secret  # never logged, printed or stored

    @classmethod
    def env_prefix(cls) -> str:
        return f"GPU_TRACKER_SOURCE_{cls.name.upper()}_"

    @classmethod
    def resolve_settings(
        cls, file_settings: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Defaults < config file `[sources.<name>]` < `GPU_TRACKER_SOURCE_<NAME>_<SETTING>`."""
        from pydantic import ValidationError

        environ = os.environ if environ is None else environ
        given = dict(file_settings or {})
        prefix = cls.env_prefix()
        for env_key, value in environ.items():
            if env_key.startswith(prefix) and env_key[len(prefix):].lower() in cls.DEFAULTS:
                given[env_key[len(prefix):].lower()] = value
        try:
            model = settings_model(cls.name, cls.DEFAULTS)
            settings = model.model_validate(given)
        except ValidationError as exc:
            error = exc.errors()[0]
            key = str(error["loc"][0]) if error["loc"] else ""
            if error["type"] == "extra_forbidden":
                known = ", ".join(sorted(cls.DEFAULTS)) or "none"
                raise InvalidInput(
                    f"source {cls.name}: unknown setting {key!r} (known: {known})") from None
            where = f"{prefix}{key.upper()}" if f"{prefix}{key.upper()}" in environ \
                else f"[sources.{cls.name}] {key}"
            message = str(error["msg"]).removeprefix("Value error, ")
            shown = "" if error["type"] == "value_error" else f", got {error['input']!r}"
            raise InvalidInput(f"source {cls.name}: {where}: {message[:1].lower()}"
                               f"{message[1:]}{shown}") from None
        return settings.model_dump()

    @classmethod
    def from_config(
        cls, file_settings: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """Build the source; raises MissingCredentials when its key is not in the environment."""
        environ = os.environ if environ is None else environ
        secret = None
        if cls.SECRET_ENV:
            secret = environ.get(cls.SECRET_ENV) or None
            if secret is None:
                raise MissingCredentials(f"source {cls.name} skipped: {cls.SECRET_ENV} is not set")
            from tracker.core.secrets import learn

            learn([secret])
        return cls(cls.resolve_settings(file_settings, environ), secret)

    @abstractmethod
    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        """Yield the source's records; raise SourceError when the source as a whole fails."""
