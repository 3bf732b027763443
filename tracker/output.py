"""One formatter for every query command: `--format table|json|csv`.

JSON is the contract (money as exact decimal strings, timestamps ISO 8601 UTC with `Z`);
`table` is for people; `csv` goes to stdout for spreadsheets.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
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


def render_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    buffer = io.StringIO()
    columns = list(columns or (rows[0].keys() if rows else []))
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buffer.getvalue().rstrip("\n")


def emit(
    data: Mapping[str, Any] | Iterable[Mapping[str, Any]], fmt: str,
    columns: Sequence[str] | None = None, *, table_text: str | None = None,
) -> None:
    """Print a result: a list of rows, or one object (field/value pairs in a table, one row in csv).

    `table_text` lets a command give its own human rendering (e.g. a breakdown with units)
    while json and csv stay the contract.
    """
    if fmt == "json":
        click.echo(dumps(data if isinstance(data, Mapping) else list(data)))
        return
    if fmt == "csv":
        rows = [dict(data)] if isinstance(data, Mapping) else [dict(r) for r in data]
        click.echo(render_csv(rows, columns))
        return
    if table_text is not None:
        click.echo(table_text)
    elif isinstance(data, Mapping):
        click.echo(render_table([{"field": k, "value": v} for k, v in data.items()]))
    else:
        click.echo(render_table([dict(r) for r in data], columns))
