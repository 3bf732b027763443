"""The configuration schema (tracker/config/schema.py): defaults, file, environment, validation,
and `config show` printing TOML that loads back to the same configuration."""

from __future__ import annotations

import tomllib
from decimal import Decimal

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.cli.main import cli
from tracker.config.schema import (
    SECTIONS,
    ConfigError,
    env_keys,
    env_name,
    load_config,
    section_defaults,
    validate_settings,
)
from tracker.config.toml_text import COMMENT_KEYS, to_toml


def write(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text, "utf-8")
    return path


def test_defaults_cover_every_section_without_importing_anything_first():
    config = validate_settings({}, {})
    data = config.model_dump()
    assert set(data) == {"gpus", "database", "http", "refresh", "sources", "schedule",
                         "report", "smtp", "economics", "alerts", "fabric", "budgets"}
    assert data["schedule"]["report_misfire_grace_seconds"] == 86400
    assert data["report"]["featured_gpus"][0] == "b200"
    assert data["smtp"]["port"] == 587
    assert data["economics"]["pue"] == Decimal("1.3")
    assert data["economics"]["billing"]["aws"] == {"granularity_seconds": 1,
                                                   "minimum_seconds": 60}


def test_a_fresh_process_sees_every_section_whatever_it_imported():
    # The old registry filled [schedule], [report], [smtp] only after their modules were
    # imported; the schema has them from the start.
    import subprocess
    import sys

    code = ("from tracker.config.schema import load_config\n"
            "c = load_config(environ={'GPU_TRACKER_REPORT_OUT_DIR': '/srv/r',"
            " 'GPU_TRACKER_SCHEDULE_MAX_WORKERS': '2'})\n"
            "print(c.report.out_dir, c.schedule.max_workers, c.smtp.port)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"HOME": "/nonexistent", "PATH": "/usr/bin"})
    assert out.stdout.split() == ["/srv/r", "2", "587"]


# A valid value for each variable that differs from its default, for keys whose type
# alone does not give one.
SPECIAL = {
    ("refresh", "sources"): ("aws,gcp", ["aws", "gcp"]),
    ("schedule", "refresh_sources"): ("vastai", ["vastai"]),
    ("report", "featured_gpus"): ("h100-sxm, l4", ["h100-sxm", "l4"]),
    ("report", "recipients"): ("a@example.com,b@example.com",
                               ["a@example.com", "b@example.com"]),
    ("report", "currency"): ("EUR", "EUR"),
    ("smtp", "security"): ("tls", "tls"),
    ("http", "trusted_urls"): ("http://127.0.0.1:8080/", ["http://127.0.0.1:8080/"]),
    ("schedule", "timezone"): ("Europe/Berlin", "Europe/Berlin"),
    ("schedule", "refresh_cron"): ("15 3 * * *", "15 3 * * *"),
    ("schedule", "report_day"): ("thu", "thu"),
    ("schedule", "report_time"): ("08:30", "08:30"),
    ("report", "timezone"): ("America/New_York", "America/New_York"),
    ("economics", "spot_band_conversion"): ("rate", "rate"),
    ("economics", "spot_band_point"): ("upper", "upper"),
    ("economics", "currency"): ("EUR", "EUR"),
    ("alerts", "currency"): ("EUR", "EUR"),
    ("smtp", "sender"): ("prices@example.com", "prices@example.com"),
    ("economics", "residual_fraction"): ("0.5", Decimal("0.5")),
    ("economics", "fail_fraction"): ("0.5", Decimal("0.5")),
    ("economics", "slot_utilization"): ("0.5", Decimal("0.5")),
    ("economics", "owned_utilization"): ("0.5", Decimal("0.5")),
}


def _other_value(section: str, key: str, default):
    if (section, key) in SPECIAL:
        return SPECIAL[(section, key)]
    if isinstance(default, bool):
        return ("false" if default else "true"), not default
    if isinstance(default, int):
        return str(default + 7), default + 7
    if isinstance(default, float):
        return str(default + 1.5), default + 1.5
    if isinstance(default, Decimal):
        return str(default + 2), default + 2
    return "changed-value", "changed-value"


@pytest.mark.parametrize(("section", "key"), env_keys())
def test_every_scalar_key_of_every_section_is_overridable_by_environment(section, key):
    default = section_defaults(section)[key]
    raw, expected = _other_value(section, key, default)
    config = load_config(environ={env_name(section, key): raw})
    actual = config.data[section][key]
    if isinstance(expected, Decimal):  # the config layer keeps economics as decimal strings
        actual = Decimal(actual)
    assert actual == expected
    assert expected != default


def test_every_section_has_an_environment_variable():
    # [fabric] holds only tables (overrides per provider), which come from the file.
    assert {section for section, _ in env_keys()} == set(SECTIONS) - {"fabric"}


def test_environment_beats_file_beats_default(tmp_path):
    path = write(tmp_path, "[refresh]\nstale_after_hours = 12\nmax_workers = 2\n")
    config = load_config(path, environ={"GPU_TRACKER_REFRESH_STALE_AFTER_HOURS": "6"})
    assert config.refresh.stale_after_hours == 6.0
    assert config.refresh.max_workers == 2
    assert config.http.retries == 3


def test_a_string_where_a_list_is_expected_is_one_item(tmp_path):
    config = load_config(write(tmp_path, '[refresh]\nsources = "aws"\n'), environ={})
    assert config.refresh.sources == ["aws"]


def test_an_empty_refresh_source_list_is_refused_not_read_as_bundled(tmp_path):
    """`[refresh] sources = []` (or an empty variable) used to run the offline `bundled`
    data, a second default beside the schema's live sources; now it is a mistake, named."""
    for path, environ in ((write(tmp_path, "[refresh]\nsources = []\n"), {}),
                          (None, {"GPU_TRACKER_REFRESH_SOURCES": ""})):
        with pytest.raises(ConfigError) as info:
            load_config(path, environ=environ)
        assert "[refresh] sources: is empty" in str(info.value)


def test_a_partial_configuration_refreshes_the_schemas_default_sources():
    from tracker.collect.refresh import configured_sources
    from tracker.config.schema import Config
    from tracker.config.sections import RefreshSection

    config = Config.from_data({"report": {"currency": "EUR"}})
    assert configured_sources(config) == RefreshSection().sources
    assert "bundled" not in configured_sources(config) and "aws" in configured_sources(config)
    assert config.report.currency == "EUR" and config.smtp.port == section_defaults("smtp")["port"]


def test_readers_get_typed_sections_not_string_keys(tmp_path):
    """The configuration is read by attribute (`config.refresh.max_workers`): its values are
    the schema's, typed, with the defaults filled in once; there is no `config["refresh"]`."""
    config = load_config(write(tmp_path, "[smtp]\nhost = \"mail.example\"\n"), environ={})
    smtp = config.smtp.settings()
    assert (smtp.host, smtp.port, smtp.timeout) == ("mail.example", 587, 30.0)
    assert config.http.settings().total_timeout == 300.0
    assert config.data["smtp"]["host"] == "mail.example"  # the plain form `config show` prints
    with pytest.raises(TypeError):
        config["refresh"]


def test_economics_tables_merge_with_the_defaults(tmp_path):
    config = load_config(write(tmp_path, "[economics.billing.aws]\nminimum_seconds = 0\n"),
                         environ={})
    assert config.economics_values()["billing"]["aws"] == {"granularity_seconds": 1,
                                                           "minimum_seconds": 0}
    assert config.economics_values()["billing"]["gcp"]["minimum_seconds"] == 60


@pytest.mark.parametrize(("text", "fragments"), [
    ("[refrsh]\nsources = []\n", ["unknown section [refrsh]", "[refresh]"]),
    ("[refresh]\ncolour = 1\n", ["[refresh] unknown key 'colour'", "stale_after_hours"]),
    ('[refresh]\nsources = "a"\n', ["[refresh] sources", "unknown source 'a'"]),
    ('[refresh]\nsources = ["aws", "nosuch"]\n', ["unknown source 'nosuch'", "known: "]),
    ('[refresh]\nstale_after_hours = "soon"\n',
     ["[refresh] stale_after_hours", "valid number", "'soon'"]),
    ("[refresh]\nstale_after_hours = 0\n", ["stale_after_hours", "greater than 0"]),
    ("[http]\nretries = -5\n", ["[http] retries", "greater than or equal to 0", "-5"]),
    ("[http]\nconnect_timeout = -1\n", ["[http] connect_timeout", "greater than 0"]),
    ('[http]\nread_timeout = "slow"\n', ["[http] read_timeout", "number"]),
    ('[report]\nfeatured_gpus = ["h900"]\n', ["[report] featured_gpus",
                                             "unknown GPU id 'h900'", "did you mean h800, h200"]),
    ('[report]\ncurrency = "dollars"\n', ["[report] currency", "ISO 4217"]),
    ("[report]\ntrend_weeks = 0\n", ["[report] trend_weeks", "greater than or equal to 1"]),
    ('[smtp]\nsecurity = "ssl"\n', ["[smtp] security", "'starttls', 'tls' or 'none'"]),
    ("[smtp]\nport = 70000\n", ["[smtp] port", "less than or equal to 65535"]),
    ('[smtp]\nsender = "gpu tracker"\n', ["[smtp] sender", "not an e-mail address"]),
    ('[report]\nrecipients = ["team@example.com", "oops"]\n',
     ["[report] recipients", "not an e-mail address: 'oops'"]),
    ('[schedule]\nrefresh_sources = ["x"]\n', ["[schedule] refresh_sources",
                                              "unknown source 'x'"]),
    ('[[schedule.groups]]\nname = "a"\ncorn = "* * * * *"\n',
     ["[[schedule.groups]] entry 1: unknown key 'corn'", "cron"]),
    ('[schedule]\nreport_send = "maybe"\n', ["[schedule] report_send", "boolean"]),
    ('[schedule]\ntimezone = "Mars/Olympus"\n', ["[schedule] timezone",
                                                "unknown time zone 'Mars/Olympus'"]),
    ('[report]\ntimezone = "CEST"\n', ["[report] timezone", "IANA"]),
    ('[economics]\nspot_band_point = "middle"\n', ["spot_band_point", "lower, mid, upper"]),
    ('[schedule]\nrefresh_cron = "61 * * * *"\n', ["[schedule] refresh_cron", "'61 * * * *'"]),
    ('[schedule]\nreport_time = "7am"\n', ["[schedule] report_time", "HH:MM"]),
    ('[schedule]\nreport_day = "funday"\n', ["[schedule] report_day", "weekday"]),
    ('[[schedule.groups]]\nname = "a"\nsources = ["vastai"]\ncron = "* *"\n',
     ["[schedule] groups.0.cron", "'* *'"]),
    ('[economics]\npue = "abc"\n', ["[economics] pue", "decimal"]),
    ("[economics]\npue = 0.5\n", ["[economics] pue", "greater than or equal to 1"]),
    ("[economics.capex_per_gpu]\nh900 = 30000\n", ["[economics] capex_per_gpu",
                                                   "unknown GPU id 'h900'"]),
    ("[economics.billing.aws]\nminimum_seconds = -1\n",
     ["[economics] billing.aws.minimum_seconds", "greater than or equal to 0"]),
    ("[economics]\nwhat = 1\n", ["[economics] unknown key 'what'"]),
    ('[alerts.webhook]\nformat = "teams"\n', ["[alerts] webhook.format", "json, slack"]),
    ('[alerts.mail]\nto = ["nobody"]\n', ["[alerts] mail.to", "not an e-mail address"]),
    ("[alerts]\nrulez = []\n", ["[alerts] unknown key 'rulez'", "rules"]),
    ("[sources.nosuch]\nurl = 'x'\n", ["unknown source 'nosuch'"]),
    ("[sources.aws]\nregionz = ['x']\n", ["source aws: unknown setting 'regionz'", "regions"]),
    ('[sources.aws]\nmax_csv_mb = "big"\n', ["[sources.aws] max_csv_mb", "integer"]),
])
def test_each_config_mistake_is_one_line_naming_file_key_and_what_is_allowed(
        tmp_path, text, fragments):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ") or str(path) in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(("variable", "value", "fragments"), [
    ("GPU_TRACKER_HTTP_RETRIES", "-1", ["[http] retries", "greater than or equal to 0"]),
    ("GPU_TRACKER_REFRESH_STALE_AFTER_HOURS", "soon", ["stale_after_hours", "number"]),
    ("GPU_TRACKER_REPORT_FEATURED_GPUS", "h100-sxm,h900", ["unknown GPU id 'h900'"]),
    ("GPU_TRACKER_SOURCE_AWS_MAX_CSV_MB", "big", ["source aws", "integer"]),
    ("GPU_TRACKER_SOURCE_AWZ_URL", "http://x", ["unknown source 'awz'", "did you mean aws"]),
])
def test_a_bad_variable_is_named_in_the_message(variable, value, fragments):
    with pytest.raises(ConfigError) as info:
        load_config(environ={variable: value})
    message = str(info.value)
    assert variable in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_cli_reports_a_config_error_in_one_line_with_exit_1(tmp_path):
    path = write(tmp_path, "[refrsh]\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "sources"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}: unknown section [refrsh]")


