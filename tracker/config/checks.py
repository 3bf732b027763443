"""The checks of the configuration's values, as pydantic validators and annotated types: known
source and GPU names, time zones, cron expressions and the report's day and time, mail
addresses, choices declared by their module, fabric overrides and the `[sources.<name>]`
tables (each checked by its source's own settings model).

The section models that use them are tracker/config/sections.py's. Each check imports what it checks
against only when it runs, so a command that never touches sources keeps `scrapers` unimported.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from tracker.core.errors import InvalidInput
from tracker.core.serialization import comma_list


def known_sources(value: list[str]) -> list[str]:
    # Imported only when a user gave source names: commands that never touch sources
    # (breakeven, spot, size) keep `scrapers` unimported.
    from scrapers import SOURCES

    for name in value:
        if name not in SOURCES:
            raise ValueError(unknown_name("source", name, list(SOURCES)))
    return list(dict.fromkeys(value))


def known_gpus(value: list[str]) -> list[str]:
    from tracker.core.gpus import gpu_table

    table = gpu_table()
    for name in value:
        if name not in table:
            raise ValueError(unknown_name("GPU id", name, sorted(table),
                                      listing="`gpu-tracker gpus` lists the ids"))
    return value


def check_time_zone(name: str) -> str:
    """An IANA time zone name, or ValueError saying what is allowed."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}: not an IANA time zone name "
                         "(e.g. UTC, Europe/Berlin)") from None
    return str(name)


def scheduler_check(check: Any, value: str) -> str:
    """Run one of the scheduler's own checks (tracker/core/cron.py) on a config value."""
    import re

    try:
        check(value)
    except InvalidInput as exc:  # the key is named by the config error already
        raise ValueError(re.sub(r"^schedule\.\w+:? ", "", str(exc))) from None
    return value


def cron_expression(expr: str) -> str:
    from zoneinfo import ZoneInfo

    from tracker.core.cron import cron_trigger

    return scheduler_check(lambda e: cron_trigger(e, ZoneInfo("UTC")), expr) if expr else expr


def report_day_check(day: str) -> str:
    from tracker.core.cron import report_cron

    return scheduler_check(lambda d: report_cron(d, "07:00"), day)


def report_time_check(time_text: str) -> str:
    from tracker.core.cron import report_cron

    return scheduler_check(lambda t: report_cron("mon", t), time_text)


def mail_addresses(value: Any) -> Any:
    """The mail module's own address check (tracker/core/smtp.py), at load instead of at sending."""
    from tracker.core.smtp import check_addresses

    try:
        check_addresses(value if isinstance(value, list) else [value])
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return value


# The fields `[report] subject` may name: plain values of the week being sent. A fixed set,
# filled by `fill_subject` (no attribute or index access, no conversion or format spec), so
# a configured subject can never reach into the objects behind it.
SUBJECT_FIELDS = ("week", "year", "week_number", "start", "end", "currency")


def _subject_parts(template: str) -> list[tuple[str, str | None]]:
    """The template as (literal text, field name or None) pairs; ValueError naming the
    problem for anything but `{field}` from SUBJECT_FIELDS (and `{{`/`}}` for braces)."""
    import string

    allowed = ", ".join("{" + f + "}" for f in SUBJECT_FIELDS)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{template!r}: {exc} (fields: {allowed}; write {{{{ for a brace)") \
            from None
    parts: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (name not in SUBJECT_FIELDS or spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + \
                (f":{spec}" if spec else "") + "}"
            raise ValueError(f"{template!r}: {shown} is not a field the subject can name "
                             f"(fields: {allowed})")
        parts.append((literal, name))
    return parts


def subject_template(value: str) -> str:
    """`[report] subject`, checked when the configuration loads."""
    if any(c in value for c in "\r\n"):
        raise ValueError("must be one line")
    _subject_parts(value)
    return value


def fill_subject(template: str, values: Mapping[str, str]) -> str:
    """The subject with its fields filled from `values` (every SUBJECT_FIELDS key)."""
    try:
        parts = _subject_parts(template)
    except ValueError as exc:
        raise InvalidInput(f"[report] subject {exc}") from None
    return "".join(literal + (str(values[name]) if name else "") for literal, name in parts)


def choice_of(module: str, name: str) -> Any:
    """A value from the list its module declares (e.g. tracker/economics/spot.py
    BAND_POINTS), so the allowed values are written once; imported when a value is checked.
    tests/test_layers.py reads `module` as an import of the configuration layer."""
    def check(value: str) -> str:
        import importlib

        allowed = getattr(importlib.import_module(module), name)
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    return AfterValidator(check)


def unknown_name(kind: str, name: str, known: list[str], listing: str = "") -> str:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint} ({listing or 'known: ' + ', '.join(known)})"

StrList = Annotated[list[str], BeforeValidator(comma_list)]
SourceList = Annotated[list[str], BeforeValidator(comma_list), AfterValidator(known_sources)]
GpuList = Annotated[list[str], BeforeValidator(comma_list), AfterValidator(known_gpus)]
TimeZone = Annotated[str, AfterValidator(check_time_zone)]
Cron = Annotated[str, AfterValidator(cron_expression)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveInt = Annotated[int, Field(ge=1)]


def fabric_overrides(value: Any) -> Any:
    """`[fabric.overrides."<provider>"]` tables, checked by tracker.core.fabric (the one reader)."""
    from tracker.core.fabric import parse_overrides

    try:
        parse_overrides({"overrides": value})
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return value


def source_tables(value: Any) -> Any:
    """`[sources.<name>]` tables: known source names, each table checked by its source."""
    if not isinstance(value, Mapping) or not value:
        return value
    checked: dict[str, Any] = {}
    for name, table in value.items():
        if not isinstance(table, Mapping):
            raise ValueError(f"[sources.{name}] must be a table of settings")
        check_source_settings(name, table, {})
        checked[name] = dict(table)
    return checked


def check_source_settings(name: str, table: Mapping[str, Any],
                          environ: Mapping[str, str]) -> None:
    """A source's file table and variables, checked by the source's own settings model."""
    from scrapers import SOURCES, load_source

    if name not in SOURCES:
        raise ValueError(unknown_name("source", name, list(SOURCES)))
    try:
        load_source(name).resolve_settings(table, environ=environ)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None


def http_url(value: str) -> str:
    """An http(s) URL with a host that parses (a bracketed IPv6 address closed, a numeric
    port), or empty; checked with the configuration so a typo is one line, not a traceback
    from the HTTP client at delivery time. The URL itself never goes in the message (a
    webhook URL carries its token)."""
    if not value:
        return value
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        _port = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("not a valid URL (it contains spaces or control characters)")
    return value
