"""Click commands. Each module is imported only when one of its commands runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from tracker.config import Config
    from tracker.db import Database


@dataclass
class AppContext:
    """What every command shares: the database and configuration, opened on first use."""

    db_url: str | None = None
    config_path: str | None = None
    quiet: bool = False
    debug: bool = False
    verbosity: int = 0
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

        return self.db_url or self.config.get("database", "url") or default_database_url()

    @property
    def db(self) -> Database:
        """The database, created or upgraded to the current schema on first use."""
        if self._db is None:
            from tracker.db import open_database

            self._db = open_database(self.database_url)
        return self._db

    def note(self, message: str) -> None:
        """A message for people on stderr (silenced by -q)."""
        if not self.quiet:
            click.echo(message, err=True)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


pass_app: Any = click.make_pass_decorator(AppContext)
