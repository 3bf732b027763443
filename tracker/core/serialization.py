"""Serialization: values to and from their JSON, CSV and environment text forms, pure and low in
the stack.

JSON is the contract: money as exact decimal strings, timestamps ISO 8601 UTC with `Z`,
dates ISO, dataclasses as objects, NaN and infinities as null. A versioned document (the weekly
report) is an envelope `{"schema_version", "kind", ...}` serialized canonically (sorted keys), so
equal documents are equal bytes. CSV cells pass the one spreadsheet-formula guard (`csv_safe`).

Nothing here prints: click, tables and the shared `--format` option are the interface
layer's (tracker/cli/commands/printing.py). Any layer may import this module.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from tracker.core.errors import InvalidInput

# Values that are their own JSON form, and plain floats, dicts and lists: answered before the
# isinstance checks below (an ABC check per string dominated printing a 5,000-row `compare`).
_PLAIN = frozenset({str, int, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    return _jsonable(value, None, iso_utc)


def _jsonable(value: Any, text: Callable[[str], str] | None,
              instant: Callable[[datetime], str]) -> Any:
    """to_jsonable, with every string, the keys too, given or made from a number or a time,
    through `text` when given; times in ISO UTC by `instant`."""
    kind = type(value)
    if kind is str:
        return value if text is None else text(value)
    if kind in _PLAIN:
        return value
    if kind is float:
        return value if math.isfinite(value) else None  # NaN and Infinity are not JSON
    if kind is dict:
        return {_key(k, text): _jsonable(v, text, instant) for k, v in value.items()}
    if kind is list:
        return [_jsonable(v, text, instant) for v in value]
    from tracker.core.money import decimal_to_str

    out: Any = value
    if isinstance(value, Decimal):
        out = decimal_to_str(value) if value.is_finite() else None
    elif isinstance(value, datetime):
        out = instant(value)
    elif isinstance(value, date):
        out = value.isoformat()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name), text, instant)
                for f in dataclasses.fields(value)}
    elif isinstance(value, Mapping):
        return {_key(k, text): _jsonable(v, text, instant) for k, v in value.items()}
    elif isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, text, instant) for v in value]
    elif isinstance(value, float) and not math.isfinite(value):  # NaN and Infinity: not JSON
        return None
    return text(out) if text is not None and isinstance(out, str) else out


def _key(key: Any, text: Callable[[str], str] | None) -> str:
    """A mapping's key as JSON's text, through `text` when given: a key can carry what a
    value can (a provider's name, a URL)."""
    return str(key) if text is None else text(str(key))


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
    """`value` as JSON (`to_jsonable`): the bytes of `json.dumps(indent=2,
    ensure_ascii=False)`, laid out as `canonical_json` does (a 5,000-row `compare` printed in
    a third of the time), keys in their order."""
    data = to_jsonable(value)
    parts: list[str] = []
    try:
        _canonical(data, "\n", parts, sort_keys=False)
    except _Unusual:  # a key that is not a string: the standard encoder's rules
        return json.dumps(data, indent=2, ensure_ascii=False)
    return "".join(parts)


def versioned_document(kind: str, schema_version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope of a versioned document: what it is and which version of its schema,
    then its body; JSON-ready (`to_jsonable`) with every string through the secret scrubber,
    since every rendering of it (HTML, JSON, CSV, mail) starts from this form. One walk does
    both, and each distinct string is scrubbed once and each instant formatted once (a
    50,000-offer report holds 850,000 strings, 87,000 of them distinct)."""
    import functools

    from tracker.core.secrets import scrubber

    # Equal aware times are one instant, one text (pandas' Timestamps format slowly).
    walk = _scrubbing_walk(scrubber(), functools.cache(iso_utc))
    return walk({"schema_version": schema_version, "kind": kind, **body})


def _scrubbing_walk(text: Callable[[str], str],
                    instant: Callable[[datetime], str]) -> Callable[[Any], Any]:
    """`_jsonable(value, text, instant)`, the same values, with a dict's or list's strings,
    plain numbers and Decimals turned in its own loop rather than one call each (the report's
    price list is 47,000 dicts of 17 keys): every string, a key or a value or a Decimal's text,
    still goes through `text`. Any other value takes `_jsonable`'s rules."""
    from tracker.core.money import decimal_to_str

    plain = frozenset({int, bool, type(None)})
    isfinite = math.isfinite
    decimals: dict[Decimal, str] = {}  # each distinct finite amount's scrubbed text
    times: dict[datetime, str] = {}  # each distinct instant's scrubbed text

    def leaf(value: Any) -> Any:
        """A value that is not a dict or a list (`walk` takes those)."""
        kind = type(value)
        if kind is str:
            return text(value)
        if kind in plain:
            return value
        if kind is float:
            return value if isfinite(value) else None
        if kind is Decimal and value.is_finite():
            out = decimals.get(value)
            if out is None:
                out = decimals[value] = text(decimal_to_str(value))
            return out
        if isinstance(value, datetime):  # pandas' Timestamp too: each instant's text once
            out = times.get(value)
            if out is None:
                out = times[value] = text(instant(value))
            return out
        return _jsonable(value, text, instant)

    def walk(value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            out = {}
            for k, v in value.items():
                vkind = type(v)
                if vkind is str:
                    v = text(v)
                elif vkind is dict or vkind is list:
                    v = walk(v)
                elif vkind is float:
                    v = v if isfinite(v) else None
                elif vkind is Decimal and v.is_finite():
                    v = decimals.get(v) or leaf(v)
                elif vkind not in plain:
                    v = leaf(v)
                out[text(k) if type(k) is str else text(str(k))] = v
            return out
        if kind is list:
            return [walk(v) if type(v) is dict or type(v) is list else leaf(v)
                    for v in value]
        return leaf(value)

    return walk


def canonical_json(document: Mapping[str, Any]) -> str:
    """Sorted keys and a fixed layout, so equal documents are equal bytes: the bytes of
    `json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)` and a newline.

    Python's encoder with an indent is its pure-Python one (about 1 µs a value); here each
    object or array without an object or array inside (a row of the report's price list)
    goes through the C encoder in one call, its separators carrying the indentation."""
    parts: list[str] = []
    try:
        _canonical(document, "\n", parts)
    except _Unusual:  # a key that is not a string: the standard encoder's rules
        return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    parts.append("\n")
    return "".join(parts)


class _Unusual(Exception):
    pass


_SCALAR_JSON = json.JSONEncoder(ensure_ascii=False)
_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
_FLAT_JSON: dict[tuple[str, bool], json.JSONEncoder] = {}


def _canonical(value: Any, newline: str, out: list[str], sort_keys: bool = True) -> None:
    """Append `value` in json.dumps(indent=2, sort_keys=sort_keys)'s layout, on a line that
    `newline` (a newline and the line's indentation) starts."""
    if type(value) is str:
        out.append(json.encoder.encode_basestring(value))
        return
    is_dict = isinstance(value, dict)
    if not is_dict and not isinstance(value, (list, tuple)):
        out.append(_SCALAR_JSON.encode(value))
        return
    if not value:
        out.append("{}" if is_dict else "[]")
        return
    inner = newline + "  "
    items = value.values() if is_dict else value
    if _LEAF_TYPES.issuperset(map(type, items)):
        encoder = _FLAT_JSON.get((inner, sort_keys))
        if encoder is None:
            encoder = _FLAT_JSON[(inner, sort_keys)] = json.JSONEncoder(
                ensure_ascii=False, sort_keys=sort_keys, separators=("," + inner, ": "))
        text = encoder.encode(value)
        out.append(f"{text[0]}{inner}{text[1:-1]}{newline}{text[-1]}")
        return
    if not is_dict:
        out.append("[")
        for number, item in enumerate(value):
            out.append(inner if number == 0 else "," + inner)
            _canonical(item, inner, out, sort_keys)
        out.append(newline + "]")
        return
    out.append("{")
    for number, (key, item) in enumerate(sorted(value.items()) if sort_keys
                                         else value.items()):
        if type(key) is not str:
            raise _Unusual
        out.append(("" if number == 0 else ",") + inner + json.encoder.encode_basestring(key)
                   + ": ")
        _canonical(item, inner, out, sort_keys)
    out.append(newline + "}")


FORMULA_PREFIXES = "=+-@\t\r"
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
# Every character a CSV reader or a spreadsheet may take as the end of a row or of a line
# inside a cell: CR and LF (RFC 4180, Python's csv, Excel), and the other breaks
# str.splitlines knows (VT, FF, FS/GS/RS, NEL, LINE/PARAGRAPH SEPARATOR), which some
# importers also split on.
LINE_BREAKS = "\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK = re.compile(f"([{LINE_BREAKS}]+)")


def csv_safe(text: str) -> str:
    """The one CSV guard: a text cell a spreadsheet would run as a formula (it starts with
    = + - @ tab or CR, OWASP's list) gets a leading `'`; plain numbers (-0.2) stay numbers.

    The guard applies to every line of the cell, not only the first: a cell holding
    `eu\\r=cmd|...` would otherwise start a new row (or a new line that some importers take
    as a new row) whose first text is a formula. Every CSV the project writes passes its cells
    through here (`write_csv`), which also quotes any cell holding a line break."""
    if not text:
        return text
    if _BREAK.search(text) is None:
        return _guard_line(text)
    parts = _BREAK.split(text)
    # split() with a group alternates text, break, text, ...: guard the text pieces, and the
    # cell itself when it starts with a break (CR is on OWASP's list).
    return _guard_line("".join(part if i % 2 else _guard_line(part)
                               for i, part in enumerate(parts)))


def _guard_line(text: str) -> str:
    if text and text[0] in FORMULA_PREFIXES and not _is_plain_number_text(text):
        return "'" + text
    return text


def formula_like(text: str) -> bool:
    """Whether a spreadsheet could run `text` as a formula (what `csv_safe` guards)."""
    return csv_safe(text) != text


def _is_plain_number_text(text: str) -> bool:
    return _PLAIN_NUMBER.match(text) is not None


_NEEDS_QUOTES = re.compile(f'[,"{LINE_BREAKS}]')


def write_csv(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """CSV text (newline-terminated rows) with every cell through `csv_safe`.

    Cells are quoted (RFC 4180: doubled quotes inside) when they hold the delimiter, a quote
    or any line break: Python's csv writer with a `\\n` line terminator leaves a lone CR
    unquoted, and a reader then starts a new row there."""
    # A table repeats most of its cells (classes, providers, regions, dates): each distinct
    # text is guarded and quoted once per call.
    written: dict[str, str] = {}

    def field(cell: str) -> str:
        text = written.get(cell)
        if text is None:
            safe = csv_safe(cell)
            text = written[cell] = ('"' + safe.replace('"', '""') + '"'
                                    if _NEEDS_QUOTES.search(safe) else safe)
        return text

    def line(cells: Sequence[str]) -> str:
        if len(cells) == 1 and not cells[0]:
            return '""'  # an empty line would be read as no row at all
        return ",".join(map(field, cells))

    lines = [line([str(c) for c in header])]
    lines.extend(line(row) for row in rows)
    return "".join(text + "\n" for text in lines)
