"""Issue 29: a refresh whose provider answers with a valid but empty listing is a failed run,
not an `ok` one that keeps the source fresh (the loopback server of test_refresh_e2e)."""

from __future__ import annotations

import json

from .loopback import Reply
from .test_refresh_e2e import env, refresh, run, server  # noqa: F401  (fixtures)


def test_an_empty_listing_is_a_failure_and_the_source_stays_stale(run, server):  # noqa: F811
    server.route("/lambda/instance-types", Reply(b'{"data": {}}'))
    result, summary = refresh(run, "lambda")
    assert result.exit_code == 1  # every source run failed
    assert summary[0]["status"] == "failed"
    assert "empty listing" in summary[0]["error"]
    rows = {r["source"]: r for r in json.loads(run("sources", "--format", "json").stdout)}
    assert rows["lambda"]["fresh"] is False and rows["lambda"]["last_status"] == "failed"
    assert rows["lambda"]["last_success_at"] is None


def test_an_empty_listing_keeps_the_stored_prices(run, server):  # noqa: F811
    _result, summary = refresh(run, "lambda")
    assert summary[0]["status"] == "ok" and summary[0]["offers_seen"] > 0
    before = json.loads(run("prices", "--format", "json").stdout)
    server.route("/lambda/instance-types", Reply(b'{"data": {}}'))
    _result, summary = refresh(run, "lambda")
    assert summary[0]["status"] == "failed"
    assert json.loads(run("prices", "--format", "json").stdout) == before
