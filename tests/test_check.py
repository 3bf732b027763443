"""`gpu-tracker check`: the same offer from two sources, at prices that disagree.

The two real Lambda catalogs disagree: SkyPilot's (catalogs/v8/lambda/vms.csv @ 0f40703) lists
gpu_8x_h100_sxm5 in us-east-1 at 31.92 $/h, gpuhunt's Lambda catalog (prices of 2026-03-10) at
27.52 $/h.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from scrapers.gpuhunt import parse_catalog_csv
from scrapers.skypilot import parse_vms_csv
from tests.helpers import at, obs
from tracker.answers.crosscheck import compare_prices, cross_check
from tracker.cli.main import cli
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records
from tracker.store.queries import price_rows

FIXTURES = Path(__file__).resolve().parent / "fixtures"
T1 = at("2026-09-14", 8)
T2 = T1 + timedelta(hours=2)


def _text(path: Path) -> io.StringIO:
    with open(path, newline="", encoding="utf-8") as f:
        return io.StringIO(f.read(), newline="")


def load_two_catalogs(url: str):
    db = open_database(url)
    sky = parse_vms_csv(_text(FIXTURES / "skypilot" / "v8" / "lambda" / "vms.csv"),
                        cloud="lambda", observed_at=T1)
    assert ingest_records(db, "skypilot", sky, started_at=T1).status == "ok"
    hunt = parse_catalog_csv(_text(FIXTURES / "gpuhunt" / "lambdalabs-real-20260310.csv"),
                             provider="lambdalabs", observed_at=T2)
    assert ingest_records(db, "gpuhunt", hunt, started_at=T2).status == "ok"
    return db


def h100_row(result):
    return next(d for d in result.disagreements if d.instance_type == "gpu_8x_h100_sxm5"
                and d.region == "us-east-1")


def test_two_catalogs_disagree_and_the_newer_sighting_is_the_authority(any_db_url: str) -> None:
    db = load_two_catalogs(any_db_url)
    result = cross_check(db)
    assert result.compared >= 20  # 22 Lambda types in us-east-1, both catalogs list most
    h100 = h100_row(result)
    assert (h100.authority_source, h100.authority_price_per_hour) == ("gpuhunt", Decimal("27.52"))
    assert (h100.other_source, h100.other_price_per_hour) == ("skypilot", Decimal("31.92"))
    assert h100.difference_pct == Decimal("15.99")  # (31.92 - 27.52) / 27.52
    assert h100.gpu == "h100-sxm" and h100.gpu_count == 8
    assert result.largest is not None
    assert abs(result.largest.difference_pct) >= abs(h100.difference_pct)
    assert all(abs(d.difference_pct) > 5 for d in result.disagreements)


def test_the_providers_own_api_is_the_authority(sqlite_url: str) -> None:
    db = load_two_catalogs(sqlite_url)
    own = obs("23.92", T1 - timedelta(days=1), provider="lambda",
              instance_type="gpu_8x_h100_sxm5", gpu_name="H100 SXM5", gpu_count=8,
              gpu_memory_gb=80.0)
    assert ingest_records(db, "lambda", [own], started_at=own.observed_at).status == "ok"
    h100 = [d for d in cross_check(db).disagreements if d.instance_type == "gpu_8x_h100_sxm5"
            and d.region == "us-east-1"]
    assert {d.authority_source for d in h100} == {"lambda"}  # older, but the own API
    assert {d.other_source: d.difference_pct for d in h100} == {
        "gpuhunt": Decimal("15.05"), "skypilot": Decimal("33.44")}


def test_threshold_and_instant(sqlite_url: str) -> None:
    db = load_two_catalogs(sqlite_url)
    rows = price_rows(db)
    assert compare_prices(rows, threshold_pct=Decimal(100)).disagreements == []
    everything = compare_prices(rows, threshold_pct=Decimal(0))
    assert len(everything.disagreements) >= len(cross_check(db).disagreements)
    # before gpuhunt was read only one source is known: nothing to compare
    assert cross_check(db, as_of=T1 + timedelta(minutes=1)).compared == 0


def test_check_command(sqlite_url: str) -> None:
    load_two_catalogs(sqlite_url).close()
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", sqlite_url, "check", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    h100 = next(r for r in rows if r["instance_type"] == "gpu_8x_h100_sxm5"
                and r["region"] == "us-east-1")
    assert h100["authority_price_per_hour"] == "27.52"
    assert h100["other_price_per_hour"] == "31.92"
    assert h100["difference_pct"] == "15.99"
    assert "disagree by more than 5%" in result.stderr
    table = runner.invoke(cli, ["--db", sqlite_url, "check", "--threshold", "1000"])
    assert table.exit_code == 0 and "(no rows)" in table.stdout
    bad = runner.invoke(cli, ["--db", sqlite_url, "check", "--threshold", "lots"])
    assert bad.exit_code == 2 and "--threshold" in bad.stderr


@pytest.mark.parametrize("value", ["-1", "NaN"])
def test_check_rejects_a_bad_threshold(sqlite_url: str, value: str) -> None:
    result = CliRunner().invoke(cli, ["--db", sqlite_url, "check", "--threshold", value])
    assert result.exit_code == 2


def test_report_data_quality_shows_the_count_and_the_largest(sqlite_url: str, tmp_path) -> None:
    from datetime import UTC, datetime

    import reports  # noqa: F401  (registers the [report] defaults)
    from reports.build import build_report
    from reports.render import render_html
    from tracker.config.schema import load_config

    db = load_two_catalogs(sqlite_url)
    config_path = tmp_path / "config.toml"
    config_path.write_text(f'[report]\nout_dir = "{tmp_path / "out"}"\n', encoding="utf-8")
    doc = build_report(db, load_config(config_path, environ={}), "2026-W38",
                       now=datetime(2026, 9, 22, tzinfo=UTC))
    cross = doc["data_quality"]["cross_source"]
    expected = cross_check(db, as_of=datetime(2026, 9, 21, tzinfo=UTC))
    assert cross["compared"] == expected.compared > 0
    assert cross["disagreements"] == len(expected.disagreements)
    assert cross["largest"] == expected.largest.to_json()
    html = render_html(doc)
    assert "Cross-source check:" in html
    assert expected.largest.instance_type in html
