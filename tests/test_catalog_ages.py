"""Stale catalogs: gpuhunt's dated versions and SkyPilot's commit dates against their cadence."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from scrapers.gpuhunt import parse_catalog_zip
from scrapers.skypilot import parse_vms_csv
from tracker.answers.catalogs import catalog_ages
from tracker.cli.main import cli
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL_LAMBDA = FIXTURES / "gpuhunt" / "lambdalabs-real-20260310.csv"


def lambda_zip(stamp: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(zipfile.ZipInfo("lambdalabs.csv", date_time=stamp),
                         REAL_LAMBDA.read_text("utf-8"))
    return buffer.getvalue()


def refresh_gpuhunt(db, version: str, stamp: tuple[int, ...], at: datetime) -> None:
    records = parse_catalog_zip(lambda_zip(stamp), provider="lambdalabs", observed_at=at,
                                version=version)
    assert ingest_records(db, "gpuhunt", records, started_at=at).status == "ok"


def test_a_gpuhunt_catalog_that_stopped_updating_is_flagged(any_db_url: str) -> None:
    db = open_database(any_db_url)
    read_at = datetime(2026, 3, 12, 9, tzinfo=UTC)
    refresh_gpuhunt(db, "20260310-1234", (2026, 3, 10, 6, 0, 0), read_at)
    (age,) = catalog_ages(db, as_of=read_at)
    assert (age.source, age.provider, age.version) == ("gpuhunt", "lambda", "20260310-1234")
    assert age.published_at == datetime(2026, 3, 10, 6, tzinfo=UTC)  # the CSV's zip stamp
    assert age.age_hours == 51.0 and age.max_age_hours == 24.0 and age.stale
    # a fresh version read an hour later: not stale any more
    later = read_at + timedelta(hours=1)
    refresh_gpuhunt(db, "20260312-1300", (2026, 3, 12, 9, 30, 0), later)
    (age,) = catalog_ages(db, as_of=later)
    assert age.version == "20260312-1300" and age.age_hours == 0.5 and not age.stale
    # and the earlier instant still sees the old one
    assert catalog_ages(db, as_of=read_at)[0].version == "20260310-1234"


def test_every_gpuhunt_row_says_which_version_it_came_from() -> None:
    records = list(parse_catalog_zip(lambda_zip((2026, 3, 10, 6, 0, 0)), provider="lambdalabs",
                                     observed_at=datetime(2026, 3, 10, 7, tzinfo=UTC),
                                     version="20260310-1234"))
    rows = [r for r in records if hasattr(r, "attributes")]
    assert len(rows) == 22
    assert {r.attributes["catalog_version"] for r in rows} == {"20260310-1234"}


def test_skypilot_version_dates_and_an_undated_refresh(sqlite_url: str) -> None:
    from scrapers.base import CatalogVersion

    db = open_database(sqlite_url)
    committed = datetime(2026, 9, 1, 12, tzinfo=UTC)
    path = FIXTURES / "skypilot" / "v8" / "lambda" / "vms.csv"
    with open(path, newline="", encoding="utf-8") as f:
        text = f.read()

    def version_records(when: datetime):
        # what `backfill skypilot` yields for one commit (tracker/collect/backfill.py)
        yield CatalogVersion("lambda", "0f4070387edc953d7004cff197940e1918a1d6aa", committed)
        yield from parse_vms_csv(io.StringIO(text, newline=""), cloud="lambda", observed_at=when)

    now = committed + timedelta(days=10)
    assert ingest_records(db, "skypilot", version_records(committed), started_at=now,
                          trigger="backfill").status == "ok"
    (age,) = catalog_ages(db, as_of=now)
    assert age.age_hours == 240.0 and age.max_age_hours == 168.0 and age.stale
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", sqlite_url, "check", "catalogs", "--as-of",
                                 "2026-09-11T12:00:00Z", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["stale"] is True
    assert "stale catalogs: skypilot/lambda" in result.stderr
    # a plain refresh of the hosted master reads no dated version: the age is unknown
    plain = now + timedelta(hours=1)
    assert ingest_records(db, "skypilot", parse_vms_csv(
        io.StringIO(text, newline=""), cloud="lambda", observed_at=plain),
        started_at=plain).status == "ok"
    assert catalog_ages(db, as_of=plain) == []


def test_report_flags_a_stale_catalog(sqlite_url: str, tmp_path) -> None:
    import reports  # noqa: F401  (registers the [report] defaults)
    from reports.build import build_report
    from reports.render import render_html
    from tracker.config.schema import load_config

    db = open_database(sqlite_url)
    refresh_gpuhunt(db, "20260310-1234", (2026, 3, 10, 6, 0, 0),
                    datetime(2026, 3, 12, 9, tzinfo=UTC))
    config_path = tmp_path / "config.toml"
    config_path.write_text(f'[report]\nout_dir = "{tmp_path / "out"}"\n', encoding="utf-8")
    doc = build_report(db, load_config(config_path, environ={}), "2026-W11",
                       now=datetime(2026, 3, 20, tzinfo=UTC))
    quality = doc["data_quality"]
    assert quality["stale_catalogs"] == ["gpuhunt/lambda"]
    assert quality["catalogs"][0]["version"] == "20260310-1234"
    assert "Stale catalogs" in render_html(doc)
