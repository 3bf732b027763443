"""Import past catalog versions as dated price history: SkyPilot (git) and gpuhunt (S3).

SkyPilot: `skypilot-org/skypilot-catalog` keeps every version of `catalogs/v8/<cloud>/vms.csv`
in its git history. `list_catalog_versions` pages through
`GET {github_api_url}/repos/{repo}/commits?path=...&since=...&until=...&per_page=100&page=N`
(following the `Link: <...>; rel="next"` header), and each version is read from
`{raw_url}/{sha}/catalogs/v8/<cloud>/vms.csv`. The version's instant is the commit's
committer date.

gpuhunt: tracker/collect/backfill_gpuhunt.py (S3 catalog versions), importing through the same
`import_versions` as SkyPilot.

Local directories (`local_dir`, CLI `--from-dir`) hold dated copies of one cloud's vms.csv.
The date comes from the file name, which must be one of:
    vms-2025-06-01.csv                 date only (00:00 UTC)
    2025-06-01.csv
    2025-06-01_95eaf48.csv             date and commit sha (7-40 hex digits)
    2025-06-01T142210Z_95eaf48.csv     UTC time too (also 14:22:10 or 14-22-10 spelled out)
    vms-2025-06-01T142210Z.csv
Files that do not match are ignored. With several clouds, `DIR/<cloud>/` is used when it
exists.

Every version is imported as one ingest run with `version="<cloud>@<sha or version>"`
(files without a sha: `<cloud>@<date/time from the name>`), oldest first. Versions already in
`imported_versions(db, source)` are skipped, so a backfill can be stopped and run again: it
resumes where it stopped, and a second run over the same range imports nothing. A local
file's short sha matches the full sha of the same commit imported from GitHub.

GitHub rate limits (60 requests/hour without a token; set `GPU_TRACKER_GITHUB_TOKEN` for
5,000): `x-ratelimit-remaining`/`x-ratelimit-reset` are read on every API answer. A 403 or
429 that is a rate limit (remaining 0, or `retry-after`) waits for the reset when that is at
most `rate_limit_max_wait` seconds away, else the backfill stops cleanly: what was imported
stays, and `BackfillStopped` says when to run again. Only the commit listing uses the API
(one request per 100 versions); the file downloads go to raw.githubusercontent.com through
the shared HTTP client (retries, `Retry-After`).
"""

from __future__ import annotations

import logging
import os
import re
import time as time_module
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapers.http import HttpStatusError, Response
from tracker.core.errors import InvalidInput, SourceError

if TYPE_CHECKING:
    from scrapers.http import HttpClient
    from tracker.store.db import Database
    from tracker.store.ingest import RunSummary

log = logging.getLogger(__name__)

TOKEN_ENV = "GPU_TRACKER_GITHUB_TOKEN"
GITHUB_API_VERSION = "2022-11-28"
SKYPILOT_PATH = "catalogs/{schema}/{cloud}/vms.csv"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_LOCAL_NAME = re.compile(
    r"^(?:vms[-_])?(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:T(?P<h>\d{2})[:\-]?(?P<m>\d{2})[:\-]?(?P<s>\d{2})Z?)?"
    r"(?:[_\-](?P<sha>[0-9a-f]{7,40}))?\.csv$")
SAFE_VERSION = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")

Progress = Callable[[str], None]
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def in_range(when: datetime, since: datetime | None, until: datetime | None) -> bool:
    """since <= when <= until, either bound optional."""
    return (since is None or when >= since) and (until is None or when <= until)


@dataclass(frozen=True, slots=True)
class CatalogVersion:
    """One past version of one cloud's (or gpuhunt provider's) catalog file."""

    cloud: str
    ref: str  # commit sha, gpuhunt version string, or the local file's date/time stamp
    observed_at: datetime | None  # None: read from the file itself (gpuhunt explicit versions)
    url: str  # where the file is read from (raw URL, zip URL or local path)
    path: Path | None = None  # set for local files

    @property
    def version(self) -> str:
        return f"{self.cloud}@{self.ref}"


class BackfillStopped(SourceError):
    """A backfill that stopped early; `summaries` holds the runs of this call (all imported
    and kept, except a last one with status `failed`)."""

    def __init__(self, message: str, summaries: list[RunSummary] | None = None,
                 retry_at: datetime | None = None) -> None:
        super().__init__(message)
        self.summaries = list(summaries or [])
        self.retry_at = retry_at


class _RateLimited(Exception):
    def __init__(self, reset_at: datetime | None, detail: str) -> None:
        super().__init__(detail)
        self.reset_at = reset_at
        self.detail = detail


# -- GitHub ------------------------------------------------------------------------------------

