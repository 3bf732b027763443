"""The sections of the configuration: one pydantic model per `[section]` of the TOML file
(and its `GPU_TRACKER_<SECTION>_<KEY>` variables), with the defaults and the checks of each
key. tracker/config/schema.py gathers them into `TrackerSettings` and loads them."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from tracker.config.checks import (
    Cron,
    GpuList,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SourceList,
    StrList,
    TimeZone,
    choice_of,
    fabric_overrides,
    known_gpus,
    mail_addresses,
    report_day_check,
    report_time_check,
    subject_template,
)
from tracker.core.errors import InvalidInput
from tracker.core.http_settings import HttpSettings
from tracker.core.smtp import SmtpSettings

# -- value types shared by the sections ------------------------------------------------------


class Section(BaseModel):
    """A config section: unknown keys are errors, values are checked when given."""

    model_config = ConfigDict(extra="forbid", validate_default=False)


# -- the sections ----------------------------------------------------------------------------

class DatabaseSection(Section):
    url: str = ""  # empty: SQLite in the user data directory (--db / GPU_TRACKER_DB win)


_HTTP = HttpSettings()


class HttpSection(Section):
    """The one HTTP client every source and backfill shares (scrapers/http.py); the defaults
    and their meaning are tracker/core/http_settings.py's."""

    connect_timeout: PositiveFloat = _HTTP.connect_timeout
    read_timeout: PositiveFloat = _HTTP.read_timeout
    total_timeout: PositiveFloat = _HTTP.total_timeout
    retries: NonNegativeInt = _HTTP.retries
    backoff: NonNegativeFloat = _HTTP.backoff
    max_backoff: NonNegativeFloat = _HTTP.max_backoff
    max_bytes: PositiveInt = _HTTP.max_bytes
    trusted_urls: StrList = list(_HTTP.trusted_urls)

    def settings(self) -> HttpSettings:
        """The section as the shared client takes it."""
        return HttpSettings(**{**self.model_dump(), "trusted_urls": tuple(self.trusted_urls)})


