"""Backfill of past catalog versions: GitHub commits (SkyPilot), local files, gpuhunt on S3.

Everything is served by httpx.MockTransport from tests/fixtures/skypilot (two real lambda
versions, GitHub commit pages) and tests/fixtures/gpuhunt; the database is a real SQLite file.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from scrapers.http import HttpClient
from tracker.collect.backfill import (
    BackfillStopped,
    already_imported,
    backfill_skypilot,
    list_catalog_versions,
    local_catalog_versions,
)
from tracker.collect.backfill_gpuhunt import (
    backfill_gpuhunt,
    gpuhunt_versions,
    list_gpuhunt_versions,
)
from tracker.core.errors import InvalidInput, SourceError
from tracker.core.http_settings import HttpSettings
from tracker.store.db import Database, open_database
from tracker.store.ingest import imported_versions
from tracker.store.queries import history

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SKY = FIXTURES / "skypilot"
API = "https://api.github.test"
RAW = "https://raw.github.test/skypilot-org/skypilot-catalog"
SETTINGS = {"github_api_url": API, "raw_url": RAW, "rate_limit_max_wait": 120}
GPUHUNT_ROOT = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3"
NOW = datetime(2026, 9, 21, 12, 0, tzinfo=UTC)
SINCE = datetime(2025, 6, 1, tzinfo=UTC)

NEW_SHA = "0f4070387edc953d7004cff197940e1918a1d6aa"
MID_SHA = "7c3e1a9b5d2f4e6a8c0b1d3f5a7e9c2b4d6f8a0e"  # the file is absent at this commit
OLD_SHA = "95eaf484fa404db8356b745607d162ea4fdf8fda"
RAW_FILES = {NEW_SHA: SKY / "v8" / "lambda" / "vms.csv",
             OLD_SHA: SKY / "history" / "lambda-95eaf484.csv"}
# GitHub's Link header points at /repositories/<id>/commits, not /repos/<owner>/<name>.
PAGE2 = (f"{API}/repositories/495939187/commits"
         "?path=catalogs%2Fv8%2Flambda%2Fvms.csv&per_page=100&page=2")


class FakeClock:
    """`clock()` that moves forward when the code under test sleeps."""

    def __init__(self, start: datetime = NOW) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += timedelta(seconds=seconds)


class GitHub:
    """The commits API (two pages, rate-limit headers) and raw.githubusercontent.com."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.requests: list[httpx.Request] = []
        self.remaining = 60
        self.rate_limit_page2_for: int | None = None  # seconds until reset, once
        self.raw_failures: dict[str, int] = {}  # sha -> 500s to answer
        self.next_link: str | None = PAGE2
        self.reset_in = 3600

    def reset_epoch(self, seconds: float | None = None) -> str:
        seconds = self.reset_in if seconds is None else seconds
        return str(int((self.clock.now + timedelta(seconds=seconds)).timestamp()))

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        url = request.url
        if url.host == "api.github.test":
            return self.api(request)
        if url.host == "raw.github.test":
            sha = url.path.split("/")[3]
            if self.raw_failures.get(sha, 0) > 0:
                self.raw_failures[sha] -= 1
                return httpx.Response(500)
            assert url.path == f"/skypilot-org/skypilot-catalog/{sha}/catalogs/v8/lambda/vms.csv"
            if sha in RAW_FILES:
                return httpx.Response(200, content=RAW_FILES[sha].read_bytes())
            return httpx.Response(404, text="404: Not Found")
        return httpx.Response(599)

    def api(self, request: httpx.Request) -> httpx.Response:
        page = request.url.params.get("page")
        if page == "2" and self.rate_limit_page2_for is not None:
            wait, self.rate_limit_page2_for = self.rate_limit_page2_for, None
            return httpx.Response(
                403, content=(SKY / "github" / "rate_limited.json").read_bytes(),
                headers={"x-ratelimit-limit": "60", "x-ratelimit-remaining": "0",
                         "x-ratelimit-used": "60", "x-ratelimit-resource": "core",
                         "x-ratelimit-reset": self.reset_epoch(wait),
                         "content-type": "application/json; charset=utf-8"})
        self.remaining -= 1
        headers = {"x-ratelimit-limit": "60", "x-ratelimit-remaining": str(self.remaining),
                   "x-ratelimit-reset": self.reset_epoch(), "x-ratelimit-resource": "core",
                   "content-type": "application/json; charset=utf-8"}
        if page == "1":
            assert request.url.path == "/repos/skypilot-org/skypilot-catalog/commits"
            assert request.url.params["path"] == "catalogs/v8/lambda/vms.csv"
            assert request.url.params["per_page"] == "100"
            if self.next_link:
                headers["link"] = (f'<{self.next_link}>; rel="next", '
                                   f'<{self.next_link}>; rel="last"')
            body = (SKY / "github" / "commits_lambda_page1.json").read_bytes()
        else:
            first = PAGE2.replace("page=2", "page=1")
            headers["link"] = f'<{first}>; rel="prev", <{first}>; rel="first"'
            body = (SKY / "github" / "commits_lambda_page2.json").read_bytes()
        return httpx.Response(200, content=body, headers=headers)


