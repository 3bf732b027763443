"""Configuration: a TOML file, every value overridable by environment variables.

Precedence (lowest first): built-in defaults, the TOML file (`--config`, `GPU_TRACKER_CONFIG`,
or `config.toml` in the user config directory), then `GPU_TRACKER_<SECTION>_<KEY>` variables.
Source settings live under `[sources.<name>]` and are resolved by each source
(`GPU_TRACKER_SOURCE_<NAME>_<SETTING>`). Secrets come only from the environment.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracker.errors import InvalidInput

APP_NAME = "gpu-tracker"
SECRET_WORDS = ("password", "secret", "token", "key")

DEFAULTS: dict[str, Any] = {
    "database": {"url": ""},
    "http": {
        "connect_timeout": 10.0, "read_timeout": 60.0, "retries": 3, "backoff": 1.0,
        "max_backoff": 60.0, "max_bytes": 64 * 1024 * 1024,
        # URL prefixes a key may be sent to over plain http:// (with a warning); keys go
        # only over https:// otherwise.
        "trusted_urls": [],
    },
    "refresh": {
        # What a plain `gpu-tracker refresh` runs: the live public sources. Keyed ones are
        # skipped with a warning until their key is set; `bundled` is the offline data.
        "sources": ["azure", "aws", "gcp", "lambda", "runpod", "vastai", "skypilot", "ecb"],
        "stale_after_hours": 48.0,
        "max_workers": 4,
    },
    "sources": {},
}


def user_config_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP_NAME)) / "config.toml"


def user_data_dir() -> Path:
    from platformdirs import user_data_dir as _user_data_dir

    return Path(_user_data_dir(APP_NAME))


def default_database_url() -> str:
    return f"sqlite:///{user_data_dir() / 'gpu-tracker.db'}"


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _coerce_like(default: Any, raw: str, name: str) -> Any:
    if isinstance(default, bool):
        if raw.lower() in {"1", "true", "yes", "on"}:
            return True
        if raw.lower() in {"0", "false", "no", "off"}:
            return False
        raise InvalidInput(f"{name} must be true or false, got {raw!r}")
    try:
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a number, got {raw!r}") from None
    if isinstance(default, list):
        return [p.strip() for p in raw.split(",") if p.strip()]
    return raw


class Config:
    """The effective configuration: `config["refresh"]["stale_after_hours"]`, `config.path`."""

    def __init__(self, data: dict[str, Any], path: Path | None) -> None:
        self.data = data
        self.path = path

    def __getitem__(self, section: str) -> Any:
        return self.data.get(section, {})

    def get(self, section: str, key: str, default: Any = None) -> Any:
        return self.data.get(section, {}).get(key, default)

    def source_settings(self, name: str) -> dict[str, Any]:
        return dict(self.data.get("sources", {}).get(name, {}))

    def masked(self) -> dict[str, Any]:
        """The configuration with anything secret-looking replaced by `***`."""

        def mask(node: Any, key: str = "") -> Any:
            if isinstance(node, dict):
                if key == "webhook":  # a webhook URL carries its token (Slack, Teams)
                    return {k: "***" if k == "url" and v else mask(v, k)
                            for k, v in node.items()}
                return {k: mask(v, k) for k, v in node.items()}
            if node and any(word in key.lower() for word in SECRET_WORDS):
                return "***"
            return node

        return mask(self.data)


def register_defaults(section: str, values: Mapping[str, Any]) -> None:
    """Let a subsystem (scheduler, report, economics) declare its section's defaults."""
    current = DEFAULTS.setdefault(section, {})
    for key, value in values.items():
        current.setdefault(key, value)


def load_config(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None,
) -> Config:
    environ = os.environ if environ is None else environ
    data = copy.deepcopy(DEFAULTS)
    explicit = path is not None
    file_path = Path(path) if path is not None else user_config_path()
    if file_path.exists():
        try:
            with file_path.open("rb") as handle:
                _merge(data, tomllib.load(handle))
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"config file {file_path} is not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"config file {file_path} is not UTF-8 text (byte "
                               f"{exc.start}: {exc.reason})") from None
        except OSError as exc:
            raise InvalidInput(f"cannot read config file {file_path}: {exc.strerror}") from None
    elif explicit:
        raise InvalidInput(f"config file {file_path} does not exist")
    # Environment overrides for scalar keys of known sections: GPU_TRACKER_<SECTION>_<KEY>.
    for section, values in data.items():
        if section == "sources" or not isinstance(values, dict):
            continue
        for key, value in list(values.items()):
            if isinstance(value, dict):
                continue
            env_name = f"GPU_TRACKER_{section.upper()}_{key.upper()}"
            if env_name in environ:
                values[key] = _coerce_like(value, environ[env_name], env_name)
    from tracker.secrets import learn_config, learn_environ

    learn_environ(environ)
    learn_config(data)
    return Config(data, file_path if file_path.exists() else None)