def test_defaults_print_as_toml_that_loads_back_to_the_same_values():
    data = validate_settings({}, {}).model_dump()
    text = to_toml(data)
    again = validate_settings(tomllib.loads(text), {}).model_dump()
    assert again == data


CUSTOM = """
[database]
url = "sqlite:///tmp/custom.db"

[http]
retries = 1

[refresh]
sources = ["skypilot", "vastai"]
stale_after_hours = 12.5

[sources.skypilot]
clouds = ["lambda", "runpod"]

[schedule]
timezone = "Europe/Berlin"

[[schedule.groups]]
name = "spot"
sources = ["vastai"]
cron = "*/30 * * * *"

[report]
featured_gpus = ["h100-sxm", "l4"]
recipients = ["team@example.com"]

[[report.workloads]]
name = "Serve 8B"
kind = "serve"
model = "llama-3.1-8b"
context = 8192
hours_per_month = 730

[smtp]
host = "mail.example.com"
password = "in-the-file"

[economics]
kwh_price = 0.2

[economics.billing.hourly-cloud]
granularity_seconds = 3600
"""


def test_config_show_prints_toml_that_loads_back_to_the_same_configuration(
        tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_TRACKER_SMTP_PASSWORD", "hunter2")
    monkeypatch.setenv("GPU_TRACKER_HTTP_BACKOFF", "0.5")
    monkeypatch.setenv("GPU_TRACKER_SOURCE_AWS_REGIONS", "eu-west-1")
    path = write(tmp_path, CUSTOM)
    runner = CliRunner()
    first = runner.invoke(cli, ["--config", str(path), "config", "show"],
                          catch_exceptions=False)
    assert first.exit_code == 0, first.stderr
    assert "hunter2" not in first.stdout and "in-the-file" not in first.stdout
    shown = tomllib.loads(first.stdout)  # valid TOML
    assert shown["smtp"]["password"] == "***"
    assert shown["http"]["backoff"] == 0.5
    assert shown["sources"]["aws"]["regions"] == ["eu-west-1"]
    assert shown["sources"]["skypilot"]["clouds"] == ["lambda", "runpod"]
    assert shown["schedule"]["groups"] == [
        {"name": "spot", "sources": ["vastai"], "cron": "*/30 * * * *"}]
    assert shown["economics"]["billing"]["hourly-cloud"]["granularity_seconds"] == 3600
    assert "# credentials: GPU_TRACKER_GCP_API_KEY" in first.stdout
    # Loaded back as the config file, it is the same configuration, printed the same.
    again_path = tmp_path / "shown.toml"
    again_path.write_text(first.stdout, "utf-8")
    second = runner.invoke(cli, ["--config", str(again_path), "config", "show"],
                           catch_exceptions=False)
    assert second.exit_code == 0, second.stderr
    assert second.stdout == first.stdout
    original = load_config(path)
    reloaded = load_config(again_path)
    for section in ("http", "refresh", "schedule", "report", "economics"):
        assert getattr(reloaded, section) == getattr(original, section), section
    assert reloaded.smtp.password == "hunter2"  # the variable still wins over "***"


def test_demo_honours_report_out_dir_from_the_environment(sqlite_url, tmp_path):
    out_dir = tmp_path / "from-env"
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "demo"],
                                env={"GPU_TRACKER_REPORT_OUT_DIR": str(out_dir)},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    written = result.stdout.strip().splitlines()[-1].removeprefix("weekly report written to ")
    assert written.startswith(str(out_dir)) and written.endswith(".html")
    assert list(out_dir.rglob("*.html"))


