"""Ingest validation: which records a run can store, and the raw form kept of those it can't.

`sort_records` splits one run's records by kind and validates every price observation. The
checks that depend only on the kind of offer (category, currency, GPU count, GPU name and
memory) are computed once per distinct kind; only the identity fields and the price are
checked per row, and anything unusual goes through `validate`, which gives the reason.
"""

from __future__ import annotations

import functools
import json
import math
import operator
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from scrapers.base import (
    CATEGORIES,
    CatalogVersion,
    ExchangeRateFact,
    InterruptionFact,
    PriceObservation,
    Rejected,
)
from tracker.core.bounds import (
    MAX_GPU_MEMORY_GB,
    MAX_GPUS_PER_OFFER,
    MAX_PRICE_PER_GPU_HOUR,
    MAX_RAM_GB,
    MAX_VCPUS,
    MIN_PRICE_PER_GPU_HOUR,
    number_text,
)
from tracker.core.gpus import canonical_gpu, memory_mismatch
from tracker.core.money import ISO_4217

__all__ = ["IDENTITY_SEPARATOR", "MAX_PRICE_PER_GPU_HOUR", "Reject", "SortedRecords", "cap_raw",
           "capped_reason", "observation_raw", "offer_identity", "raw_json", "sort_records",
           "storable_text", "validate"]

# What a reject keeps of a reason and of the raw payload: a row is quarantined for one
# reason, and a hostile row (a 1 MB name, a number of a million digits) must not be stored
# whole.
MAX_REASON_CHARS = 500
MAX_RAW_CHARS = 8192
MAX_NAME_CHARS = 200  # a GPU name longer than this is no name (and costly to match)
# The text fields of an observation that become columns, with their column widths
# (tracker/store/models.py Offer; PostgreSQL refuses a longer value, which would fail the run).
_TEXT_FIELDS = (("provider", 64), ("instance_type", 128), ("region", 64), ("zone", 64),
                ("variant", 64), ("source_url", 1 << 20))
_NUMBERS = (float, int)
# An offer's identity (its row in `offer`), in the order ingest keys offers by, and as one
# string (an identity key): these fields joined by IDENTITY_SEPARATOR. A field may hold the
# separator (it is valid text), so whoever splits a key checks by counting.
offer_identity = operator.attrgetter(
    "provider", "region", "zone", "instance_type", "variant", "category")
IDENTITY_SEPARATOR = "\x1f"
_ROW_FIELDS = operator.attrgetter("provider", "region", "zone", "instance_type", "variant",
                                  "category", "source_url", "vcpus", "ram_gb")
_FAST_TEXT_CHARS = 64  # identity text this short fits every column it goes to

# A reject as ingest keeps it until the run's end: (reason, provider, raw payload, when).
Reject = tuple[str, str, Any, datetime]

# The fields that make an offer's kind (the cached checks), read at C speed per row.
offer_kind = operator.attrgetter("category", "currency", "gpu_count", "gpu_name", "gpu_memory_gb")


@dataclass
class SortedRecords:
    """One run's records by kind; `accepted` observations passed validation."""

    accepted: list[PriceObservation] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    unmapped: int = 0  # rejects of an instance type the source maps to no GPU
    facts: list[InterruptionFact] = field(default_factory=list)
    versions: list[CatalogVersion] = field(default_factory=list)
    rates: list[ExchangeRateFact] = field(default_factory=list)
    # The identity key of each of `accepted`, or None when some row was accepted by the
    # exact checks (`validate`), which compute none.
    keys: list[str] | None = None
    # (category, currency, count, gpu name, memory) -> (GPU id, reason, price cap, floor)
    offer_checks: dict[tuple, tuple[str | None, str | None, Decimal, Decimal]] = field(
        default_factory=dict)

    def gpu_of(self, obs: PriceObservation) -> str:
        gpu = self.offer_checks[offer_kind(obs)][0]
        assert gpu is not None  # accepted rows passed _validate_offer, which found their GPU
        return gpu


def sort_records(source: str, items: Iterable[Any], started_at: datetime) -> SortedRecords:
    """Split and validate one run's records; raises TypeError for a record of no known kind."""
    out = SortedRecords()
    accept, checks = out.accepted.append, out.offer_checks
    keys: list[str] = []
    add_key, keys_known = keys.append, True
    for item in items:
        if type(item) is PriceObservation:
            # The offer-kind checks are cached per kind; the per-row checks come cheapest
            # first, and a row failing any of them goes through validate() for its reason.
            kind = offer_kind(item)
            checked = checks.get(kind)
            if checked is None:
                checked = checks[kind] = _validate_offer(*kind)
            price = item.price_per_hour
            if (checked[1] is None and type(price) is Decimal and price.is_finite()
                    and checked[3] <= price <= checked[2]
                    and item.observed_at.tzinfo is not None):
                key = _plain_key(item)
                if key is not None:
                    accept(item)
                    add_key(key)
                    continue
        _sort_other(out, source, item, started_at)
        if len(out.accepted) > len(keys):  # accepted by the exact checks: its key too
            try:
                add_key(IDENTITY_SEPARATOR.join(offer_identity(item)))
            except TypeError:  # a field that is not text (None for an empty zone, say)
                add_key("")
                keys_known = False
    out.keys = keys if keys_known else None
    return out


