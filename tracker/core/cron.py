"""Cron expressions, pure: crontab text to APScheduler 3 trigger fields, and the weekly
report's `report_day` / `report_time` as a cron expression.

Classic 5 fields (`minute hour day month weekday`, weekday 0 or 7 = Sunday as in crontab,
not APScheduler 3's 0 = Monday), an optional leading seconds field (6 fields), or
@hourly/@daily/@weekly/@monthly. The configuration checks its values with these (at load)
and the scheduler (tracker/cli/scheduler.py) builds its triggers with them.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from tracker.core.errors import InvalidInput

_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MACROS = {
    "@hourly": "0 * * * *", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0", "@monthly": "0 0 1 * *", "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


def _day_number(text: str, expr: str) -> int:
    text = text.strip().lower()
    if text.isdigit() and 0 <= int(text) <= 7:
        return int(text)
    if text[:3] in _DAY_NAMES and len(text) >= 3:
        return _DAY_NAMES.index(text[:3])
    raise InvalidInput(f"cron {expr!r}: {text!r} is not a weekday (0-7 or sun..sat)")


def cron_day_of_week(field_: str, expr: str = "") -> str:
    """A crontab weekday field (0/7 = Sunday) as APScheduler 3 day names.

    APScheduler 3 counts 0 = Monday (its docs warn about it); spelling the days out by name
    keeps `0 7 * * 1` on Monday as every crontab user expects.
    """
    if field_ in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field_.split(","):
        base, _, step_text = part.partition("/")
        try:
            step = int(step_text) if step_text else 1
        except ValueError:
            raise InvalidInput(f"cron {expr!r}: bad step {step_text!r}") from None
        if step < 1:
            raise InvalidInput(f"cron {expr!r}: step must be at least 1")
        if base in ("*", "?"):
            low, high = 0, 6
        elif "-" in base:
            first, _, last = base.partition("-")
            low, high = _day_number(first, expr), _day_number(last, expr)
            if high < low:
                raise InvalidInput(f"cron {expr!r}: weekday range {base!r} runs backwards")
        else:
            low = _day_number(base, expr)
            high = 6 if step_text else low
        days.update(d % 7 for d in range(low, high + 1, step))
    return ",".join(_DAY_NAMES[d] for d in sorted(days))


def cron_fields(expr: str) -> dict[str, str]:
    """Split a crontab expression into APScheduler CronTrigger fields (not yet validated)."""
    text = _MACROS.get(expr.strip().lower(), expr.strip())
    parts = text.split()
    if len(parts) == 5:
        parts = ["0", *parts]
    if len(parts) != 6:
        raise InvalidInput(
            f"cron {expr!r}: expected 5 fields (minute hour day month weekday), 6 with "
            "leading seconds, or @hourly/@daily/@weekly/@monthly")
    second, minute, hour, day, month, weekday = parts
    if day not in ("*", "?") and weekday not in ("*", "?"):
        # crontab runs when either matches, APScheduler only when both do: refuse rather
        # than silently run on fewer days.
        raise InvalidInput(
            f"cron {expr!r}: restrict either the day of the month or the weekday, not both")
    return {"second": second, "minute": minute, "hour": hour,
            "day": "*" if day == "?" else day, "month": month,
            "day_of_week": cron_day_of_week(weekday, expr)}


def cron_trigger(expr: str, timezone: Any, jitter: float | None = None) -> Any:
    """An APScheduler CronTrigger for a crontab expression in `timezone`."""
    from apscheduler.triggers.cron import CronTrigger

    fields = cron_fields(expr)
    try:
        return CronTrigger(**fields, timezone=timezone, jitter=int(jitter) if jitter else None)
    except ValueError as exc:
        raise InvalidInput(f"cron {expr!r}: {exc}") from None


def fire_times(trigger: Any, start: datetime, count: int) -> list[datetime]:
    """The next `count` fire times of a (jitter-free) trigger at or after `start`."""
    times: list[datetime] = []
    current = trigger.get_next_fire_time(None, start)
    while current is not None and len(times) < count:
        times.append(current)
        current = trigger.get_next_fire_time(current, current + timedelta(microseconds=1))
    return times


def previous_fire_time(trigger: Any, now: datetime, within_seconds: float) -> datetime | None:
    """The latest fire time of a (jitter-free) trigger at or before `now`, looking back at
    most `within_seconds`; None when it did not fire in that window.

    Looks back in doubling windows, so a job firing every second and a weekly one both take
    a few steps.
    """
    limit = timedelta(seconds=max(within_seconds, 0))
    window = timedelta(seconds=1)
    while True:
        window = min(window, limit)
        latest = None
        current = trigger.get_next_fire_time(None, now - window)
        while current is not None and current <= now:
            latest = current
            current = trigger.get_next_fire_time(current, current + timedelta(microseconds=1))
        if latest is not None or window >= limit:
            return latest
        window *= 2


def report_cron(day: Any, time_text: Any) -> str:
    """The cron expression of `[schedule] report_day` at `report_time` (checked)."""
    days = [d.strip().lower() for d in str(day).split(",") if d.strip()]
    if not days or not all(d[:3] in _DAY_NAMES for d in days):
        raise InvalidInput(f"schedule.report_day must be a weekday such as mon, got {day!r}")
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", str(time_text).strip())
    if not match or int(match.group(1)) > 23 or int(match.group(2)) > 59:
        raise InvalidInput(f"schedule.report_time must be HH:MM, got {time_text!r}")
    return f"{int(match.group(2))} {int(match.group(1))} * * {','.join(d[:3] for d in days)}"
