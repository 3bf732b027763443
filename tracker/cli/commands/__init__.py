"""Click commands. Each module is imported only when one of its commands runs.

`COMMANDS` is the registry of the `gpu-tracker` commands (tracker/cli/main.py is the group that
serves them; `demo` runs some of them by name through `load_command`)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tracker.config.schema import Config
    from tracker.economics.defaults import EconomicsSettings
    from tracker.store.db import Database


# name -> ("module:attribute", short help), the module inside this package. The help text
# lives here so `--help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("core:init", "Create or upgrade the database."),
    "refresh": ("refresh:refresh", "Fetch prices from sources."),
    "import": ("import_cmd:import_group",
               "Import a quotes CSV (FILE) or a FOCUS usage export (focus-usage FILE)."),
    "backfill": ("backfill_cmd:backfill",
                 "Import a source's past catalog versions."),
    "sources": ("core:sources", "List price sources with last run and freshness."),
    "prices": ("core:prices", "Query prices as of a date, cheapest first."),
    "history": ("core:history", "Price history of a GPU model over time."),
    "gpus": ("core:gpus", "List canonical GPU models and their specs."),
    "size": ("size:size", "Memory, GPU count, parallelism and time for a job."),
    "models": ("size:models", "Model presets with computed parameter counts."),
    "cost": ("economics:cost", "Cost per run (and per success) of a job."),
    "compare": ("economics:compare", "Rank GPUs, counts, offers by run cost."),
    "spot": ("spot:spot", "Spot with checkpoints vs on-demand."),
    "breakeven": ("breakeven:breakeven", "Rent vs buy: payback, NPV, breakeven."),
    "status": ("schedule:status", "Freshness per source; exit 2 when stale."),
    "schedule": ("schedule:schedule", "Run or list the built-in scheduler."),
    "config": ("schedule:config", "Show the effective configuration."),
    "report": ("report:report", "Build, list and send the weekly report."),
    "index": ("market:index", "Daily GPU price index and cost-per-job index."),
    "forecast": ("market:forecast",
                 "Price index (or cost per job) forecast with P10/P50/P90 and a back-test."),
    "alerts": ("market:alerts", "Market alerts: list, history, test, check."),
    "export": ("market:export", "Export prices as FOCUS rows (CSV/Parquet)."),
    "check": ("check:check",
              "Check prices across sources, catalog ages, invoices vs market."),
    "plan": ("plan:plan",
             "Plan commitments from usage: what to commit, on which term, back-tested."),
    "budgets": ("budgets:budgets",
                "Budgets: spend to date, forecast end of period, under/at-risk/over."),
    "demo": ("demo:demo", "Load bundled prices and show what the tool does."),
}


def load_command(name: str) -> click.Command | None:
    """The click command registered as `name` (its module imported now), or None."""
    if name not in COMMANDS:
        return None
    target, _ = COMMANDS[name]
    module_name, attribute = target.split(":")
    module = importlib.import_module(f"{__name__}.{module_name}")
    command: click.Command = getattr(module, attribute)
    return command


# The commands that may create a new database; every other one refuses a missing database
# ("run `gpu-tracker init`"), so a typo in --db never quietly starts an empty store.
CREATING_COMMANDS = frozenset({"init", "refresh", "import", "import-quotes", "backfill",
                               "demo"})


@dataclass
class AppContext:
    """What every command shares: the database and configuration, opened on first use."""

    db_url: str | None = None
    config_path: str | None = None
    quiet: bool = False
    debug: bool = False
    verbosity: int = 0
    create_database: bool | None = None  # None: decided by the command (CREATING_COMMANDS)
    _db: Database | None = field(default=None, repr=False)
    _config: Config | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        if self._config is None:
            from tracker.answers.report_settings import check_workloads
            from tracker.config.schema import load_config

            config = load_config(self.config_path)
            check_workloads(config)
            self._config = config
        return self._config

    def apply_gpu_config(self) -> None:
        """Lay the configuration's `[gpus.<id>]` tables over data/gpus.json for this process.
        Only a file can hold them (no variable sets a table), so without a file naming
        `[gpus` nothing is loaded and a fast command stays fast."""
        if self._config is None:
            from tracker.config.paths import user_config_path
            from tracker.core.errors import InvalidInput
            from tracker.core.local_input import MAX_CONFIG_BYTES, read_capped

            path = Path(self.config_path) if self.config_path else user_config_path()
            try:
                text = read_capped(path, "config file", MAX_CONFIG_BYTES)
            except OSError:
                return  # a missing --config file is reported by the command that reads it
            except InvalidInput:
                pass  # a FIFO, a device, a huge file: loading the configuration says so
            else:
                if b"gpus" not in text:
                    return
        self.config  # noqa: B018 - loading it applies the [gpus] figures (tracker.config.schema)

    def defaults_only(self) -> bool:
        """Whether the configuration would be the defaults alone: no --config, no file in the
        user config directory, no GPU_TRACKER_* variable but the command line's own options'.
        Then a command that reads only defaults kept outside the schema need not load it."""
        if self._config is not None:
            return False
        import os

        from tracker.config.paths import defaults_only

        return defaults_only(self.config_path, os.environ, option_variables())

    @property
    def database_url(self) -> str:
        from tracker.config.paths import default_database_url
        from tracker.core.secrets import learn, url_password

        url = self.db_url or self.config.database.url or default_database_url()
        learn([url_password(url)])  # a --db password is a secret like any other
        return url

    @property
    def db(self) -> Database:
        """The database, upgraded to the current schema on first use. Only the commands that
        write prices (CREATING_COMMANDS) create one; the others refuse a missing database."""
        if self._db is None:
            from tracker.store.db import open_database

            self._db = open_database(self.database_url, create=self._may_create())
        return self._db

    def _may_create(self) -> bool:
        if self.create_database is not None:
            return self.create_database
        ctx = click.get_current_context(silent=True)
        if ctx is None:
            return True
        root = ctx.find_root()
        if isinstance(root.command, click.Group):
            return root.invoked_subcommand in CREATING_COMMANDS
        # A command invoked on its own (tests, demo): its own name decides.
        return (root.command.name or "").replace("_", "-") in CREATING_COMMANDS

    def note(self, message: str) -> None:
        """A message for people on stderr (silenced by -q)."""
        if not self.quiet:
            from tracker.cli.commands.printing import terminal_safe
            from tracker.core.secrets import scrub

            click.echo(scrub(terminal_safe(message, keep_newlines=True)), err=True)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


pass_app: Any = click.make_pass_decorator(AppContext)


def option_variables() -> set[str]:
    """The environment variables of the running command line's options (GPU_TRACKER_DB,
    GPU_TRACKER_FORMAT, ...): click reads them, the configuration does not."""
    names: set[str] = set()
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        for param in ctx.command.params:
            envvar = param.envvar
            names.update([envvar] if isinstance(envvar, str) else envvar or ())
        ctx = ctx.parent
    return names


def economics_settings(app: AppContext) -> EconomicsSettings:
    """The `[economics]` settings every economics command prices with.

    With no configuration file and no variable that could set one (`app.defaults_only()`)
    they are data/economics.json's defaults, the values the schema's `[economics]` section
    starts from, so the schema (pydantic, most of `breakeven`'s start) is not loaded."""
    from tracker.economics.defaults import EconomicsSettings

    if app.defaults_only():
        return EconomicsSettings()
    return EconomicsSettings(app.config.economics_values())
