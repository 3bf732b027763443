"""Bad catalog files fail the run cleanly: a failed run row says why and nothing else is stored."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from scrapers.gpuhunt import parse_catalog_zip
from scrapers.skypilot import parse_vms_csv
from tracker.store.db import open_database
from tracker.store.ingest import ingest_records

FIXTURES = Path(__file__).resolve().parent / "fixtures"
AT = datetime(2026, 9, 14, 8, tzinfo=UTC)
VAST = (FIXTURES / "skypilot" / "v8" / "vast" / "vms.csv").read_bytes().decode("utf-8")


def _zip(member: str, body: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, body)
    return buffer.getvalue()


CASES = {
    "skypilot-html": ("skypilot", lambda: parse_vms_csv(
        io.StringIO("<!DOCTYPE html><html><body>Rate limited</body></html>\n"), cloud="vast",
        observed_at=AT), "not a SkyPilot v8 catalog"),
    "skypilot-wrong-columns": ("skypilot", lambda: parse_vms_csv(
        io.StringIO(VAST.replace("AcceleratorName", "Accelerator", 1), newline=""),
        cloud="vast", observed_at=AT), "missing columns: AcceleratorName"),
    "gpuhunt-truncated-zip": ("gpuhunt", lambda: parse_catalog_zip(
        _zip("lambdalabs.csv", (FIXTURES / "gpuhunt" / "lambdalabs-real-20260310.csv")
             .read_text("utf-8"))[:200], provider="lambdalabs", observed_at=AT,
        version="20260310-1"), "not a zip file"),
    "gpuhunt-html-in-zip": ("gpuhunt", lambda: parse_catalog_zip(
        _zip("lambdalabs.csv", "<html><body>error</body></html>\n"), provider="lambdalabs",
        observed_at=AT, version="20260310-1"), "not a gpuhunt catalog"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_catalog_file_stores_nothing(sqlite_url: str, case: str) -> None:
    source, records, message = CASES[case]
    db = open_database(sqlite_url)
    summary = ingest_records(db, source, records(), started_at=AT)
    assert summary.status == "failed" and message in (summary.error or "")
    with db.engine.connect() as conn:
        counts = {table: conn.execute(text(f"SELECT count(*) FROM {table}")).scalar()
                  for table in ("offer", "price_span", "rejected_row", "catalog_version")}
        runs = conn.execute(text("SELECT status FROM ingest_run")).scalars().all()
    assert counts == {"offer": 0, "price_span": 0, "rejected_row": 0, "catalog_version": 0}
    assert runs == ["failed"]
