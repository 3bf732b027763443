"""Every citation in code, tests and data names a file in the repository, and that file has the
section it cites.

A clone must be able to check every reference case: "docs/sizing.md §2 case 7" has to lead to a
heading `2.` in docs/sizing.md with a table row `| 7 |`; "docs/claims.md B3" to a row `| B3 |`.
Bare names of the reference notes this project was written from ("sizing.md §1.3" without
`docs/`) are refused, because they point outside the repository.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED_DIRS = ("tracker", "scrapers", "reports", "templates", "data", "bench", "tests", "docs")
SCANNED_SUFFIXES = {".py", ".json", ".md", ".html", ".txt", ".toml", ".csv"}
SCANNED_FILES = ("README.md", "pyproject.toml")

# A cited doc of this repository (not `owner/repo:docs/x.md`) and the text after it, up to the
# end of the clause that carries its sections.
CITATION = re.compile(r"(?<![\w:/.-])docs/(?P<name>[\w-]+\.md)(?P<tail>[^)\];\n\"]*)")
SECTION = re.compile(r"§\s*(?P<number>\d+(?:\.\d+)*)(?:\s*[-–]\s*(?P<until>\d+(?:\.\d+)*))?"
                     r"(?:\s+cases?\s+(?P<cases>\d+(?:\s*(?:,|and)\s*\d+)*))?")
CLAIM = re.compile(r"\b(?P<claim>[AB]\d{1,2})\b")
# A reference-note name without the docs/ directory in front of it.
BARE_NAME = re.compile(r"(?<![/\w.-])(sizing|economics|sources|claims|serving|fabric|style)\.md\b")


def scanned_files() -> list[Path]:
    files = [ROOT / name for name in SCANNED_FILES if (ROOT / name).exists()]
    for directory in SCANNED_DIRS:
        for path in sorted((ROOT / directory).rglob("*")):
            if path.suffix in SCANNED_SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return [p for p in files if p.is_file() and p != Path(__file__).resolve()]


def citations() -> list[tuple[str, str, str]]:
    """(where, doc name, the text after it) for every `docs/<name>.md` in the scanned files."""
    found = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match["name"], match["tail"]))
    return found


@cache
def _line_starts(name: str, pattern: str) -> frozenset[str]:
    """The first group of `pattern` on every line of docs/<name> where it matches."""
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    return frozenset(m[1] for line in text.splitlines() if (m := re.match(pattern, line)))


def headings(name: str) -> frozenset[str]:
    """Section numbers of a doc's headings: `### 1.3 Training` -> "1.3", `## 2. Cases` -> "2"."""
    return _line_starts(name, r"#+\s+(\d+(?:\.\d+)*)\.?\s")


def table_rows(name: str) -> frozenset[str]:
    """First cells of a doc's table rows: the case and claim numbers."""
    return _line_starts(name, r"\|\s*([AB]?\d+)\s*\|")


ALL_CITATIONS = citations()


def test_the_scan_finds_the_citations() -> None:
    # The code and tests cite docs/sizing.md and docs/economics.md dozens of times; a scan that
    # finds a handful has stopped looking where they are.
    assert len(ALL_CITATIONS) >= 60
    assert {name for _, name, _ in ALL_CITATIONS} >= {
        "sizing.md", "economics.md", "sources.md", "claims.md"}


@pytest.mark.parametrize(("where", "name", "tail"), ALL_CITATIONS,
                         ids=[f"{w}:{n}" for w, n, _ in ALL_CITATIONS])
def test_cited_doc_and_section_exist(where: str, name: str, tail: str) -> None:
    assert (ROOT / "docs" / name).is_file(), f"{where} cites docs/{name}, which does not exist"
    for section in SECTION.finditer(tail):
        for number in filter(None, (section["number"], section["until"])):
            assert number in headings(name), f"{where} cites docs/{name} §{number}: no such heading"
        if section["cases"]:
            for case in re.findall(r"\d+", section["cases"]):
                assert case in table_rows(name), (
                    f"{where} cites docs/{name} §{section['number']} case {case}: no such row")
    if name == "claims.md":
        for claim in CLAIM.finditer(tail):
            assert claim["claim"] in table_rows(name), (
                f"{where} cites docs/{name} {claim['claim']}: no such claim")


def test_no_citation_points_outside_the_repository() -> None:
    outside = []
    for path in scanned_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if BARE_NAME.search(line) or "/work/shared" in line:
                outside.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:90]}")
    assert not outside, "citations that name no file in the repository:\n" + "\n".join(outside)


def test_a_wrong_section_is_caught() -> None:
    # The checker itself: a section that does not exist must not pass.
    assert "1.3" in headings("sizing.md")
    assert "9.9" not in headings("sizing.md")
    assert "26" in table_rows("economics.md") and "99" not in table_rows("economics.md")
    assert "B3" in table_rows("claims.md")
