"""A non-editable wheel carries the code, migrations, templates and bundled data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build_dir = tmp_path_factory.mktemp("src")
    # Build from a copy so the build leaves nothing in the work tree.
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(build_dir / "src")],
                   check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(build_dir / "src")], check=True)
    (path,) = out.glob("gpu_tracker-*.whl")
    return path


def test_wheel_contains_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("tracker/cli.py", "tracker/migrations/env.py",
                     "tracker/migrations/versions/0001_price_store.py", "scrapers/base.py",
                     "data/gpus.json", "data/models.json", "data/economics.json",
                     "data/providers.json",
                     "data/prices/SOURCES.md", "tracker/sizing/engine.py",
                     "tracker/economics/spot.py", "tracker/commands/size.py"):
        assert required in names, required
    assert any(n.startswith("data/prices/") and n.endswith(".csv") for n in names)
    assert any(n.startswith("templates/") and n.endswith(".html") for n in names)
    assert any(n.startswith("reports/") and n.endswith(".py") for n in names)


def test_installed_wheel_runs_on_bundled_data(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": str(target), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("GPU_TRACKER_DB", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, check=True)

    where = subprocess.run([sys.executable, "-c", "import tracker; print(tracker.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(target))
    run("refresh", "--source", "bundled", "--format", "json")
    rows = json.loads(run("prices", "--gpu", "h100-sxm", "--format", "json").stdout)
    assert rows and all(r["gpu"] == "h100-sxm" for r in rows)
    sized = json.loads(run("size", "--model", "llama-3.1-8b", "--workload", "inference",
                           "--gpu", "h100-sxm", "--format", "json").stdout)
    assert sized["params"] == 8030261248 and sized["fits_single_gpu"] is True
    # The default database lives in the user data directory.
    assert (tmp_path / "data" / "gpu-tracker" / "gpu-tracker.db").exists()
