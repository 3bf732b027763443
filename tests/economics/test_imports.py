"""The economics command and engine stay light: no pandas, SQLAlchemy, numpy or scrapers."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pandas", "sqlalchemy", "sqlmodel", "numpy", "numpy_financial", "scrapers",
         "matplotlib", "httpx", "tracker.store", "tracker.db")


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
        "from tracker.cli import cli\n"
        f"r = CliRunner().invoke(cli, {GIVEN_PRICES[command]!r})\n"
        "assert r.exit_code == 0, r.output\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == ""