def _some_source(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("is empty; name the sources a plain `gpu-tracker refresh` runs "
                         "(`bundled` for the offline data)")
    return value


class RefreshSection(Section):
    # What a plain `gpu-tracker refresh` runs: the live public sources. Keyed ones are
    # skipped with a warning until their key is set; `bundled` is the offline data.
    sources: Annotated[SourceList, AfterValidator(_some_source)] = [
        "azure", "aws", "gcp", "lambda", "runpod", "vastai", "skypilot", "ecb"]
    stale_after_hours: PositiveFloat = 48.0
    max_workers: PositiveInt = 4


class ScheduleGroup(Section):
    """A `[[schedule.groups]]` entry: sources refreshed on their own cron."""

    name: str
    sources: SourceList = []
    cron: Cron = ""  # empty: refresh_cron
    jitter_seconds: NonNegativeInt | None = None
    misfire_grace_seconds: NonNegativeInt | None = None


class ScheduleSection(Section):
    """The built-in scheduler (tracker/cli/scheduler.py checks cron, zone and groups' overlaps)."""

    timezone: TimeZone = "UTC"  # for every cron expression and the report time
    refresh_cron: Cron = "0 */6 * * *"  # empty: no default refresh job
    refresh_jitter_seconds: NonNegativeInt = 300  # spreads hosts and providers' load
    refresh_sources: SourceList = []  # empty: the [refresh] sources
    refresh_misfire_grace_seconds: NonNegativeInt = 3600
    groups: list[ScheduleGroup] = []
    report_enabled: bool = True
    report_day: Annotated[str, AfterValidator(report_day_check)] = "mon"
    report_time: Annotated[str, AfterValidator(report_time_check)] = "07:00"
    report_jitter_seconds: NonNegativeInt = 0
    report_misfire_grace_seconds: NonNegativeInt = 86400  # down at 07:00: still this week's
    report_send: bool = True  # mail it (when [report] recipients and [smtp] host are set)
    lock_wait_seconds: NonNegativeFloat = 0.0  # a scheduled run skips a busy lock
    max_workers: PositiveInt = 4


# A workload is the sizing request in config form: `kind` (train | serve), the model preset,
# and either `tokens` (train) or `context` (serve); `runs_per_month` / `hours_per_month` say
# how often it runs. The report checks each one and reports a bad one instead of failing.
DEFAULT_WORKLOADS: list[dict[str, Any]] = [
    {"name": "Fine-tune Llama 3.1 8B on 2B tokens, weekly", "kind": "finetune",
     "model": "llama-3.1-8b", "tokens": 2_000_000_000, "runs_per_month": 4.33},
    {"name": "Serve Llama 3.1 70B, 1,000 in / 1,000 out, TPOT ≤ 50 ms, 50M output tokens a day",
     "kind": "serve", "model": "llama-3.1-70b", "prompt_tokens": 1000, "output_tokens": 1000,
     "max_tpot_ms": 50, "output_tokens_per_day": 50_000_000, "hours_per_month": 730},
    {"name": "Pre-train a 7B model on 1T tokens", "kind": "pretrain",
     "model": "llama-2-7b", "tokens": 1_000_000_000_000, "runs_per_month": 0},
]


class ReportSection(Section):
    out_dir: str = ""  # empty: <user data dir>/reports
    currency: str = "USD"
    timezone: TimeZone = "UTC"  # shown next to the UTC times; weeks are always ISO weeks in UTC
    featured_gpus: GpuList = ["b200", "h200", "h100-sxm", "a100-80gb", "l40s", "l4"]
    recipients: Annotated[StrList, AfterValidator(mail_addresses)] = []
    # Fields: {week} {year} {week_number} {start} {end} {currency} (config_checks.py).
    subject: Annotated[str, AfterValidator(subject_template)] = "GPU prices {week}"
    trend_weeks: PositiveInt = 12
    movers: NonNegativeInt = 10
    spot_rows: NonNegativeInt = 25
    templates_dir: str = ""  # optional directory of template overrides (same file names)
    workloads: list[dict[str, Any]] = Field(default_factory=lambda: [
        dict(w) for w in DEFAULT_WORKLOADS])

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        from tracker.core.money import check_currency

        try:
            return check_currency(value)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None


_SMTP = SmtpSettings()


class SmtpSection(Section):
    """The mail server every sender shares (tracker/core/smtp.py, whose defaults these are)."""

    host: str = _SMTP.host  # empty: no mail
    port: Annotated[int, Field(ge=1, le=65535)] = _SMTP.port
    security: Literal["starttls", "tls", "none"] = "starttls"
    user: str = _SMTP.user
    password: str = _SMTP.password  # better GPU_TRACKER_SMTP_PASSWORD than the file
    sender: Annotated[str, AfterValidator(mail_addresses)] = _SMTP.sender
    timeout: PositiveFloat = _SMTP.timeout

    def settings(self) -> SmtpSettings:
        """The section as tracker.core.smtp takes it."""
        return SmtpSettings(**self.model_dump())


class BillingEntry(Section):
    granularity_seconds: PositiveInt = 1
    minimum_seconds: NonNegativeInt = 0


class NodePower(Section):
    kw: Annotated[Decimal, Field(gt=0)]
    gpus: PositiveInt


def _economics_defaults() -> dict[str, Any]:
    from tracker.economics.defaults import config_defaults

    return config_defaults()


class EconomicsSection(Section):
    """`[economics]`: every default in data/economics.json and data/providers.json, each
    overridable. Tables (billing, notice_seconds, ...) merge key by key with the defaults,
    so `[economics.billing.aws]` changes AWS and keeps the others."""

    currency: str
    hours_per_month: Annotated[Decimal, Field(gt=0)]
    pue: Annotated[Decimal, Field(ge=1)]
    kwh_price: Annotated[Decimal, Field(ge=0)]
    colo_per_kw_month: Annotated[Decimal, Field(ge=0)]
    staff_per_node_month: Annotated[Decimal, Field(ge=0)]
    other_opex_per_month: Annotated[Decimal, Field(ge=0)]
    residual_fraction: Annotated[Decimal, Field(ge=0, le=1)]
    horizon_months: Annotated[Decimal, Field(ge=1)]
    discount_rate: Annotated[Decimal, Field(ge=0, le=10)]
    networking_per_gpu: Annotated[Decimal, Field(ge=0)]
    power_factor: Annotated[Decimal, Field(gt=0)]
    gpus_per_node: Annotated[Decimal, Field(ge=1)]
    fail_fraction: Annotated[Decimal, Field(ge=0, le=1)]
    slot_utilization: Annotated[Decimal, Field(gt=0, le=1)]
    cloud_price_multiplier: Annotated[Decimal, Field(gt=0)]
    capex_multiplier: Annotated[Decimal, Field(gt=0)]
    owned_utilization: Annotated[Decimal, Field(gt=0, le=1)]
    spot_band_conversion: Annotated[str, choice_of("tracker.economics.spot", "BAND_CONVERSIONS")]
    spot_band_window_hours: Annotated[Decimal, Field(gt=0)]
    spot_band_point: Annotated[str, choice_of("tracker.economics.spot", "BAND_POINTS")]
    spot_band_open_top_pct: Annotated[Decimal, Field(gt=0)]
    capex_per_gpu: dict[str, Annotated[Decimal, Field(gt=0)]]
    node_power_kw: dict[str, NodePower]
    # Keyed by provider; a provider not in data/providers.json may be given its own entry
    # (the economics commands take any --provider), "default" applies to the rest.
    billing: dict[str, BillingEntry]
    notice_seconds: dict[str, NonNegativeInt]
    mtti_hours: dict[str, Annotated[Decimal, Field(gt=0)]]
    max_runtime_hours: dict[str, Annotated[Decimal, Field(gt=0)]]

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, given: Any) -> Any:
        if not isinstance(given, Mapping):
            return given
        merged = dict(_economics_defaults())
        for key, value in given.items():
            if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
                inner = dict(merged[key])
                for name, entry in value.items():
                    if isinstance(entry, Mapping) and isinstance(inner.get(name), Mapping):
                        inner[name] = {**inner[name], **entry}
                    else:
                        inner[name] = entry
                merged[key] = inner
            else:
                merged[key] = value
        return merged

    @field_validator("capex_per_gpu", "node_power_kw")
    @classmethod
    def _gpu_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        known_gpus(list(value))
        return value

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        return ReportSection._currency(value)


