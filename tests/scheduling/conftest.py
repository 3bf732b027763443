"""Real parts for the scheduling tests: a loopback HTTP catalog, CLI subprocesses, DB counts.

The catalog is a tiny SkyPilot v8 `vms.csv` for the `lambda` cloud, served by `http.server`
on 127.0.0.1; the `skypilot` source is pointed at it through its environment settings. The
server can hold a response (`gate`) so a test can catch a refresh in the middle of its fetch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HEADER = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,"
          "SpotPrice")
A100_INFO = ("\"{'Gpus': [{'Name': 'A100', 'Manufacturer': 'NVIDIA', 'Count': %s, "
             "'MemoryInfo': {'SizeInMiB': 40960}}], 'TotalGpuMemoryInMiB': 40960}\"")
H100_INFO = ("\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 1.0, "
             "'MemoryInfo': {'SizeInMiB': 81920}}], 'TotalGpuMemoryInMiB': 81920}\"")
LAMBDA_ROWS = [
    "cpu_4x_generalx,,,4.0,16.0,0.2,us-east-1,,",  # CPU only: skipped, not rejected
    f"gpu_8x_a100,A100,8.0,124.0,1800.0,15.92,us-east-1,{A100_INFO % '8.0'},",
    f"gpu_1x_a100,A100,1.0,30.0,200.0,1.99,us-east-1,{A100_INFO % '1.0'},",
    f"gpu_1x_a100,A100,1.0,30.0,200.0,1.99,us-west-1,{A100_INFO % '1.0'},",
    f"gpu_1x_h100_pcie,H100,1.0,26.0,200.0,2.49,us-east-1,{H100_INFO},",
    f"gpu_2x_a100,A100,2.0,60.0,400.0,abc,us-east-1,{A100_INFO % '2.0'},",  # rejected
]
EXPECTED_OFFERS = 4
EXPECTED_REJECTED = 1


def catalog_csv(rows: list[str] | None = None) -> bytes:
    return ("\n".join([HEADER, *(LAMBDA_ROWS if rows is None else rows)]) + "\n").encode()


class CatalogServer:
    """`{url}/v8/lambda/vms.csv` on a loopback port. With `gate` set, each response sends
    its headers and first line, then waits for the gate before the rest."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {"/v8/lambda/vms.csv": catalog_csv()}
        self.status = 200
        self.gate: threading.Event | None = None
        self.requests = 0
        self.requested = threading.Event()
        self.holding = threading.Event()  # a response is being held at the gate
        self.served = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.requests += 1
                body = server.files.get(self.path)
                server.requested.set()
                if body is None or server.status != 200:
                    self.send_response(404 if body is None else server.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/csv")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                gate = server.gate
                if gate is not None:
                    head, _, rest = body.partition(b"\n")
                    self.wfile.write(head + b"\n")
                    self.wfile.flush()
                    server.holding.set()
                    gate.wait(60)
                    body = rest
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client was killed mid-response
                server.served.set()

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def reset(self) -> None:
        with self._lock:
            self.requests = 0
        self.requested.clear()
        self.holding.clear()
        self.served.clear()

    def close(self) -> None:
        if self.gate is not None:
            self.gate.set()
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def catalog() -> Iterator[CatalogServer]:
    server = CatalogServer()
    try:
        yield server
    finally:
        server.close()


def source_environ(server: CatalogServer) -> dict[str, str]:
    """Settings that point the skypilot source at the loopback catalog, without retries."""
    return {
        "GPU_TRACKER_SOURCE_SKYPILOT_URL": server.url,
        "GPU_TRACKER_SOURCE_SKYPILOT_CLOUDS": "lambda",
        "GPU_TRACKER_HTTP_RETRIES": "0",
        "GPU_TRACKER_HTTP_BACKOFF": "0",
        "GPU_TRACKER_REFRESH_SOURCES": "skypilot",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def cli_env(db_url: str, server: CatalogServer, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(source_environ(server))
    env["GPU_TRACKER_DB"] = db_url
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """`python -m tracker ARGS` in its own process (no terminal: the trigger is `cron`)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tracker", *args], env=env, cwd=ROOT, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(predicate: Callable[[], object], timeout: float = 30.0,
             what: str = "condition") -> object:
    """Poll `predicate` until it is truthy (a real multi-process event has no callback)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def scalar(db, sql: str, **params) -> object:
    from sqlalchemy import text

    with db.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar()


def rows(db, sql: str, **params) -> list:
    from sqlalchemy import text

    with db.engine.connect() as conn:
        return list(conn.execute(text(sql), params))


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh database (file SQLite, or a PostgreSQL schema of its own), schema created."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'tracker.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    from tracker.store.db import open_database

    open_database(url).close()
    return url
