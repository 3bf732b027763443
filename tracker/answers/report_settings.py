"""`ReportOptions`, the checked `[report]` values the report's sections are computed with,
the report's output directory, and the `[report] workloads` checked when the configuration
loads.

The sections themselves (keys, types, defaults) are declared once in tracker/config/sections.py;
this module only reads them. Light on purpose (no pandas, no matplotlib).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.config.checks import check_time_zone
from tracker.config.paths import user_data_dir
from tracker.config.schema import Config
from tracker.config.sections import DEFAULT_WORKLOADS
from tracker.core.errors import InvalidInput

__all__ = ["DEFAULT_WORKLOADS", "ReportOptions", "out_dir"]


def check_workloads(config: Config) -> None:
    """Every `[report] workloads` entry read as the report reads it (kind, settings, model,
    serving shape), when the configuration is loaded: a typo fails at start, in one line,
    rather than inside the week's report."""
    from tracker.answers.workloads import Workload
    from tracker.config.schema import ConfigError
    from tracker.core.errors import NotFound

    workloads = config.report.workloads
    if workloads == [dict(w) for w in DEFAULT_WORKLOADS]:
        return  # the bundled ones are checked by the tests; parsing them costs ~0.15 s a start
    for index, raw in enumerate(workloads):
        label = f"[report] workloads #{index + 1}"
        if isinstance(raw, dict) and raw.get("name"):
            label += f" ({raw['name']!r})"
        if not isinstance(raw, dict):
            raise ConfigError(f"{label}: must be a table, got {type(raw).__name__}")
        try:
            workload = Workload.parse(raw)
            if workload.sizing.get("model"):
                from tracker.sizing.models import resolve_model

                resolve_model(str(workload.sizing["model"]))
        except (InvalidInput, NotFound) as exc:
            raise ConfigError(f"{label}: {exc}") from None


@dataclass(frozen=True)
class ReportOptions:
    currency: str = "USD"
    featured_gpus: tuple[str, ...] = ()
    trend_weeks: int = 12
    movers: int = 10
    spot_rows: int = 25
    stale_after_hours: float = 48.0
    timezone: str = "UTC"
    workloads: tuple[dict[str, Any], ...] = ()
    economics: dict[str, Any] = field(default_factory=dict)
    # `[fabric.overrides]`: the same joins of unclustered hosts that `compare` honours.
    fabric_overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> ReportOptions:
        from tracker.answers.freshness import stale_after_hours
        from tracker.core.fabric import parse_overrides
        from tracker.core.money import check_currency

        report = config.report
        try:
            check_time_zone(report.timezone)
        except ValueError as exc:
            raise InvalidInput(f"[report] timezone: {exc}") from None
        return cls(
            currency=check_currency(report.currency),
            featured_gpus=tuple(report.featured_gpus),
            trend_weeks=report.trend_weeks, movers=report.movers, spot_rows=report.spot_rows,
            stale_after_hours=stale_after_hours(config),
            timezone=report.timezone,
            workloads=tuple(dict(w) for w in report.workloads),
            economics=config.economics_values(),
            fabric_overrides=parse_overrides(config.fabric.model_dump()),
        )


def out_dir(config: Config, override: str | Path | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    configured = config.report.out_dir
    return Path(configured).expanduser() if configured else user_data_dir() / "reports"
