"""Code-health figures for issue #10's before/after note, printed in one process.

    python bench/code_health.py [--root DIR] [--no-mypy]

Prints, for the tree at --root (default: this checkout):

- the longest function or method in the project's code (tracker, scrapers, reports, templates,
  data, bench, tools; tests are reported on their own line), by lines from `def` to its end;
- how many modules are over 600 lines (ARCHITECTURE's "asking to be split" threshold);
- `duplicates` pairs (the house tool; pairs that touch generated golden files or recorded
  fixtures are left out, since those are data that happen to end in .html/.py);
- the error count of `mypy` with the [tool.mypy] configuration of this checkout's
  pyproject.toml (CI runs mypy and requires zero; --root shows an older revision's count).

To measure another revision, export it and point --root at it, e.g.
`git archive fd5519b | tar -x -C /tmp/base && python bench/code_health.py --root /tmp/base`.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PROJECT_DIRS = ("tracker", "scrapers", "reports", "templates", "data", "bench", "tools")
MODULE_LIMIT = 600
# Generated or recorded files that are not code anyone wrote twice.
NOT_CODE = ("tests/reports/test_golden/", "tests/fixtures/")


def python_files(root: Path, dirs: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for name in dirs:
        files.extend(p for p in sorted((root / name).rglob("*.py")) if "__pycache__" not in p.parts)
    return files


def longest_function(files: list[Path], root: Path) -> tuple[str, int]:
    best = ("", 0)
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    qualified = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        length = (child.end_lineno or child.lineno) - child.lineno + 1
                        if length > best[1]:
                            best = (f"{path.relative_to(root)}:{child.lineno} {qualified}", length)
                    stack.append((child, qualified + "."))
                else:
                    stack.append((child, prefix))
    return best


def long_modules(files: list[Path], root: Path) -> list[tuple[str, int]]:
    sizes = [(str(p.relative_to(root)), len(p.read_text(encoding="utf-8").splitlines()))
             for p in files]
    return sorted((s for s in sizes if s[1] > MODULE_LIMIT), key=lambda s: -s[1])


def duplicate_pairs(root: Path) -> tuple[int | None, str]:
    """(pairs not touching generated/recorded files, the tool's own summary line)."""
    tool = shutil.which("duplicates")
    if tool is None:
        return None, "duplicates: not installed"
    done = subprocess.run([tool, "--repo", str(root), "--most", "200", "--seconds", "120"],
                          capture_output=True, text=True, timeout=300, check=False)
    lines = done.stdout.splitlines()
    rows = [line for line in lines if re.match(r"D\d+ ", line)]
    kept = [row for row in rows if not any(marker in row for marker in NOT_CODE)]
    more = next((int(m[1]) for line in lines if (m := re.match(r"\(\+(\d+) more pairs\)", line))),
                0)
    summary = lines[0] if lines else "duplicates: no output"
    return len(kept) + more, summary


def mypy_errors(root: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file",
                           str(HERE / "pyproject.toml"), "--no-incremental"],
                          cwd=root, capture_output=True, text=True, timeout=1200, check=False)
    found = re.search(r"Found (\d+) errors? in (\d+) files?", done.stdout)
    if found:
        return f"{found[1]} errors in {found[2]} files"
    if "Success" in done.stdout:
        return "0 errors"
    return "mypy did not run: " + (done.stderr or done.stdout).strip()[:200]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=HERE)
    parser.add_argument("--no-mypy", action="store_true", help="skip the (slow) mypy run")
    args = parser.parse_args()
    root = args.root.resolve()
    code = python_files(root, PROJECT_DIRS)
    name, lines = longest_function(code, root)
    test_name, test_lines = longest_function(python_files(root, ("tests",)), root)
    big = long_modules(code, root)
    pairs, summary = duplicate_pairs(root)
    print(f"tree: {root}")
    print(f"longest function: {name} ({lines} lines)")
    print(f"longest test function: {test_name} ({test_lines} lines)")
    print(f"modules over {MODULE_LIMIT} lines: {len(big)}"
          + (" (" + ", ".join(f"{m} {n}" for m, n in big) + ")" if big else ""))
    print(f"duplicates pairs (code only): {pairs}; tool: {summary}")
    if not args.no_mypy:
        print(f"mypy: {mypy_errors(root)}")


if __name__ == "__main__":
    main()
