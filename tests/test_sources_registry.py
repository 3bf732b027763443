"""Meta-tests over the registry: every source is well-formed and has recorded-fixture tests."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from scrapers import SOURCES, load_source
from scrapers.base import Source

TESTS = Path(__file__).parent


def test_names_are_unique_and_match_their_class():
    assert len(SOURCES) == len(set(SOURCES))
    classes = [load_source(name) for name in SOURCES]
    assert len({cls for cls in classes}) == len(classes)
    for name, cls in zip(SOURCES, classes, strict=True):
        assert issubclass(cls, Source)
        assert cls.name == name
        assert cls.description, name
        assert "url" in cls.DEFAULTS, f"{name}: every base URL must be configurable"


def test_every_scraper_module_is_registered():
    registered = {module for module, _cls in SOURCES.values()}
    package = Path(importlib.import_module("scrapers").__file__).parent
    modules = {f"scrapers.{p.stem}" for p in package.glob("*.py")
               if p.stem not in {"__init__", "base", "http"}}
    # A source's own helper module, `<source>_<part>.py`, is no source: its source imports it.
    helpers = {m for m in modules - registered
               if m.split("_")[0] in registered
               and m in (package / f"{m.split('_')[0].split('.')[1]}.py").read_text()}
    assert modules - helpers == registered


@pytest.mark.parametrize("name", list(SOURCES))
def test_every_source_has_a_fixture_test(name):
    module = SOURCES[name][0].split(".")[-1]
    test_file = TESTS / "scrapers" / f"test_{module}.py"
    assert test_file.exists(), f"{name}: missing {test_file.relative_to(TESTS.parent)}"
    fixtures = TESTS / "fixtures" / name
    if name != "bundled":  # the bundled source's recordings are the package's own data/
        assert fixtures.is_dir() and any(fixtures.iterdir()), f"{name}: no recorded fixtures"
    text = test_file.read_text()
    assert "def test_" in text and "assert" in text


@pytest.mark.parametrize("name", list(SOURCES))
def test_url_is_configurable_by_environment(name):
    cls = load_source(name)
    env = {f"GPU_TRACKER_SOURCE_{name.upper()}_URL": "http://127.0.0.1:9/x"}
    assert cls.resolve_settings({}, env)["url"] == "http://127.0.0.1:9/x"


def test_secret_env_names_follow_the_convention():
    for name in SOURCES:
        cls = load_source(name)
        if cls.SECRET_ENV:
            assert cls.SECRET_ENV.startswith("GPU_TRACKER_")
            assert "fetch" in dict(inspect.getmembers(cls))
