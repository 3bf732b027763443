"""Issue 29, the operator's view: `status` names each source under the state its table shows
(a source skipped for want of a key is not "failing" and does not fail the exit status);
`schedule list` does not call the refresh job ok after a manual run of other sources; and
`compare` says in one line which GPUs it left out (the reasons with -v)."""

from __future__ import annotations

import json

from .test_refresh_e2e import KEYS, env, run, server  # noqa: F401  (fixtures)

NO_KEYS = {key: "" for key in KEYS}


def test_status_does_not_call_keyless_sources_failing(run, server, tmp_path):  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text('[refresh]\nsources = ["aws", "lambda", "runpod"]\n')
    refreshed = run("--config", str(config), "refresh", extra=NO_KEYS)
    assert refreshed.exit_code == 0, refreshed.stderr
    table = run("--config", str(config), "status", extra=NO_KEYS)
    # aws is fresh; lambda and runpod have no key: skipped in the table and in the summary.
    assert table.exit_code == 0, table.stderr
    assert "failing" not in table.stderr
    assert "skipped (no key set, not monitored): lambda, runpod" in table.stderr
    report = json.loads(run("--config", str(config), "status", "--format", "json",
                            extra=NO_KEYS).stdout)
    assert report["status"] == "fresh"
    assert {s["source"]: s["state"] for s in report["sources"]} == {
        "aws": "fresh", "lambda": "skipped", "runpod": "skipped"}


def test_status_on_a_fresh_install_calls_keyless_sources_skipped(run, tmp_path):  # noqa: F811
    """Before any refresh a source without its key used to be "never ran" (exit 2), though a
    refresh would only skip it."""
    config = tmp_path / "config.toml"
    config.write_text('[refresh]\nsources = ["lambda", "runpod"]\n')
    assert run("--config", str(config), "init").exit_code == 0
    table = run("--config", str(config), "status", extra=NO_KEYS)
    assert table.exit_code == 0, table.stderr
    assert "never" not in table.stdout + table.stderr
    assert "skipped (no key set, not monitored): lambda, runpod" in table.stderr
    assert "GPU_TRACKER_LAMBDA_API_KEY is not set" in table.stdout
    config.write_text('[refresh]\nsources = ["aws", "lambda"]\n')
    report = run("--config", str(config), "status", "--format", "json", extra=NO_KEYS)
    assert report.exit_code == 2  # aws needs no key and never ran: that still fails
    assert {s["source"]: s["state"] for s in json.loads(report.stdout)["sources"]} == {
        "aws": "never", "lambda": "skipped"}


def test_schedule_list_ignores_a_manual_run_of_other_sources(run, server, tmp_path):  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text('[refresh]\nsources = ["aws", "vastai"]\n')
    assert run("--config", str(config), "refresh", "--source", "vastai").exit_code == 0
    jobs = {j["job"]: j for j in json.loads(run("--config", str(config), "schedule", "list",
                                                "--format", "json").stdout)}
    # The refresh job (aws and vastai) has not run: a vastai-only run does not make it "ok".
    assert jobs["refresh"]["last_status"] is None
    assert run("--config", str(config), "refresh").exit_code == 0
    jobs = {j["job"]: j for j in json.loads(run("--config", str(config), "schedule", "list",
                                                "--format", "json").stdout)}
    assert jobs["refresh"]["last_status"] == "ok"


def test_compare_says_what_it_skipped_in_one_line(run, server):  # noqa: F811
    assert run("refresh", "--source", "aws", "--source", "vastai").exit_code == 0
    args = ("compare", "--model", "llama-3.1-70b", "--prompt-tokens", "1000",
            "--output-tokens", "1000", "--max-tpot-ms", "50")
    quiet = run(*args)
    assert quiet.exit_code == 0, quiet.stderr
    lines = [line for line in quiet.stderr.splitlines() if line.startswith("skipped")]
    assert len(lines) == 1 and lines[0].endswith("-v lists why")
    verbose = run("-v", *args)
    reasons = [line for line in verbose.stderr.splitlines() if line.startswith("skipped")]
    assert len(reasons) > 1 and all("-v lists why" not in line for line in reasons)


def test_a_training_compare_names_the_single_instance_providers_in_one_line(run):  # noqa: F811
    assert run("refresh", "--source", "bundled").exit_code == 0
    args = ("compare", "--model", "llama-3.1-8b", "--workload", "full-finetune",
            "--sharding", "zero3", "--tokens", "2e9", "--limit", "3")
    quiet = run(*args)
    assert quiet.exit_code == 0, quiet.stderr
    lines = [line for line in quiet.stderr.splitlines() if "no multi-instance options" in line]
    assert len(lines) == 1 and lines[0].endswith("-v lists why"), quiet.stderr
    verbose = run("-v", *args)
    reasons = [line for line in verbose.stderr.splitlines()
               if "no multi-instance options" in line]
    assert len(reasons) > 5 and all("-v lists why" not in line for line in reasons)
