"""End to end: `gpu-tracker refresh` over real HTTP on loopback, then `prices`.

The server replays the recorded provider responses in tests/fixtures/<source>/; faults are
scripted on the same server. Every fault must leave the failing source with nothing
written and the others untouched.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli

from .loopback import LoopbackServer, Reply, Request

FIXTURES = Path(__file__).parent / "fixtures"
KEYS = {"GPU_TRACKER_GCP_API_KEY": "gcp-secret-key-123",
        "GPU_TRACKER_LAMBDA_API_KEY": "lambda-secret-key-456",
        "GPU_TRACKER_RUNPOD_API_KEY": "runpod-secret-key-789"}


def gcp_pages(request: Request) -> Reply:
    token = (request.query.get("pageToken") or [""])[0]
    page = {"": "skus_page1.json", "AJsiZ2V0X3NrdXMiLCAicGFnZSI6IDJ9": "skus_page2.json",
            "AJsiZ2V0X3NrdXMiLCAicGFnZSI6IDN9": "skus_page3_empty.json"}[token]
    return Reply.file(FIXTURES / "gcp" / page)


def runpod_graphql(request: Request) -> Reply:
    count = request.json()["variables"]["lowestPriceInput"]["gpuCount"]
    return Reply.file(FIXTURES / "runpod" / f"gpu_types_count{count}.json")


def azure_pages(request: Request) -> Reply:
    odata = (request.query.get("$filter") or [""])[0]
    family = odata.split("Standard_")[1][:2] if "Standard_" in odata else ""
    skip = (request.query.get("$skip") or [""])[0]
    page = {("NC", ""): "nc_page1.json", ("NC", "1000"): "nc_page2.json",
            ("ND", ""): "nd_page1.json", ("NV", ""): "nv_page1.json"}.get(
                (family, skip), "empty_page.json")
    return Reply.file(FIXTURES / "azure" / page)


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        srv.route("/gcp/skus", gcp_pages)
        srv.route("/lambda/instance-types", Reply.file(FIXTURES / "lambda" /
                                                       "instance_types.json"))
        srv.route("/runpod/graphql", runpod_graphql)
        srv.route("/vastai/bundles/", Reply.file(FIXTURES / "vastai" / "bundles.json"))
        srv.route("/azure/prices", azure_pages)
        for region in ("us-east-1", "eu-west-1"):
            srv.route(f"/aws/{region}/index.csv",
                      Reply.file(FIXTURES / "aws" / region / "index.csv"))
            srv.route(f"/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/20260828192011/{region}/"
                      "index.csv",
                      Reply.file(FIXTURES / "aws" / "savings-plans" / region / "index.csv"))
        srv.route("/aws-plans/region_index.json",
                  Reply.file(FIXTURES / "aws" / "savings-plans" / "region_index.json"))
        srv.route("/aws-spot/spot.js", Reply.file(FIXTURES / "aws" / "spot.js"))
        srv.route("/aws-advisor/data.json",
                  Reply.file(FIXTURES / "aws" / "spot-advisor-data.json"))
        yield srv


@pytest.fixture
def env(server):
    return {
        **KEYS,
        "GPU_TRACKER_SOURCE_GCP_URL": f"{server.url}/gcp/skus",
        "GPU_TRACKER_SOURCE_LAMBDA_URL": f"{server.url}/lambda/instance-types",
        "GPU_TRACKER_SOURCE_RUNPOD_URL": f"{server.url}/runpod/graphql",
        "GPU_TRACKER_SOURCE_VASTAI_URL": f"{server.url}/vastai/bundles/",
        "GPU_TRACKER_SOURCE_AZURE_URL": f"{server.url}/azure/prices",
        "GPU_TRACKER_SOURCE_AWS_URL": f"{server.url}/aws",
        "GPU_TRACKER_SOURCE_AWS_SPOT_URL": f"{server.url}/aws-spot/spot.js",
        "GPU_TRACKER_SOURCE_AWS_ADVISOR_URL": f"{server.url}/aws-advisor/data.json",
        "GPU_TRACKER_SOURCE_AWS_SAVINGS_PLAN_URL": f"{server.url}/aws-plans/region_index.json",
        "GPU_TRACKER_SOURCE_AWS_REGIONS": "us-east-1,eu-west-1",
        "GPU_TRACKER_HTTP_BACKOFF": "0.01",
        "GPU_TRACKER_HTTP_RETRIES": "2",
        # The loopback server is plain http; keys may go there only because it is listed.
        "GPU_TRACKER_HTTP_TRUSTED_URLS": server.url,
    }


@pytest.fixture
def run(sqlite_url, env):
    def invoke(*args: str, extra: dict | None = None):
        return CliRunner().invoke(cli, ["--db", sqlite_url, *args], env={**env, **(extra or {})},
                                  catch_exceptions=False)

    return invoke


SOURCES = ["aws", "azure", "gcp", "lambda", "runpod", "vastai"]


def refresh(run, *names: str, extra: dict | None = None):
    args = [a for name in names for a in ("--source", name)]
    result = run("refresh", *args, "--format", "json", extra=extra)
    return result, json.loads(result.stdout) if result.stdout.strip() else []


def offers_by_source(run) -> dict[str, int]:
    rows = json.loads(run("prices", "--format", "json").stdout)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["source"]] = counts.get(row["source"], 0) + 1
    return counts


def test_refresh_all_sources_then_prices(run, server):
    result, summary = refresh(run, *SOURCES)
    assert result.exit_code == 0, result.output
    assert [s["status"] for s in summary] == ["ok"] * len(SOURCES)
    counts = offers_by_source(run)
    assert set(counts) == set(SOURCES)
    assert all(n > 0 for n in counts.values())
    # Every page of the paged API was fetched once.
    assert server.hits("/gcp/skus") == 3
    assert server.hits("/azure/prices") == 4  # NC twice (NextPageLink), ND, NV
    aws = next(s for s in summary if s["source"] == "aws")
    assert aws["interruption_facts"] > 0
    spot = json.loads(run("prices", "--provider", "aws", "--category", "spot", "--format",
                          "json").stdout)
    assert spot and all(r["source"] == "aws" for r in spot)
    # Keys travel in headers or parameters, never in what we print or store.
    for secret in KEYS.values():
        assert secret not in result.output
    # A second refresh of the same responses adds nothing.
    _result, again = refresh(run, *SOURCES)
    assert all(s["new_offers"] == 0 and s["prices_changed"] == 0 for s in again)


def test_server_errors_then_success_are_retried(run, server):
    server.route("/lambda/instance-types", [
        Reply(b"oops", 500), Reply(b"oops", 503),
        Reply.file(FIXTURES / "lambda" / "instance_types.json")])
    result, summary = refresh(run, "lambda")
    assert result.exit_code == 0
    assert summary[0]["status"] == "ok" and summary[0]["offers_seen"] > 0
    assert server.hits("/lambda/instance-types") == 3


def test_429_honours_retry_after(run, server):
    server.route("/vastai/bundles/", [
        Reply(b'{"error": "slow down"}', 429, headers={"Retry-After": "1"}),
        Reply.file(FIXTURES / "vastai" / "bundles.json")])
    started = time.monotonic()
    result, summary = refresh(run, "vastai")
    assert result.exit_code == 0 and summary[0]["status"] == "ok"
    assert time.monotonic() - started >= 1.0


def test_persistent_500_fails_only_that_source(run, server):
    server.route("/runpod/graphql", Reply(b"down", 500))
    result, summary = refresh(run, "runpod", "lambda")
    assert result.exit_code == 3  # some failed
    status = {s["source"]: s for s in summary}
    assert status["runpod"]["status"] == "failed"
    assert "HTTP 500 after 3 tries" in status["runpod"]["error"]
    assert status["lambda"]["status"] == "ok"
    assert set(offers_by_source(run)) == {"lambda"}
    assert "refresh failed for runpod" in result.stderr


def test_read_timeout_fails_cleanly(run, server):
    server.route("/lambda/instance-types", Reply.file(
        FIXTURES / "lambda" / "instance_types.json", delay=1.5))
    result, summary = refresh(run, "lambda", extra={"GPU_TRACKER_HTTP_READ_TIMEOUT": "0.3",
                                                    "GPU_TRACKER_HTTP_RETRIES": "1"})
    assert result.exit_code == 1  # all failed
    assert summary[0]["status"] == "failed"
    assert "timed out" in summary[0]["error"]
    assert offers_by_source(run) == {}


def test_truncated_json_writes_nothing(run, server):
    body = (FIXTURES / "gcp" / "skus_page2.json").read_bytes()

    def pages(request: Request) -> Reply:
        reply = gcp_pages(request)
        if (request.query.get("pageToken") or [""])[0]:
            return Reply(body[: len(body) // 2])  # page 2 is cut off mid-document
        return reply

    server.route("/gcp/skus", pages)
    result, summary = refresh(run, "gcp")
    assert result.exit_code == 1
    assert "not valid JSON" in summary[0]["error"]
    # Page 1 parsed fine, but the run is one transaction: nothing of it is stored.
    assert offers_by_source(run) == {}


def test_repeating_page_token_is_refused(run, server):
    def loop(request: Request) -> Reply:
        return Reply.file(FIXTURES / "gcp" / "skus_page1.json")  # always says "next: page 2"

    server.route("/gcp/skus", loop)
    result, summary = refresh(run, "gcp")
    assert result.exit_code == 1
    assert summary[0]["status"] == "failed"
    assert offers_by_source(run) == {}
    assert server.hits("/gcp/skus") <= 3


def test_missing_key_skips_with_one_warning(run, server):
    result, summary = refresh(run, "lambda", "vastai",
                              extra={"GPU_TRACKER_LAMBDA_API_KEY": ""})
    assert result.exit_code == 0
    status = {s["source"]: s["status"] for s in summary}
    assert status == {"lambda": "skipped", "vastai": "ok"}
    assert "source lambda skipped: GPU_TRACKER_LAMBDA_API_KEY is not set" in result.stderr
    assert server.hits("/lambda/instance-types") == 0


def test_looping_next_page_link_is_refused(run, server):
    def loop(request: Request) -> Reply:
        return Reply.file(FIXTURES / "azure" / "nc_page1.json")  # always links to $skip=1000

    server.route("/azure/prices", loop)
    result, summary = refresh(run, "azure", "vastai")
    assert result.exit_code == 3
    status = {s["source"]: s for s in summary}
    assert status["azure"]["status"] == "failed"
    assert "NextPageLink" in status["azure"]["error"] or "repeat" in status["azure"]["error"]
    assert set(offers_by_source(run)) == {"vastai"}
    assert server.hits("/azure/prices") <= 3