def currency_or_empty(value: str) -> str:
    return ReportSection._currency(value) if value else value


class AlertsMail(Section):
    to: Annotated[StrList, AfterValidator(mail_addresses)] = []


WEBHOOK_FORMATS = ("json", "slack")  # the bodies tracker/market/alerts.py can post


class AlertsWebhook(Section):
    url: str = ""  # better GPU_TRACKER_ALERTS_WEBHOOK_URL: the URL usually holds a token
    format: Annotated[str, choice_of("tracker.config.sections", "WEBHOOK_FORMATS")] = "json"
    timeout: PositiveFloat = 10.0


class AlertsSection(Section):
    """`[alerts]`; each `[[alerts.rules]]` entry is checked by tracker/market/alerts.py
    (`alert_settings`), which knows the conditions and the workloads they name."""

    enabled: bool = True
    currency: Annotated[str, AfterValidator(currency_or_empty)] = ""  # empty: [report]'s
    mail: AlertsMail = Field(default_factory=AlertsMail)
    webhook: AlertsWebhook = Field(default_factory=AlertsWebhook)
    rules: list[dict[str, Any]] = []


BUDGET_PERIODS = ("month", "quarter")


def _positive_amount(value: Decimal) -> Decimal:
    if not value.is_finite() or value <= 0:
        raise ValueError(f"amount must be a positive number, got {value}")
    return value


