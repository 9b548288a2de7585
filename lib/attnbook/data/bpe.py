"""Byte-level byte-pair encoding (BPE), trained from scratch (Sennrich et al., 2016; GPT-2's
byte-level variant, Radford et al., 2019).

The base alphabet is the 256 byte values, so every text (any script, any emoji) has an encoding
and ``decode(encode(text)) == text``. Text is first cut into pieces the way GPT-2 does (a word
with the space before it, a number, a run of punctuation, whitespace; ``pre_split``); merges
never cross a piece boundary. Training works on the *counts* of distinct pieces, as the
original BPE does: count adjacent pairs (weighted by how often each piece occurs), merge the
most frequent pair into a new token, repeat. Ties go to the smallest pair of ids, so training
is deterministic. Only the pieces that hold the merged pair are updated after each merge, and
a heap finds the next most frequent pair, so a corpus of a million words trains in seconds.

Token ids: 0-255 are the bytes; merge number ``m`` (from 0) creates id ``256 + m``.
"""
from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# GPT-2's pre-tokenizer with Python's ``re`` (no \p{L}): contractions, an optional space plus
# letters, plus digits, plus other symbols; whitespace runs (the last space of a run goes with
# the next word). Every character matches some branch, so the pieces join back to the text.
_PIECE = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

Pair = tuple[int, int]


def pre_split(text: str) -> list[str]:
    """Cut ``text`` into the pieces BPE works inside: ``"Let there be light."`` ->
    ``['Let', ' there', ' be', ' light', '.']``. ``''.join(pre_split(text)) == text``."""
    return _PIECE.findall(text)


def merge_pair(ids: Sequence[int], pair: Pair, new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``ids``, left to right, by ``new_id``:
    ``merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]``."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def count_pairs(pieces: dict[tuple[int, ...], int]) -> Counter:
    """How often each adjacent pair occurs, each piece weighted by its count."""
    pairs: Counter = Counter()
    for ids, n in pieces.items():
        for pair in zip(ids, ids[1:]):
            pairs[pair] += n
    return pairs


@dataclass(frozen=True)
class BPE:
    """A trained byte-level BPE: the merges in the order they were learned."""

    merges: tuple[Pair, ...]

    @property
    def vocab_size(self) -> int:
        return 256 + len(self.merges)

    def token_bytes(self) -> list[bytes]:
        """The bytes each token id stands for (index = id)."""
        table = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            table.append(table[a] + table[b])
        return table

    def encode_piece(self, piece: str) -> list[int]:
        """Token ids of one pre-split piece: apply the learned merges in the order they were learned."""
        ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        return _encode_bytes(piece.encode("utf-8"), ranks)

    def encode(self, text: str) -> list[int]:
        """Text -> token ids. Each distinct piece is encoded once."""
        ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        seen: dict[str, list[int]] = {}
        out: list[int] = []
        for piece in pre_split(text):
            ids = seen.get(piece)
            if ids is None:
                ids = seen[piece] = _encode_bytes(piece.encode("utf-8"), ranks)
            out.extend(ids)
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text (bytes that are not valid UTF-8, e.g. half a character, become U+FFFD)."""
        table = self.token_bytes()
        try:
            data = b"".join(table[i] for i in ids)
        except IndexError:
            bad = [i for i in ids if not 0 <= i < len(table)]
            raise ValueError(f"token ids must be in [0, {len(table)}), got {bad[:5]}") from None
        return data.decode("utf-8", errors="replace")

    def tokens(self, text: str) -> list[str]:
        """The pieces of text each token covers, for display: ``'·'`` marks a space, and a
        token that is only part of a character shows its bytes (``'<f0 9f>'``)."""
        table = self.token_bytes()
        return [_show(table[i]) for i in self.encode(text)]


def _show(data: bytes) -> str:
    try:
        return data.decode("utf-8").replace(" ", "·")
    except UnicodeDecodeError:
        return "<" + " ".join(f"{b:02x}" for b in data) + ">"


def _encode_bytes(data: bytes, ranks: dict[Pair, int]) -> list[int]:
    ids = list(data)
    while len(ids) > 1:
        pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, len(ranks)))
        if pair not in ranks:
            break
        ids = merge_pair(ids, pair, 256 + ranks[pair])
    return ids


def train_bpe(text: str | Iterable[str], vocab_size: int) -> BPE:
    """Learn ``vocab_size - 256`` merges from ``text`` (a string, or an iterable of strings
    that are split separately). Stops early if no pair occurs any more."""
    if vocab_size < 256:
        raise ValueError(f"vocab_size must be >= 256 (the byte alphabet), got {vocab_size}")
    counts: Counter = Counter()
    for chunk in [text] if isinstance(text, str) else text:
        counts.update(pre_split(chunk))
    words = [list(piece.encode("utf-8")) for piece in counts]  # distinct pieces as byte ids
    weights = list(counts.values())
    pair_counts: Counter = Counter()
    where: defaultdict[Pair, set[int]] = defaultdict(set)  # pair -> pieces that (may) hold it
    for w, ids in enumerate(words):
        for pair in zip(ids, ids[1:]):
            pair_counts[pair] += weights[w]
            where[pair].add(w)
    heap = [(-n, pair) for pair, n in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[Pair] = []
    while len(merges) < vocab_size - 256 and heap:
        neg, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -neg or -neg <= 0:
            continue  # a stale heap entry: the count changed since it was pushed
        new_id = 256 + len(merges)
        merges.append(pair)
        changed = set()
        for w in sorted(where.pop(pair)):
            old = words[w]
            new = merge_pair(old, pair, new_id)
            if len(new) == len(old):
                continue
            for p in zip(old, old[1:]):
                pair_counts[p] -= weights[w]
                changed.add(p)
            for p in zip(new, new[1:]):
                pair_counts[p] += weights[w]
                where[p].add(w)
                changed.add(p)
            words[w] = new
        for p in changed:
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p))
            else:
                del pair_counts[p]
    return BPE(tuple(merges))