class _GitHub:
    """GET against the GitHub REST API with its rate-limit rules (see the module doc)."""

    def __init__(self, client: HttpClient, *, token: str | None, max_wait: float,
                 sleep: Callable[[float], None], clock: Clock, max_rate_waits: int = 3) -> None:
        self.client = client
        self.headers = {"Accept": "application/vnd.github+json",
                        "X-GitHub-Api-Version": GITHUB_API_VERSION}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.max_wait = max_wait
        self.sleep = sleep
        self.clock = clock
        self.max_rate_waits = max_rate_waits
        self.remaining: int | None = None
        self.reset_at: datetime | None = None

    def get(self, url: str, params: Mapping[str, Any] | None = None) -> Response:
        """Connection errors, timeouts and 5xx are retried by the shared client
        (scrapers/http.py, `[http] retries`); here only GitHub's rate-limit rules."""
        short = url.split("?", 1)[0]
        rate_waits = 0
        while True:
            if self.remaining == 0 and self.reset_at is not None and self.reset_at > self.clock():
                self._wait_or_stop(self.reset_at, "the GitHub API rate limit is used up")
                rate_waits += 1
            response = _send(self.client, url, params=params, headers=self.headers)
            self._note_limits(response)
            status = response.status_code
            if status in (403, 429):
                wait_until = self._rate_limit_reset(response)
                if wait_until is None:
                    raise SourceError(f"{short}: HTTP {status}: {_github_message(response)}")
                if rate_waits >= self.max_rate_waits:
                    raise _RateLimited(wait_until, "still rate limited after waiting")
                self._wait_or_stop(wait_until, _github_message(response))
                rate_waits += 1
                continue
            if status >= 500:
                tries = self.client.settings.retries + 1
                raise SourceError(f"{short}: HTTP {status} after {tries} tries")
            if status >= 400:
                raise SourceError(f"{short}: HTTP {status}: {_github_message(response)}")
            return response

    def _note_limits(self, response: Response) -> None:
        remaining = response.headers.get("x-ratelimit-remaining")
        reset = response.headers.get("x-ratelimit-reset")
        if remaining is not None and remaining.strip().isdigit():
            self.remaining = int(remaining)
        if reset is not None and reset.strip().isdigit():
            self.reset_at = datetime.fromtimestamp(int(reset), UTC)

    def _rate_limit_reset(self, response: Response) -> datetime | None:
        """When a 403/429 is a rate limit, the instant to retry at; None for other 403s."""
        now = self.clock()
        retry_after = response.headers.get("retry-after")
        if retry_after is not None and retry_after.strip().isdigit():
            return now + timedelta(seconds=int(retry_after))
        if response.headers.get("x-ratelimit-remaining", "").strip() == "0":
            return self.reset_at if self.reset_at is not None else now + timedelta(minutes=1)
        if response.status_code == 429:
            return now + timedelta(minutes=1)  # GitHub: wait at least a minute
        return None

    def _wait_or_stop(self, until: datetime, detail: str) -> None:
        wait = (until - self.clock()).total_seconds()
        if wait > self.max_wait:
            raise _RateLimited(until, detail)
        if wait > 0:
            log.info("GitHub rate limit: waiting %.0f s", wait)
            self.sleep(wait + 1)
        self.remaining = None


def _send(client: HttpClient, url: str, *, params: Mapping[str, Any] | None,
          headers: Mapping[str, str]) -> Response:
    """One GET whose status and headers the caller inspects (Link, rate limits)."""
    return client.get_response(url, params=params, headers=headers)


def _github_message(response: Response) -> str:
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message)[:200] if message else f"HTTP {response.status_code}"


