"""Cron expressions and the jobs built from `[schedule]` (pure: no database, no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.cli.scheduler import JobSpec, job_specs
from tracker.config.schema import load_config
from tracker.core.cron import (
    cron_day_of_week,
    cron_fields,
    cron_trigger,
    fire_times,
    previous_fire_time,
)
from tracker.core.errors import InvalidInput, NotFound


def config_from(tmp_path, text: str, environ: dict[str, str] | None = None):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path, environ=environ or {})


@pytest.mark.parametrize(("field", "names"), [
    ("1", "mon"), ("0", "sun"), ("7", "sun"), ("1-5", "mon,tue,wed,thu,fri"),
    ("mon-fri", "mon,tue,wed,thu,fri"), ("*/2", "sun,tue,thu,sat"), ("5-7", "sun,fri,sat"),
    ("1,3", "mon,wed"), ("sat,sun", "sun,sat"), ("1/3", "mon,thu"), ("*", "*"),
])
def test_crontab_weekdays_keep_crontab_meaning(field, names):
    # APScheduler 3 counts 0 = Monday; crontab counts 0 = Sunday.
    assert cron_day_of_week(field) == names


def test_monday_cron_fires_on_monday_not_tuesday():
    trigger = cron_trigger("0 7 * * 1", ZoneInfo("UTC"))
    start = datetime(2026, 11, 25, tzinfo=UTC)  # a Wednesday
    first = fire_times(trigger, start, 1)[0]
    assert first == datetime(2026, 11, 30, 7, 0, tzinfo=UTC)
    assert first.strftime("%A") == "Monday"


def test_report_time_is_in_the_configured_zone(tmp_path):
    config = config_from(tmp_path, '[schedule]\ntimezone = "Europe/Berlin"\n'
                                   'report_day = "mon"\nreport_time = "07:00"\n')
    report = next(s for s in job_specs(config) if s.id == "report")
    winter = report.next_runs(datetime(2026, 11, 25, tzinfo=UTC), 1)[0]
    summer = report.next_runs(datetime(2026, 7, 1, tzinfo=UTC), 1)[0]
    assert winter.astimezone(UTC) == datetime(2026, 11, 30, 6, 0, tzinfo=UTC)  # CET
    assert summer.astimezone(UTC) == datetime(2026, 7, 6, 5, 0, tzinfo=UTC)  # CEST
    assert report.misfire_grace_seconds == 86400


def test_six_fields_have_seconds_and_macros_expand():
    assert cron_fields("* * * * * *")["second"] == "*"
    assert cron_fields("*/15 * * * *") == {
        "second": "0", "minute": "*/15", "hour": "*", "day": "*", "month": "*",
        "day_of_week": "*"}
    assert cron_fields("@weekly")["day_of_week"] == "sun"
    assert cron_fields("@daily")["hour"] == "0"


@pytest.mark.parametrize("expr", ["* * *", "61 * * * *", "0 7 1 * 1", "0 7 * * 9",
                                  "0 7 * * 5-1", "0 25 * * *"])
def test_bad_cron_expressions_are_refused_in_one_line(expr):
    with pytest.raises(InvalidInput) as info:
        cron_trigger(expr, ZoneInfo("UTC"))
    assert expr in str(info.value)
    assert "\n" not in str(info.value)


def test_default_jobs_and_groups(tmp_path):
    config = config_from(tmp_path, """
[refresh]
sources = ["skypilot", "vastai", "runpod"]

[schedule]
refresh_cron = "0 */6 * * *"
refresh_jitter_seconds = 120

