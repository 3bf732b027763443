"""Hardening of what the project writes (issue #30, part a): the CSV guard, the secret scrubber,
the secure output writer, the report subject.

Each case was a probe that failed on the main of 2026-12-01; the inputs are what an attacker
controls (provider names and regions, quote and FOCUS files, error bodies).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import obs
from tracker.cli.main import cli

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
KEY = "sk-Live-4fR9xQ2mZ7pL0vB8nT3k"
INJECTION = "eu\r=2+5*cmd|' /C calc'!A0"


@pytest.fixture(autouse=True)
def _forget_secrets():
    yield
    from tracker.core import secrets

    secrets.forget_all()


def _invoke(db_url: str, *args: str, env: dict | None = None):
    return CliRunner().invoke(cli, ["--db", db_url, *args], env=env or {},
                              catch_exceptions=False)


def _formula_cells(text: str) -> list[str]:
    """Every cell of `text` read back as CSV, and every line inside a cell, that a spreadsheet
    would run: it starts with = + - @ tab or CR and is not a plain number."""
    from tracker.core.serialization import FORMULA_PREFIXES, _is_plain_number_text

    bad = []
    for row in csv.reader(io.StringIO(text, newline="")):
        for cell in row:
            for line in re.split(r"[\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029]", cell):
                if line[:1] in FORMULA_PREFIXES and line[:1] and not _is_plain_number_text(line):
                    bad.append(line)
    return bad


# -- the CSV guard -------------------------------------------------------------------------

def test_a_carriage_return_cannot_start_a_formula_row():
    from tracker.core.serialization import csv_safe, write_csv

    text = write_csv(["region", "price"], [[INJECTION, "2.5"]])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 2  # the CR stays inside its quoted cell
    assert rows[1] == ["eu\r'=2+5*cmd|' /C calc'!A0", "2.5"]
    assert _formula_cells(text) == []
    assert csv_safe("a\n+b\r\n@c\u2028-d") == "a\n'+b\r\n'@c\u2028'-d"
    assert csv_safe("ok\n-0.5") == "ok\n-0.5"  # a number on its own line stays a number
    assert csv_safe("\r=x") == "'\r'=x"


CELL = st.text(alphabet=st.sampled_from(list("=+-@\t\r\n\v\u2028\",' a1.eE")), max_size=12)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(CELL, min_size=3, max_size=3), min_size=1, max_size=4))
def test_every_csv_the_project_writes_reads_back_without_a_formula(rows, tmp_path_factory):
    """The CLI's `--format csv`, the report's CSV (file and mail attachment), the FOCUS export:
    parsed back with a CSV reader, the same number of rows and no formula-leading cell."""
    from reports.render import render_csv as report_csv
    from tracker.cli.commands.printing import render_csv as cli_csv
    from tracker.market.focus import EXPORT_COLUMNS, write_export

    columns = ["a", "b", "c"]
    dicts = [dict(zip(columns, row, strict=True)) for row in rows]
    outputs = {
        "cli": cli_csv(dicts, columns),
        "report": report_csv({"prices": {"columns": columns, "rows": dicts}}),
    }
    records = [{c: row[i % 3] for i, c in enumerate(EXPORT_COLUMNS)} for row in rows]
    out = tmp_path_factory.mktemp("focus") / "focus.csv"
    write_export(records, out)
    outputs["focus"] = out.read_text("utf-8")
    for name, text in outputs.items():
        parsed = list(csv.reader(io.StringIO(text, newline="")))
        assert len(parsed) == len(rows) + 1, name
        assert {len(row) for row in parsed} == {len(parsed[0])}, name
        assert _formula_cells(text) == [], name


def test_prices_csv_from_a_hostile_region_parses_back_clean(sqlite_url: str):
    from tracker.store.db import open_database
    from tracker.store.ingest import ingest_records

    db = open_database(sqlite_url)
    summary = ingest_records(db, "vastai", [obs("2.10", NOW, provider="vastai",
                                                 region=INJECTION)], started_at=NOW)
    assert summary.status == "ok"
    result = _invoke(sqlite_url, "prices", "--format", "csv", "--as-of", "2026-11-30T13:00Z")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout, newline="")))
    assert len(rows) == 1
    assert rows[0]["region"] == "eu\r'=2+5*cmd|' /C calc'!A0"
    assert _formula_cells(result.stdout) == []


def test_quotes_import_refuses_a_formula_after_a_line_break(tmp_path: Path, sqlite_url: str):
    quotes = tmp_path / "quotes.csv"
    quotes.write_bytes(b"provider,instance_type,gpu,gpu_count,category,price_per_hour,currency,"
                       b"valid_from,region\nacme,box,h100,8,on-demand,20,USD,2026-11-01,"
                       b"\"eu\r=2+5*cmd|' /C calc'!A0\"\n")
    result = _invoke(sqlite_url, "import", str(quotes))
    assert result.exit_code == 1
    assert "region" in result.stderr and "formula" in result.stderr
    assert "nothing imported" in result.stderr


# -- the secret scrubber -------------------------------------------------------------------

def test_scrubber_masks_the_known_transforms_of_a_secret():
    from tracker.core import secrets

    secrets.learn([KEY])
    echoes = {
        "verbatim": f"bad key {KEY}",
        "upper": f"BAD KEY {KEY.upper()}",
        "lower": KEY.lower(),
        "url-encoded": quote(KEY + "/+", safe=""),
        "quote_plus": quote_plus(KEY),
        "base64": base64.b64encode(KEY.encode()).decode(),
        "base64 in basic auth": "Authorization: " + base64.b64encode(
            f"user:{KEY}".encode()).decode(),
        "urlsafe base64 at offset 2": base64.urlsafe_b64encode(f"ab{KEY}".encode()).decode(),
        "truncated": f"invalid key {KEY[:12]}...",
        "suffix": f"key ending ...{KEY[-14:]}",
        "bytes repr": repr((b"authorization", f"Bearer {KEY}".encode())),
        "json": json.dumps({"k": KEY}),
    }
    for name, text in echoes.items():
        cleaned = secrets.scrub(text)
        assert "***" in cleaned, name
        for fragment in (KEY, KEY.upper(), KEY[:12], KEY[-14:],
                         base64.b64encode(KEY.encode()).decode()[4:20]):
            assert fragment.lower() not in cleaned.lower(), (name, cleaned)
    assert secrets.scrub("sk-Live is a prefix of nothing") == "sk-Live is a prefix of nothing"


def test_short_passwords_are_masked_as_whole_tokens():
    from tracker.core import secrets

    secrets.learn_environ({"GPU_TRACKER_SMTP_PASSWORD": "pw1"})
    assert secrets.scrub("535 auth failed for pw1, try again") == \
        "535 auth failed for ***, try again"
    assert secrets.scrub("apw12 pw1x") == "apw12 pw1x"  # not inside other words
    secrets.learn_config({"smtp": {"password": "abcd"}, "report": {"sort_key": "gpu"}})
    assert secrets.scrub("abcd gpu") == "*** gpu"


def test_webhook_tokens_are_masked_as_an_http_client_rewrites_them():
    import httpx

    from tracker.core import secrets

    url = "https://hooks.example.com/services/T0ABC/B0DEF/xYz Token~1"
    secrets.learn_url(url)
    logged = f'HTTP Request: POST {httpx.URL(url)} "HTTP/1.1 500 Internal Server Error"'
    assert "xYz" not in secrets.scrub(logged)
    assert "B0DEF" not in secrets.scrub(url)


ADVERSARIAL = ("a" * 20_000, "a://" * 5_000, "Bearer " * 3_000, "?key=a&" * 3_000,
               "://u:" * 4_000, (KEY[:-2] + " ") * 800, "x" * 9_000 + "://" + "y" * 9_000 + ":")


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda t: repr(t[:8]))
def test_scrubber_takes_no_time_on_adversarial_text(text: str):
    """~200 KB of each run the old patterns backtracked on: well under a second now (tens of
    milliseconds), where the main of 2026-12-01 took ~19 s for 40 KB of letters and grew with
    the square. The figure itself is bench/scrubber.py's (10 MB, linear)."""
    from tracker.core import secrets

    secrets.learn([KEY, "hunter2-password"])
    secrets.learn(["pw9"], short=True)
    sample = text * (200_000 // len(text) + 1)
    start = time.perf_counter()
    secrets.scrub(sample)
    assert time.perf_counter() - start < 2.0


def test_a_5_mb_error_body_is_scrubbed_in_seconds():
    from tracker.core import secrets

    secrets.learn([KEY])
    body = ("error " + "q" * 5_000_000 + f" key {KEY}")
    start = time.perf_counter()
    cleaned = secrets.scrub(body)
    assert time.perf_counter() - start < 5
    assert cleaned.endswith("key ***")


# -- the output writer ---------------------------------------------------------------------

def _focus(sqlite_url: str, out: str):
    from tracker.store.db import open_database

    open_database(sqlite_url)
    return _invoke(sqlite_url, "export", "focus", "--out", out)


@pytest.mark.parametrize("device", ["full", "null", "stdout"])
def test_export_refuses_a_device_and_leaves_it_a_device(tmp_path: Path, sqlite_url: str,
                                                        device: str):
    """Made in tmp_path, never the real /dev nodes: on code with the bug (run as root) the
    export would turn the target into a regular file, and /dev/null with it."""
    target = tmp_path / device
    if device == "stdout":
        target.symlink_to("/proc/self/fd/1")  # what /dev/stdout is
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        minor = {"null": 3, "full": 7}[device]
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    before = os.lstat(target)
    result = _focus(sqlite_url, str(target))
    assert result.exit_code != 0
    assert "not a regular file" in result.stderr and len(result.stderr.splitlines()) == 1
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (
        before.st_mode, before.st_ino, before.st_rdev)
    assert not stat.S_ISREG(after.st_mode)


def test_export_never_writes_through_a_planted_temporary_symlink(tmp_path: Path,
                                                                  sqlite_url: str):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "prices.csv"
    (tmp_path / ".prices.csv.tmp").symlink_to(victim)
    result = _focus(sqlite_url, str(out))
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious\n"
    assert out.read_text().startswith("BilledCost,") or out.read_text().count("\n") >= 1
    assert stat.S_ISREG(os.lstat(out).st_mode)
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".prices"))
    assert leftovers == [".prices.csv.tmp"]  # the planted link, untouched; nothing of ours