class BudgetEntry(Section):
    """One `[[budgets]]` entry: a spending limit per period over a scope of the imported FOCUS
    usage (tracker/market/budgets.py). Empty scope keys match everything."""

    name: Annotated[str, Field(min_length=1)]
    amount: Annotated[Decimal, AfterValidator(_positive_amount)]
    currency: str = "USD"
    period: Literal["month", "quarter"] = "month"
    provider: str = ""
    gpu: str = ""  # a GPU class or id (h100, h100-sxm)
    region: str = ""
    tag: str = ""  # a FOCUS tag: `key` (present) or `key=value`
    # The `budget` alert fires when the forecast P50 is above the amount or the spend to date
    # is above this share of it.
    alert_spent_share: Annotated[float, Field(gt=0, le=10)] = 0.9

    @field_validator("currency")
    @classmethod
    def _currency(cls, value: str) -> str:
        return ReportSection._currency(value)


class FabricSection(Section):
    """`[fabric]`: per provider or `provider/instance_type`, the cluster network a team knows
    its hosts have (docs/fabric.md §4)."""

    overrides: Annotated[dict[str, dict[str, Any]], AfterValidator(fabric_overrides)] = {}


SCALE_UP_LINKS = ("nvlink2", "nvlink3", "nvlink4", "nvlink5", "nvlink-bridge", "xgmi", "pcie")
FP4_FORMATS = ("fp4", "mxfp4")
FORM_FACTORS = ("SXM", "PCIe", "OAM", "NVL")


class GpuEntry(Section):
    """`[gpus.<id>]`: figures for a GPU class, laid over data/gpus.json (a known id) or a new
    class (then memory_gb, bf16_tflops and memory_bandwidth_gbps are required). Units and
    meanings as tracker.core.gpus.SPEC_FIGURES; peaks are dense (no sparsity)."""

    name: str | None = None
    vendor: str | None = None
    family: str | None = None
    form_factor: Annotated[str, choice_of("tracker.config.sections", "FORM_FACTORS")] | None = None
    memory_gb: PositiveFloat | None = None
    aliases: StrList = []
    bf16_tflops: PositiveFloat | None = None
    fp8_tflops: PositiveFloat | None = None
    fp4_tflops: PositiveFloat | None = None
    int8_tops: PositiveFloat | None = None
    tf32_tflops: PositiveFloat | None = None
    fp32_tflops: PositiveFloat | None = None
    memory_bandwidth_gbps: PositiveFloat | None = None
    memory_bytes: PositiveInt | None = None
    link_gbps_unidirectional: PositiveFloat | None = None
    scale_up_link: Annotated[
        str, choice_of("tracker.config.sections", "SCALE_UP_LINKS")] | None = None
    scale_up_domain: PositiveInt | None = None
    host_gpus: PositiveInt | None = None
    pcie_gen: PositiveInt | None = None
    tdp_watts: PositiveFloat | None = None
    fp4_formats: list[Annotated[
        str, choice_of("tracker.config.sections", "FP4_FORMATS")]] | None = None
    sources: StrList = []


_NEW_GPU_NEEDS = ("memory_gb", "bf16_tflops", "memory_bandwidth_gbps")


def gpu_entries(value: dict[str, GpuEntry]) -> dict[str, GpuEntry]:
    """A new GPU class names every figure sizing needs; the entries then apply at once, so the
    sections validated after this one (featured GPUs, capex) may name a new class."""
    from tracker.core.gpus import gpu_table, set_gpu_overrides

    set_gpu_overrides({})
    known = gpu_table()
    for gpu_id, entry in value.items():
        if gpu_id not in known:
            lacking = [k for k in _NEW_GPU_NEEDS if getattr(entry, k) is None]
            if lacking:
                raise ValueError(f"[gpus.{gpu_id}] {lacking[0]}: missing; a GPU class not in "
                                 f"data/gpus.json needs {', '.join(_NEW_GPU_NEEDS)}")
    set_gpu_overrides({k: v.model_dump(exclude_none=True, exclude_defaults=True)
                       for k, v in value.items()})
    return value
