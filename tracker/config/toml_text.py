"""The configuration as TOML: what `gpu-tracker config show` prints, written so that
`load_config` reads it back to the same values (tests/test_config.py checks the round trip).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

# Keys `config show` adds for people (a source's key variable, a source that failed to load):
# written as comments, so the printed TOML loads back as a configuration file.
COMMENT_KEYS = frozenset({"credentials", "error"})


def toml_value(value: Any) -> str:
    """One TOML value. Decimals are written as strings, exact (the schema reads them back to
    the same Decimal); strings use JSON escapes, which TOML basic strings share."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, Decimal):
        return json.dumps(str(value))  # exact, as a string: the schema reads it back as Decimal
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()
                                if v is not None) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Path):
        value = str(value)
    # JSON escapes the control characters below U+0020; TOML also forbids DEL (U+007F).
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_key(key: Any) -> str:
    text = str(key)
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else toml_value(text)


def to_toml(data: Mapping[str, Any]) -> str:
    """The configuration as a TOML document that `load_config` reads back to the same values
    (None values are left out: TOML has no null)."""
    lines: list[str] = []

    def is_table_array(value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(
            isinstance(item, Mapping) for item in value)

    def table(path: list[str], node: Mapping[str, Any]) -> None:
        scalars = {k: v for k, v in node.items() if v is not None
                   and not isinstance(v, Mapping) and not is_table_array(v)}
        if path and (scalars or not node):
            lines.append("")
            lines.append(f"[{'.'.join(toml_key(p) for p in path)}]")
        for key, value in scalars.items():
            if key in COMMENT_KEYS:
                lines.append(f"# {key}: {' '.join(str(value).split())}")
            else:
                lines.append(f"{toml_key(key)} = {toml_value(value)}")
        for key, value in node.items():
            if isinstance(value, Mapping):
                table([*path, str(key)], value)
            elif is_table_array(value):
                for item in value:
                    lines.append("")
                    lines.append(f"[[{'.'.join(toml_key(p) for p in [*path, str(key)])}]]")
                    for k, v in item.items():
                        if v is not None:
                            lines.append(f"{toml_key(k)} = {toml_value(v)}")

    table([], data)
    return "\n".join(lines).strip() + "\n"
