"""Hardening (issue #30, the input side): hostile rows, slow peers, huge local inputs, bounds.

- One poisoned field of one provider row (a number of a billion digits' exponent, JSON's
  `Infinity`, a lone surrogate) quarantines that row and keeps the rest of the source.
- Ingest quarantines rows outside tracker/bounds.py with their reason, capped in size.
- The shared HTTP client's total deadline holds against a peer sending a byte a second.
- Local inputs (configuration, quotes, FOCUS usage, gpuhunt archives) have size caps.
- Terminal control characters from providers are made visible in table output.
- Bad values are usage errors (exit 2), one line, never a traceback.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from scrapers.base import PriceObservation
from tests.helpers import fetch_records
from tracker.cli import cli

FIXTURES = Path(__file__).parent / "fixtures"
FETCHED_AT = datetime(2026, 9, 14, 8, 30, tzinfo=UTC)
QUOTES_HEADER = ("provider,instance_type,gpu,gpu_count,category,price_per_hour,currency,"
                 "valid_from\n")
CASES_TRIED: dict[str, int] = {}


def _count(group: str, n: int = 1) -> None:
    CASES_TRIED[group] = CASES_TRIED.get(group, 0) + n


def _invoke(db_url: str, *args: str, env: dict | None = None):
    return CliRunner().invoke(cli, ["--db", db_url, *args], env=env or {},
                              catch_exceptions=False)


def _one_line(result, code: int) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output, result.output
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines
    return lines[0]


# -- one poisoned field never fails a whole source ---------------------------------------------

HUGE = "@@HUGE@@"
POISONS = {"huge exponent": HUGE, "Infinity": float("inf"), "lone surrogate": "\ud800x"}


def _poisoned_json(document: Any) -> bytes:
    text = json.dumps(document)  # Infinity and "\ud800x" as JSON writes them
    return text.replace(json.dumps(HUGE), "1e999999999").encode()


def _leaves(value: Any, path: tuple = ()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:2]):
            yield from _leaves(item, (*path, i))
    else:
        yield path


def _set(document: Any, path: tuple, value: Any) -> Any:
    out = copy.deepcopy(document)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


def _first_row(document: dict, source: str) -> tuple[tuple, Any]:
    """The path of the first offer row of a recorded response, and that row."""
    if source == "vastai":
        return ("offers", 0), document["offers"][0]
    if source == "lambda":
        name = next(iter(document["data"]))
        return ("data", name), document["data"][name]
    if source == "runpod":
        return ("data", "gpuTypes", 0), document["data"]["gpuTypes"][0]
    if source == "azure":
        return ("Items", 0), document["Items"][0]
    return ("skus", 0), document["skus"][0]


JSON_SOURCES = {
    # source: (recorded response, an empty page the later requests get)
    "vastai": ("vastai/bundles.json", None),
    "lambda": ("lambda/instance_types.json", None),
    "runpod": ("runpod/gpu_types_count8.json", None),
    "azure": ("azure/nd_page1.json", "azure/empty_page.json"),
    "gcp": ("gcp/skus_page1.json", "gcp/skus_page3_empty.json"),
}


def _source(name: str):
    from scrapers import load_source

    env = {"GPU_TRACKER_LAMBDA_API_KEY": "lk-test", "GPU_TRACKER_RUNPOD_API_KEY": "rp-test",
           "GPU_TRACKER_GCP_API_KEY": "gcp-test"}
    return load_source(name).from_config({}, env)


@pytest.mark.parametrize("source", sorted(JSON_SOURCES))
def test_one_poisoned_field_quarantines_its_row_and_keeps_the_rest(source: str):
    """Every leaf of the first row of each JSON source, each poison: the fetch finishes,
    ingest stores the other rows, and the run is not failed."""
    from tracker.ingest_checks import sort_records

    recorded_name, empty_name = JSON_SOURCES[source]
    document = json.loads((FIXTURES / recorded_name).read_text())
    empty = (FIXTURES / empty_name).read_bytes() if empty_name else None
    row_path, row = _first_row(document, source)
    clean = fetch_records(_source(source), _handler(_poisoned_json(document), empty),
                          FETCHED_AT)
    clean_count = sum(isinstance(r, PriceObservation) for r in clean)
    assert clean_count > 0
    failures = []
    for leaf in _leaves(row):
        for poison_name, poison in POISONS.items():
            body = _poisoned_json(_set(document, (*row_path, *leaf), poison))
            _count("poisoned provider fields")
            try:
                started = time.monotonic()
                records = fetch_records(_source(source), _handler(body, empty), FETCHED_AT)
                sorted_records = sort_records(source, records, FETCHED_AT)
                elapsed = time.monotonic() - started
            except Exception as exc:
                failures.append((leaf, poison_name, f"{type(exc).__name__}: {exc}"[:200]))
                continue
            # The other rows survive: at most the poisoned row's offers are lost (a GCP SKU
            # prices every machine type with that GPU, so only "some survive" there).
            kept = len(sorted_records.accepted)
            if (kept < clean_count - 8 if source != "gcp" else kept == 0) or elapsed > 5:
                failures.append((leaf, poison_name, len(sorted_records.accepted), elapsed))
            for reason, *_ in sorted_records.rejects:
                if len(str(reason)) > 1000:
                    failures.append((leaf, poison_name, "reason of", len(str(reason))))
    assert not failures, failures[:10]


def _handler(body: bytes, empty: bytes | None) -> Callable[[httpx.Request], httpx.Response]:
    """The recorded page for every first page (each Azure family asks for one), the empty
    page for any next page."""

    def handler(request: httpx.Request) -> httpx.Response:
        next_page = "pageToken" in request.url.params or "$skip" in request.url.params
        return httpx.Response(200, content=empty if next_page and empty else body)

    return handler


# -- ingest quarantines what is outside the bounds ---------------------------------------------

def _obs(**kw: Any) -> PriceObservation:
    base: dict[str, Any] = dict(
        provider="acme", instance_type="box-8", gpu_name="H100 SXM", gpu_count=8.0,
        category="on-demand", price_per_hour=Decimal("20"), currency="USD",
        observed_at=FETCHED_AT, gpu_memory_gb=80.0)
    base.update(kw)
    return PriceObservation(**base)


BAD_ROWS = {
    "price 1e999999999": (_obs(instance_type="a", price_per_hour=Decimal("1e999999999")),
                          "absurd price 1E+999999999"),
    "price 1e1000000": (_obs(instance_type="b", price_per_hour=Decimal("1e1000000")),
                        "absurd price"),
    "price 1e-30": (_obs(instance_type="c", price_per_hour=Decimal("1e-30")),
                    "below 0.001 per GPU-hour"),
    "1e30 GPUs": (_obs(instance_type="d", gpu_count=1e30, price_per_hour=Decimal("1e10")),
                  "GPU count 1e+30 is above"),
    "Infinity GPUs": (_obs(instance_type="e", gpu_count=float("inf")), "GPU count"),
    "surrogate instance type": (_obs(instance_type="f\ud800"), "lone surrogate"),
    "surrogate region": (_obs(instance_type="g", region="eu-\udc00"), "lone surrogate"),
    "surrogate provider": (_obs(provider="ac\ud800me", instance_type="h"), "lone surrogate"),
    "surrogate GPU name": (_obs(instance_type="i", gpu_name="H100\ud800"), "lone surrogate"),
    "Infinity vCPUs": (_obs(instance_type="j", vcpus=float("inf")), "vcpus inf"),
    "NaN RAM": (_obs(instance_type="k", ram_gb=float("nan")), "ram_gb nan"),
    "1e300 GB of memory": (_obs(instance_type="l", gpu_memory_gb=1e300), "GPU memory 1e+300"),
    "1 MB name": (_obs(instance_type="m", gpu_name="x" * 1_000_000), "unknown GPU"),
}


def test_ingest_quarantines_rows_outside_the_bounds_and_keeps_the_rest(sqlite_url: str):
    from tracker.db import open_database
    from tracker.ingest import ingest_records

    db = open_database(sqlite_url)
    rows = [_obs()] + [bad for bad, _ in BAD_ROWS.values()]
    # A surrogate in the attributes is stored escaped: the row is kept.
    rows.append(_obs(instance_type="kept", attributes={"note": "\ud800"}))
    summary = ingest_records(db, "quotes", rows, started_at=FETCHED_AT)
    _count("bad rows at ingest", len(BAD_ROWS) + 1)
    assert summary.status == "ok", summary.error
    assert summary.offers_seen == 2
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        reasons = [r[0] for r in conn.execute("SELECT reason FROM rejected_row")]
        raws = [r[0] for r in conn.execute("SELECT raw FROM rejected_row")]
        types = {r[0] for r in conn.execute("SELECT instance_type FROM offer")}
    assert types == {"box-8", "kept"}
    for name, (_, needle) in BAD_ROWS.items():
        assert any(needle in reason for reason in reasons), (name, reasons)
    assert max(map(len, reasons)) <= 500
    assert max(map(len, raws)) <= 8300


def test_json_output_never_prints_infinity():
    from tracker.serialization import dumps

    text = dumps({"a": float("inf"), "b": [float("-inf"), float("nan")],
                  "c": Decimal("Infinity"), "d": Decimal("1.5")})
    assert json.loads(text) == {"a": None, "b": [None, None], "c": None, "d": "1.5"}
    _count("non-finite JSON values", 4)


def test_provider_numbers_out_of_range_are_refused_by_to_decimal():
    from tracker.errors import InvalidInput
    from tracker.money import to_decimal

    for text in ("1e999999999", "2.199,00", "1,2", "1e-200", "12,34,5"):
        with pytest.raises(InvalidInput):
            to_decimal(text)
        _count("provider number texts")
    assert to_decimal("2,199.00") == Decimal("2199.00")
    assert to_decimal("$1,234,567.5") == Decimal("1234567.5")


# -- a total deadline on every request ---------------------------------------------------------

class _TrickleServer:
    """A loopback HTTP server that sends its headers, then one body byte a second."""

    def __init__(self, total_bytes: int = 120) -> None:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/slow"
        self.total_bytes = total_bytes
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % self.total_bytes)
                for _ in range(self.total_bytes):
                    if self.stop.wait(1.0):
                        return
                    conn.sendall(b" ")
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("how", ["get_bytes", "get_response", "stream_lines"])
def test_a_peer_trickling_a_byte_a_second_is_cut_off_at_the_total_deadline(how: str):
    from scrapers.http import HttpClient
    from tracker.errors import SourceError
    from tracker.http_settings import HttpSettings

    server = _TrickleServer()
    settings = HttpSettings(read_timeout=2.0, total_timeout=3.0, retries=2, backoff=0.1)
    started = time.monotonic()
    try:
        with HttpClient(settings) as client, pytest.raises(SourceError) as caught:
            if how == "stream_lines":
                list(client.stream_lines(server.url))
            else:
                getattr(client, how)(server.url)
    finally:
        server.close()
    elapsed = time.monotonic() - started
    _count("slow peers")
    assert "total_timeout" in str(caught.value)
    assert 2.5 < elapsed < 3.0 + 2.0 + 1.0, elapsed  # the deadline, within one read timeout


def test_total_timeout_is_a_setting_with_a_default():
    from tracker.config import load_config
    from tracker.refresh import http_settings

    assert http_settings(load_config(None, environ={})).total_timeout == 300.0
    assert http_settings(load_config(None, environ={
        "GPU_TRACKER_HTTP_TOTAL_TIMEOUT": "7.5"})).total_timeout == 7.5
