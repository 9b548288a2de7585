"""Vocabularies: symbols <-> integer ids, with the book's four special tokens."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


class Vocab:
    """Ids 0-3 are ``<pad> <bos> <eos> <unk>``; the symbols follow in the order given."""

    def __init__(self, symbols: Iterable[str]) -> None:
        symbols = list(symbols)
        clash = [s for s in symbols if s in SPECIALS]
        if clash:
            raise ValueError(f"symbols may not include the special tokens {SPECIALS}; got {clash}")
        if len(set(symbols)) != len(symbols):
            raise ValueError("symbols contain duplicates")
        self.itos: list[str] = [*SPECIALS, *symbols]
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(4)

    def __len__(self) -> int:
        return len(self.itos)

    def __repr__(self) -> str:
        return f"Vocab({len(self)} entries: {' '.join(self.itos[:12])}{' ...' if len(self) > 12 else ''})"

    def encode(self, symbols: Sequence[str], allow_unknown: bool = False) -> list[int]:
        """Ids for ``symbols``. An unknown symbol raises, unless ``allow_unknown`` maps it to ``<unk>``."""
        ids = []
        for position, s in enumerate(symbols):
            if s in self.stoi:
                ids.append(self.stoi[s])
            elif allow_unknown:
                ids.append(self.unk_id)
            else:
                known = " ".join(self.itos[len(SPECIALS):])
                raise KeyError(f"unknown symbol {s!r} at position {position} of {list(symbols)!r}; known: {known}")
        return ids

    def decode(self, ids: Iterable[int], strip_specials: bool = True) -> list[str]:
        """Symbols for ``ids``, stopping at ``<eos>`` and dropping ``<pad>``/``<bos>`` when asked."""
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self):
                raise IndexError(f"id {i} is outside this vocabulary of {len(self)} entries")
            if strip_specials:
                if i == self.eos_id:
                    break
                if i in (self.pad_id, self.bos_id):
                    continue
            out.append(self.itos[i])
        return out