def client_for(handler: Callable, clock: FakeClock | None = None) -> HttpClient:
    return HttpClient(HttpSettings(backoff=0, retries=2), transport=httpx.MockTransport(handler),
                      sleep=(clock.sleep if clock else lambda _s: None))


def lambda_h100_history(db: Database) -> list[tuple[Decimal, str, str | None]]:
    points = [p for p in history(db, "h100-sxm", provider="lambda")
              if p.instance_type == "gpu_8x_h100_sxm5" and p.region == "us-east-1"]
    return [(p.price_per_hour, p.valid_from.isoformat(),
             p.valid_to.isoformat() if p.valid_to else None) for p in points]


def run_rows(db: Database, source: str) -> list[tuple[str, str, str]]:
    with db.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT version, status, \"trigger\" FROM ingest_run WHERE source = :s ORDER BY id"),
            {"s": source})]


# -- listing ------------------------------------------------------------------------------------

def test_list_versions_follows_link_and_orders_oldest_first() -> None:
    clock = FakeClock()
    github = GitHub(clock)
    with client_for(github.handler, clock) as client:
        versions = list_catalog_versions(client, "lambda", SINCE, None, SETTINGS,
                                         environ={}, sleep=clock.sleep, clock=clock)
    assert [v.ref for v in versions] == [OLD_SHA, MID_SHA, NEW_SHA]
    assert versions[0].observed_at == datetime(2025, 7, 10, 21, 40, 17, tzinfo=UTC)
    assert versions[0].version == f"lambda@{OLD_SHA}"
    assert versions[2].url == f"{RAW}/{NEW_SHA}/catalogs/v8/lambda/vms.csv"
    first, second = github.requests
    assert first.url.params["since"] == "2025-06-01T00:00:00Z"
    assert first.url.params["page"] == "1"
    assert str(second.url) == PAGE2  # the Link header's URL, as given
    assert first.headers["accept"] == "application/vnd.github+json"
    assert "authorization" not in first.headers


def test_token_is_sent_to_the_api_only() -> None:
    clock = FakeClock()
    github = GitHub(clock)
    with client_for(github.handler, clock) as client:
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS,
                              environ={"GPU_TRACKER_GITHUB_TOKEN": "ghp_example123"},
                              sleep=clock.sleep, clock=clock)
    assert all(r.headers["authorization"] == "Bearer ghp_example123" for r in github.requests)


def test_until_filters_and_is_passed_on() -> None:
    clock = FakeClock()
    github = GitHub(clock)
    until = datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC)
    with client_for(github.handler, clock) as client:
        versions = list_catalog_versions(client, "lambda", SINCE, until, SETTINGS, environ={},
                                         sleep=clock.sleep, clock=clock)
    assert [v.ref for v in versions] == [OLD_SHA]
    assert github.requests[0].url.params["until"] == "2025-12-31T23:59:59Z"


def test_short_rate_limit_waits_for_the_reset() -> None:
    clock = FakeClock()
    github = GitHub(clock)
    github.rate_limit_page2_for = 30
    with client_for(github.handler, clock) as client:
        versions = list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                                         sleep=clock.sleep, clock=clock)
    assert len(versions) == 3
    assert clock.sleeps == [31]  # until the reset, plus a second
    assert [r.url.params.get("page") for r in github.requests] == ["1", "2", "2"]


