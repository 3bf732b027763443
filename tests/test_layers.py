"""Imports flow downward only: every module's imports, read with `ast` (function-level and
TYPE_CHECKING imports included, and modules named by string to `import_module` or the
config's `choice_of`), against the layer order of docs/architecture.md.

A module may import from its own layer and any layer below it; an import from a higher layer
fails this test with the module, the line and the imported name. A module no rule names fails
too, so a new file is placed deliberately.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tracker", "scrapers", "reports")

# Lowest first. A module belongs to the layer of the longest prefix that names it (a prefix
# ending in `$` names that module only: `tracker$` is the package's __init__).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("tracker$", "tracker.errors", "tracker.secrets", "tracker.money",
                    "tracker.gpus", "tracker.providers", "tracker.categories", "tracker.types",
                    "tracker.fabric", "tracker.serialization", "tracker.config_toml",
                    "tracker.cron", "tracker.smtp", "tracker.http_settings",
                    "tracker.data_files", "tracker.bounds",
                    "tracker.local_input", "tracker.output_files")),
    ("sources", ("scrapers",)),
    ("store", ("tracker.db", "tracker.models", "tracker.migrations", "tracker.store",
               "tracker.ingest", "tracker.ingest_checks", "tracker.ingest_spans",
               "tracker.ingest_facts", "tracker.ingest_sql", "tracker.market.store",
               "tracker.locks", "tracker.jobs")),
    ("engines", ("tracker.sizing", "tracker.economics")),
    ("configuration", ("tracker.config", "tracker.config_checks", "tracker.config_paths")),
    ("application", ("tracker.answers", "tracker.market", "tracker.refresh", "tracker.backfill",
                     "tracker.backfill_gpuhunt", "tracker.catalogs", "tracker.crosscheck",
                     "tracker.freshness", "tracker.report_settings")),
    ("interfaces", ("tracker.commands", "tracker.cli", "tracker.__main__", "tracker.scheduler",
                    "reports")),
)
LAYER_NAMES = [name for name, _ in LAYERS]


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the longest prefix naming `module` (None: no rule names it)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if prefix.endswith("$"):
                named = module == prefix[:-1]
            else:
                named = module == prefix or module.startswith(prefix + ".")
            if named and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES
            for p in sorted((ROOT / package).rglob("*.py")) if "__pycache__" not in p.parts}


def imported_names(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in the file; `from a import b` gives `a.b` (b may be
    a module or a name in a), relative imports resolved against `module`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            found.extend((node.lineno, f"{origin}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and _string_import(node) is not None:
            found.append((node.lineno, _string_import(node) or ""))
    return found


STRING_IMPORTERS = ("import_module", "choice_of")  # calls whose first argument is a module


def _string_import(call: ast.Call) -> str | None:
    """`importlib.import_module("m")` or the config's `choice_of("m", NAME)`: the module `m`."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name in STRING_IMPORTERS and call.args and isinstance(call.args[0], ast.Constant) \
            and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def target_module(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported dotted name lives in (the longest known prefix)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def upward_imports() -> list[str]:
    modules = project_modules()
    problems: list[str] = []
    for module, path in modules.items():
        own = layer_of(module)
        for line, name in imported_names(path, module):
            target = target_module(name, modules)
            if target is None or target == module:
                continue
            theirs = layer_of(target)
            if own is not None and theirs is not None and theirs > own:
                problems.append(
                    f"{path.relative_to(ROOT)}:{line} ({LAYER_NAMES[own]}) imports {name} "
                    f"({LAYER_NAMES[theirs]})")
    return problems


def test_every_module_has_a_layer():
    unplaced = [m for m in project_modules() if layer_of(m) is None]
    assert unplaced == [], f"modules no layer names (add them to LAYERS): {unplaced}"


def test_imports_flow_downward_only():
    problems = upward_imports()
    assert problems == [], "imports from a higher layer:\n" + "\n".join(problems)


@pytest.mark.parametrize(("module", "layer"), [
    ("tracker.money", "foundation"), ("scrapers.aws", "sources"), ("tracker.market.store", "store"),
    ("tracker.sizing.engine", "engines"), ("tracker.market.index", "application"),
    ("tracker.commands.printing", "interfaces"), ("reports.sections.spot", "interfaces"),
])
def test_layer_of_takes_the_longest_prefix(module, layer):
    index = layer_of(module)
    assert index is not None and LAYER_NAMES[index] == layer


def test_an_upward_import_is_named(tmp_path, monkeypatch):
    """The check reports the module, line and name of an upward import (a planted one)."""
    package = tmp_path / "tracker"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "money.py").write_text("import json\n\ndef f():\n    from tracker.cli import x\n"
                                      "    importlib.import_module('tracker.cli')\n")
    (package / "cli.py").write_text("from tracker.money import f\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert upward_imports() == [
        "tracker/money.py:4 (foundation) imports tracker.cli.x (interfaces)",
        "tracker/money.py:5 (foundation) imports tracker.cli (interfaces)"]
