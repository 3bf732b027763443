"""Configuration: one typed schema for the TOML file, the environment and the defaults.

Precedence (lowest first): the defaults declared here, the TOML file (`--config`,
`GPU_TRACKER_CONFIG`, or `config.toml` in the user config directory), then
`GPU_TRACKER_<SECTION>_<KEY>` variables. Every section is declared in this module as a
pydantic model (`TrackerSettings`), so every command sees the same sections whatever it
imported first, and environment strings become typed values in one place (pydantic).

pydantic itself rather than pydantic-settings: the file and the variables are merged here in
a few lines (`section_variables`), and pydantic-settings' import (its asyncio, cloud and
secrets providers) cost about 0.25 s of CPU at every start, which put
`bench/cli_start.py` at its 4x goal.

Source settings live under `[sources.<name>]`; each source declares them (`DEFAULTS` in its
module) and resolves them with `GPU_TRACKER_SOURCE_<NAME>_<SETTING>`
(scrapers/base.py `Source.resolve_settings`), which this schema calls to check the file's
tables. Secrets come only from the environment.

A value the schema refuses raises `ConfigError`: one line naming the file (or the
variable), the key, and what is allowed.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
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
    check_source_settings,
    choice_of,
    fabric_overrides,
    known_gpus,
    mail_addresses,
    report_day_check,
    report_time_check,
    source_tables,
    subject_template,
    unknown_name,
)
from tracker.config.paths import ENV_PREFIX, user_config_path
from tracker.core.errors import InvalidInput
from tracker.core.http_settings import HttpSettings
from tracker.core.smtp import SmtpSettings

SECRET_WORDS = ("password", "secret", "token", "key")


class ConfigError(InvalidInput):
    """The configuration breaks the schema (type, range, unknown section, key or name)."""


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
    format: Annotated[str, choice_of("tracker.config.schema", "WEBHOOK_FORMATS")] = "json"
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
    form_factor: Annotated[str, choice_of("tracker.config.schema", "FORM_FACTORS")] | None = None
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
        str, choice_of("tracker.config.schema", "SCALE_UP_LINKS")] | None = None
    scale_up_domain: PositiveInt | None = None
    pcie_gen: PositiveInt | None = None
    tdp_watts: PositiveFloat | None = None
    fp4_formats: list[Annotated[
        str, choice_of("tracker.config.schema", "FP4_FORMATS")]] | None = None
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


SOURCE_ENV_PREFIX = f"{ENV_PREFIX}SOURCE_"


def _check_source_variables(file_data: Mapping[str, Any], environ: Mapping[str, str]) -> None:
    """`GPU_TRACKER_SOURCE_<NAME>_<SETTING>`: a known source and a value its setting takes.
    Only when such a variable is set, so other commands never import the sources."""
    from scrapers import SOURCES

    names: set[str] = set()
    for variable in environ:
        if variable.startswith(SOURCE_ENV_PREFIX):
            rest = variable[len(SOURCE_ENV_PREFIX):].lower()
            name = next((n for n in SOURCES if rest.startswith(f"{n}_")), None)
            if name is None:
                guess = rest.split("_")[0]
                raise ConfigError(f"{variable}: {unknown_name('source', guess, list(SOURCES))}")
            names.add(name)
    given = file_data.get("sources")
    tables: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    for name in sorted(names):
        try:
            check_source_settings(name, dict(tables.get(name) or {}), environ)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


SourcesSection = Annotated[dict[str, dict[str, Any]], BeforeValidator(source_tables)]


# -- the whole configuration -----------------------------------------------------------------

def section_variables(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """`GPU_TRACKER_<SECTION>_<KEY>` for every scalar or list key of every section.

    Values stay strings here; pydantic converts them with the same rules as TOML values
    (lists are comma-separated). Table-valued keys (`[[schedule.groups]]`, the economics
    tables, `[sources.*]`) come only from the file.
    """
    found: dict[str, dict[str, str]] = {}
    for section, key in env_keys():
        name = env_name(section, key)
        if name in environ:
            found.setdefault(section, {})[key] = environ[name]
    return found


class TrackerSettings(BaseModel):
    """Every section of the configuration, with its defaults."""

    model_config = ConfigDict(extra="forbid", validate_default=False)

    # First: its entries apply before the sections that name GPU ids are checked.
    gpus: Annotated[dict[str, GpuEntry], AfterValidator(gpu_entries)] = Field(
        default_factory=dict)
    database: DatabaseSection = Field(default_factory=DatabaseSection)
    http: HttpSection = Field(default_factory=HttpSection)
    refresh: RefreshSection = Field(default_factory=RefreshSection)
    sources: SourcesSection = Field(default_factory=dict)
    schedule: ScheduleSection = Field(default_factory=ScheduleSection)
    report: ReportSection = Field(default_factory=ReportSection)
    smtp: SmtpSection = Field(default_factory=SmtpSection)
    economics: EconomicsSection = Field(
        default_factory=lambda: EconomicsSection.model_validate({}))
    alerts: AlertsSection = Field(default_factory=AlertsSection)
    fabric: FabricSection = Field(default_factory=FabricSection)
    budgets: list[BudgetEntry] = []

    # What the two sources read, set for the duration of one validation (under a lock).


SECTIONS: dict[str, type[BaseModel]] = {
    "database": DatabaseSection, "http": HttpSection, "refresh": RefreshSection,
    "schedule": ScheduleSection, "report": ReportSection, "smtp": SmtpSection,
    "economics": EconomicsSection, "alerts": AlertsSection, "fabric": FabricSection,
}


def env_name(section: str, key: str) -> str:
    return f"{ENV_PREFIX}{section.upper()}_{key.upper()}"


def _is_table(annotation: Any) -> bool:
    """A key whose value is a table or a list of tables: set in the file only."""
    import typing

    origin = typing.get_origin(annotation)
    if origin is dict:
        return True
    if origin is list:
        return any(_is_table(arg) or typing.get_origin(arg) is dict
                   for arg in typing.get_args(annotation))
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def env_keys() -> list[tuple[str, str]]:
    """Every (section, key) an environment variable can set: the scalar and list keys."""
    keys = []
    for section, model in SECTIONS.items():
        for key, info in model.model_fields.items():
            if not _is_table(info.annotation):
                keys.append((section, key))
    return keys


def section_defaults(section: str) -> dict[str, Any]:
    """A section's defaults as plain values (what `config show` prints with no file)."""
    model = SECTIONS[section]
    instance = model.model_validate({}) if section == "economics" else model()
    return instance.model_dump(mode="python")


