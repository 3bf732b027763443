"""Cluster-true plans through the CLI, over the bundled price snapshots (real list prices).

`compare` never joins instances that have no cluster network unless told to, says why, and
shows an override wherever one was used; `prices` shows every offer's network.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tracker.cli.main import cli
from tracker.config.schema import load_config

FINETUNE = ["compare", "--model", "llama-3.1-8b", "--workload", "full-finetune",
            "--tokens", "2e9", "--format", "json"]


def run(*args: str, db: str, config: str | None = None):
    argv = ["--db", db] + (["--config", config] if config else [])
    return CliRunner().invoke(cli, [*argv, *args], catch_exceptions=False)


def test_prices_show_each_offers_network(bundled_db):
    result = run("prices", "--gpu", "b200", "--format", "json", db=bundled_db)
    rows = {r["instance_type"]: r for r in json.loads(result.stdout)}
    assert rows["p6-b200.48xlarge"]["cluster_network"] == "efa"
    assert rows["p6-b200.48xlarge"]["cluster_gbps"] == 3200
    assert rows["p6-b200.48xlarge"]["node_link"] == "nvlink5"
    assert rows["1x-B200"]["cluster_network"] is None
    assert rows["1x-B200"]["network_note"] == "independent hosts, no cluster network"
    table = run("prices", "--gpu", "b200", db=bundled_db).stdout
    assert "cluster_network" in table.splitlines()[0] and "efa" in table


def test_compare_never_joins_unclustered_instances(bundled_db):
    result = run(*FINETUNE, db=bundled_db)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    joined = [r for r in rows if r["instances"] > 1]
    assert joined, "clustered offers still make multi-instance options"
    assert all(r["cluster_network"] and r["override"] is None for r in joined)
    assert not any(r["provider"] in ("vastai", "runpod", "lambda") for r in joined)
    # One line by default names the providers; -v gives each one's instance sizes and reason.
    (summary,) = [line for line in result.stderr.splitlines() if "multi-instance" in line]
    assert "vastai" in summary and summary.endswith("-v lists why")
    verbose = run("-v", *FINETUNE, db=bundled_db)
    vast = next(line for line in verbose.stderr.splitlines() if " for vastai " in line)
    assert "1x-B200" in vast and vast.endswith(": independent hosts, no cluster network")


def test_allow_unclustered_is_shown_in_the_json(bundled_db):
    rows = json.loads(run(*FINETUNE, "--gpu", "b200", "--allow-unclustered",
                          db=bundled_db).stdout)
    joined = [r for r in rows if r["instances"] > 1 and r["provider"] == "vastai"]
    assert joined and all("--allow-unclustered" in r["override"] for r in joined)
    assert all(r["cluster_network"] == "tcp" for r in joined)


def test_config_override_per_provider_is_shown(bundled_db, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[fabric.overrides."vastai"]\ncluster_network = "roce"\n'
                      'cluster_gbps = 400\n')
    rows = json.loads(run(*FINETUNE, "--gpu", "b200", db=bundled_db,
                          config=str(config)).stdout)
    joined = [r for r in rows if r["instances"] > 1 and r["provider"] == "vastai"]
    assert joined and all(r["override"] == "config override vastai: roce 400 Gb/s"
                          for r in joined)
    bad = tmp_path / "bad.toml"
    bad.write_text('[fabric.overrides."vastai"]\ncluster_network = "pigeons"\n')
    result = run(*FINETUNE, db=bundled_db, config=str(bad))
    assert result.exit_code != 0 and "cluster_network must be one of" in result.stderr


def test_cost_refuses_to_join_marketplace_hosts(bundled_db):
    result = run("cost", "--model", "llama-3.1-8b", "--workload", "full-finetune",
                 "--tokens", "2e9", "--gpu", "rtx-4090", "--count", "8", db=bundled_db)
    assert result.exit_code != 0
    assert "independent" in result.stderr or "no cluster" in result.stderr


def test_cost_with_allow_unclustered_says_so(bundled_db):
    result = run("cost", "--model", "llama-3.1-8b", "--workload", "full-finetune",
                 "--tokens", "2e9", "--gpu", "rtx-4090", "--count", "8", "--allow-unclustered",
                 "--format", "json", db=bundled_db)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert any("--allow-unclustered" in w for w in data["warnings"])
    assert data["instances"] == 8


def test_a_bad_fabric_override_is_refused_when_the_config_is_read(tmp_path):
    # The schema checks [fabric.overrides] through tracker.core.fabric.parse_overrides, so every
    # command (not only compare and cost) refuses it with one line naming the key.
    from tracker.config.schema import ConfigError

    bad = tmp_path / "bad.toml"
    bad.write_text('[fabric.overrides."vastai"]\ncluster_network = "roce"\ncluster_gbps = -1\n')
    with pytest.raises(ConfigError, match=r"fabric.*cluster_gbps"):
        load_config(bad, environ={})