def _iso_z(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def catalog_path(cloud: str, schema: str = "v8") -> str:
    return SKYPILOT_PATH.format(schema=schema, cloud=cloud)


def list_catalog_versions(
    client: HttpClient, cloud: str, since: datetime | None, until: datetime | None = None,
    settings: Mapping[str, Any] | None = None, *, environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time_module.sleep, clock: Clock = utcnow,
) -> list[CatalogVersion]:
    """Every commit that touched `catalogs/v8/<cloud>/vms.csv` in [since, until], oldest first.

    Raises `BackfillStopped` (with no summaries) when the GitHub rate limit stops the
    listing for longer than `rate_limit_max_wait`.
    """
    github = _github_client(client, settings, environ, sleep, clock)
    try:
        return _list_commits(github, cloud, since, until, _settings(settings))
    except _RateLimited as exc:
        raise _stopped(exc, "listing commits", has_token="Authorization" in github.headers) \
            from None


def _github_client(client: HttpClient, settings: Mapping[str, Any] | None,
                   environ: Mapping[str, str] | None, sleep: Callable[[float], None],
                   clock: Clock) -> _GitHub:
    environ = os.environ if environ is None else environ
    s = _settings(settings)
    token = (environ.get(TOKEN_ENV) or "").strip() or None
    from tracker.core.secrets import learn

    learn([token])  # never echoed back in an error, a row or a log
    return _GitHub(client, token=token,
                   max_wait=float(s["rate_limit_max_wait"]), sleep=sleep, clock=clock)


def _settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    from scrapers.skypilot import SkypilotSource

    merged = dict(SkypilotSource.DEFAULTS)
    merged.update(settings or {})
    return merged


def _list_commits(github: _GitHub, cloud: str, since: datetime | None,
                  until: datetime | None, s: Mapping[str, Any]) -> list[CatalogVersion]:
    repo = str(s["repo"]).strip("/")
    path = catalog_path(cloud)
    url: str | None = f"{str(s['github_api_url']).rstrip('/')}/repos/{repo}/commits"
    params: dict[str, Any] | None = {"path": path, "per_page": 100, "page": 1}
    assert params is not None
    if since is not None:
        params["since"] = _iso_z(since)
    if until is not None:
        params["until"] = _iso_z(until)
    raw_root = str(s["raw_url"]).rstrip("/")
    seen_urls: set[str] = set()
    versions: dict[str, CatalogVersion] = {}
    pages = 0
    while url is not None:
        pages += 1
        if pages > int(s["max_pages"]):
            raise SourceError(f"commit list for {path} has more than {s['max_pages']} pages; "
                              "narrow --since/--until or raise the max_pages setting")
        response = github.get(url, params)
        seen_urls.add(str(response.request.url))
        try:
            commits = response.json()
        except ValueError:
            raise SourceError(f"{url.split('?', 1)[0]}: response is not valid JSON") from None
        if not isinstance(commits, list):
            raise SourceError(f"{url.split('?', 1)[0]}: expected a list of commits")
        for item in commits:
            sha, when = _commit_fields(item)
            if not in_range(when, since, until):
                continue
            versions.setdefault(sha, CatalogVersion(
                cloud=cloud, ref=sha, observed_at=when, url=f"{raw_root}/{sha}/{path}"))
        next_url = response.links.get("next", {}).get("url")
        if next_url and next_url in seen_urls:
            raise SourceError(f"commit list for {path}: the next-page link repeats ({next_url})")
        url, params = (next_url, None) if next_url else (None, None)
    return sorted(versions.values(), key=lambda v: (v.observed_at, v.ref))


def _commit_fields(item: Any) -> tuple[str, datetime]:
    try:
        sha = item["sha"]
        date_text = item["commit"]["committer"]["date"]
    except (KeyError, TypeError):
        raise SourceError("unexpected commit object in the GitHub response "
                          "(no sha or commit.committer.date)") from None
    if not isinstance(sha, str) or not _SHA.match(sha):
        raise SourceError(f"unexpected commit sha in the GitHub response: {sha!r}")
    try:
        when = datetime.fromisoformat(str(date_text).replace("Z", "+00:00"))
    except ValueError:
        raise SourceError(f"unexpected commit date {date_text!r} for {sha}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return sha, when.astimezone(UTC)


def _stopped(exc: _RateLimited, doing: str, *, has_token: bool) -> BackfillStopped:
    if exc.reset_at is not None:
        when = exc.reset_at.strftime("%Y-%m-%d %H:%M:%SZ")
        retry = f"run the same command again after {when} to continue"
    else:
        retry = "run the same command again later to continue"
    hint = "" if has_token else f" (set {TOKEN_ENV} for a higher limit)"
    return BackfillStopped(
        f"GitHub API rate limit reached while {doing} ({exc.detail}); nothing imported yet; "
        f"{retry}{hint}", retry_at=exc.reset_at)


# -- local directories -------------------------------------------------------------------------

def local_catalog_versions(directory: str | Path, cloud: str, since: datetime | None = None,
                           until: datetime | None = None) -> list[CatalogVersion]:
    """Dated copies of a cloud's vms.csv in `directory` (names in the module doc)."""
    root = Path(directory).expanduser()
    if (root / cloud).is_dir():
        root = root / cloud
    if not root.is_dir():
        raise InvalidInput(f"not a directory: {root}")
    versions: list[CatalogVersion] = []
    for path in sorted(root.iterdir()):
        match = _LOCAL_NAME.match(path.name)
        if match is None or not path.is_file():
            continue
        try:
            day = datetime.fromisoformat(match["date"]).date()
            clock = time(int(match["h"]), int(match["m"]), int(match["s"])) if match["h"] \
                else time()
        except ValueError:
            raise InvalidInput(f"{path.name}: not a valid date/time in the file name") from None
        when = datetime.combine(day, clock, tzinfo=UTC)
        if not in_range(when, since, until):
            continue
        stamp = match["date"] + (f"T{match['h']}{match['m']}{match['s']}Z" if match["h"] else "")
        versions.append(CatalogVersion(cloud=cloud, ref=match["sha"] or stamp, observed_at=when,
                                       url=str(path), path=path))
    if not versions:
        raise InvalidInput(
            f"no dated catalog files for {cloud} in {root} in the requested range (expected "
            "names like vms-2025-06-01.csv, 2025-06-01_<sha>.csv or "
            "2025-06-01T142210Z_<sha>.csv)")
    return sorted(versions, key=lambda v: (v.observed_at, v.ref))


# -- import ------------------------------------------------------------------------------------

def already_imported(version: str, done: set[str]) -> bool:
    """Exact match, or the same commit under a short and a full sha (`lambda@95eaf48`)."""
    if version in done:
        return True
    cloud, _, ref = version.partition("@")
    if not re.fullmatch(r"[0-9a-f]{7,40}", ref):
        return False
    for other in done:
        other_cloud, _, other_ref = other.partition("@")
        if other_cloud == cloud and re.fullmatch(r"[0-9a-f]{7,40}", other_ref) and (
                other_ref.startswith(ref) or ref.startswith(other_ref)):
            return True
    return False


def backfill_skypilot(
    db: Database, client: HttpClient, cloud: str, since: datetime | None,
    until: datetime | None = None, *, settings: Mapping[str, Any] | None = None,
    local_dir: str | Path | None = None, on_progress: Progress | None = None,
    environ: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time_module.sleep, clock: Clock = utcnow,
) -> list[RunSummary]:
    """Import the past versions of one cloud's SkyPilot catalog; one run per version.

    Returns the summaries of the versions imported now (empty when everything in range was
    imported before). Raises `BackfillStopped` when it had to stop early (rate limit, a
    download or a version that failed); the versions imported before that stay imported.
    """
    from scrapers.skypilot import parse_vms_csv
    from tracker.store.ingest import imported_versions

    if local_dir is not None:
        versions = local_catalog_versions(local_dir, cloud, since, until)
    else:
        versions = list_catalog_versions(client, cloud, since, until, settings,
                                         environ=environ, sleep=sleep, clock=clock)

    def records(version: CatalogVersion, body: str) -> Iterator[Any]:
        from scrapers.base import CatalogVersion as VersionRead
        from scrapers.skypilot import provider_id

        assert version.observed_at is not None
        # The commit date is the version's date: `check catalogs` reports how old it is.
        yield VersionRead(provider_id(cloud), version.ref, version.observed_at)
        yield from parse_vms_csv(body.splitlines(), cloud=cloud,
                                 observed_at=version.observed_at, source_url=version.url)

    return import_versions(db, client, "skypilot", versions, imported_versions(db, "skypilot"),
                            records, on_progress=on_progress, clock=clock)


def import_versions(
    db: Database, client: HttpClient, source: str, versions: Sequence[CatalogVersion],
    done: set[str], make_records: Callable[[CatalogVersion, Any], Iterable[Any]], *,
    on_progress: Progress | None, clock: Clock, binary: bool = False,
) -> list[RunSummary]:
    from tracker.store.ingest import ingest_records

    pending = [v for v in versions if not already_imported(v.version, done)]
    note = on_progress or (lambda message: None)
    if len(pending) < len(versions):
        note(f"{len(versions) - len(pending)} of {len(versions)} version(s) already imported")
    summaries: list[RunSummary] = []
    for index, version in enumerate(pending, 1):
        try:
            body = _read_version(client, version, binary=binary)
        except SourceError as exc:
            if isinstance(exc, HttpStatusError) and exc.status == 404:
                note(f"[{index}/{len(pending)}] {version.version}: no file at this version "
                     "(deleted or renamed); skipped")
                continue
            raise BackfillStopped(
                f"{version.version}: {exc}; {len(summaries)} version(s) imported before "
                "stopping; run the same command again to continue", summaries) from None
        summary = ingest_records(db, source, make_records(version, body), started_at=clock(),
                                 version=version.version, trigger="backfill")
        summaries.append(summary)
        if summary.status != "ok":
            raise BackfillStopped(
                f"{version.version}: import failed: {summary.error}; "
                f"{len(summaries) - 1} version(s) imported before it", summaries)
        note(f"[{index}/{len(pending)}] {version.version}: {summary.offers_seen} offers, "
             f"{summary.prices_changed} prices changed, {summary.rejected} rejected")
    return summaries


def _read_version(client: HttpClient, version: CatalogVersion, *, binary: bool) -> Any:
    if version.path is not None:
        try:
            data = version.path.read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {version.path}: {exc.strerror}") from None
    else:
        data = client.get_bytes(version.url)
    if binary:
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"{version.url}: not UTF-8 text") from None


# -- gpuhunt -----------------------------------------------------------------------------------


