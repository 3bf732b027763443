"""Archive: write the week's HTML, JSON and CSV files and record them in `report_archive`.

One directory per week under the output directory; rebuilding a week replaces its files and
updates its rows (one row per week and kind), so the archive always points at the newest build.

Files and rows succeed or fail together: the three files are written to temporary names
first (a full disk fails there, before anything is visible), then moved into place inside
the archive-row transaction; if the rows cannot be committed the previous files come back.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracker.config.schema import Config
    from tracker.store.db import Database


@dataclass(frozen=True)
class ArchivedReport:
    week: str
    as_of: str
    path_html: Path
    path_json: Path
    path_csv: Path
    sha256: dict[str, str]
    document: dict[str, Any] = field(repr=False)

    @property
    def headline(self) -> str:
        from reports.filters import summary_sentence

        return summary_sentence(self.document["summary"]["headline"], self.document["currency"])

    def to_json(self) -> dict[str, Any]:
        return {"week": self.week, "as_of": self.as_of, "html": str(self.path_html),
                "json": str(self.path_json), "csv": str(self.path_csv),
                "sha256": dict(sorted(self.sha256.items())), "headline": self.headline}


def report_basename(week: str) -> str:
    return f"gpu-report-{week}"


def build_and_archive(
    db: Database, config: Config, week: str | None = None, as_of: datetime | None = None,
    out_dir: str | Path | None = None, *, generated_at: datetime | None = None,
) -> ArchivedReport:
    """Build the report for `week` (default: the newest finished week with data), write
    `gpu-report-<week>.html`, `.json` and `gpu-prices-<week>.csv` under `out_dir/<week>/`, and
    record them in `report_archive`.

    `as_of` is the clock ("now", default the current time): a finished week is reported as of
    its end regardless, the running week as of this instant.
    """
    from reports.background import in_parallel
    from reports.build import build_report
    from reports.render import csv_filename, environment, render_csv, render_html
    from tracker.answers.report_settings import out_dir as configured_out_dir
    from tracker.core.serialization import canonical_json

    now = as_of or datetime.now(UTC)
    document = build_report(db, config, week, now=now, generated_at=generated_at)
    week_name = document["week"]
    directory = configured_out_dir(config, out_dir) / week_name
    env = environment(config.report.templates_dir or None)
    base = report_basename(week_name)
    paths = {
        "html": directory / f"{base}.html",
        "json": directory / f"{base}.json",
        "csv": directory / csv_filename(document),
    }
    # The page (its charts most of the time) renders in a child process where one can run
    # (reports.background) while this one writes the JSON and the CSV.
    html = in_parallel(db, render_html, document, env, csv_href=paths["csv"].name)
    contents = {
        "json": canonical_json(document).encode("utf-8"),
        "csv": render_csv(document).encode("utf-8"),
        "html": html().encode("utf-8"),
    }
    hashes = publish_with_rows(db, week_name, paths, contents, now)
    return ArchivedReport(
        week=week_name, as_of=document["period"]["as_of"], path_html=paths["html"],
        path_json=paths["json"], path_csv=paths["csv"], sha256=hashes, document=document)


def publish_with_rows(db: Database, week: str, paths: dict[str, Path],
                      contents: dict[str, bytes], created_at: datetime) -> dict[str, str]:
    """Write the files and their archive rows together or not at all; returns the hashes.

    Files go through the one output writer (tracker.core.output_files): staged under new random
    names in the week's directory, each target checked to be a regular file or a new path."""
    from tracker.core.output_files import check_target, install, set_aside, stage

    hashes = {kind: hashlib.sha256(data).hexdigest() for kind, data in contents.items()}
    staged: dict[str, Path] = {}
    backups: dict[str, Path] = {}
    installed: list[str] = []
    try:
        for kind in ("json", "csv", "html"):
            check_target(paths[kind])
        for kind in ("json", "csv", "html"):
            staged[kind] = stage(paths[kind], contents[kind])
        with db.write() as conn:
            _upsert_rows(conn, week, {k: (paths[k], hashes[k]) for k in paths}, created_at)
            for kind in ("json", "csv", "html"):
                backup = set_aside(paths[kind])
                if backup is not None:
                    backups[kind] = backup
                install(staged.pop(kind), paths[kind])
                installed.append(kind)
    except BaseException:
        for kind in installed:
            paths[kind].unlink(missing_ok=True)
        for kind, backup in backups.items():
            os.replace(backup, paths[kind])
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        raise
    for backup in backups.values():
        backup.unlink(missing_ok=True)
    return hashes


def record_archive(db: Database, week: str, files: dict[str, tuple[Path, str]],
                   created_at: datetime) -> None:
    with db.write() as conn:
        _upsert_rows(conn, week, files, created_at)


def _upsert_rows(conn: Any, week: str, files: dict[str, tuple[Path, str]],
                 created_at: datetime) -> None:
    from tracker.store.report_log import upsert_archive_rows

    upsert_archive_rows(conn, week, {kind: (str(path.resolve()), digest)
                                     for kind, (path, digest) in files.items()}, created_at)


def list_archived(db: Database) -> list[dict[str, Any]]:
    """One row per archived week: its files, when built, and where it was sent."""
    from tracker.store.report_log import archive_rows

    files, sends = archive_rows(db)
    weeks: dict[str, dict[str, Any]] = {}
    for row in files:
        entry = weeks.setdefault(row.week, {
            "week": row.week, "built_at": row.created_at, "html": None, "json": None,
            "csv": None, "sent_at": None, "sent_to": ""})
        entry[row.kind] = row.path
        entry["built_at"] = max(entry["built_at"], row.created_at)
    for row in sends:
        sent = weeks.get(row.week)
        if sent is not None:
            sent["sent_at"] = row.sent_at
            recipients = set(filter(None, sent["sent_to"].split(", ")))
            recipients.update(filter(None, row.recipients.split(",")))
            sent["sent_to"] = ", ".join(sorted(recipients))
    return [weeks[w] for w in sorted(weeks, reverse=True)]
