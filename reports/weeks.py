"""ISO weeks of the report: parsing `2026-W48`, the week's UTC bounds and its "as of" instant.

A week runs Monday 00:00 UTC to the next Monday 00:00 UTC (Sunday 24:00). A finished week is
reported as of its end; the week still running is reported as of the instant passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from tracker.core.errors import InvalidInput

_WEEK = re.compile(r"^(\d{4})-?W(\d{1,2})$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Week:
    year: int
    number: int

    @classmethod
    def parse(cls, text: str) -> Week:
        match = _WEEK.match(text.strip())
        if not match:
            raise InvalidInput(f"week must look like 2026-W48, got {text!r}")
        year, number = int(match.group(1)), int(match.group(2))
        try:
            date.fromisocalendar(year, number, 1)
        except ValueError:
            raise InvalidInput(f"{year} has no ISO week {number}") from None
        return cls(year, number)

    @classmethod
    def containing(cls, instant: datetime) -> Week:
        year, number, _ = instant.astimezone(UTC).isocalendar()
        return cls(year, number)

    def __str__(self) -> str:
        return f"{self.year}-W{self.number:02d}"

    @property
    def start(self) -> datetime:
        """Monday 00:00 UTC."""
        monday = date.fromisocalendar(self.year, self.number, 1)
        return datetime(monday.year, monday.month, monday.day, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """Sunday 24:00 UTC (= the next Monday 00:00)."""
        return self.start + timedelta(days=7)

    def previous(self) -> Week:
        return Week.containing(self.start - timedelta(days=1))

    def as_of(self, now: datetime) -> datetime:
        """The instant the report describes: the week's end, or `now` for the running week."""
        if now < self.start:
            raise InvalidInput(f"week {self} has not started yet")
        return min(self.end, now.astimezone(UTC))

    def is_complete(self, now: datetime) -> bool:
        return now >= self.end


def last_complete_week(now: datetime) -> Week:
    return Week.containing(now).previous()


def default_week(now: datetime, latest_observation: datetime | None) -> Week:
    """The newest finished week that has data: normally last week; when the newest price in the
    store is older (bundled demo snapshots, a refresh that stopped), the week of that price."""
    week = last_complete_week(now)
    if latest_observation is not None and latest_observation < week.start:
        return Week.containing(latest_observation)
    return week