def test_long_rate_limit_stops_cleanly_with_the_reset_time() -> None:
    clock = FakeClock()
    github = GitHub(clock)
    github.rate_limit_page2_for = 45 * 60
    with client_for(github.handler, clock) as client, \
            pytest.raises(BackfillStopped) as info:
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                              sleep=clock.sleep, clock=clock)
    assert clock.sleeps == []
    assert info.value.retry_at == NOW + timedelta(minutes=45)
    message = str(info.value)
    assert "GitHub API rate limit reached while listing commits" in message
    assert "API rate limit exceeded for 203.0.113.7" in message
    assert "after 2026-09-21 12:45:00Z" in message
    assert "set GPU_TRACKER_GITHUB_TOKEN" in message
    assert info.value.summaries == []


def test_used_up_limit_on_a_good_answer_is_respected_before_the_next_page() -> None:
    clock = FakeClock()
    github = GitHub(clock)
    github.remaining = 1  # page 1 answers 200 with remaining 0, reset in an hour
    with client_for(github.handler, clock) as client, pytest.raises(BackfillStopped):
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                              sleep=clock.sleep, clock=clock)
    assert len(github.requests) == 1  # no request that could only fail
    github = GitHub(clock)
    github.remaining, github.reset_in = 1, 50
    with client_for(github.handler, clock) as client:
        versions = list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                                         sleep=clock.sleep, clock=clock)
    assert len(versions) == 3 and clock.sleeps == [51]


def test_other_forbidden_answers_fail() -> None:
    clock = FakeClock()

    def forbidden(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"message": "Resource not accessible"})

    with client_for(forbidden, clock) as client, \
            pytest.raises(SourceError, match="HTTP 403: Resource not accessible"):
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                              sleep=clock.sleep, clock=clock)


def test_next_link_that_repeats_is_an_error() -> None:
    clock = FakeClock()

    def looping(request: httpx.Request) -> httpx.Response:
        body = (SKY / "github" / "commits_lambda_page2.json").read_bytes()
        return httpx.Response(200, content=body, headers={
            "link": f'<{API}/repos/skypilot-org/skypilot-catalog/commits?page=2>; rel="next"'})

    with client_for(looping, clock) as client, pytest.raises(SourceError, match="repeats"):
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                              sleep=clock.sleep, clock=clock)


def test_malformed_commit_list() -> None:
    clock = FakeClock()

    def odd(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[{"sha": "nope"}])

    with client_for(odd, clock) as client, pytest.raises(SourceError, match="unexpected commit"):
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                              sleep=clock.sleep, clock=clock)


# -- importing from GitHub ----------------------------------------------------------------------

def test_backfill_imports_versions_as_dated_history_and_resumes(db: Database) -> None:
    clock = FakeClock()
    github = GitHub(clock)
    github.rate_limit_page2_for = 20
    notes: list[str] = []
    with client_for(github.handler, clock) as client:
        summaries = backfill_skypilot(db, client, "lambda", SINCE, settings=SETTINGS,
                                      on_progress=notes.append, environ={},
                                      sleep=clock.sleep, clock=clock)
    assert [s.version for s in summaries] == [f"lambda@{OLD_SHA}", f"lambda@{NEW_SHA}"]
    assert all(s.status == "ok" for s in summaries)
    # 20 GPU types x 3 regions, then 22 x 3 (the Quadro RTX 6000 included).
    assert (summaries[0].offers_seen, summaries[0].new_offers, summaries[0].rejected) == \
        (60, 60, 0)
    assert (summaries[1].offers_seen, summaries[1].new_offers, summaries[1].rejected) == \
        (66, 6, 0)
    assert summaries[1].prices_changed == 60  # every one of the 20 shared types x 3 regions
    assert any(f"lambda@{MID_SHA}: no file at this version" in n for n in notes)
    assert lambda_h100_history(db) == [
        (Decimal("23.92"), "2025-07-10T21:40:17+00:00", "2026-09-20T07:13:05+00:00"),
        (Decimal("31.92"), "2026-09-20T07:13:05+00:00", None)]
    a6000 = [p for p in history(db, "rtx-a6000", provider="lambda")
             if p.instance_type == "gpu_1x_a6000" and p.region == "us-west-1"]
    assert [p.price_per_hour for p in a6000] == [Decimal("0.8"), Decimal("1.09")]
    assert run_rows(db, "skypilot") == [(f"lambda@{OLD_SHA}", "ok", "backfill"),
                                        (f"lambda@{NEW_SHA}", "ok", "backfill")]

    # A second run lists again but imports nothing new.
    github.requests.clear()
    with client_for(github.handler, clock) as client:
        again = backfill_skypilot(db, client, "lambda", SINCE, settings=SETTINGS,
                                  on_progress=notes.append, environ={}, sleep=clock.sleep,
                                  clock=clock)
    assert again == []
    assert len(run_rows(db, "skypilot")) == 2
    raw_requests = [r for r in github.requests if r.url.host == "raw.github.test"]
    assert [r.url.path.split("/")[3] for r in raw_requests] == [MID_SHA]  # only the absent one
    assert imported_versions(db, "skypilot") == {f"lambda@{OLD_SHA}", f"lambda@{NEW_SHA}"}