[[schedule.groups]]
name = "spot"
sources = ["vastai", "runpod"]
cron = "*/30 * * * *"
jitter_seconds = 30
""")
    specs = {s.id: s for s in job_specs(config)}
    assert list(specs) == ["refresh", "refresh:spot", "report"]
    assert specs["refresh"].sources == ("skypilot",)  # grouped sources leave the default job
    assert specs["refresh"].jitter_seconds == 120
    assert specs["refresh:spot"].sources == ("vastai", "runpod")
    assert specs["refresh:spot"].cron == "*/30 * * * *"
    assert specs["refresh:spot"].jitter_seconds == 30
    assert specs["refresh:spot"].locks == ["refresh:vastai", "refresh:runpod"]
    assert specs["report"].locks == ["report"]
    start = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
    assert specs["refresh:spot"].next_runs(start, 2) == [
        datetime(2026, 11, 29, 10, 30, tzinfo=UTC), datetime(2026, 11, 29, 11, 0, tzinfo=UTC)]
    # The jittered trigger used for running stays within the jitter of the plain one.
    jittered = specs["refresh:spot"].trigger().get_next_fire_time(None, start)
    assert timedelta(0) <= jittered - datetime(2026, 11, 29, 10, 30, tzinfo=UTC) \
        <= timedelta(seconds=30)


def test_environment_overrides_schedule_values(tmp_path):
    config = config_from(tmp_path, "", environ={
        "GPU_TRACKER_SCHEDULE_REFRESH_CRON": "15 3 * * *",
        "GPU_TRACKER_SCHEDULE_REPORT_ENABLED": "false",
        "GPU_TRACKER_SCHEDULE_REFRESH_SOURCES": "skypilot,vastai"})
    specs = job_specs(config)
    assert [(s.id, s.cron, s.sources) for s in specs] == [
        ("refresh", "15 3 * * *", ("skypilot", "vastai"))]


@pytest.mark.parametrize(("text", "message"), [
    ('[schedule]\ntimezone = "Mars/Olympus"\n', "unknown time zone"),
    ('[schedule]\nreport_time = "7am"\n', "HH:MM"),
    ('[schedule]\nreport_day = "funday"\n', "weekday"),
    ('[[schedule.groups]]\nname = "a"\nsources = ["nosuch"]\n', "unknown source"),
    ('[[schedule.groups]]\nname = "a"\nsources = ["vastai"]\n'
     '[[schedule.groups]]\nname = "b"\nsources = ["vastai"]\n', "two schedule groups"),
    ('[[schedule.groups]]\nname = "a"\nsources = ["vastai"]\ncorn = "* * * * *"\n',
     "unknown key"),
])
def test_configuration_mistakes_are_clear(tmp_path, text, message):
    with pytest.raises((InvalidInput, NotFound)) as info:
        job_specs(config_from(tmp_path, text))
    assert message in str(info.value)


def test_previous_fire_time_finds_the_latest_due_time():
    every_second = cron_trigger("* * * * * *", ZoneInfo("UTC"))
    weekly = cron_trigger("0 7 * * mon", ZoneInfo("UTC"))
    now = datetime(2026, 11, 30, 9, 30, 15, 500000, tzinfo=UTC)  # Monday
    assert previous_fire_time(every_second, now, 10) == now.replace(microsecond=0)
    assert previous_fire_time(weekly, now, 86400) == datetime(2026, 11, 30, 7, tzinfo=UTC)
    assert previous_fire_time(weekly, now, 3600) is None  # 2.5 h ago: outside the window
    assert previous_fire_time(weekly, datetime(2026, 11, 30, 7, tzinfo=UTC), 1) == \
        datetime(2026, 11, 30, 7, tzinfo=UTC)


@settings(max_examples=60, deadline=None)
@given(minute=st.integers(0, 59), hour=st.integers(0, 23),
       offset=st.integers(0, 7 * 86400))
def test_previous_fire_time_is_the_last_fire_before_now(minute, hour, offset):
    trigger = cron_trigger(f"{minute} {hour} * * *", ZoneInfo("UTC"))
    now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=offset)
    found = previous_fire_time(trigger, now, 2 * 86400)
    assert found is not None and found <= now
    following = fire_times(trigger, found + timedelta(microseconds=1), 1)[0]
    assert following > now  # nothing fired between `found` and now
    assert now - found < timedelta(days=1)


def test_job_spec_without_jitter_is_deterministic():
    spec = JobSpec(id="refresh", kind="refresh", cron="*/10 * * * *", timezone="UTC",
                   sources=("skypilot",), jitter_seconds=300)
    now = datetime(2026, 11, 29, 10, 4, tzinfo=UTC)
    assert spec.next_runs(now, 1) == [datetime(2026, 11, 29, 10, 10, tzinfo=UTC)]
    assert spec.last_due(now) == datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
