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
    # The pure-Python build: compiling the sizing modules (setup.py) takes a minute; .ci/run
    # checks the compiled build's answers against these sources' (bench/size_equivalence.py).
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(out), str(build_dir / "src")], check=True,
                   env={**os.environ, "GPU_TRACKER_PURE_PYTHON": "1"})
    (path,) = out.glob("gpu_tracker-*.whl")
    return path


def test_wheel_contains_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("tracker/cli/main.py", "tracker/store/migrations/env.py",
                     "tracker/store/migrations/versions/0001_price_store.py",
                     "tracker/store/migrations/script.py.mako", "scrapers/base.py",
                     "tracker/data/gpus.json", "tracker/data/models.json",
                     "tracker/data/economics.json", "tracker/data/providers.json",
                     "tracker/data/prices/SOURCES.md", "tracker/sizing/engine.py",
                     "tracker/economics/spot.py", "tracker/cli/commands/size.py"):
        assert required in names, required
    assert any(n.startswith("tracker/data/prices/") and n.endswith(".csv") for n in names)
    assert any(n.startswith("tracker/templates/") and n.endswith(".html") for n in names)
    assert any(n.startswith("reports/") and n.endswith(".py") for n in names)


def test_wheel_installs_only_the_three_import_names(wheel):
    """data/ and templates/ install inside the tracker namespace, so no other distribution's
    `data` or `templates` package is shadowed."""
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()
            if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"tracker", "scrapers", "reports"}


def test_the_pure_build_ships_no_extension(wheel):
    """GPU_TRACKER_PURE_PYTHON=1 builds the sources only (no C compiler needed)."""
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".pyd"))]


def test_the_compiled_modules_are_sizing_modules():
    """setup.py compiles modules of tracker/sizing that exist, and not the two that cannot be
    compiled (request replaces its dataclass's __init__; architecture's dataclass)."""
    text = (ROOT / "setup.py").read_text()
    namespace: dict = {}
    start = text.index("COMPILED = [")
    exec(text[start:text.index("]\n", text.index('for name in ("', start)) + 2], namespace)
    compiled = namespace["COMPILED"]
    assert len(compiled) == 13
    for path in compiled:
        assert (ROOT / path).is_file() and path.startswith("tracker/sizing/")
    assert "tracker/sizing/request.py" not in compiled
    assert "tracker/sizing/architecture.py" not in compiled


def test_the_package_list_names_every_package_folder():
    """pyproject.toml lists the packages (data/ and templates/ are mapped into tracker), so a
    new folder must be added there: this fails naming it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for top in ("tracker", "scrapers", "reports")
               for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert listed - {"tracker.data", "tracker.data.prices", "tracker.templates"} == on_disk


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
