"""Generated parts of the documentation, run by cogapp (`cog -r README.md docs/cli.md`).

- `tour()`: the README's "A short tour", cut from the real output of `gpu-tracker demo` on the
  bundled prices, run in a throw-away home directory so nothing of the user's is read or
  written.
- `cli_reference()`: docs/cli.md, the `--help` of every command and subcommand.

What varies from machine to machine or day to day is normalised, so `cog --check` passes on
any checkout: the throw-away home becomes `~`, and the report's week (which depends on
today's date) becomes `YYYY-Www`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The demo's sections shown in the README, each with the most output lines it keeps (None:
# all). A cut section ends in "...".
TOUR_SECTIONS: tuple[tuple[str, int | None], ...] = (
    ("The same question as of a past date", None),
    ("Price history of AWS H100 on-demand", None),
    ("Serving Llama 3.1 70B at 128K context", None),
    ("Its cost per run", None),
    ("One GPU or a cluster", 9),
    ("Serving Llama 3.1 70B at 20 tokens/s per user", 10),
    ("A 200-hour job on AWS p5.48xlarge spot", None),
    ("Rent or buy 8 x H100", 10),
    ("How many A100s to commit", None),
    ("... and the budget", None),
    ("Weekly report", None),
)
WEEK = re.compile(r"\b\d{4}-W\d{2}\b")


def _isolated_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_TRACKER_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CONFIG_HOME=str(home / ".config"), COLUMNS="100",
               PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def demo_output() -> str:
    """stdout of `gpu-tracker demo` in a fresh home directory, with that home shown as `~`."""
    with tempfile.TemporaryDirectory(prefix="gpu-tracker-tour-") as tmp:
        home = Path(tmp).resolve()
        done = subprocess.run([sys.executable, "-m", "tracker", "demo"], cwd=ROOT,
                              env=_isolated_env(home), capture_output=True, text=True,
                              timeout=600, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"gpu-tracker demo failed ({done.returncode}): {done.stderr}")
        return done.stdout.replace(str(home), "~")


def sections(output: str) -> dict[str, list[str]]:
    """The demo's output by heading (`== title`), each a list of lines without the heading."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("== "):
            current = found.setdefault(line[3:], [])
        elif current is not None:
            current.append(line)
    return found


def tour(output: str | None = None) -> str:
    """The README's tour block (fenced), from a real demo run (or the `output` given)."""
    by_title = sections(demo_output() if output is None else output)
    lines = ["```"]
    for prefix, keep in TOUR_SECTIONS:
        title = next((t for t in by_title if t.startswith(prefix)), None)
        if title is None:
            raise RuntimeError(f"the demo has no section starting {prefix!r}")
        body = by_title[title]
        while body and not body[-1].strip():
            body = body[:-1]
        lines.append(f"== {title}")
        if keep is not None and len(body) > keep:
            lines.extend([*body[:keep], "..."])
        else:
            lines.extend(body)
        lines.append("")
    lines[-1] = "```"
    return WEEK.sub("YYYY-Www", "\n".join(lines))


def _command_paths() -> list[list[str]]:
    import click

    from tracker.cli.main import cli

    paths: list[list[str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        paths.append(path)
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name])

    walk(cli, [])
    return paths


def help_text(path: list[str]) -> str:
    from click.testing import CliRunner

    from tracker.cli.main import cli

    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="gpu-tracker",
                                terminal_width=100, env={"COLUMNS": "100"})
    if result.exit_code != 0:
        raise RuntimeError(f"gpu-tracker {' '.join(path)} --help failed: {result.output}")
    return result.stdout.rstrip()


def cli_reference() -> str:
    """docs/cli.md's body: every command's --help, in command order."""
    parts = []
    for path in _command_paths():
        title = "gpu-tracker " + " ".join(path) if path else "gpu-tracker"
        parts.append(f"## {title.rstrip()}\n\n```\n{help_text(path)}\n```\n")
    return "\n".join(parts).rstrip()