def test_failed_download_stops_and_a_rerun_continues(db: Database) -> None:
    clock = FakeClock()
    github = GitHub(clock)
    github.raw_failures[NEW_SHA] = 3  # more than the client's retries
    with client_for(github.handler, clock) as client, \
            pytest.raises(BackfillStopped) as info:
        backfill_skypilot(db, client, "lambda", SINCE, settings=SETTINGS, environ={},
                          sleep=clock.sleep, clock=clock)
    assert [s.version for s in info.value.summaries] == [f"lambda@{OLD_SHA}"]
    assert f"lambda@{NEW_SHA}" in str(info.value) and "HTTP 500" in str(info.value)
    assert "1 version(s) imported before stopping" in str(info.value)
    assert lambda_h100_history(db) == [(Decimal("23.92"), "2025-07-10T21:40:17+00:00", None)]

    with client_for(github.handler, clock) as client:
        summaries = backfill_skypilot(db, client, "lambda", SINCE, settings=SETTINGS,
                                      environ={}, sleep=clock.sleep, clock=clock)
    assert [s.version for s in summaries] == [f"lambda@{NEW_SHA}"]
    assert [p[0] for p in lambda_h100_history(db)] == [Decimal("23.92"), Decimal("31.92")]


def test_rate_limit_during_listing_imports_nothing(db: Database) -> None:
    clock = FakeClock()
    github = GitHub(clock)
    github.rate_limit_page2_for = 2 * 3600
    with client_for(github.handler, clock) as client, pytest.raises(BackfillStopped):
        backfill_skypilot(db, client, "lambda", SINCE, settings=SETTINGS, environ={},
                          sleep=clock.sleep, clock=clock)
    assert run_rows(db, "skypilot") == []


# -- local directories --------------------------------------------------------------------------

def history_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "lambda-history"
    directory.mkdir()
    shutil.copy(SKY / "history" / "lambda-95eaf484.csv", directory / "2025-07-10_95eaf48.csv")
    shutil.copy(SKY / "v8" / "lambda" / "vms.csv", directory / "vms-2026-09-20T071305Z.csv")
    (directory / "README.md").write_text("not a catalog")
    (directory / "vms.csv").write_text("undated: ignored")
    return directory


def test_local_file_names_give_the_dates(tmp_path: Path) -> None:
    directory = history_dir(tmp_path)
    versions = local_catalog_versions(directory, "lambda")
    assert [(v.ref, v.observed_at) for v in versions] == [
        ("95eaf48", datetime(2025, 7, 10, tzinfo=UTC)),
        ("2026-09-20T071305Z", datetime(2026, 9, 20, 7, 13, 5, tzinfo=UTC))]
    assert versions[0].path == directory / "2025-07-10_95eaf48.csv"
    older = local_catalog_versions(directory, "lambda", until=datetime(2025, 12, 31, tzinfo=UTC))
    assert [v.ref for v in older] == ["95eaf48"]
    # DIR/<cloud>/ is used when it exists.
    assert len(local_catalog_versions(tmp_path, "lambda-history")) == 2
    with pytest.raises(InvalidInput, match="no dated catalog files for lambda"):
        local_catalog_versions(directory, "lambda", since=datetime(2027, 1, 1, tzinfo=UTC))