def _sort_other(out: SortedRecords, source: str, item: Any, started_at: datetime) -> None:
    if isinstance(item, PriceObservation):
        _gpu, reason = validate(item)
        if reason is not None:
            raw = item.raw if item.raw is not None else observation_raw(item)
            provider = storable_text(item.provider)[:64]
            out.rejects.append((reason, provider, raw, item.observed_at))
        else:
            kind = offer_kind(item)
            if kind not in out.offer_checks:  # a subclass, or a row of odd but valid types
                out.offer_checks[kind] = _validate_offer(*kind)
            out.accepted.append(item)
    elif isinstance(item, Rejected):
        provider = storable_text(item.provider)[:64]
        out.rejects.append((item.reason, provider, item.raw, started_at))
        out.unmapped += item.unmapped
    elif isinstance(item, InterruptionFact):
        out.facts.append(item)
    elif isinstance(item, CatalogVersion):
        out.versions.append(item)
    elif isinstance(item, ExchangeRateFact):
        out.rates.append(item)
    else:
        raise TypeError(f"source {source} yielded {type(item).__name__}, not a record")


def validate(obs: PriceObservation) -> tuple[str | None, str | None]:
    """(canonical GPU id, None) for a storable observation, else (None, reason)."""
    if not obs.provider or not obs.instance_type:
        return None, "missing provider or instance type"
    if obs.observed_at is None or obs.observed_at.tzinfo is None:
        return None, "observed_at missing or not timezone-aware"
    reason = _text_problem(obs)
    if reason is not None:
        return None, reason
    gpu_id, reason, cap, floor = _validate_offer(
        obs.category, obs.currency, obs.gpu_count, obs.gpu_name, obs.gpu_memory_gb)
    if reason is not None:
        return None, reason
    for name, value, high in (("vcpus", obs.vcpus, MAX_VCPUS), ("ram_gb", obs.ram_gb, MAX_RAM_GB)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or not 0 <= value <= high):
            return None, f"{name} {number_text(value)} is outside [0, {high:g}]"
    price = obs.price_per_hour
    if not isinstance(price, Decimal):
        return None, f"price is not a Decimal: {number_text(price)}"
    if not price.is_finite():
        return None, f"price is not a finite number: {price}"
    if price <= 0:
        return None, f"price must be positive, got {number_text(price)}"
    if price > cap:
        return None, (f"absurd price {number_text(price)} {obs.currency}/h for "
                      f"{obs.gpu_count:g} GPU(s): above {MAX_PRICE_PER_GPU_HOUR} per GPU-hour")
    if price < floor:
        return None, (f"absurd price {number_text(price)} {obs.currency}/h for "
                      f"{obs.gpu_count:g} GPU(s): below {MIN_PRICE_PER_GPU_HOUR} per GPU-hour")
    return gpu_id, None


def storable_text(value: Any) -> str:
    """A text field as both databases can store it: a lone surrogate (JSON's `\\ud800`)
    escaped, and a NUL byte (which PostgreSQL text refuses) written as `\\x00`."""
    if not isinstance(value, str):
        return "" if value is None else str(value)
    if value.isascii() and "\x00" not in value:
        return value
    return value.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _plain_key(obs: PriceObservation) -> str | None:
    """The observation's identity key if it passes the per-row checks of the fast path,
    conservative and cheap: a provider and an instance type, short ASCII identity text
    without NUL, hardware figures within bounds (its category is checked with its kind).
    None for a row it is unsure of: `validate` decides exactly (a long but valid region is
    still accepted there)."""
    provider, region, zone, itype, variant, category, url, vcpus, ram = _ROW_FIELDS(obs)
    try:
        key = IDENTITY_SEPARATOR.join((provider, region, zone, itype, variant, category))
    except TypeError:
        return None
    # The five fields beside the category hold at most _FAST_TEXT_CHARS characters.
    if (provider and itype and len(key) - len(category) - 5 <= _FAST_TEXT_CHARS
            and key.isascii() and "\x00" not in key
            and (url is None or (type(url) is str and url.isascii() and "\x00" not in url))
            and (vcpus is None or (type(vcpus) in _NUMBERS and 0 <= vcpus <= MAX_VCPUS))
            and (ram is None or (type(ram) in _NUMBERS and 0 <= ram <= MAX_RAM_GB))):
        return key
    return None


