"""Click commands. Each module is imported only when one of its commands runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tracker.config import Config
    from tracker.db import Database


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
            from tracker.config import load_config

            self._config = load_config(self.config_path)
        return self._config

    @property
    def database_url(self) -> str:
        from tracker.config import default_database_url
        from tracker.secrets import learn, url_password

        url = self.db_url or self.config.get("database", "url") or default_database_url()
        learn([url_password(url)])  # a --db password is a secret like any other
        return url

    @property
    def db(self) -> Database:
        """The database, upgraded to the current schema on first use. Only the commands that
        write prices (CREATING_COMMANDS) create one; the others refuse a missing database."""
        if self._db is None:
            from tracker.db import open_database

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
            from tracker.secrets import scrub

            click.echo(scrub(message), err=True)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


pass_app: Any = click.make_pass_decorator(AppContext)