_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1,
                max_size=12).filter(lambda k: k not in COMMENT_KEYS)
_SCALARS = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20),
    st.integers(-(2**63), 2**63 - 1), st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
)
_VALUES = st.one_of(_SCALARS, st.lists(st.text(max_size=8), max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_KEYS, st.dictionaries(_KEYS, _VALUES, max_size=5), max_size=4))
def test_any_table_of_values_survives_the_toml_round_trip(data):
    back = tomllib.loads(to_toml(data))
    expected = {section: {key: (str(value) if isinstance(value, Decimal) else value)
                          for key, value in values.items()}
                for section, values in data.items()}
    assert back == expected


def test_comment_keys_stay_on_one_comment_line():
    text = to_toml({"sources": {"x": {"url": "u", "error": "line one\nline two"}}})
    assert "# error: line one line two" in text
    assert tomllib.loads(text) == {"sources": {"x": {"url": "u"}}}


def test_every_economics_default_has_a_key_in_the_schema():
    # A default added to data/economics.json (and DECIMAL_KEYS) needs its [economics] key
    # in tracker/config/schema.py EconomicsSection, or every command refuses the defaults.
    from tracker.config.sections import EconomicsSection
    from tracker.economics.defaults import config_defaults

    assert set(config_defaults()) <= set(EconomicsSection.model_fields)


