"""One formatter for every query command: `--format table|json|csv`.

JSON is the contract (tracker/core/serialization.py: money as exact decimal strings, timestamps
ISO 8601 UTC with `Z`); `table` is for people; `csv` goes to stdout for spreadsheets. This is
the interface layer's printing: only commands and the CLI import it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import click

from tracker.core.serialization import dumps, to_jsonable, write_csv

FORMATS = ("table", "json", "csv")

# What a terminal would act on rather than show: C0 controls (ESC starts a colour or cursor
# sequence, CR rewrites the line), DEL, C1 controls (CSI as one byte), and the bidirectional
# embeddings, overrides and isolates that reorder a line (Trojan Source, CVE-2021-42574).
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_INVISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_INVISIBLE.update({ord(c): f"\\u{ord(c):04x}" for c in _BIDI})
_INVISIBLE.update({ord("\r"): "\\r", ord("\t"): "\\t", ord("\n"): "\\n"})
_KEEP_LINES = {k: v for k, v in _INVISIBLE.items() if k != ord("\n")}


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """Text a terminal shows as it is: control and bidi characters made visible as escapes
    (`\\x1b`, `\\r`, `\\u202e`). Table output only; JSON and CSV keep the exact values."""
    if text.isascii() and text.isprintable():
        return text
    return text.translate(_KEEP_LINES if keep_newlines else _INVISIBLE)


def format_option(func: Callable) -> Callable:
    """The shared `--format` option (also `GPU_TRACKER_FORMAT`)."""
    return click.option(
        "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
        envvar="GPU_TRACKER_FORMAT", show_envvar=True,
        help="Output format: table for people, json/csv for tools.",
    )(func)


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
    cells = [[terminal_safe(_cell(row.get(c))) for c in columns] for row in rows]
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
    from tracker.core.secrets import scrub

    if fmt == "json":
        click.echo(scrub(dumps(data if isinstance(data, Mapping) else list(data))))
        return
    if fmt == "csv":
        rows = [dict(data)] if isinstance(data, Mapping) else [dict(r) for r in data]
        click.echo(scrub(render_csv(rows, columns)))
        return
    if table_text is not None:
        click.echo(scrub(terminal_safe(table_text, keep_newlines=True)))
    elif isinstance(data, Mapping):
        click.echo(scrub(render_table([{"field": k, "value": v} for k, v in data.items()])))
    else:
        click.echo(scrub(render_table([dict(r) for r in data], columns)))


def round_for_people(rows: list[dict], keys: tuple[str, ...], *, rate: bool = False) -> None:
    """Table output only: amounts to their currency's minor unit (JPY without decimals), a
    price per unit (`rate`) below one unit with three decimals, as `money_text` shows them."""
    from tracker.core.money import display_amount

    for row in rows:
        for key in keys:
            if row.get(key) is not None:
                row[key] = str(display_amount(Decimal(str(row[key])), row["currency"],
                                              rate=rate))


def rows_for_people(rows: Sequence[Mapping[str, Any]], money: tuple[str, ...] = (),
                    rates: tuple[str, ...] = ()) -> list[dict]:
    """Copies of a document's rows for a table: `money` keys rounded as amounts, `rates` as
    prices per unit (`round_for_people`); the document itself keeps its exact values."""
    copies = [dict(row) for row in rows]
    round_for_people(copies, money)
    round_for_people(copies, rates, rate=True)
    return copies


def money_text(amount: Decimal | None, currency: str, *, rate: bool = False,
               places: int | None = None) -> str:
    """An amount for a human table, as the report shows it (`tracker.core.money.format_money`:
    the currency's minor units, a price per unit below one unit with three decimals) with its
    ISO code; `-` for none."""
    from tracker.core.money import format_money

    if amount is None:
        return "-"
    return format_money(Decimal(amount), currency, rate=rate, places=places)


def field_lines(pairs: list[tuple[str, str]], warnings: list[str] | tuple[str, ...] = ()) -> str:
    """A human answer as aligned `label  value` lines, then one `warning:` line each."""
    width = max(len(label) for label, _ in pairs)
    out = [f"{label.ljust(width)}  {value}" for label, value in pairs]
    out.extend(f"warning: {w}" for w in warnings)
    return "\n".join(out)
