"""Where the configuration comes from, without its schema: the file's default path, the user
data directory, the variables' prefix, and whether a configuration would be the defaults
alone.

The schema (tracker/config/schema.py) is pydantic, and loading it costs most of a fast command's
start; a command that reads only defaults kept outside the schema (the `[economics]`
defaults of data/economics.json) asks `defaults_only` first and loads the schema only when a
file or a variable could change (or break) them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

APP_NAME = "gpu-tracker"
ENV_PREFIX = "GPU_TRACKER_"


def user_config_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP_NAME)) / "config.toml"


def user_data_dir() -> Path:
    from platformdirs import user_data_dir as _user_data_dir

    return Path(_user_data_dir(APP_NAME))


def default_database_url() -> str:
    return f"sqlite:///{user_data_dir() / 'gpu-tracker.db'}"


def defaults_only(path: str | None, environ: Mapping[str, str],
                  ignored: Collection[str] = ()) -> bool:
    """Whether `tracker.config.schema.load_config(path, environ)` would read nothing but the
    defaults: no file given, none in the user config directory, and no `GPU_TRACKER_*`
    variable except those in `ignored` (the command line's own option variables, which no
    configuration key shares). Anything else is for load_config to read and check."""
    if path is not None:
        return False
    if any(name.startswith(ENV_PREFIX) and name not in ignored for name in environ):
        return False
    return not user_config_path().exists()
