"""The `[report]` and `[smtp]` configuration sections (defaults registered on import), and
`ReportOptions`, the checked `[report]` values the report's sections are computed with.

Light on purpose (no pandas, no matplotlib) so `gpu-tracker config` can show the defaults.
Every scalar key can be overridden by `GPU_TRACKER_REPORT_<KEY>` / `GPU_TRACKER_SMTP_<KEY>`;
lists (recipients, featured GPUs) take a comma-separated value there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracker.config import Config, register_defaults, user_data_dir
from tracker.errors import InvalidInput

# A workload is the sizing request in config form: `kind` (train | serve), the model preset,
# and either `tokens` (train) or `context` (serve); `schedule` says how often it runs.
DEFAULT_WORKLOADS: list[dict[str, Any]] = [
    {"name": "Fine-tune Llama 3.1 8B on 2B tokens, weekly", "kind": "finetune",
     "model": "llama-3.1-8b", "tokens": 2_000_000_000, "runs_per_month": 4.33},
    {"name": "Serve Llama 3.1 70B, 1,000 in / 1,000 out, TPOT ≤ 50 ms, 50M output tokens a day",
     "kind": "serve", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 1000,
     "max_tpot_ms": 50, "output_tokens_per_day": 50_000_000, "hours_per_month": 730},
    {"name": "Pre-train a 7B model on 1T tokens", "kind": "pretrain",
     "model": "llama-2-7b", "tokens": 1_000_000_000_000, "runs_per_month": 0},
]

REPORT_DEFAULTS: dict[str, Any] = {
    "out_dir": "",  # empty: <user data dir>/reports
    "currency": "USD",
    "timezone": "UTC",  # shown next to the UTC times; weeks are always ISO weeks in UTC
    "featured_gpus": ["b200", "h200", "h100-sxm", "a100-80gb", "l40s", "l4"],
    "recipients": [],
    "subject": "GPU prices {week}",
    "trend_weeks": 12,
    "movers": 10,
    "spot_rows": 25,
    "templates_dir": "",  # optional directory of template overrides (same file names)
    "workloads": DEFAULT_WORKLOADS,
}

SMTP_DEFAULTS: dict[str, Any] = {
    "host": "",
    "port": 587,
    "security": "starttls",  # starttls | tls | none
    "user": "",
    "password": "",  # better set GPU_TRACKER_SMTP_PASSWORD than write it in the file
    "sender": "gpu-tracker@localhost",
    "timeout": 30.0,
}

register_defaults("report", REPORT_DEFAULTS)
register_defaults("smtp", SMTP_DEFAULTS)


def report_settings(config: Config) -> dict[str, Any]:
    """The `[report]` section with defaults filled in (tests pass partial configs)."""
    settings = {**REPORT_DEFAULTS, **dict(config["report"] or {})}
    for key in ("featured_gpus", "recipients"):
        value = settings[key]
        if isinstance(value, str):
            settings[key] = [part.strip() for part in value.split(",") if part.strip()]
    return settings


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

    @classmethod
    def from_config(cls, config: Config) -> ReportOptions:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        from tracker.money import check_currency

        settings = report_settings(config)
        timezone = str(settings["timezone"] or "UTC")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput(f"[report] timezone {timezone!r} is not an IANA time zone "
                               "(e.g. Europe/Berlin)") from None
        return cls(
            currency=check_currency(str(settings["currency"])),
            featured_gpus=tuple(settings["featured_gpus"]),
            trend_weeks=int(settings["trend_weeks"]), movers=int(settings["movers"]),
            spot_rows=int(settings["spot_rows"]),
            stale_after_hours=float(config.get("refresh", "stale_after_hours", 48.0) or 48.0),
            timezone=timezone,
            workloads=tuple(dict(w) for w in settings["workloads"] or ()),
            economics=dict(config["economics"] or {}),
        )


def smtp_settings(config: Config) -> dict[str, Any]:
    return {**SMTP_DEFAULTS, **dict(config["smtp"] or {})}


def out_dir(config: Config, override: str | Path | None = None) -> Path:
    if override:
        return Path(override).expanduser()
    configured = report_settings(config)["out_dir"]
    return Path(configured).expanduser() if configured else user_data_dir() / "reports"