# -- loading ---------------------------------------------------------------------------------

class Config:
    """The effective configuration: its typed sections (`config.refresh.stale_after_hours`,
    defaults filled in by the schema) and the file it was read from (`config.path`).

    `Config.from_data` checks a partial dict (tests, benchmarks) the way `load_config` checks
    a file; `data` is the plain form `config show` prints.
    """

    def __init__(self, settings: TrackerSettings | None = None,
                 path: Path | None = None) -> None:
        self.settings = settings if settings is not None else TrackerSettings()
        self.path = path

    @classmethod
    def from_data(cls, data: Mapping[str, Any], path: Path | None = None) -> Config:
        return cls(validate_settings(data, {}, path), path)

    @property
    def database(self) -> DatabaseSection:
        return self.settings.database

    @property
    def http(self) -> HttpSection:
        return self.settings.http

    @property
    def refresh(self) -> RefreshSection:
        return self.settings.refresh

    @property
    def schedule(self) -> ScheduleSection:
        return self.settings.schedule

    @property
    def report(self) -> ReportSection:
        return self.settings.report

    @property
    def smtp(self) -> SmtpSection:
        return self.settings.smtp

    @property
    def economics(self) -> EconomicsSection:
        return self.settings.economics

    @property
    def alerts(self) -> AlertsSection:
        return self.settings.alerts

    @property
    def fabric(self) -> FabricSection:
        return self.settings.fabric

    @property
    def budgets(self) -> list[BudgetEntry]:
        return self.settings.budgets

    def economics_values(self) -> dict[str, Any]:
        """`[economics]` as tracker.economics.defaults.EconomicsSettings reads it: every
        figure (the defaults included) as an exact decimal string."""
        return self.settings.economics.model_dump(mode="json")

    def source_settings(self, name: str) -> dict[str, Any]:
        """`[sources.<name>]` as given (the source declares and resolves its settings)."""
        return dict(self.settings.sources.get(name, {}))

    @property
    def data(self) -> dict[str, Any]:
        return settings_data(self.settings)

    def masked(self) -> dict[str, Any]:
        """The configuration with anything secret-looking replaced by `***`."""
        return mask_secrets(self.data)


