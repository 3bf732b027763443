"""One formatter for every query command: `--format table|json|csv`.

JSON is the contract (money as exact decimal strings, timestamps ISO 8601 UTC with `Z`);
`table` is for people; `csv` goes to stdout for spreadsheets.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import click

FORMATS = ("table", "json", "csv")


def format_option(func: Callable) -> Callable:
    """The shared `--format` option (also `GPU_TRACKER_FORMAT`)."""
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
        envvar="GPU_TRACKER_FORMAT", help="Output format: table for people, json/csv for tools.",
    )(func)


def to_jsonable(value: Any) -> Any:
    from tracker.money import decimal_to_str

    if isinstance(value, Decimal):
        return decimal_to_str(value)
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
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def iso_utc(value: datetime) -> str:
    from datetime import UTC

    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def dumps(value: Any) -> str:
    return json.dumps(to_jsonable(value), indent=2, ensure_ascii=False)


def _cell(value: Any) -> str:
    value = to_jsonable(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    numeric = [all(not r[i] or _is_number(r[i]) for r in cells) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


FORMULA_PREFIXES = "=+-@\t\r"


def csv_safe(text: str) -> str:
    """The one CSV guard: a text cell a spreadsheet would run as a formula (it starts with
    = + - @ tab or CR, OWASP's list) gets a leading `'`; plain numbers (-0.2) stay numbers.
    Every CSV the project writes passes its cells through here (`write_csv`)."""
    if text and text[0] in FORMULA_PREFIXES and not _is_plain_number_text(text):
        return "'" + text
    return text


_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


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


def render_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    columns = list(columns or (rows[0].keys() if rows else []))
    return write_csv(columns, ([_cell(row.get(c)) for c in columns] for row in rows)).rstrip("\n")


def emit(
    data: Mapping[str, Any] | Iterable[Mapping[str, Any]], fmt: str,
    columns: Sequence[str] | None = None, *, table_text: str | None = None,
) -> None:
    """Print a result: a list of rows, or one object (field/value pairs in a table, one row in csv).

    `table_text` lets a command give its own human rendering (e.g. a breakdown with units)
    while json and csv stay the contract.
    """
    from tracker.secrets import scrub

    if fmt == "json":
        click.echo(scrub(dumps(data if isinstance(data, Mapping) else list(data))))
        return
    if fmt == "csv":
        rows = [dict(data)] if isinstance(data, Mapping) else [dict(r) for r in data]
        click.echo(scrub(render_csv(rows, columns)))
        return
    if table_text is not None:
        click.echo(scrub(table_text))
    elif isinstance(data, Mapping):
        click.echo(scrub(render_table([{"field": k, "value": v} for k, v in data.items()])))
    else:
        click.echo(scrub(render_table([dict(r) for r in data], columns)))


def round_for_people(rows: list[dict], keys: tuple[str, ...], *, rate: bool = False) -> None:
    """Table output only: amounts to their currency's minor unit (JPY without decimals)."""
    from tracker.money import display_amount

    for row in rows:
        for key in keys:
            if row.get(key) is not None:
                row[key] = str(display_amount(Decimal(str(row[key])), row["currency"],
                                              rate=rate))
