"""One notation for the whole book: the shape letters every chapter uses are declared.

``chapters/notation.md`` gives each shape letter one book-wide meaning (its Shapes table) and
lists the letters a chapter uses in a meaning of its own (its Chapter-local symbols table); a
local row for a book-wide letter is a declared exception. The letters a chapter *uses* are read
from its shape annotations, ``(B, H, T, Dh)`` in comments, printed sources and inline code
(``tools.notation``). A clash is caught in three ways: a letter used but declared nowhere for
that chapter, a letter given two book-wide meanings, or one chapter declaring a letter twice
with different meanings. The synthetic cases at the end show each can fail.

What this cannot see: a chapter that writes ``(B, C, H, W)`` with **H** the image height uses a
declared letter, so the test passes unless the chapter-local table says so; it catches the new
letters (**W** there) and every duplicate, and it makes each exception visible in one table.
"""
import pytest

from tools import notation

TEXT = notation.NOTATION.read_text(encoding="utf-8")
CHAPTERS = notation.chapters()


def clashes(text: str, notebooks: dict[int, dict]) -> list[str]:
    """Every problem the notation page and the chapters have together."""
    problems = []
    meanings: dict[str, str] = {}
    for row in notation.book_wide(text):
        if row.symbol in meanings and meanings[row.symbol] != row.meaning:
            problems.append(f"{row.symbol}: two book-wide meanings, {meanings[row.symbol]!r} and "
                            f"{row.meaning!r}")
        meanings.setdefault(row.symbol, row.meaning)
    local: dict[tuple[int, str], str] = {}
    for row in notation.chapter_local(text):
        if row.chapter not in notebooks:
            problems.append(f"Chapter {row.chapter} declares {row.symbol} but there is no such chapter")
        key = (row.chapter, row.symbol)
        if key in local and local[key] != row.meaning:
            problems.append(f"Chapter {row.chapter}: {row.symbol} declared twice, {local[key]!r} and "
                            f"{row.meaning!r}")
        local.setdefault(key, row.meaning)
    for number, nb in sorted(notebooks.items()):
        for letter, where in sorted(notation.used_letters(nb).items()):
            if letter not in meanings and (number, letter) not in local:
                problems.append(f"Chapter {number} uses {letter} ({', '.join(sorted(where))}), "
                                "declared neither book-wide nor for this chapter in notation.md")
    return problems


def test_the_tables_are_read():
    wide = {row.symbol for row in notation.book_wide(TEXT)}
    assert {"B", "S", "T", "D", "H", "Dh", "V", "N", "L", "P"} <= wide
    assert notation.chapter_local(TEXT), "no Chapter-local symbols table found"


def test_every_letter_a_chapter_uses_is_declared_once():
    notebooks = {number: notation.load(path) for number, path in CHAPTERS.items()}
    assert clashes(TEXT, notebooks) == []


def test_the_shape_reader_finds_shapes_and_only_shapes():
    assert notation.shape_letters("# (B, H, T, Dh)") == {"B", "H", "T", "Dh"}
    assert notation.shape_letters("# (B, E + 2He), (T, P+T), (B, N, C·P·P)") == \
        {"B", "E", "He", "T", "P", "N", "C"}
    assert notation.shape_letters("# (B, C, rows, P, cols, P)") == {"B", "C", "P"}
    assert notation.shape_letters("# mask (True = may attend), f(x, y)") == set()
    assert notation.shape_letters("print(Q, K)") == {"Q", "K"}  # a tuple of capitals counts


# --- synthetic clashes: each kind is caught ------------------------------------------------------
def _nb(*comments):
    return {"cells": [{"cell_type": "code", "source": "".join(f"x = 1  # {c}\n" for c in comments),
                       "outputs": []}]}


def _book(**shapes):
    """Empty stand-ins for every chapter, with the given comments in some (key "chNN")."""
    books = {number: _nb() for number in CHAPTERS}
    books.update({int(k[2:]): _nb(*v) for k, v in shapes.items()})
    return books


def test_the_stand_in_book_has_no_clash():
    assert clashes(TEXT, _book(ch07=["(B, C, H, W)"], ch04=["(B, H, P+T, Dh)"])) == []


def test_a_letter_used_but_never_declared_is_caught():
    text = TEXT.replace("| 7 | **H**, **W** |", "| 7 | **H** |")
    assert clashes(text, _book(ch07=["(B, C, H, W)"])) == [
        "Chapter 7 uses W (cell 0), declared neither book-wide nor for this chapter in notation.md"]


def test_a_letter_declared_for_another_chapter_only_is_caught():
    assert clashes(TEXT, _book(ch08=["(B, C, H, W)"])) == [
        "Chapter 8 uses W (cell 0), declared neither book-wide nor for this chapter in notation.md"]


def test_two_book_wide_meanings_are_caught():
    text = TEXT.replace("| **B** | batch size |", "| **B** | batch size |\n| **B** | beam width |")
    assert clashes(text, _book()) == [
        "B: two book-wide meanings, 'batch size' and 'beam width'"]


def test_one_chapter_declaring_a_letter_twice_is_caught():
    text = TEXT.replace("## Masks", "| 7 | **W** | width of a patch |\n\n## Masks")
    twice = [p for p in clashes(text, _book()) if "declared twice" in p]
    assert len(twice) == 1 and twice[0].startswith("Chapter 7: W declared twice")
    assert twice[0].endswith("and 'width of a patch'")


def test_a_declaration_for_a_missing_chapter_is_caught():
    text = TEXT.replace("## Masks", "| 42 | **Q** | something |\n\n## Masks")
    assert clashes(text, _book()) == ["Chapter 42 declares Q but there is no such chapter"]


@pytest.mark.parametrize("number", sorted(CHAPTERS))
def test_declared_exceptions_are_listed(number):
    """Not a check: prints each chapter's declared exceptions (``pytest -s`` shows them), the
    local meanings of book-wide letters that remain to be renamed."""
    wide = {row.symbol for row in notation.book_wide(TEXT)}
    for row in notation.chapter_local(TEXT):
        if row.chapter == number and row.symbol in wide:
            print(f"Chapter {number}: {row.symbol} = {row.meaning}")
