"""The bundled data files (the `data` package: gpus.json, economics.json, providers.json, ...).

Read through the package's loader (`pkgutil.get_data`, for a package in a directory or a zip
alike) rather than `importlib.resources`, whose import (tempfile, shutil, zipfile, bz2, lzma,
random) cost a fast command's start (`breakeven`, `size`) more than reading the files.
"""

from __future__ import annotations

import json
import pkgutil
from typing import Any

PACKAGE = "data"


def read_text(name: str) -> str:
    """The UTF-8 text of data/`name`."""
    raw = pkgutil.get_data(PACKAGE, name)
    if raw is None:  # a loader that cannot read files: not one Python's importers give
        raise FileNotFoundError(f"{PACKAGE}/{name}: the package's loader cannot read it")
    return raw.decode("utf-8")


def read_json(name: str, **options: Any) -> Any:
    """data/`name` parsed as JSON (`options` go to json.loads, e.g. parse_float=Decimal)."""
    return json.loads(read_text(name), **options)