def test_the_schemas_economics_defaults_are_the_catalogs_as_they_are():
    # Without a file or variable, commands read [economics] from config_defaults() without
    # the schema (tracker.cli.commands.economics_settings); the schema must give the same values.
    from tracker.economics.defaults import EconomicsSettings, config_defaults

    config = load_config(environ={})
    assert config.path is None
    assert config.economics_values() == config_defaults()
    assert EconomicsSettings(config.economics_values()).value("pue") == EconomicsSettings().value(
        "pue") == Decimal("1.3")


def _option_variables(command) -> set[str]:
    import click

    names = set()
    for param in command.params:
        names.update([param.envvar] if isinstance(param.envvar, str) else param.envvar or ())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= _option_variables(sub)
    return names


def test_no_option_variable_is_a_configuration_variable():
    # The commands read the defaults without the schema when the only GPU_TRACKER_*
    # variables are their options' (tracker.config.paths.defaults_only): an option variable
    # that also set a configuration key would skip that key's check.
    from tracker.cli.commands import COMMANDS, load_command
    from tracker.config.schema import SOURCE_ENV_PREFIX

    variables = _option_variables(cli)
    for name in COMMANDS:
        command = load_command(name)
        assert command is not None
        variables |= _option_variables(command)
    assert {"GPU_TRACKER_DB", "GPU_TRACKER_CONFIG", "GPU_TRACKER_FORMAT"} <= variables
    configuration = {env_name(section, key) for section, key in env_keys()}
    assert sorted(variables & configuration) == []
    assert [v for v in variables if v.startswith(SOURCE_ENV_PREFIX)] == []