def mask_secrets(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        if key == "webhook":  # a webhook URL carries its token (Slack, Teams)
            return {k: "***" if k == "url" and v else mask_secrets(v, k)
                    for k, v in node.items()}
        return {k: mask_secrets(v, k) for k, v in node.items()}
    if node and any(word in key.lower() for word in SECRET_WORDS):
        return "***"
    return node


def _describe_error(error: Mapping[str, Any], file_path: Path | None,
                    environ: Mapping[str, str]) -> str:
    loc = [str(part) for part in error["loc"]]
    section = loc[0] if loc else ""
    key = loc[1] if len(loc) > 1 else ""
    variable = env_name(section, key) if key else ""
    from_env = bool(variable) and variable in environ and (section, key) in env_keys()
    where = variable if from_env else (str(file_path) if file_path else "config")
    kind = error["type"]
    if kind == "extra_forbidden" and len(loc) == 1:
        known = ", ".join(f"[{name}]" for name in TrackerSettings.model_fields)
        return f"{where}: unknown section [{section}] (known: {known})"
    if kind == "extra_forbidden":
        model = SECTIONS.get(section)
        if section == "schedule" and len(loc) >= 4 and loc[1] == "groups":
            known = ", ".join(ScheduleGroup.model_fields)
            return (f"{where}: [[schedule.groups]] entry {int(loc[2]) + 1}: unknown key "
                    f"{loc[-1]!r} (known: {known})")
        table = ".".join([section, *loc[1:-1]])
        if model is not None and len(loc) == 2:
            known = ", ".join(model.model_fields)
            return f"{where}: [{table}] unknown key {loc[-1]!r} (known: {known})"
        return f"{where}: [{table}] unknown key {loc[-1]!r}"
    dotted = ".".join(loc[1:]) if len(loc) > 1 else section
    message = str(error["msg"]).removeprefix("Value error, ")
    if section == "budgets" and len(loc) >= 3 and loc[1].isdigit():
        entry = int(loc[1]) + 1
        if kind == "extra_forbidden":
            known = ", ".join(BudgetEntry.model_fields)
            return (f"{where}: [[budgets]] entry {entry}: unknown key {loc[-1]!r} "
                    f"(known: {known})")
        if kind == "missing":
            return f"{where}: [[budgets]] entry {entry}: {loc[-1]} is required"
        return f"{where}: [[budgets]] entry {entry}: {loc[-1]}: {message[:1].lower()}" \
               f"{message[1:]}"
    if (section == "sources" or (section == "gpus" and len(loc) == 1)) and \
            kind == "value_error":
        return f"{where}: {message}"
    given = error.get("input")
    shown = "" if kind.startswith("value_error") or isinstance(given, Mapping) \
        else f", got {given!r}"
    return f"{where}: [{section}] {dotted}: {message[:1].lower()}{message[1:]}{shown}"


def load_config(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None,
) -> Config:
    """Read and check the configuration; a value the schema refuses raises ConfigError."""
    environ = os.environ if environ is None else environ
    explicit = path is not None
    file_path = Path(path) if path is not None else user_config_path()
    file_data: dict[str, Any] = {}
    if file_path.exists():
        from tracker.core.local_input import MAX_CONFIG_BYTES, read_capped

        try:
            # A regular file of at most 1 MiB: /dev/zero or a FIFO is refused, not read.
            file_data = tomllib.loads(
                read_capped(file_path, "config file", MAX_CONFIG_BYTES).decode("utf-8"))
        except InvalidInput as exc:
            raise ConfigError(str(exc)) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {file_path} is not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {file_path} is not UTF-8 text (byte "
                              f"{exc.start}: {exc.reason})") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file_path}: {exc.strerror}") from None
    elif explicit:
        raise ConfigError(f"config file {file_path} does not exist")
    shown_path = file_path if file_path.exists() else None
    settings = validate_settings(file_data, environ, shown_path)
    if any(variable.startswith(SOURCE_ENV_PREFIX) for variable in environ):
        _check_source_variables(file_data, environ)
    from tracker.core.secrets import learn_config, learn_environ

    learn_environ(environ)  # the scrubber learns the secrets it must never print
    learn_config(settings_data(settings))
    return Config(settings, shown_path)


def settings_data(settings: TrackerSettings) -> dict[str, Any]:
    """The checked configuration as plain values (a group's unset keys stay unset: they fall
    back to the `[schedule]` defaults, and TOML has no null)."""
    data = settings.model_dump(mode="python")
    data["gpus"] = {gpu_id: entry.model_dump(exclude_none=True, exclude_defaults=True)
                    for gpu_id, entry in settings.gpus.items()}
    # Economics figures stay exact decimal strings in the config layer: EconomicsSettings
    # reads them with Decimal, and JSON and TOML print them as they are (no float rounding).
    data["economics"] = settings.economics.model_dump(mode="json")
    data["schedule"]["groups"] = [group.model_dump(exclude_unset=True)
                                  for group in settings.schedule.groups]
    return data


def validate_settings(file_data: Mapping[str, Any], environ: Mapping[str, str],
                      file_path: Path | None = None) -> TrackerSettings:
    """The schema applied to one file's data and one environment (defaults < file < env)."""
    merged = _merge_sections(file_data, section_variables(environ))
    from tracker.core.gpus import set_gpu_overrides

    set_gpu_overrides({})  # [gpus.<id>] of this configuration only (gpu_entries sets them)
    try:
        return TrackerSettings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(_describe_error(first, file_path, environ)) from None


def _merge_sections(file_data: Mapping[str, Any],
                    variables: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """The file's sections with the variables' keys laid over them (variables win)."""
    merged = dict(file_data)
    for section, values in variables.items():
        given = merged.get(section)
        merged[section] = {**given, **values} if isinstance(given, Mapping) else dict(values)
    return merged
