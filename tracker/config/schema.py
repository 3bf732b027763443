"""Configuration: one typed schema for the TOML file, the environment and the defaults.

Precedence (lowest first): the defaults declared with the sections, the TOML file
(`--config`, `GPU_TRACKER_CONFIG`, or `config.toml` in the user config directory), then
`GPU_TRACKER_<SECTION>_<KEY>` variables. Every section is a pydantic model in
tracker/config/sections.py, all gathered here in `TrackerSettings`, so every command sees the
same sections whatever it imported first, and environment strings become typed values in one
place (pydantic).

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
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

from tracker.config.checks import (
    check_source_settings,
    source_tables,
    unknown_name,
)
from tracker.config.paths import ENV_PREFIX, user_config_path
from tracker.config.sections import (
    AlertsSection,
    BudgetEntry,
    DatabaseSection,
    EconomicsSection,
    FabricSection,
    GpuEntry,
    HttpSection,
    RefreshSection,
    ReportSection,
    ScheduleGroup,
    ScheduleSection,
    SmtpSection,
    gpu_entries,
)
from tracker.core.errors import InvalidInput

SECRET_WORDS = ("password", "secret", "token", "key")


class ConfigError(InvalidInput):
    """The configuration breaks the schema (type, range, unknown section, key or name)."""


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
