"""Hardening (issue #14): bad input, faults, interrupts and secrets, end to end.

- A table-driven bad-input suite: command x option x class of bad value, each asserting the
  exit code, exactly one line on stderr, no traceback, and an unchanged database.
- Faults with real processes: a SQLite lock held by another process, a read-only file
  system, a full one (tmpfs the test mounts; skipped with the reason where mounting is
  impossible), SIGINT/SIGTERM once and twice during a slow loopback refresh.
- The secret-echo case: a provider answering with the request's key in its error message;
  the key must appear in no output, row, log, report or mail.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli

from .helpers import mounted_tmpfs
from .loopback import LoopbackServer, Reply, free_port

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "lk-SECRET-9f8e7d6c5b4a"
QUOTES_HEADER = ("provider,instance_type,gpu,gpu_count,category,price_per_hour,currency,"
                 "valid_from\n")


@pytest.fixture(autouse=True)
def _forget_secrets():
    """The scrubber's registry is process-wide: what one test teaches it must not mask
    another test's output (the property test learns hundreds of random values)."""
    yield
    from tracker.core import secrets

    secrets.forget_all()


def _invoke(db_url: str, *args: str, env: dict | None = None):
    return CliRunner().invoke(cli, ["--db", db_url, *args], env=env or {},
                              catch_exceptions=False)