def test_export_refuses_a_symlink_fifo_or_directory_target(tmp_path: Path, sqlite_url: str):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "link.csv"
    link.symlink_to(victim)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    (tmp_path / "dir.csv").mkdir()
    for target, kind in ((link, "symbolic link"), (fifo, "FIFO"),
                         (tmp_path / "dir.csv", "directory")):
        result = _focus(sqlite_url, str(target))
        assert result.exit_code != 0, target
        assert kind in result.stderr and len(result.stderr.splitlines()) == 1
    assert victim.read_text() == "precious\n" and link.is_symlink()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_the_writer_replaces_a_regular_file_whole_or_not_at_all(tmp_path: Path):
    from tracker.core.output_files import write_atomically

    out = tmp_path / "sub" / "out.bin"
    write_atomically(out, b"first")
    assert out.read_bytes() == b"first" and (os.stat(out).st_mode & 0o777) == 0o644

    def failing(handle):
        handle.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_atomically(out, failing)
    assert out.read_bytes() == b"first"
    assert [p.name for p in out.parent.iterdir()] == ["out.bin"]


def test_the_report_archive_refuses_a_planted_non_regular_target(tmp_path: Path):
    from reports.archive import publish_with_rows
    from tracker.core.errors import InvalidInput
    from tracker.store.db import open_database

    db = open_database(f"sqlite:///{tmp_path / 't.db'}")
    week = tmp_path / "out" / "2026-W48"
    week.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (week / "r.csv").symlink_to(victim)
    paths = {k: week / f"r.{k}" for k in ("json", "csv", "html")}
    with pytest.raises(InvalidInput, match="symbolic link"):
        publish_with_rows(db, "2026-W48", paths, {k: b"x" for k in paths}, NOW)
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in week.iterdir()) == ["r.csv"]  # nothing else written