def test_local_directory_backfill_then_github_skips_the_same_commit(
        db: Database, tmp_path: Path) -> None:
    directory = history_dir(tmp_path)
    with client_for(lambda r: httpx.Response(599)) as client:
        summaries = backfill_skypilot(db, client, "lambda", None, settings=SETTINGS,
                                      local_dir=directory)
    assert [s.version for s in summaries] == ["lambda@95eaf48", "lambda@2026-09-20T071305Z"]
    assert lambda_h100_history(db) == [
        (Decimal("23.92"), "2025-07-10T00:00:00+00:00", "2026-09-20T07:13:05+00:00"),
        (Decimal("31.92"), "2026-09-20T07:13:05+00:00", None)]
    again = backfill_skypilot(db, client, "lambda", None, settings=SETTINGS,
                              local_dir=directory)
    assert again == []

    clock = FakeClock()
    github = GitHub(clock)
    with client_for(github.handler, clock) as client:
        from_github = backfill_skypilot(db, client, "lambda", SINCE, settings=SETTINGS,
                                        environ={}, sleep=clock.sleep, clock=clock)
    # 95eaf48 (short, local) is the same commit as 95eaf484... (full, GitHub).
    assert [s.version for s in from_github] == [f"lambda@{NEW_SHA}"]
    assert from_github[0].prices_changed == 0 and from_github[0].new_offers == 0


def test_already_imported_matches_short_and_full_shas() -> None:
    done = {f"lambda@{OLD_SHA}", "aws@2025-06-01"}
    assert already_imported("lambda@95eaf48", done)
    assert already_imported(f"lambda@{OLD_SHA}", {"lambda@95eaf48"})
    assert not already_imported("aws@95eaf48", done)
    assert not already_imported("lambda@95eaf4", done)  # too short to be a sha
    assert already_imported("aws@2025-06-01", done)


# -- gpuhunt ------------------------------------------------------------------------------------

def gpuhunt_zip(version: str) -> bytes:
    day = version.split("-")[0]
    name = "lambdalabs-20250601-100.csv" if day == "20250601" else "lambdalabs-20250602-124.csv"
    csv_bytes = (FIXTURES / "gpuhunt" / name).read_bytes()
    stamp = {"20250601-100": (2025, 6, 1, 10, 7, 40), "20250601-101": (2025, 6, 1, 11, 7, 36),
             "20250602-123": (2025, 6, 2, 9, 7, 50), "20250602-124": (2025, 6, 2, 10, 7, 42)}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("lambdalabs.csv", date_time=stamp[version]), csv_bytes)
    return buffer.getvalue()


class Bucket:
    def __init__(self, listing: bool = True) -> None:
        self.listing = listing
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path == "/":
            if not self.listing:
                return httpx.Response(403, content=b"<Error><Code>AccessDenied</Code></Error>")
            assert request.url.params["list-type"] == "2"
            assert request.url.params["prefix"] == "v3/lambdalabs/"
            page = "list_page2.xml" if "continuation-token" in request.url.params \
                else "list_page1.xml"
            return httpx.Response(200, content=(FIXTURES / "gpuhunt" / page).read_bytes(),
                                  headers={"content-type": "application/xml"})
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[3] == "catalog.zip":
            return httpx.Response(200, content=gpuhunt_zip(parts[2]))
        return httpx.Response(404)


def test_gpuhunt_listing_two_pages_and_daily_thinning() -> None:
    bucket = Bucket()
    settings = {"url": GPUHUNT_ROOT}
    with client_for(bucket.handler) as client:
        versions = list_gpuhunt_versions(client, "lambdalabs", SINCE, None, settings)
        daily = list_gpuhunt_versions(client, "lambdalabs", SINCE, None, settings, daily=True)
    assert [v.ref for v in versions] == ["20250601-100", "20250601-101", "20250602-123",
                                         "20250602-124"]
    assert versions[0].observed_at == datetime(2025, 6, 1, 10, 7, 41, tzinfo=UTC)
    assert versions[0].url == f"{GPUHUNT_ROOT}/lambdalabs/20250601-100/catalog.zip"
    assert [v.ref for v in daily] == ["20250601-101", "20250602-124"]
    first = bucket.requests[0]
    assert first.url.host == "dstack-gpu-pricing.s3.eu-west-1.amazonaws.com"
    assert first.url.params["start-after"] == "v3/lambdalabs/20250531"
    assert bucket.requests[1].url.params["continuation-token"] == \
        "1k2Hq9Z5bWlRr0p0Y3VWnM8rQ0VkNzJ5dXJtZg=="