def _text_problem(obs: PriceObservation) -> str | None:
    for name, width in _TEXT_FIELDS:
        value = getattr(obs, name)
        if value is None or (type(value) is str and value.isascii() and "\x00" not in value
                             and len(value) <= width):
            continue
        if not isinstance(value, str):
            return f"{name} is not text: {type(value).__name__}"
        if "\x00" in value:  # PostgreSQL text cannot hold it
            return f"{name} holds a NUL byte"
        if len(value) > width:
            return f"{name} is {len(value)} characters, more than {width}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{name} is not valid Unicode text (a lone surrogate)"
    return None


@functools.lru_cache(maxsize=4096)
def _validate_offer(category: str, currency: str, count: Any, gpu_name: str | None,
                    memory_gb: float | None) -> tuple[str | None, str | None, Decimal, Decimal]:
    """The checks that depend only on what kind of offer a row is; cached, since a source
    lists thousands of rows of a few dozen kinds. The last two are the bounds of the
    instance's price (tracker/core/bounds.py per GPU-hour, times the count)."""
    cap = Decimal(0)
    if not isinstance(category, str) or category not in CATEGORIES:
        return None, f"unknown pricing category {_short(category)}", cap, cap
    if not isinstance(currency, str) or currency not in ISO_4217:
        return None, f"currency {_short(currency)} is not an ISO 4217 code", cap, cap
    if count is None or isinstance(count, bool) or not isinstance(count, (int, float)) \
            or not math.isfinite(count) or count <= 0:
        return None, f"GPU count must be positive, got {number_text(count)}", cap, cap
    if count > MAX_GPUS_PER_OFFER:
        return None, (f"GPU count {number_text(count)} is above {MAX_GPUS_PER_OFFER} "
                      "(tracker/core/bounds.py)"), cap, cap
    if memory_gb is not None and (isinstance(memory_gb, bool)
                                  or not isinstance(memory_gb, (int, float))
                                  or not math.isfinite(memory_gb)
                                  or not 0 < memory_gb <= MAX_GPU_MEMORY_GB):
        return None, (f"GPU memory {number_text(memory_gb)} GB is outside (0, "
                      f"{MAX_GPU_MEMORY_GB:g}]"), cap, cap
    if gpu_name is not None and not isinstance(gpu_name, str):
        return None, f"GPU name is not text: {type(gpu_name).__name__}", cap, cap
    if gpu_name and not gpu_name.isascii():
        try:
            gpu_name.encode("utf-8")
        except UnicodeEncodeError:
            return None, "GPU name is not valid Unicode text (a lone surrogate)", cap, cap
    if gpu_name and len(gpu_name) > MAX_NAME_CHARS:
        return None, (f"unknown GPU {_short(gpu_name)} ({len(gpu_name)} characters, more "
                      f"than {MAX_NAME_CHARS})"), cap, cap
    gpu_id = canonical_gpu(gpu_name or "", memory_gb)
    if gpu_id is None:
        return None, f"unknown GPU {_short(gpu_name)}", cap, cap
    # Never re-class silently: memory that cannot be this GPU's means the row was misread.
    mismatch = memory_mismatch(gpu_id, memory_gb)
    if mismatch is not None:
        return None, mismatch, cap, cap
    gpus = Decimal(repr(float(count)))
    return gpu_id, None, MAX_PRICE_PER_GPU_HOUR * gpus, MIN_PRICE_PER_GPU_HOUR * gpus


def _short(value: Any) -> str:
    """A provider's value in a reason: its repr, cut short (a reason is one line)."""
    text = repr(storable_text(value) if isinstance(value, str) else value)
    return text if len(text) <= 80 else text[:77] + "..."


def raw_json(value: Any) -> str:
    """A payload as JSON text a database can store: a lone surrogate stays as its `\\ud800`
    escape (ASCII JSON) rather than failing the run's transaction."""
    try:
        text = json.dumps(value, default=_json_default, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value)[:MAX_RAW_CHARS])
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(value, default=_json_default, ensure_ascii=True, sort_keys=True)
    return text


def cap_raw(text: str) -> str:
    """Raw JSON text cut to MAX_RAW_CHARS (then a JSON object holding its start: still JSON)."""
    if len(text) <= MAX_RAW_CHARS:
        return text
    cut = MAX_RAW_CHARS - 64
    while True:  # escaping can lengthen the start (quotes, backslashes): halve until it fits
        capped = json.dumps({"truncated": text[:cut], "chars": len(text)}, ensure_ascii=False)
        if len(capped) <= MAX_RAW_CHARS:
            return capped
        cut //= 2


def capped_reason(reason: Any) -> str:
    text = storable_text(reason)
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 3] + "..."


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return number_text(value, limit=MAX_REASON_CHARS)
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)
    return repr(value)


def observation_raw(obs: PriceObservation) -> dict[str, Any]:
    data = {f: getattr(obs, f) for f in obs.__dataclass_fields__ if f != "raw"}
    data["attributes"] = dict(obs.attributes)
    return data