# -- the report subject --------------------------------------------------------------------

@pytest.mark.parametrize("subject", ["{week.__class__.__mro__}", "{week[0]}", "{week!r}",
                                     "{0}", "{}", "{secret}", "GPU {week", "{week:{x}}",
                                     "two\nlines"])
def test_a_bad_subject_is_refused_when_the_configuration_loads(tmp_path: Path, subject: str):
    from tracker.config.schema import load_config
    from tracker.core.errors import InvalidInput

    path = tmp_path / "config.toml"
    path.write_text(f"[report]\nsubject = {json.dumps(subject)}\n")
    with pytest.raises(InvalidInput, match="subject"):
        load_config(path, environ={})


def test_the_subject_fills_only_its_fields():
    from reports.mail import subject_values
    from tracker.config.checks import fill_subject

    values = subject_values({"week": "2026-W48", "currency": "EUR"})
    assert fill_subject("GPU {{prices}} {week} ({start} to {end}, {currency}) #{week_number} "
                        "{year}", values) == \
        "GPU {prices} 2026-W48 (2026-11-23 to 2026-11-29, EUR) #48 2026"


# -- trusted URLs and redirects ------------------------------------------------------------

@pytest.mark.parametrize(("entry", "url", "trusted"), [
    ("http://prices.example/", "http://prices.example/x", True),
    ("http://prices.example", "http://prices.example/x", True),
    ("http://prices.example:80/", "http://prices.example/x", True),
    ("http://prices.example/", "http://prices.example.evil.com/x", False),
    ("http://prices.example/", "http://prices.example:8080/x", False),
    ("http://prices.example/", "https://prices.example/x", False),
    ("http://prices.example/", "http://user@evil.example/prices.example/", False),
    ("http://127.0.0.1:8080/api", "http://127.0.0.1:8080/api/v1", True),
    ("http://127.0.0.1:8080/api", "http://127.0.0.1:8080/apix", False),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:80800/", False),
])
def test_trusted_urls_match_scheme_host_and_port_exactly(entry: str, url: str, trusted: bool):
    from scrapers.http import trusted_match

    assert trusted_match(entry, url) is trusted


