"""Shared click parameter types: UTC instants, canonical GPU names, bounded numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import click

from tracker.core.bounds import MAX_GPUS, MAX_HOURS, MAX_MONEY, MAX_MONTHS, MAX_ROWS, MAX_TOKENS
from tracker.core.serialization import parse_instant


class Instant(click.ParamType):
    """`--as-of 2026-11-09`, `--since 2026-09-01T00:00Z`, or `now`."""

    name = "DATE"

    def __init__(self, end_of_day: bool = False) -> None:
        self.end_of_day = end_of_day

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        from tracker.core.errors import InvalidInput

        try:
            instant = parse_instant(str(value), end_of_day=self.end_of_day)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)
        if param is not None and param.name == "as_of":
            # An as-of is a question about the past: prices are known up to now, and a later
            # date would silently answer with today's.
            today = datetime.now(UTC).date()
            if instant.date() > today:
                self.fail(f"{value} is after today ({today.isoformat()}); prices are known "
                          "only up to now: give a date up to today", param, ctx)
        return instant


def check_range(since: datetime | None, until: datetime | None) -> None:
    """`--since` after `--until` is a usage error naming both (an empty range is a typo)."""
    if since is not None and until is not None and since > until:
        from tracker.core.errors import usage_error
        from tracker.core.serialization import iso_utc

        shown = iso_utc(until.replace(microsecond=0))
        raise usage_error(f"--since {iso_utc(since)} is after --until {shown}; give --since "
                          "on or before --until")


def resolve_gpus(names: tuple[str, ...] | list[str], app: Any = None) -> list[str]:
    """Canonical ids for user-typed GPU names; warnings (ambiguity) go to stderr."""
    from tracker.core.gpus import resolve_gpu

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


# -- bounded numbers: one way to validate every numeric option (exit 2, one line) -------------

# Sanity bounds: far beyond any real job, small enough that the arithmetic stays exact and the
# answer means something (`cost --hours 1e300` is a typo, not a plan). The one table of them,
# with their reasons, is tracker/core/bounds.py (MAX_HOURS, MAX_GPUS, MAX_MONEY, ... come from it).


def _label(param: click.Parameter | None) -> str:
    if param is not None and param.name:
        opts = getattr(param, "opts", None)
        return opts[0] if opts else f"--{param.name.replace('_', '-')}"
    return "value"


def _text(number: Any) -> str:
    if isinstance(number, Decimal):
        return f"{number.normalize():f}" if abs(number) < Decimal("1e15") else str(number)
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return str(number)


class _Bounded(click.ParamType):
    """Shared bounds check; subclasses parse. Errors are usage errors (exit 2), one line."""

    def __init__(self, min: Any = None, max: Any = None, *, min_open: bool = False,
                 max_open: bool = False, interval: bool = False, why: str = "") -> None:
        self.min, self.max = min, max
        self.min_open, self.max_open = min_open, max_open
        self.interval = interval  # say "must be in (0, 1]" rather than "more than 0"
        self.why = why

    def fail_line(self, message: str, ctx: click.Context | None) -> Any:
        raise click.UsageError(message, ctx)

    def _range(self) -> str:
        left = "(" if self.min_open else "["
        right = ")" if self.max_open else "]"
        return f"in {left}{_text(self.min)}, {_text(self.max)}{right}"

    def check(self, number: Any, value: Any, param: click.Parameter | None,
              ctx: click.Context | None) -> Any:
        label = _label(param)
        if self.min is not None and (number < self.min or (self.min_open and number == self.min)):
            if self.interval and self.max is not None:
                self.fail_line(f"{label} must be {self._range()}, got {value}", ctx)
            bound = (f"more than {_text(self.min)}" if self.min_open
                     else f"{_text(self.min)} or more")
            self.fail_line(f"{label} must be {bound}, got {value}", ctx)
        if self.max is not None and (number > self.max or (self.max_open and number == self.max)):
            if self.interval and self.min is not None:
                self.fail_line(f"{label} must be {self._range()}, got {value}", ctx)
            why = f" ({self.why})" if self.why else ""
            self.fail_line(f"{label} must be at most {_text(self.max)}{why}, got {value}", ctx)
        return number


class BoundedFloat(_Bounded):
    """A finite float (hours, counts, fractions) within bounds."""

    name = "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        import math

        if isinstance(value, bool):
            self.fail_line(f"{_label(param)} must be a number, got {value!r}", ctx)
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail_line(f"{_label(param)} must be a number, got {value!r}", ctx)
        if not math.isfinite(number):
            self.fail_line(f"{_label(param)} must be a finite number, got {value!r}", ctx)
        return self.check(number, value, param, ctx)


class BoundedInt(_Bounded):
    """A whole number within bounds (`1e3` and `1000.0` are accepted as 1000)."""

    name = "INTEGER"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return self.check(value, value, param, ctx)
        text = str(value).strip()
        try:
            number = int(text)
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                as_float = float("nan")
            if not as_float.is_integer():
                self.fail_line(f"{_label(param)} must be a whole number, got {value!r}", ctx)
            number = int(as_float)
        return self.check(number, value, param, ctx)


class BoundedDecimal(_Bounded):
    """An exact decimal (money, rates) parsed without float, within bounds."""

    name = "DECIMAL"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Decimal:
        from tracker.core.errors import InvalidInput
        from tracker.core.money import to_decimal

        if isinstance(value, Decimal):
            return self.check(value, value, param, ctx)
        try:
            number = to_decimal(value, what=_label(param))
        except InvalidInput as exc:
            self.fail_line(str(exc), ctx)
        if not number.is_finite():
            self.fail_line(f"{_label(param)} must be a finite number, got {value!r}", ctx)
        return self.check(number, value, param, ctx)


# The shapes the commands use, named by what they measure.
HOURS = BoundedFloat(0, MAX_HOURS, why="a sanity bound")
POSITIVE_HOURS = BoundedFloat(0, MAX_HOURS, min_open=True, why="a sanity bound")
# A mean time to interruption may be given as "practically never" (1e9 h).
MTTI_HOURS = BoundedFloat(0, 1e12, min_open=True, why="a sanity bound")
MINUTES = BoundedFloat(0, MAX_HOURS * 60, why="a sanity bound")
SECONDS = BoundedFloat(0, MAX_HOURS * 3600, why="a sanity bound")
GPU_COUNT = BoundedFloat(0, MAX_GPUS, min_open=True, why="a sanity bound")
WHOLE_GPUS = BoundedInt(1, MAX_GPUS, why="a sanity bound")
NODES = BoundedInt(1, MAX_GPUS, why="a sanity bound")
TOKENS = BoundedFloat(0, MAX_TOKENS, min_open=True, why="a sanity bound")
FRACTION = BoundedFloat(0, 1, interval=True)
OPEN_FRACTION = BoundedFloat(0, 1, min_open=True, interval=True)
MONEY = BoundedDecimal(0, MAX_MONEY, why="a sanity bound")
POSITIVE_MONEY = BoundedDecimal(0, MAX_MONEY, min_open=True, why="a sanity bound")
DECIMAL_FRACTION = BoundedDecimal(0, 1, interval=True)
OPEN_DECIMAL_FRACTION = BoundedDecimal(0, 1, min_open=True, interval=True)
MONTHS = BoundedInt(1, MAX_MONTHS, why="a sanity bound")
YEARS = BoundedInt(1, MAX_MONTHS // 12, why="a sanity bound")
ROW_LIMIT = BoundedInt(1, MAX_ROWS)
MIN_GPUS = BoundedFloat(0, MAX_GPUS, why="a sanity bound")
COUNT = BoundedInt(1, 1_000_000, why="a sanity bound")
NON_NEGATIVE_COUNT = BoundedInt(0, 1_000_000, why="a sanity bound")
REPLICAS = BoundedInt(1, 1_000_000, why="memory and time")  # spot --simulate
RATIO = BoundedDecimal(0, 100, why="a sanity bound")  # multipliers
# Power usage effectiveness is facility power over IT power: 1.0 is the ideal, never below.
PUE = BoundedDecimal(1, 100, why="a sanity bound")
POSITIVE_MINUTES = BoundedFloat(0, MAX_HOURS * 60, min_open=True, why="a sanity bound")


def known_name(value: str, known: list[str] | tuple[str, ...], what: str) -> str:
    """`value` if it is one of `known`, else a usage error naming what exists."""
    if value in known:
        return value
    raise click.UsageError(f"unknown {what} {value!r}; known: {', '.join(sorted(known))}")


class IsoWeek(click.ParamType):
    """`--week 2026-W48`: checked while parsing (a usage error), passed on as the string."""

    name = "YYYY-Www"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        from reports.weeks import Week
        from tracker.core.errors import InvalidInput

        try:
            return str(Week.parse(str(value)))
        except InvalidInput as exc:
            raise click.UsageError(str(exc), ctx) from None


ISO_WEEK = IsoWeek()
