"""Serialization: values to and from their JSON, CSV and environment text forms, pure and low in
the stack.

JSON is the contract: money as exact decimal strings, timestamps ISO 8601 UTC with `Z`,
dates ISO, dataclasses as objects, NaN and infinities as null. A versioned document (the weekly
report) is an envelope `{"schema_version", "kind", ...}` serialized canonically (sorted keys), so
equal documents are equal bytes. CSV cells pass the one spreadsheet-formula guard (`csv_safe`).

Nothing here prints: click, tables and the shared `--format` option are the interface
layer's (tracker/commands/printing.py). Any layer may import this module.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from tracker.errors import InvalidInput


def to_jsonable(value: Any) -> Any:
    from tracker.money import decimal_to_str

    if isinstance(value, Decimal):
        return decimal_to_str(value) if value.is_finite() else None
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):  # NaN and Infinity are not JSON
        return None
    return value


def iso_utc(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_instant(value: str, *, end_of_day: bool = False) -> datetime:
    """ISO date or date-time to an aware UTC datetime; naive times are UTC.

    A bare date means the start of that day, or its last instant with `end_of_day`
    (so `--as-of 2026-11-09` includes prices observed during 9 November).
    """
    text = value.strip()
    if text.lower() == "now":
        return datetime.now(UTC)
    try:
        if _DATE_ONLY.match(text):
            day = datetime.fromisoformat(text).date()
            if end_of_day:
                return datetime.combine(day, time.max, tzinfo=UTC)
            return datetime.combine(day, time.min, tzinfo=UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"cannot parse {value!r} as a date or time; use e.g. 2026-11-09 or "
            "2026-11-09T12:00Z") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def comma_list(value: Any) -> Any:
    """A string where a list is expected is a comma-separated list (`"aws"` -> `["aws"]`):
    that is how environment variables spell lists, and a one-word TOML string means one item."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def dumps(value: Any) -> str:
    return json.dumps(to_jsonable(value), indent=2, ensure_ascii=False)


def versioned_document(kind: str, schema_version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope of a versioned document: what it is and which version of its schema,
    then its body; JSON-ready (`to_jsonable`) with every string through the secret scrubber,
    since every rendering of it (HTML, JSON, CSV, mail) starts from this form."""
    from tracker.secrets import scrub_tree

    return scrub_tree(to_jsonable({"schema_version": schema_version, "kind": kind, **body}))


def canonical_json(document: Mapping[str, Any]) -> str:
    """Sorted keys and a fixed layout, so equal documents are equal bytes."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


FORMULA_PREFIXES = "=+-@\t\r"
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def csv_safe(text: str) -> str:
    """The one CSV guard: a text cell a spreadsheet would run as a formula (it starts with
    = + - @ tab or CR, OWASP's list) gets a leading `'`; plain numbers (-0.2) stay numbers.
    Every CSV the project writes passes its cells through here (`write_csv`)."""
    if text and text[0] in FORMULA_PREFIXES and not _is_plain_number_text(text):
        return "'" + text
    return text


def formula_like(text: str) -> bool:
    """Whether a spreadsheet could run `text` as a formula (what `csv_safe` guards)."""
    return csv_safe(text) != text


def _is_plain_number_text(text: str) -> bool:
    return _PLAIN_NUMBER.match(text) is not None


def write_csv(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """CSV text (newline-terminated rows) with every cell through `csv_safe`."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_safe(str(c)) for c in header])
    for row in rows:
        writer.writerow([csv_safe(c) for c in row])
    return buffer.getvalue()
