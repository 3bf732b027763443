"""The provider registry: `data/providers.json`, the one place for what the tracker knows
about each provider (display name, the names sources use for it, billing, spot notice,
default spot MTTI, and a slot for its network fabric). Light: json only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from tracker.core.data_files import read_json


@dataclass(frozen=True, slots=True)
class Provider:
    id: str
    display_name: str
    aliases: tuple[str, ...] = ()
    billing: dict[str, Any] | None = None  # granularity_seconds, minimum_seconds, source, ...
    spot_notice_seconds: dict[str, Any] | None = None  # value, source, reliability
    spot_mtti_hours: dict[str, Any] | None = None  # value, source, reliability
    fabric: str | None = None  # an entry of a networking table; None: not described yet
    extra: dict[str, Any] = field(default_factory=dict)


@cache
def registry() -> dict[str, Any]:
    """The bundled data/providers.json as loaded (numbers as in the file)."""
    return read_json("providers.json")


@cache
def provider_table() -> dict[str, Provider]:
    table: dict[str, Provider] = {}
    for pid, entry in registry()["providers"].items():
        known = {k: entry.get(k) for k in ("billing", "spot_notice_seconds", "spot_mtti_hours",
                                           "fabric")}
        extra = {k: v for k, v in entry.items()
                 if k not in known and k not in ("display_name", "aliases")}
        table[pid] = Provider(id=pid, display_name=entry["display_name"],
                              aliases=tuple(entry.get("aliases", ())), extra=extra, **known)
    return table


@cache
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for provider in provider_table().values():
        index[provider.id] = provider.id
        for alias in provider.aliases:
            index.setdefault(alias, provider.id)
    return index


def provider_id(name: str) -> str:
    """The tracker's id for a provider name a source uses (`lambdalabs` -> `lambda`);
    a name the registry does not know is kept as it is (sources list new providers first)."""
    return _alias_index().get(name, name)


def display_name(pid: str) -> str:
    provider = provider_table().get(pid)
    return provider.display_name if provider else pid.replace("-", " ").title()


def provider_defaults() -> dict[str, Any]:
    """What applies to a provider without its own entry (billing, spot MTTI)."""
    return dict(registry()["default"])
