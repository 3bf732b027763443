"""The tree is the layer table: a module's layer is its package, and imports flow downward.

Every module's imports are read with `ast` (function-level and TYPE_CHECKING imports included,
and modules named by string to `import_module` or the config's `choice_of`). A module may import
from its own layer and any layer below it; an import from a higher layer fails with the module,
the line and the imported name. A module in no layer's package fails too (tracker/ itself holds
only `__init__.py` and `__main__.py`), so a new file goes into the folder of its layer. The
same reading checks that each third-party library is imported only by its owning package and
that no files import each other in a loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tracker", "scrapers", "reports")

# Lowest first: the packages of each layer (docs/architecture.md draws the same table).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("tracker", "tracker.core")),
    ("sources", ("scrapers",)),
    ("store", ("tracker.store",)),
    ("engines", ("tracker.sizing", "tracker.economics")),
    ("configuration", ("tracker.config",)),
    ("application", ("tracker.answers", "tracker.collect", "tracker.market")),
    ("interfaces", ("tracker.cli", "tracker.__main__", "reports")),
)
LAYER_NAMES = [name for name, _ in LAYERS]
_LAYER_OF_PACKAGE = {package: index for index, (_, packages) in enumerate(LAYERS)
                     for package in packages}


def package_of(module: str) -> str:
    """The layer package a module is in: `tracker.<folder>` inside tracker (the package's own
    `__init__` is `tracker`), the top-level package otherwise."""
    parts = module.split(".")
    if parts[0] == "tracker" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the module's package (None: a module in no layer's package)."""
    return _LAYER_OF_PACKAGE.get(package_of(module))


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
    ("tracker", "foundation"), ("tracker.core.money", "foundation"),
    ("scrapers.aws", "sources"), ("tracker.store.market", "store"),
    ("tracker.store.ingest.spans", "store"), ("tracker.sizing.engine", "engines"),
    ("tracker.config.schema", "configuration"), ("tracker.market.index", "application"),
    ("tracker.collect.refresh", "application"), ("tracker.cli.commands.printing", "interfaces"),
    ("reports.sections.spot", "interfaces"), ("tracker.__main__", "interfaces"),
])
def test_a_modules_layer_is_its_package(module, layer):
    index = layer_of(module)
    assert index is not None and LAYER_NAMES[index] == layer


def test_a_loose_module_in_tracker_has_no_layer():
    assert layer_of("tracker.helpers") is None


def test_tracker_itself_holds_only_the_package_and_its_main():
    loose = sorted(p.name for p in (ROOT / "tracker").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]


def test_every_package_folder_has_a_layer():
    folders = sorted(f"tracker.{p.name}" for p in (ROOT / "tracker").iterdir()
                     if p.is_dir() and (p / "__init__.py").exists())
    assert [f for f in folders if f not in _LAYER_OF_PACKAGE] == []


def test_an_upward_import_is_named(tmp_path, monkeypatch):
    """The check reports the module, line and name of an upward import (a planted one)."""
    for folder in ("tracker", "tracker/core", "tracker/cli"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "tracker/core/money.py").write_text(
        "import json\n\ndef f():\n    from tracker.cli.main import x\n"
        "    importlib.import_module('tracker.cli.main')\n")
    (tmp_path / "tracker/cli/main.py").write_text("from tracker.core.money import f\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert upward_imports() == [
        "tracker/core/money.py:4 (foundation) imports tracker.cli.main.x (interfaces)",
        "tracker/core/money.py:5 (foundation) imports tracker.cli.main (interfaces)"]


# Each third-party library has one owning place: the package (or module) that may import it.
LIBRARY_OWNERS: dict[str, tuple[str, ...]] = {
    "sqlalchemy": ("tracker.store",),
    "sqlmodel": ("tracker.store",),
    "alembic": ("tracker.store",),
    "click": ("tracker.cli",),
    "httpx": ("scrapers.http",),
    "jinja2": ("reports",),
    "matplotlib": ("reports",),
    "css_inline": ("reports",),
    "pydantic": ("tracker.config", "scrapers.base"),
    "apscheduler": ("tracker.cli.scheduler", "tracker.core.cron"),
}
# Imports outside the owner that are still to be moved behind it. The test fails when one is
# added, and when one of these no longer imports the library (so the list only shrinks).
NOT_YET_OWNED: frozenset[tuple[str, str]] = frozenset()


def _owned_by(module: str, owners: tuple[str, ...]) -> bool:
    return any(module == owner or module.startswith(owner + ".") for owner in owners)


def library_imports() -> set[tuple[str, str]]:
    """(library, module) for every import of an owned library outside its owner."""
    found: set[tuple[str, str]] = set()
    for module, path in project_modules().items():
        for _, name in imported_names(path, module):
            library = name.split(".")[0]
            owners = LIBRARY_OWNERS.get(library)
            if owners and not _owned_by(module, owners):
                found.add((library, module))
    return found


def test_each_library_is_imported_only_by_its_owner():
    outside = library_imports()
    assert sorted(outside - NOT_YET_OWNED) == [], "a library imported outside its owner"
    assert sorted(NOT_YET_OWNED - outside) == [], "moved behind its owner: drop it from the list"


# Files that import each other in a loop. The list only shrinks.
KNOWN_LOOPS: list[list[str]] = []


def import_loops() -> list[list[str]]:
    """The strongly connected groups of two or more modules in the import graph."""
    modules = project_modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for _, name in imported_names(path, module):
            target = target_module(name, modules)
            if target is not None and target != module:
                graph[module].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                loops.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(loops)


def test_no_files_import_each_other_in_a_loop():
    assert import_loops() == sorted(KNOWN_LOOPS)


# Private names imported from another module of the project. The list only shrinks.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def private_imports() -> set[tuple[str, str]]:
    """(importing module, imported dotted name) for every `_name` (not `__dunder__`) imported
    from another project module: what modules share belongs in a public name."""
    modules = project_modules()
    found: set[tuple[str, str]] = set()
    for module, path in modules.items():
        for _, name in imported_names(path, module):
            last = name.rsplit(".", 1)[-1]
            if not last.startswith("_") or last.startswith("__"):
                continue
            target = target_module(name, modules)
            if target is not None and target != module:
                found.add((module, name))
    return found


def test_no_module_imports_another_modules_private_names():
    found = private_imports()
    assert sorted(found - KNOWN_PRIVATE_IMPORTS) == [], "share it under a public name"
    assert sorted(KNOWN_PRIVATE_IMPORTS - found) == [], "made public: drop it from the list"
