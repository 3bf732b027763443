"""`gpu-tracker report weekly|list` through the click group."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tracker.cli.main import cli

# A week that is finished whatever the machine's clock says (tests run after Nov 2026).
WEEK = "2026-W47"


def _run(report_db, report_config, *args):
    result = CliRunner().invoke(
        cli, ["--db", report_db.url, "--config", str(report_config.path), "report", *args])
    return result


def test_weekly_writes_and_archives_the_three_files(report_db, report_config, tmp_path):
    out = tmp_path / "out"
    html = _run(report_db, report_config, "weekly", "--week", WEEK, "--out", str(out))
    assert html.exit_code == 0, html.output
    path = out / WEEK / f"gpu-report-{WEEK}.html"
    assert html.stdout.strip() == str(path)
    assert "prices as of 2026-11-23T00:00:00Z" in html.stderr
    assert sorted(p.name for p in (out / WEEK).iterdir()) == [
        f"gpu-prices-{WEEK}.csv", f"gpu-report-{WEEK}.html", f"gpu-report-{WEEK}.json"]

    as_json = _run(report_db, report_config, "weekly", "--week", WEEK, "--out", str(out),
                   "--format", "json")
    assert as_json.exit_code == 0
    doc = json.loads(as_json.stdout)
    assert (doc["schema_version"], doc["week"]) == (1, WEEK)
    assert as_json.stdout == (out / WEEK / f"gpu-report-{WEEK}.json").read_text("utf-8")
    # Week 47 as of its end: Lambda's 2.49 (RunPod went 2.19 -> 2.69 on 16 Nov 12:00, after
    # the previous as-of instant of 16 Nov 00:00, when RunPod's 2.19 was the cheapest).
    h100 = next(e for e in doc["key_figures"] if e["gpu"] == "h100-sxm")
    od = h100["on_demand"]
    assert (od["now"]["provider"], od["now"]["price"]) == ("lambda", "2.49")
    assert (od["previous"]["provider"], od["previous"]["price"], od["change_pct"]) == (
        "runpod", "2.19", 13.7)

    as_csv = _run(report_db, report_config, "weekly", "--week", WEEK, "--out", str(out),
                  "--format", "csv")
    assert as_csv.stdout.splitlines()[0].startswith("gpu,gpu_name,provider,region")

    listed = _run(report_db, report_config, "list", "--format", "json")
    rows = json.loads(listed.stdout)
    assert [r["week"] for r in rows] == [WEEK]
    assert rows[0]["json"].endswith(f"gpu-report-{WEEK}.json") and rows[0]["sent_at"] is None


def test_default_output_directory_comes_from_config(report_db, report_config):
    result = _run(report_db, report_config, "weekly", "--week", WEEK)
    assert result.exit_code == 0, result.output
    configured = report_config.report.out_dir
    assert result.stdout.strip().startswith(configured)


def test_bad_week_is_one_line_error(report_db, report_config):
    result = _run(report_db, report_config, "weekly", "--week", "48")
    assert result.exit_code == 2  # a usage error, caught while parsing the option
    assert result.stderr.strip().startswith("Error: week must look like 2026-W48, got '48'")
    assert len(result.stderr.strip().splitlines()) == 1


def test_list_is_empty_before_any_report(report_db, report_config):
    result = _run(report_db, report_config, "list")
    assert result.exit_code == 0
    assert result.stdout.strip() == "(no rows)"


def test_help_has_examples():
    result = CliRunner().invoke(cli, ["report", "--help"])
    assert result.exit_code == 0
    assert "gpu-tracker report weekly --week 2026-W48" in result.stdout
    for command in ("weekly", "send", "list"):
        assert command in result.stdout
