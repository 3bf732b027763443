"""The bundled files: `data/` (gpus.json, economics.json, providers.json, the dated price
snapshots, ...) and the report's `templates/`.

A wheel installs them as the packages `tracker.data` and `tracker.templates`, so its only
top-level import names are `tracker`, `scrapers` and `reports`; a checkout keeps them as the
top-level folders the project's layout names, and a run from a checkout reads them there.

Files are read through the package's loader (`pkgutil.get_data`) rather than
`importlib.resources`, whose import (tempfile, shutil, zipfile, bz2, lzma, random) cost a fast
command's start (`breakeven`, `size`) more than reading the files.
"""

from __future__ import annotations

import json
import pkgutil
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal

Bundle = Literal["data", "templates"]
CHECKOUT = Path(__file__).resolve().parents[2]  # tracker/core/ -> the checkout's root


@cache
def _installed(bundle: Bundle) -> bool:
    """Whether `tracker.<bundle>` is a package (a wheel, or an editable install's mapping)."""
    return find_spec(f"tracker.{bundle}") is not None


def bundled_dir(bundle: Bundle) -> Path:
    """The folder of the bundled `data` or `templates`."""
    if _installed(bundle):
        spec = find_spec(f"tracker.{bundle}")
        if spec is not None and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
    return CHECKOUT / bundle


def read_bytes(name: str) -> bytes:
    """The bytes of data/`name`."""
    if _installed("data"):
        raw = pkgutil.get_data("tracker.data", name)
        if raw is None:  # a loader that cannot read files: not one Python's importers give
            raise FileNotFoundError(f"data/{name}: the package's loader cannot read it")
        return raw
    return (CHECKOUT / "data" / name).read_bytes()


def read_text(name: str) -> str:
    """The UTF-8 text of data/`name`."""
    return read_bytes(name).decode("utf-8")


def read_json(name: str, **options: Any) -> Any:
    """data/`name` parsed as JSON (`options` go to json.loads, e.g. parse_float=Decimal)."""
    return json.loads(read_text(name), **options)