def test_gpuhunt_listing_denied_says_to_name_versions() -> None:
    with client_for(Bucket(listing=False).handler) as client, \
            pytest.raises(SourceError, match="name the versions to import with --version"):
        list_gpuhunt_versions(client, "lambdalabs", SINCE, None, {"url": GPUHUNT_ROOT})


def test_gpuhunt_backfill_from_listing_is_resumable(db: Database) -> None:
    bucket = Bucket()
    with client_for(bucket.handler) as client:
        summaries = backfill_gpuhunt(db, client, "lambdalabs", SINCE,
                                     settings={"url": GPUHUNT_ROOT}, daily=True)
        assert [s.version for s in summaries] == ["lambdalabs@20250601-101",
                                                  "lambdalabs@20250602-124"]
        assert backfill_gpuhunt(db, client, "lambdalabs", SINCE,
                                settings={"url": GPUHUNT_ROOT}, daily=True) == []
    points = [p for p in history(db, "h100-sxm", provider="lambda")
              if p.instance_type == "gpu_8x_h100_sxm5" and p.region == "us-east-1"]
    assert [(p.price_per_hour, p.valid_from) for p in points] == [
        (Decimal("23.92"), datetime(2025, 6, 1, 11, 7, 38, tzinfo=UTC)),
        (Decimal("31.92"), datetime(2025, 6, 2, 10, 7, 44, tzinfo=UTC))]


def test_gpuhunt_explicit_versions_are_dated_by_the_zip(db: Database) -> None:
    bucket = Bucket(listing=False)
    versions = gpuhunt_versions("lambdalabs", ["20250602-124", "20250601-100"],
                                {"url": GPUHUNT_ROOT})
    assert [v.ref for v in versions] == ["20250601-100", "20250602-124"]
    with client_for(bucket.handler) as client:
        summaries = backfill_gpuhunt(db, client, "lambdalabs", settings={"url": GPUHUNT_ROOT},
                                     versions=["20250602-124", "20250601-100"])
    assert [s.status for s in summaries] == ["ok", "ok"]
    assert not any(r.url.path == "/" for r in bucket.requests)
    points = [p for p in history(db, "a10", provider="lambda") if p.region == "us-west-1"]
    assert [(p.price_per_hour, p.valid_from) for p in points] == [
        (Decimal("0.75"), datetime(2025, 6, 1, 10, 7, 40, tzinfo=UTC)),
        (Decimal("1.29"), datetime(2025, 6, 2, 10, 7, 42, tzinfo=UTC))]
    with pytest.raises(InvalidInput, match="not a gpuhunt catalog version"):
        gpuhunt_versions("lambdalabs", ["../etc"])


# -- the command --------------------------------------------------------------------------------

def invoke_backfill(sqlite_url: str, args: list[str], handler: Callable,
                    monkeypatch: pytest.MonkeyPatch):
    from tracker.cli.commands import AppContext, backfill_cmd

    monkeypatch.setattr(backfill_cmd, "_http_client", lambda app: client_for(handler))
    return CliRunner().invoke(backfill_cmd.backfill, args, obj=AppContext(db_url=sqlite_url))


def test_backfill_command_prints_a_row_per_version(sqlite_url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_GITHUB_API_URL", API)
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_RAW_URL", RAW)
    github = GitHub(FakeClock(datetime.now(UTC)))
    args = ["skypilot", "--cloud", "lambda", "--since", "2025-06-01", "--format", "json"]
    result = invoke_backfill(sqlite_url, args, github.handler, monkeypatch)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["version"], r["status"], r["offers_seen"]) for r in rows] == [
        (f"lambda@{OLD_SHA}", "ok", 60), (f"lambda@{NEW_SHA}", "ok", 66)]
    again = invoke_backfill(sqlite_url, ["skypilot", "--cloud", "lambda", "--since",
                                         "2025-06-01"], github.handler, monkeypatch)
    assert again.exit_code == 0
    assert "nothing new to import" in again.stderr
    assert again.stdout == ""


