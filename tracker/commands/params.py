"""Shared click parameter types: UTC instants and canonical GPU names."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta
from typing import Any

import click

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_instant(value: str, *, end_of_day: bool = False) -> datetime:
    """ISO date or date-time to an aware UTC datetime; naive times are UTC.

    A bare date means the start of that day, or its last instant with `end_of_day`
    (so `--as-of 2026-11-09` includes prices observed during 9 November).
    """
    from tracker.errors import InvalidInput

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


class Instant(click.ParamType):
    """`--as-of 2026-11-09`, `--since 2026-09-01T00:00Z`, or `now`."""

    name = "DATE"

    def __init__(self, end_of_day: bool = False) -> None:
        self.end_of_day = end_of_day

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        from tracker.errors import InvalidInput

        try:
            return parse_instant(str(value), end_of_day=self.end_of_day)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)


def resolve_gpus(names: tuple[str, ...] | list[str], app: Any = None) -> list[str]:
    """Canonical ids for user-typed GPU names; warnings (ambiguity) go to stderr."""
    from tracker.gpus import resolve_gpu

    ids = []
    for name in names:
        resolved = resolve_gpu(name)
        for warning in resolved.warnings:
            if app is not None:
                app.note(f"warning: {warning}")
        ids.append(resolved.gpu.id)
    return ids


def hours_between(a: datetime, b: datetime) -> float:
    return (b - a) / timedelta(hours=1)


def currency_option(func: Any) -> Any:
    """The shared `--currency CODE` option (also `GPU_TRACKER_CURRENCY`): show money converted
    at the ECB rate of each price's own date; without it, amounts stay as quoted."""
    return click.option(
        "--currency", "currency", metavar="CODE", envvar="GPU_TRACKER_CURRENCY", default=None,
        callback=_check_currency_param,
        help="Show money in this ISO currency (EUR, GBP, JPY, ...), converted at the ECB "
             "reference rate of each price's date. Default: as quoted.")(func)


def _check_currency_param(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None or value == "":
        return None
    from tracker.errors import InvalidInput
    from tracker.money import check_currency

    try:
        return check_currency(str(value))
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
