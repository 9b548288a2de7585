"""The book's symbols: the notation page's tables and the shape letters each chapter uses.

``chapters/notation.md`` holds two tables that this module reads:

- **Shapes** (``| **B** | batch size |``): the book-wide letters, one meaning each;
- **Chapter-local symbols** (``| 7 | **W** | image width |``): a letter one chapter uses in a
  meaning of its own. A local row whose letter is also book-wide is a *declared exception*: the
  chapter uses that letter in another meaning, and says so here.

A chapter's **used** letters are read from its shape annotations: the tuples such as
``(B, H, T, Dh)`` in code comments, in printed sources (``inspect.getsource`` output) and in the
markdown's inline code. ``tests/test_notation.py`` checks that every used letter is declared for
that chapter, and that no letter has two meanings in one scope.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTATION = ROOT / "chapters" / "notation.md"

_LETTER = r"\d*[A-Z][a-z]{0,2}"  # B, Dh, Hkv, 2He
_ELEMENT = re.compile(rf"^(?:{_LETTER}|\d+)(?:\s*[-+*/·]\s*(?:{_LETTER}|\d+))*$|^\d+$|^[a-z_][a-z_0-9]*$|^(?:\.\.\.|…)$")
_WORD = re.compile(r"(?<![A-Za-z])[A-Z][a-z]{0,2}(?![A-Za-z])")
_TUPLE = re.compile(r"\(([^()]*)\)")


@dataclass(frozen=True)
class Row:
    symbol: str
    meaning: str
    chapter: int | None = None  # None: book-wide


def _table(text: str, heading: str) -> list[list[str]]:
    """The cells of the first markdown table under ``## heading``."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        return []
    rows = []
    for line in match.group(1).splitlines():
        if line.startswith("|") and not re.match(r"^\|\s*-", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:]  # without the header


def _symbols(cell: str) -> list[str]:
    return re.findall(r"\*\*([A-Za-z]+)\*\*", cell)


def book_wide(text: str) -> list[Row]:
    """The rows of the Shapes table, one per letter (a row may name two, **He**, **Hd**)."""
    return [Row(symbol, meaning) for letters, meaning in (r[:2] for r in _table(text, "Shapes"))
            for symbol in _symbols(letters)]


def chapter_local(text: str) -> list[Row]:
    """The rows of the Chapter-local symbols table."""
    rows = []
    for cells in _table(text, "Chapter-local symbols"):
        chapter, letters, meaning = cells[:3]
        for number in re.findall(r"\d+", chapter):
            rows.extend(Row(symbol, meaning, int(number)) for symbol in _symbols(letters))
    return rows


def shape_letters(annotation: str) -> set[str]:
    """The letters of every shape tuple in ``annotation`` (a comment, a docstring, code span)."""
    letters = set()
    for match in _TUPLE.finditer(annotation):
        elements = [e.strip() for e in match.group(1).split(",") if e.strip()]
        if len(elements) < 2 or not all(_ELEMENT.match(e) for e in elements):
            continue
        found = {w for e in elements for w in _WORD.findall(e)}
        letters |= found
    return letters


def _annotations(source: str) -> list[str]:
    """Comments and docstring lines of a code text (where shapes are written)."""
    out = []
    for line in source.splitlines():
        if "#" in line:
            out.append(line[line.index("#"):])
        if '"""' in line or "``" in line:
            out.append(line)
    return out


def used_letters(nb: dict) -> dict[str, set[str]]:
    """Letter -> where it is used ("cell N"), for one notebook."""
    used: dict[str, set[str]] = {}
    for index, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        texts = []
        if cell["cell_type"] == "code":
            texts += _annotations(source)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream":
                    texts += _annotations("".join(output.get("text", "")))
        else:
            texts += re.findall(r"``?([^`]+)``?", source)
        for text in texts:
            for letter in shape_letters(text):
                used.setdefault(letter, set()).add(f"cell {index}")
    return used


def chapters() -> dict[int, Path]:
    return {int(p.name[:2]): p for p in sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))}


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