def test_a_keyed_request_is_not_sent_over_http_to_a_lookalike_host():
    import httpx

    from scrapers.http import HttpClient
    from tracker.core.errors import SourceError
    from tracker.core.http_settings import HttpSettings

    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    settings = HttpSettings(trusted_urls=("http://prices.example",))
    with HttpClient(settings, transport=transport) as client:
        with pytest.raises(SourceError, match="refusing to send an API key"):
            client.get_json("http://prices.example.evil.com/x",
                            headers={"Authorization": "Bearer k"})
        assert client.get_json("http://prices.example/x",
                               headers={"Authorization": "Bearer k"}) == {}


def _redirecting(location: str):
    import httpx

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.path == "/start":
            return httpx.Response(302, headers={"Location": location})
        return httpx.Response(200, json={"at": str(request.url)})

    return httpx.MockTransport(handler), seen


@pytest.mark.parametrize(("location", "keyed", "message"), [
    ("https://other.example/done", True, "with an API key"),
    ("http://api.example:8443/done", True, "with an API key"),
    ("http://127.0.0.1:9/done", False, "internal address 127.0.0.1"),
    ("http://169.254.169.254/latest/meta-data/", False, "internal address 169.254.169.254"),
    ("http://[::1]/done", False, "internal address"),
    ("http://10.1.2.3/done", False, "internal address"),
    ("file:///etc/passwd", False, "file: URL"),
])
def test_redirects_off_policy_are_refused(location: str, keyed: bool, message: str):
    from scrapers.http import HttpClient
    from tracker.core.errors import SourceError

    transport, seen = _redirecting(location)
    headers = {"Authorization": f"Bearer {KEY}"} if keyed else None
    with HttpClient(transport=transport) as client, \
            pytest.raises(SourceError, match=message) as caught:
        client.get_json("https://api.example/start", headers=headers)
    assert seen == ["https://api.example/start"]  # the target was never requested
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(("start", "location"), [
    ("https://api.example/start", "/done"),
    ("https://api.example/start", "https://api.example/done"),
    ("http://api.example/start", "https://api.example/done"),
])
def test_redirects_within_the_origin_are_followed_with_the_key(start: str, location: str):
    from scrapers.http import HttpClient
    from tracker.core.http_settings import HttpSettings

    transport, seen = _redirecting(location)
    settings = HttpSettings(trusted_urls=("http://api.example/",))
    with HttpClient(settings, transport=transport) as client:
        body = client.get_json(start, headers={"Authorization": "Bearer k"})
    assert body == {"at": "https://api.example/done"} and len(seen) == 2


def test_a_loopback_source_may_redirect_on_loopback():
    from scrapers.http import HttpClient

    transport, _seen = _redirecting("http://127.0.0.1:9/done")
    with HttpClient(transport=transport) as client:
        assert client.get_json("http://127.0.0.1:8/start") == {"at": "http://127.0.0.1:9/done"}


def test_a_repr_escaped_key_in_a_debug_log_record_is_masked():
    import logging

    from tracker.core import secrets

    odd = "k'ey\\with\"quotes-12345"
    secrets.learn([odd])
    record = logging.LogRecord("httpcore.http11", logging.DEBUG, __file__, 1,
                               "send_request_headers.started request=%r headers=%r", (
                                   "<Request [b'GET']>",
                                   [(b"authorization", odd.encode()), (b"x-key", odd)]),
                               None)
    secrets.ScrubbingFilter().filter(record)
    text = record.getMessage()
    assert "12345" not in text and "quotes" not in text and "***" in text