def _digest(path: Path) -> str:
    """Content of every table (not the file bytes: SQLite may touch its header on open)."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        h = hashlib.sha256()
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
                h.update(repr(row).encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def loaded_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bad-input") / "tracker.db"
    result = CliRunner().invoke(cli, ["--db", f"sqlite:///{path}", "refresh", "--source",
                                      "bundled", "--format", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return path


# -- the bad-input table ----------------------------------------------------------------------

MALFORMED = ("abc", "1.2.3", "", "0x10", "12abc")
HUGE = ("1e300", "1e40")
NEGATIVE = ("-1", "-1e9")

COST = ("cost", "--price-per-gpu-hour", "4", "--hours", "10")
SPOT = ("spot", "--work-hours", "100", "--checkpoint-minutes", "5", "--restart-minutes", "10",
        "--mtti-hours", "20", "--spot-price", "10", "--on-demand-price", "30")
BREAKEVEN = ("breakeven", "--capex", "300000", "--power-kw", "10", "--utilization", "0.5",
             "--cloud-price-per-hour", "29")

# (base command, option, values): every value must be a usage error (exit 2).
BAD_INPUT: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = [
    (("prices",), "--max-price", MALFORMED + NEGATIVE + HUGE),
    (("prices",), "--min-gpus", MALFORMED + NEGATIVE + ("1e12",)),
    (("prices",), "--limit", MALFORMED + NEGATIVE + ("0", "1e9", "2.5")),
    (("prices",), "--as-of", ("last tuesday", "2026-13-01", "")),
    (("prices",), "--category", ("bogus", "")),
    (("history", "--gpu", "h100"), "--category", ("bogus",)),
    (("history", "--gpu", "h100"), "--since", ("yesterday-ish",)),
    (("compare", "--hours", "10"), "--limit", MALFORMED + NEGATIVE + ("0",)),
    (("compare", "--hours", "10"), "--max-gpus", MALFORMED + NEGATIVE + ("0", "1e12")),
    (COST, "--hours", MALFORMED + NEGATIVE + HUGE + ("0", "inf", "nan")),
    (COST, "--count", MALFORMED + NEGATIVE + ("0", "1e12")),
    (COST, "--price-per-gpu-hour", MALFORMED + NEGATIVE + ("1e30",)),
    (COST, "--tokens", MALFORMED + NEGATIVE + ("1e30",)),
    (COST, "--success-rate", MALFORMED + NEGATIVE + ("0", "1.5")),
    (COST, "--parallel", MALFORMED + NEGATIVE + ("0",)),
    (SPOT, "--work-hours", MALFORMED + NEGATIVE + HUGE),
    (SPOT, "--mtti-hours", MALFORMED + NEGATIVE + ("0",)),
    (SPOT, "--nodes", MALFORMED + NEGATIVE + ("0", "1e12")),
    (SPOT, "--spot-price", MALFORMED + NEGATIVE + ("1e30",)),
    (BREAKEVEN, "--capex", MALFORMED + NEGATIVE + HUGE),
    (BREAKEVEN, "--utilization", MALFORMED + NEGATIVE + ("0", "40", "1.01")),
    (BREAKEVEN, "--horizon-months", MALFORMED + NEGATIVE + ("0", "100000")),
    (BREAKEVEN, "--discount-rate", (*MALFORMED, "-2", "1e9")),
    (BREAKEVEN, "--count", MALFORMED + NEGATIVE + ("0", "1e12")),
    (("size", "--model", "llama-3.1-8b"), "--count", MALFORMED + NEGATIVE + ("0", "1e12")),
    (("size", "--model", "llama-3.1-8b"), "--micro-batch", MALFORMED + NEGATIVE + ("0",)),
    (("refresh", "--source", "bundled"), "--wait", MALFORMED + NEGATIVE),
    (("status",), "--stale-after", MALFORMED + NEGATIVE),
    (("schedule", "list"), "--count", MALFORMED + NEGATIVE + ("0", "1000")),
    (("history", "--gpu", "h100"), "--until", ("soon", "2026-02-30")),
    (("compare", "--hours", "10"), "--category", ("bogus",)),
    (("compare", "--hours", "10"), "--as-of", ("when",)),
    (COST, "--mfu", (*MALFORMED, "0", "1.5", "-0.1")),
    (COST, "--billing-seconds", (*MALFORMED, "0", "-5")),
    (COST, "--experiments", (*MALFORMED, "0", "-1")),
    (COST, "--category", ("bogus",)),
    (SPOT, "--checkpoint-minutes", (*MALFORMED, *NEGATIVE, "1e300")),
    (SPOT, "--restart-minutes", (*MALFORMED, *NEGATIVE)),
    (SPOT, "--notice-seconds", (*MALFORMED, *NEGATIVE)),
    (SPOT, "--deadline-hours", (*MALFORMED, *NEGATIVE, "0")),
    (BREAKEVEN, "--pue", (*MALFORMED, *NEGATIVE, "1e6")),
    (BREAKEVEN, "--hours-per-month", (*MALFORMED, *NEGATIVE, "0", "800")),
    (BREAKEVEN, "--residual-fraction", (*MALFORMED, *NEGATIVE, "1.5")),
    (BREAKEVEN, "--depreciation-years", (*MALFORMED, *NEGATIVE, "0", "1000")),
    (BREAKEVEN, "--kwh-price", (*MALFORMED, *NEGATIVE, "1e20")),
    (("size", "--model", "llama-3.1-8b"), "--context", (*MALFORMED, *NEGATIVE, "0")),
    (("size", "--model", "llama-3.1-8b"), "--mfu", (*MALFORMED, "0", "2")),
    (("size", "--model", "llama-3.1-8b"), "--precision", ("fp3", "")),
    (("size", "--model", "llama-3.1-8b"), "--tokens", ("abc", "-5", "7X")),
    (("report", "weekly"), "--week", ("48", "2026-W99", "bogus")),
    (("report", "send", "--to", "a@example.com"), "--week", ("48",)),
    (("backfill", "skypilot", "--cloud", "aws"), "--since", ("yesterday",)),
    (("backfill", "skypilot", "--cloud", "aws"), "--wait", (*MALFORMED, *NEGATIVE)),
    (("index",), "--max-age-hours", (*MALFORMED, *NEGATIVE, "0", "1e300")),
    (("index",), "--since", ("someday",)),
    (("index",), "--category", ("bogus",)),
    (("prices",), "--currency", ("EURO", "12", "xx")),
    (("alerts", "history"), "--limit", (*MALFORMED, *NEGATIVE, "0")),
]
CASES = [(base, option, value) for base, option, values in BAD_INPUT for value in values]


def test_bad_input_table(loaded_db: Path, capsys):
    """Every case: exit 2, one line on stderr naming the option, no traceback, no writes."""
    before = _digest(loaded_db)
    failures = []
    for base, option, value in CASES:
        args = [*base, option, value]
        result = _invoke(f"sqlite:///{loaded_db}", *args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        ok = (result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output
              and lines[0].startswith("Error: "))
        if not ok:
            failures.append((args, result.exit_code, result.stderr))
    assert _digest(loaded_db) == before, "a rejected command changed the database"
    assert not failures, "\n".join(map(repr, failures[:10]))
    with capsys.disabled():
        print(f"\nbad-input suite: {len(CASES)} cases tried "
              f"({len(BAD_INPUT)} command x option pairs)")


def test_unknown_names_say_what_exists(loaded_db: Path):
    url = f"sqlite:///{loaded_db}"
    result = _invoke(url, "prices", "--provider", "nosuch")
    assert result.exit_code == 2  # a name no source uses: a usage error
    assert result.stderr.strip().startswith("Error: unknown provider 'nosuch'; the store has: ")
    assert "aws" in result.stderr
    history = _invoke(url, "history", "--gpu", "h100", "--category", "bogus")
    assert history.exit_code == 2 and "'on-demand'" in history.stderr


def test_read_only_commands_refuse_a_missing_database(tmp_path: Path):
    for db in (str(tmp_path / "typo.db"), "notaurl", f"sqlite:///{tmp_path}/a/b/c.db"):
        for args in (["prices"], ["sources"], ["status"], ["report", "list"]):
            result = CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)
            assert result.exit_code == 1, (db, args, result.output)
            assert "run `gpu-tracker init`" in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "typo.db").exists() and not (tmp_path / "a").exists()
    assert not Path("notaurl").exists()


def test_non_utf8_config_is_one_line(tmp_path: Path, sqlite_url: str):
    config = tmp_path / "config.toml"
    config.write_bytes(b"[refresh]\nsources = [\"caf\xe9\"]\n")
    result = _invoke(sqlite_url, "--config", str(config), "config", "show")
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "UTF-8" in result.stderr


# -- CSV guard -------------------------------------------------------------------------------

def test_csv_guard_and_quotes_refuse_formulas(tmp_path: Path, sqlite_url: str):
    from tracker.cli.commands.printing import render_csv
    from tracker.core.serialization import csv_safe

    assert csv_safe("=cmd|' /C calc'!A0") == "'=cmd|' /C calc'!A0"
    assert [csv_safe(v) for v in ("+1+1", "@SUM(A1)", "-x", "\tx", "-0.2", "1e-05", "ok")] == [
        "'+1+1", "'@SUM(A1)", "'-x", "'\tx", "-0.2", "1e-05", "ok"]
    assert render_csv([{"a": "=1+2"}]) == "a\n'=1+2"
    quotes = tmp_path / "quotes.csv"
    quotes.write_text(QUOTES_HEADER
                      + "acme,=cmd|' /C calc'!A0,h100,8,on-demand,20,USD,2026-11-01\n")
    result = _invoke(sqlite_url, "import", str(quotes))
    assert result.exit_code == 1
    assert "line 2" in result.stderr and "instance_type" in result.stderr
    assert "spreadsheet formula" in result.stderr


# -- secrets ---------------------------------------------------------------------------------

def test_scrubber_masks_learned_values_and_credential_shapes():
    from tracker.core import secrets

    secrets.learn([SECRET])
    assert secrets.scrub(f"bad key Bearer {SECRET}") == "bad key Bearer ***"
    assert secrets.scrub(f"key={SECRET}&x=1") == "key=***&x=1"
    assert secrets.scrub("postgresql://u:hunter2pw@db/x") == "postgresql://u:***@db/x"
    assert secrets.scrub("Authorization: Basic dXNlcjpwYXNz") == "Authorization: Basic ***"
    assert secrets.scrub_tree({"a": [f"x{SECRET}y"]}) == {"a": ["x***y"]}


def test_a_secret_in_a_mapping_key_is_masked_too():
    """A key can carry what a value can (a provider's name, a URL): the job summaries'
    scrub_tree and the report's versioned documents mask keys as they mask values."""
    from tracker.core import secrets
    from tracker.core.serialization import versioned_document

    secrets.learn([SECRET])
    tree = {f"https://api.example/?key={SECRET}": 1, 2: f"x{SECRET}", "plain": "ok"}
    assert secrets.scrub_tree(tree) == {"https://api.example/?key=***": 1, 2: "x***",
                                        "plain": "ok"}
    document = versioned_document("test", 1, {"by_url": tree})
    assert SECRET not in json.dumps(document)
    assert document["by_url"] == {"https://api.example/?key=***": 1, "2": "x***",
                                  "plain": "ok"}


def test_key_only_over_https_unless_trusted():
    import httpx

    from scrapers.http import HttpClient
    from tracker.core.errors import SourceError
    from tracker.core.http_settings import HttpSettings

    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    with HttpClient(transport=transport) as client:
        with pytest.raises(SourceError, match="refusing to send an API key over plain http"):
            client.get_json("http://prices.example/x", headers={"Authorization": "Bearer k"})
        assert client.get_json("https://prices.example/x",
                               headers={"Authorization": "Bearer k"}) == {}
        assert client.get_json("http://prices.example/open") == {}  # no key: fine
    trusted = HttpSettings(trusted_urls=("http://prices.example/",))
    with HttpClient(trusted, transport=transport) as client:
        assert client.get_json("http://prices.example/x",
                               headers={"Authorization": "Bearer k"}) == {}


def test_secret_echo_reaches_no_output_row_log_report_or_mail(tmp_path: Path, sqlite_url: str):
    """Lambda answers HTTP 200 with an error echoing the request's bearer key."""
    echo = json.dumps({"error": {"code": "global/invalid-api-key",
                                 "message": f"bad key Bearer {SECRET}"}}).encode()
    with LoopbackServer() as server:
        server.route("/lambda/instance-types", Reply(echo))
        env = {"GPU_TRACKER_LAMBDA_API_KEY": SECRET,
               "GPU_TRACKER_SOURCE_LAMBDA_URL": f"{server.url}/lambda/instance-types",
               "GPU_TRACKER_HTTP_TRUSTED_URLS": server.url, "GPU_TRACKER_HTTP_RETRIES": "0",
               "GPU_TRACKER_SMTP_PASSWORD": "smtp-" + SECRET[::-1]}
        outputs = [_invoke(sqlite_url, "-vv", "refresh", "--source", "bundled", "--source",
                           "lambda", env=env)]
        assert outputs[0].exit_code == 3, outputs[0].output  # lambda failed, bundled ok
        assert "bad key Bearer ***" in outputs[0].stderr
    out_dir = tmp_path / "reports"
    for args in (["sources"], ["sources", "--format", "json"], ["status", "--format", "json"],
                 ["schedule", "list", "--format", "json"], ["config", "show"],
                 ["report", "weekly", "--out", str(out_dir)]):
        outputs.append(_invoke(sqlite_url, "-vv", *args, env=env))
    for result in outputs:
        assert SECRET not in result.output, result.output
        assert SECRET[::-1] not in result.output, result.output
    files = [p for p in out_dir.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        dump = "\n".join(conn.iterdump())
    assert "bad key Bearer ***" in dump and SECRET not in dump
    from reports.mail import render_mail

    document = json.loads(next(p for p in files if p.suffix == ".json").read_text())
    parts = render_mail(document)
    assert all(SECRET not in text for text in (parts.subject, parts.html, parts.text,
                                               parts.csv.decode()))


# -- faults with real processes ----------------------------------------------------------------

def _cli(*args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    full_env = {**os.environ, **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "tracker", *args], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def _one_line_failure(proc: subprocess.Popen, code: int = 1, timeout: float = 60) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == code, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def _import_refused_while_locked(url: str, tmp_path: Path, holder: list[str]) -> None:
    """`holder` is a process that takes the database's lock, prints `locked` and keeps it; an
    `import` meanwhile, with a 1 s lock timeout, fails in one line naming the lock, promptly."""
    process = subprocess.Popen(holder, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "locked"
        quotes = tmp_path / "quotes.csv"
        quotes.write_text(QUOTES_HEADER + "acme,box-8,h100-sxm,8,on-demand,20,USD,2026-11-01\n")
        started = time.monotonic()
        line = _one_line_failure(_cli("--db", url, "import", str(quotes),
                                      env={"GPU_TRACKER_DB_LOCK_TIMEOUT": "1"}))
        assert "locked" in line, line
        assert time.monotonic() - started < 30
    finally:
        process.kill()
        process.wait()


def test_sqlite_lock_held_by_another_process(tmp_path: Path):
    db = tmp_path / "tracker.db"
    url = f"sqlite:///{db}"
    assert _invoke(url, "init").exit_code == 0
    _import_refused_while_locked(url, tmp_path, [
        sys.executable, "-c", "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(60)"])


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 2 MB tmpfs mounted for the test (root only), unmounted afterwards."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    with mounted_tmpfs(mount, "2m"):
        yield mount


def test_read_only_file_system_is_one_line(tiny_fs: Path):
    url = f"sqlite:///{tiny_fs / 'tracker.db'}"
    assert _invoke(url, "refresh", "--source", "bundled").exit_code == 0
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    try:
        for args in (["refresh", "--source", "bundled"], ["init"],
                     ["report", "weekly", "--out", str(tiny_fs / "out")]):
            line = _one_line_failure(_cli("--db", url, *args))
            assert "read-only" in line or "readonly" in line, (args, line)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tiny_fs)], check=True)


def test_full_disk_leaves_no_half_written_report(tiny_fs: Path, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    assert _invoke(url, "refresh", "--source", "bundled").exit_code == 0
    filler = tiny_fs / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:  # fill it to the brim
        out.write(b"\0" * (2 * 1024 * 1024))
    line = _one_line_failure(_cli("--db", url, "report", "weekly", "--out", str(tiny_fs)))
    assert "disk is full" in line, line
    assert not [p for p in tiny_fs.rglob("*") if p.is_file() and p != filler]
    listed = _invoke(url, "report", "list", "--format", "json")
    assert json.loads(listed.stdout) == []


def _slow_vastai(server: LoopbackServer, delay: float) -> dict:
    server.route("/vastai/bundles/", Reply.file(FIXTURES / "vastai" / "bundles.json",
                                                delay=delay))
    return {"GPU_TRACKER_SOURCE_VASTAI_URL": f"{server.url}/vastai/bundles/",
            "GPU_TRACKER_HTTP_RETRIES": "0"}


def _wait_for_request(server: LoopbackServer, path: str, timeout: float = 30) -> None:
    """Until the refresh is under way (its signal handlers are then in place)."""
    deadline = time.monotonic() + timeout
    while server.hits(path) == 0:
        assert time.monotonic() < deadline, "the refresh never reached the server"
        time.sleep(0.05)


def _runs(db: Path) -> tuple[list[tuple], list[tuple]]:
    with sqlite3.connect(db) as conn:
        ingest = conn.execute("SELECT source, status FROM ingest_run ORDER BY id").fetchall()
        jobs = conn.execute("SELECT job, status FROM job_run ORDER BY id").fetchall()
    return ingest, jobs


@contextlib.contextmanager
def _refresh_signalled(tmp_path: Path, signum: int, vastai_delay: float):
    """A `refresh` of vastai (its reply held `vastai_delay` s) and bundled in a fresh database,
    sent `signum` once while vastai's request is in flight; yields (process, database file,
    URL) with the slow server still up."""
    db = tmp_path / "tracker.db"
    url = f"sqlite:///{db}"
    assert _invoke(url, "init").exit_code == 0
    with LoopbackServer() as server:
        env = _slow_vastai(server, delay=vastai_delay)
        proc = _cli("--db", url, "refresh", "--source", "vastai", "--source", "bundled",
                    "--format", "json", env=env)
        _wait_for_request(server, "/vastai/bundles/")
        time.sleep(0.3)
        proc.send_signal(signum)
        yield proc, db, url


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_one_signal_lets_running_sources_finish(tmp_path: Path, signum: int):
    with _refresh_signalled(tmp_path, signum, vastai_delay=2.0) as (proc, db, _url):
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    summary = {row["source"]: row["status"] for row in json.loads(out)}
    assert summary == {"vastai": "ok", "bundled": "ok"}  # both finished within the grace
    ingest, jobs = _runs(db)
    assert sorted(ingest) == [("bundled", "ok"), ("vastai", "ok")]
    assert jobs == [("refresh", "interrupted")]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_second_signal_aborts_and_rolls_back(tmp_path: Path, signum: int):
    with _refresh_signalled(tmp_path, signum, vastai_delay=20.0) as (proc, db, url):
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - started < 10  # at once, not after the 20 s reply
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "client has been closed" not in err
    summary = {row["source"]: row["status"] for row in json.loads(out)}
    assert summary == {"vastai": "interrupted", "bundled": "ok"}
    ingest, jobs = _runs(db)
    assert ingest == [("bundled", "ok")]  # exactly the committed run, nothing of vastai
    assert jobs == [("refresh", "interrupted")]
    status = _invoke(url, "sources", "--format", "json")
    assert {r["source"]: r["last_status"] for r in json.loads(status.stdout)}["bundled"] == "ok"


# -- a PostgreSQL server of the test's own, stopped mid-refresh and restarted -----------------

@pytest.fixture
def own_postgres():
    """initdb in a temporary directory, a server on its own port; yields (url, stop, start)."""
    import glob
    import shutil
    import tempfile

    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries:
        pytest.skip("no initdb under /usr/lib/postgresql/*/bin")
    bindir = Path(binaries[-1]).parent
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root; run the server as the postgres user
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        as_user = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="gt-pg-"))
    data = base / "data"
    if as_user:
        shutil.chown(base, "postgres")
    port = free_port()
    done = subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust",
                           "-U", "postgres", "--no-sync"], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"initdb failed: {done.stderr.strip().splitlines()[-1:]}")
    ctl = [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w"]
    options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"

    def start() -> None:
        subprocess.run([*ctl, "-o", options, "start"], check=True, capture_output=True)

    def stop() -> None:
        subprocess.run([*ctl, "-m", "immediate", "stop"], capture_output=True)

    start()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres", stop, start
    finally:
        stop()
        shutil.rmtree(base, ignore_errors=True)


def _pg_runs(url: str) -> tuple[list[tuple], list[tuple]]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            ingest = [tuple(r) for r in conn.execute(text(
                "SELECT source, status FROM ingest_run ORDER BY id"))]
            jobs = [tuple(r) for r in conn.execute(text(
                "SELECT job, status FROM job_run ORDER BY id"))]
    finally:
        engine.dispose()
    return ingest, jobs


@pytest.mark.slow
def test_postgres_server_stopped_mid_refresh_and_restarted(own_postgres):
    url, stop, start = own_postgres
    assert _invoke(url, "init").exit_code == 0
    with LoopbackServer() as server:
        env = _slow_vastai(server, delay=3.0)
        proc = _cli("--db", url, "-q", "refresh", "--source", "bundled", "--source", "vastai",
                    env={**env, "GPU_TRACKER_REFRESH_MAX_WORKERS": "1"})
        _wait_for_request(server, "/vastai/bundles/")  # bundled committed, vastai in flight
        stop()
        line = _one_line_failure(proc, code=1)
    assert "unreachable" in line or "failed" in line, line
    start()
    ingest, jobs = _pg_runs(url)
    assert ingest == [("bundled", "ok")]  # exactly the committed run; nothing of vastai
    assert jobs == [("refresh", "running")]  # its end could not be written ...
    again = _invoke(url, "refresh", "--source", "bundled")
    assert again.exit_code == 0, again.output
    _ingest, jobs = _pg_runs(url)
    assert jobs[0] == ("refresh", "abandoned")  # ... and the next run marks it
    assert jobs[-1] == ("refresh", "ok")


# -- silent wrong states -----------------------------------------------------------------------

def test_missing_key_is_skipped_not_ok(sqlite_url: str):
    result = _invoke(sqlite_url, "refresh", "--source", "lambda", "--format", "json")
    assert result.exit_code == 0, result.output
    assert [r["status"] for r in json.loads(result.stdout)] == ["skipped"]
    path = Path(sqlite_url.removeprefix("sqlite:///"))
    assert _runs(path) == ([("lambda", "skipped")], [("refresh", "skipped")])
    status = json.loads(_invoke(sqlite_url, "status", "--source", "lambda", "--format",
                                "json").stdout)
    lam = next(s for s in status["sources"] if s["source"] == "lambda")
    assert lam["state"] == "skipped" and "GPU_TRACKER_LAMBDA_API_KEY" in lam["last_error"]


def test_dead_process_jobs_are_marked_abandoned_when_seen(sqlite_url: str):
    import socket

    from tracker.store.db import open_database
    from tracker.store.jobs import _insert, job_runs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    db = open_database(sqlite_url)
    try:
        _insert(db, job="refresh", trigger="scheduler", host=socket.gethostname(),
                started_at=datetime_now(), finished_at=None, status="running",
                summary={"locks": ["refresh:aws"], "pid": dead.pid}, error=None)
        _insert(db, job="report", trigger="scheduler", host="another-host",
                started_at=datetime_now(), finished_at=None, status="running",
                summary={"locks": ["report"], "pid": dead.pid}, error=None)
        assert _invoke(sqlite_url, "schedule", "list", "--format", "json").exit_code == 0
        rows = {r.job: r for r in job_runs(db)}
    finally:
        db.close()
    assert rows["refresh"].status == "abandoned" and f"pid {dead.pid}" in rows["refresh"].error
    assert rows["report"].status == "running"  # another host's pid says nothing here


def datetime_now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def test_report_send_refuses_a_week_without_prices(loaded_db: Path, tmp_path: Path):
    result = _invoke(f"sqlite:///{loaded_db}", "report", "send", "--to", "ops@example.com",
                     "--week", "2020-W01", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output  # the week is a usage error (issue 29)
    assert "week 2020-W01 has no prices in the store; give a week from " in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unwritable_report_dir_and_corrupt_database_are_one_line(loaded_db: Path,
                                                                 tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = _invoke(f"sqlite:///{loaded_db}", "report", "weekly", "--out",
                     str(blocker / "sub"))
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    result = _invoke(f"sqlite:///{corrupt}", "prices")
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "corrupt" in lines[0] and "sqlalche.me" not in lines[0]


def test_signal_while_a_source_waits_for_a_worker(tmp_path: Path):
    """One worker: vastai in flight, bundled queued. The stop starts nothing new."""
    db = tmp_path / "tracker.db"
    url = f"sqlite:///{db}"
    assert _invoke(url, "init").exit_code == 0
    with LoopbackServer() as server:
        env = _slow_vastai(server, delay=2.0) | {"GPU_TRACKER_REFRESH_MAX_WORKERS": "1"}
        proc = _cli("--db", url, "refresh", "--source", "vastai", "--source", "bundled",
                    "--format", "json", env=env)
        _wait_for_request(server, "/vastai/bundles/")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, (out, err)
    summary = {row["source"]: (row["status"], row["error"]) for row in json.loads(out)}
    assert summary["vastai"] == ("ok", None)
    assert summary["bundled"][0] == "interrupted" and "before it started" in summary["bundled"][1]
    ingest, jobs = _runs(db)
    assert ingest == [("vastai", "ok")] and jobs == [("refresh", "interrupted")]
    with sqlite3.connect(db) as conn:
        [(summary_json,)] = conn.execute("SELECT summary FROM job_run").fetchall()
    assert json.loads(summary_json)["committed_sources"] == ["vastai"]


def test_postgres_lock_held_by_another_process(pg_url: str, tmp_path: Path):
    assert _invoke(pg_url, "init").exit_code == 0
    _import_refused_while_locked(pg_url, tmp_path, [
        sys.executable, "-c", "import sys, time\nfrom sqlalchemy import create_engine, text\n"
        "conn = create_engine(sys.argv[1]).connect()\n"
        "conn.execute(text('LOCK TABLE offer IN ACCESS EXCLUSIVE MODE'))\n"
        "print('locked', flush=True); time.sleep(60)", pg_url])
    ingest, _jobs = _pg_runs(pg_url)
    assert ingest == [("quotes", "failed")]  # the failure is on record, none of its data
    from sqlalchemy import create_engine, text

    engine = create_engine(pg_url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM offer")).scalar() == 0
    engine.dispose()


@pytest.mark.slow
def test_postgres_read_only_database_is_one_line(own_postgres, tmp_path: Path):
    url, _stop, _start = own_postgres
    assert _invoke(url, "refresh", "--source", "bundled").exit_code == 0
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text("ALTER DATABASE postgres SET default_transaction_read_only = on"))
    engine.dispose()
    before = _pg_runs(url)
    for args in (["refresh", "--source", "bundled"], ["init"],
                 ["report", "weekly", "--out", str(tmp_path / "out")]):
        line = _one_line_failure(_cli("--db", url, *args))
        assert "read-only" in line, (args, line)
    assert _pg_runs(url) == before
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.html"))


@pytest.mark.slow
def test_postgres_disk_full_is_one_line_and_rolls_back(own_postgres, tiny_fs_for_postgres):
    """The database lives in a tablespace on a small tmpfs that is then filled up."""
    url, _stop, _start = own_postgres
    from sqlalchemy import create_engine, text

    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE TABLESPACE tiny LOCATION '{tiny_fs_for_postgres}'"))
        conn.execute(text("CREATE DATABASE small TABLESPACE tiny"))
    admin.dispose()
    small = url.rsplit("/", 1)[0] + "/small"
    assert _invoke(small, "init").exit_code == 0
    filler = tiny_fs_for_postgres / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:
        out.write(b"\0" * (64 * 1024 * 1024))
    line = _one_line_failure(_cli("--db", small, "-q", "refresh", "--source", "bundled"))
    assert "full" in line, line
    filler.unlink()
    ingest, _jobs = _pg_runs(small)
    assert ("bundled", "ok") not in ingest  # nothing of the failed run committed
    engine = create_engine(small)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM offer")).scalar() == 0
    engine.dispose()


@pytest.fixture
def tiny_fs_for_postgres():
    """A 24 MB tmpfs the postgres user owns (a new database's catalog needs ~8 MB)."""
    import shutil
    import tempfile

    mount = Path(tempfile.mkdtemp(prefix="gt-pgfs-"))
    try:
        with mounted_tmpfs(mount, "24m"):
            if os.geteuid() == 0:
                shutil.chown(mount, "postgres")
            yield mount
    finally:
        shutil.rmtree(mount, ignore_errors=True)


def test_usage_errors_are_one_line_but_help_stays_help():
    runner = CliRunner()
    alone = runner.invoke(cli, [])
    assert "Usage: " in alone.output and "Commands" in alone.output  # help, not an error line
    for args in (["prices", "--limt", "3"], ["bogus"], ["spot"]):
        result = runner.invoke(cli, args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), args


# -- properties ----------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(secret=st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF),
                      min_size=6, max_size=40),
       before=st.text(max_size=30), after=st.text(max_size=30))
def test_a_learned_secret_never_survives_scrubbing(secret: str, before: str, after: str):
    from tracker.core import secrets

    secrets.learn([secret])
    assert secret not in secrets.scrub(before + secret + after + secret)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_a_guarded_csv_cell_never_starts_a_formula(text: str):
    from tracker.core.serialization import FORMULA_PREFIXES, _is_plain_number_text, csv_safe

    guarded = csv_safe(text)
    assert guarded[:1] not in set(FORMULA_PREFIXES) or _is_plain_number_text(guarded)
    if "'" not in text:  # only guards were added: taking them out gives the text back
        assert guarded.replace("'", "") == text


def test_learn_environ_takes_only_the_projects_secrets():
    from tracker.core import secrets

    secrets.learn_environ({"GPU_TRACKER_RUNPOD_API_KEY": "rp-abcdef123",
                           "KEYBOARD_LAYOUT_NAME": "german-qwertz",
                           "GPU_TRACKER_DB": "postgresql://me:dbpass-777@h/db"})
    assert secrets.scrub("rp-abcdef123 german-qwertz dbpass-777") == "*** german-qwertz ***"


def test_library_warnings_become_one_line_log_records():
    import logging

    from tracker.core.secrets import ScrubbingFilter

    record = logging.LogRecord(
        "py.warnings", logging.WARNING, __file__, 1,
        "/x/apscheduler/schedulers/base.py:12: PytzUsageWarning: use zoneinfo\n  warn(...)\n",
        None, None)
    assert ScrubbingFilter().filter(record)
    assert record.getMessage() == ("/x/apscheduler/schedulers/base.py:12: PytzUsageWarning: "
                                   "use zoneinfo")


def test_signal_while_waiting_for_another_runs_lock(tmp_path: Path):
    from tracker.store.locks import lock_path

    db = tmp_path / "tracker.db"
    url = f"sqlite:///{db}"
    assert _invoke(url, "init").exit_code == 0
    path = lock_path(db, "refresh:bundled")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom filelock import FileLock\n"
         "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True)\n"
         "time.sleep(60)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = _cli("--db", url, "-v", "refresh", "--source", "bundled", "--wait", "60")
        for line in proc.stderr:  # -v: it says when it starts waiting for the lock
            if "waiting up to" in line:
                break
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        assert time.monotonic() - started < 5
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert err.strip().splitlines()[-1].startswith(
            "Error: refresh interrupted by SIGINT while waiting for another run"), err
    finally:
        holder.kill()
        holder.wait()
    ingest, _jobs = _runs(db)
    assert ingest == []