def test_backfill_command_rate_limited_exits_1(sqlite_url: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_GITHUB_API_URL", API)
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_RAW_URL", RAW)
    github = GitHub(FakeClock(datetime.now(UTC)))
    github.rate_limit_page2_for = 3 * 3600
    result = invoke_backfill(sqlite_url, ["skypilot", "--cloud", "lambda", "--since",
                                          "2025-06-01"], github.handler, monkeypatch)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1].startswith(
        "Error: GitHub API rate limit reached while listing commits")


def test_backfill_command_partial_import_exits_3(sqlite_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_GITHUB_API_URL", API)
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_RAW_URL", RAW)
    github = GitHub(FakeClock(datetime.now(UTC)))
    github.raw_failures[NEW_SHA] = 10
    result = invoke_backfill(sqlite_url, ["skypilot", "--cloud", "lambda", "--since",
                                          "2025-06-01", "--format", "csv"],
                             github.handler, monkeypatch)
    assert result.exit_code == 3
    assert result.stdout.splitlines()[1].startswith(f"lambda@{OLD_SHA},ok,60,")
    assert "run the same command again to continue" in result.stderr


def test_backfill_command_from_dir_and_usage_errors(sqlite_url: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    directory = history_dir(tmp_path)
    result = invoke_backfill(sqlite_url, ["skypilot", "--cloud", "lambda", "--from-dir",
                                          str(directory), "--format", "json"],
                             lambda r: httpx.Response(599), monkeypatch)
    assert result.exit_code == 0, result.output
    assert [r["version"] for r in json.loads(result.stdout)] == [
        "lambda@95eaf48", "lambda@2026-09-20T071305Z"]
    no_since = invoke_backfill(sqlite_url, ["skypilot", "--cloud", "aws"],
                               lambda r: httpx.Response(599), monkeypatch)
    assert isinstance(no_since.exception, InvalidInput)
    assert "--since is required" in str(no_since.exception)


def test_backfill_refuses_while_a_refresh_of_the_source_runs(
        sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracker.store.locks import hold_locks

    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_GITHUB_API_URL", API)
    monkeypatch.setenv("GPU_TRACKER_SOURCE_SKYPILOT_RAW_URL", RAW)
    github = GitHub(FakeClock(datetime.now(UTC)))
    db = open_database(sqlite_url)
    with hold_locks(db, ["refresh:skypilot"]) as got:  # a refresh of skypilot is running
        assert got.held
        result = invoke_backfill(sqlite_url, ["skypilot", "--cloud", "lambda", "--since",
                                              "2025-06-01"], github.handler, monkeypatch)
    assert result.exit_code == 1  # the CLI group turns the error into one line
    assert str(result.exception).startswith("a refresh of skypilot is running")
    assert imported_versions(db, "skypilot") == set()
    db.close()


# -- the one retry loop ---------------------------------------------------------------------

def test_github_listing_retries_through_the_shared_client() -> None:
    # Connection errors and 5xx on the commits API are retried by scrapers/http.py (the one
    # retry loop, [http] retries), not by a loop of the backfill's own.
    clock = FakeClock()
    github = GitHub(clock)
    answers = [httpx.ConnectError("refused"), httpx.Response(502)]

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.host == "api.github.test" and answers:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return github.handler(request)

    with client_for(flaky, clock) as client:
        versions = list_catalog_versions(client, "lambda", SINCE, None, SETTINGS,
                                         environ={}, sleep=clock.sleep, clock=clock)
        assert client.requests_made == 4  # 2 failed tries + the two pages
    assert [v.ref for v in versions] == [OLD_SHA, MID_SHA, NEW_SHA]


def test_github_listing_gives_up_after_the_configured_retries() -> None:
    clock = FakeClock()

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503)

    with client_for(down, clock) as client, pytest.raises(SourceError) as info:
        list_catalog_versions(client, "lambda", SINCE, None, SETTINGS, environ={},
                              sleep=clock.sleep, clock=clock)
    assert "HTTP 503 after 3 tries" in str(info.value)
    assert client.requests_made == 3  # retries=2 in client_for
