"""The economics command and engine stay light: no pandas, SQLAlchemy, numpy or scrapers."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pandas", "sqlalchemy", "sqlmodel", "numpy", "numpy_financial", "scrapers",
         "matplotlib", "httpx", "tracker.store.queries", "tracker.store.db")


GIVEN_PRICES = {
    "breakeven": ["breakeven", "--capex", "300000", "--power-kw", "10.2",
                  "--cloud-price-per-hour", "55.04", "--utilization", "0.7", "--format", "json"],
    "spot": ["spot", "--work-hours", "100", "--mtti-hours", "24", "--checkpoint-minutes", "5",
             "--restart-minutes", "10", "--spot-price", "17.63", "--on-demand-price", "55.04",
             "--format", "json"],
}


@pytest.mark.parametrize("command", list(GIVEN_PRICES))
def test_command_with_given_prices_imports_nothing_heavy(command):
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracker.cli.main import cli\n"
        f"r = CliRunner().invoke(cli, {GIVEN_PRICES[command]!r})\n"
        "assert r.exit_code == 0, r.output\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == ""


BREAKEVEN = ["breakeven", "--capex", "300000", "--power-kw", "10.2", "--cloud-price-per-hour",
             "55.04", "--utilization", "0.7", "--horizon-months", "36", "--format", "json"]


# Modules `breakeven` with its prices given and no configuration does not need: the
# configuration schema, the cost, spot and compare documents with the spot engine, and
# importlib.resources (tempfile, zipfile, ...; the data files are read with pkgutil).
NOT_NEEDED = ("pydantic", "tracker.config.schema", "tracker.answers.documents",
              "tracker.economics.spot", "importlib.resources")


def _breakeven_in_a_fresh_process(tmp_path, variables: dict[str, str]) -> tuple[dict, list]:
    """The breakeven document, and which of NOT_NEEDED the process imported."""
    import json
    import os

    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from tracker.cli.main import cli\n"
        f"r = CliRunner().invoke(cli, {BREAKEVEN!r})\n"
        "assert r.exit_code == 0, r.output\n"
        f"print(json.dumps([json.loads(r.stdout), [m for m in {NOT_NEEDED!r}"
        " if m in sys.modules]]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_TRACKER_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), **variables)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=env)
    document, imported = json.loads(result.stdout)
    return document, imported


def test_breakeven_without_a_config_reads_the_defaults_without_the_schema(tmp_path):
    """No file and no configuration variable: the [economics] defaults come from
    data/economics.json without pydantic, and the document is the one the schema gives."""
    empty = tmp_path / "empty.toml"
    empty.write_text("", "utf-8")
    plain, plain_imported = _breakeven_in_a_fresh_process(tmp_path, {})
    options, options_imported = _breakeven_in_a_fresh_process(
        tmp_path, {"GPU_TRACKER_DB": f"sqlite:///{tmp_path / 'none.db'}",
                   "GPU_TRACKER_FORMAT": "table", "GPU_TRACKER_QUIET": "1"})
    loaded, loaded_imported = _breakeven_in_a_fresh_process(
        tmp_path, {"GPU_TRACKER_CONFIG": str(empty)})
    assert plain_imported == options_imported == []
    assert {"pydantic", "tracker.config.schema"} <= set(loaded_imported)
    assert plain == options == loaded
    assert plain["npv"] == loaded["npv"] and plain["verdict"] == "buy"


@pytest.mark.parametrize("where", ["user config file", "GPU_TRACKER_ECONOMICS_KWH_PRICE",
                                   "GPU_TRACKER_SMTP_PORT", "GPU_TRACKER_SOURCE_AWS_URL"])
def test_breakeven_loads_the_schema_when_a_file_or_variable_could_set_it(tmp_path, where):
    variables: dict[str, str] = {}
    if where == "user config file":
        (tmp_path / "config" / "gpu-tracker").mkdir(parents=True)
        (tmp_path / "config" / "gpu-tracker" / "config.toml").write_text(
            "[economics]\nkwh_price = 0.2\n", "utf-8")
    elif where == "GPU_TRACKER_ECONOMICS_KWH_PRICE":
        variables[where] = "0.2"
    elif where == "GPU_TRACKER_SMTP_PORT":
        variables[where] = "25"
    else:
        variables[where] = "http://127.0.0.1:9/"
    document, imported = _breakeven_in_a_fresh_process(tmp_path, variables)
    assert "pydantic" in imported and "tracker.config.schema" in imported
    kwh = next(a for a in document["assumptions"] if a["name"] == "kwh_price")
    overridden = where in ("user config file", "GPU_TRACKER_ECONOMICS_KWH_PRICE")
    assert (kwh["value"], kwh["source"] == "config [economics]") == (
        ("0.2", True) if overridden else ("0.08", False))


def test_the_economics_package_imports_a_name_from_its_module_on_first_use():
    code = (
        "import sys\n"
        "import tracker.economics as e\n"
        "print(sorted(m for m in sys.modules if m.startswith('tracker.economics.')))\n"
        "print(len(e.__all__), e.run_cost.__module__, e.plan_spot.__module__,"
        " e.irr.__module__, e.OwnershipInputs.__module__)\n"
        "print(sorted(m for m in sys.modules if m.startswith('tracker.economics.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == [
        "[]",
        "19 tracker.economics.cost tracker.economics.spot tracker.economics.finance "
        "tracker.economics.ownership",
        "['tracker.economics.cost', 'tracker.economics.finance', "
        "'tracker.economics.ownership', 'tracker.economics.spot', 'tracker.economics.units']",
    ]
