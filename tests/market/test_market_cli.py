"""The market commands through the CLI: `index` in table/JSON/CSV, `index --job`, and
`import FILE.csv` still importing quotes now that `import` is a group."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.helpers import at, obs
from tracker.cli.main import cli

QUOTES = Path(__file__).resolve().parents[2] / "data" / "quotes-example.csv"


@pytest.fixture
def db_url(sqlite_url):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    db = open_database(sqlite_url)
    rows = []
    for day in ("2026-11-01", "2026-11-02"):
        rows += [obs("23.92", at(day), provider="lambda", instance_type="gpu_8x_h100"),
                 obs("98.32", at(day), provider="aws"),
                 obs("2.39", at(day), provider="runpod", instance_type="1x", gpu_count=1)]
    assert ingest_records(db, "test", rows, started_at=at("2026-11-02")).status == "ok"
    db.close()
    return sqlite_url


def run(db_url: str, *args: str, code: int = 0):
    result = CliRunner().invoke(cli, ["--db", db_url, *args])
    assert result.exit_code == code, result.output
    return result.output


def test_index_json_keys_and_values(db_url):
    rows = json.loads(run(db_url, "index", "--gpu", "h100-sxm", "--since", "2026-11-01",
                          "--until", "2026-11-02", "--format", "json"))
    assert [r["date"] for r in rows] == ["2026-11-01", "2026-11-02"]
    first = rows[0]
    for key in ("date", "gpu", "category", "median", "p10", "p90", "providers", "currency"):
        assert key in first
    # aws 12.29, lambda 2.99, runpod 2.39 per GPU-hour.
    assert (first["median"], first["p10"], first["p90"], first["providers"]) == (
        "2.99", "2.51", "10.43", 3)
    csv_text = run(db_url, "index", "--gpu", "h100-sxm", "--since", "2026-11-01", "--until",
                   "2026-11-01", "--format", "csv")
    assert csv_text.splitlines()[0].startswith("date,gpu,category,median,p10,p90,providers")


def test_index_needs_a_gpu_or_a_job(db_url):
    out = run(db_url, "index", code=1)
    assert "--gpu is required" in out


def test_job_index(db_url, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[[report.workloads]]\nname = "ft"\nkind = "finetune"\n'
                      'model = "llama-3.1-8b"\ntokens = 2000000000\n')
    rows = json.loads(run(db_url, "--config", str(config), "index", "--job", "ft", "--since",
                          "2026-11-01", "--until", "2026-11-02", "--format", "json"))
    assert [(r["date"], r["job"], r["basis"]) for r in rows] == [
        ("2026-11-01", "ft", "run"), ("2026-11-02", "ft", "run")]
    assert rows[0]["cost"] is not None and rows[0]["currency"] == "USD"
    out = run(db_url, "--config", str(config), "index", "--job", "nope", code=1)
    assert "no configured workload named 'nope'" in out


def test_import_file_still_imports_quotes(db_url):
    out = json.loads(run(db_url, "import", "--format", "json", str(QUOTES)))
    assert out["source"] == "quotes" and out["status"] == "ok"
    out = run(db_url, "import", str(QUOTES))
    assert "quotes" in out
