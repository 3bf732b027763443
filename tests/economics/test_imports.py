"""The economics command and engine stay light: no pandas, SQLAlchemy, numpy or scrapers."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pandas", "sqlalchemy", "sqlmodel", "numpy", "numpy_financial", "scrapers",
         "matplotlib", "httpx", "tracker.store", "tracker.db")


def test_breakeven_with_given_prices_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracker.cli import cli\n"
        "r = CliRunner().invoke(cli, ['breakeven', '--capex', '300000', '--power-kw', '10.2',"
        " '--cloud-price-per-hour', '55.04', '--utilization', '0.7', '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == ""


def test_spot_with_given_prices_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tracker.cli import cli\n"
        "r = CliRunner().invoke(cli, ['spot', '--work-hours', '100', '--mtti-hours', '24',"
        " '--checkpoint-minutes', '5', '--restart-minutes', '10', '--spot-price', '17.63',"
        " '--on-demand-price', '55.04', '--format', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == ""
