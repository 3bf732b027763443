"""The explicit registry of price sources: name -> (module, class). Imported lazily."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tracker.core.errors import NotFound

if TYPE_CHECKING:
    from scrapers.base import Source

SOURCES: dict[str, tuple[str, str]] = {
    "bundled": ("scrapers.bundled", "BundledSource"),
    "azure": ("scrapers.azure", "AzureSource"),
    "aws": ("scrapers.aws", "AwsSource"),
    "gcp": ("scrapers.gcp", "GcpSource"),
    "lambda": ("scrapers.lambdalabs", "LambdaSource"),
    "runpod": ("scrapers.runpod", "RunpodSource"),
    "vastai": ("scrapers.vastai", "VastaiSource"),
    "skypilot": ("scrapers.skypilot", "SkypilotSource"),
    "gpuhunt": ("scrapers.gpuhunt", "GpuhuntSource"),
    "quotes": ("scrapers.quotes", "QuotesSource"),
    "ecb": ("scrapers.ecb", "EcbSource"),
}


def source_names() -> list[str]:
    return list(SOURCES)


def load_source(name: str) -> type[Source]:
    try:
        module_name, class_name = SOURCES[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, SOURCES, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise NotFound(f"unknown source {name!r}{hint} (known: {', '.join(SOURCES)})") from None
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls
