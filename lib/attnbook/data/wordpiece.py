"""WordPiece tokenisation as BERT does it, from scratch, on a checkpoint's ``vocab.txt``.

Two stages (Devlin et al. 2018; the vocabulary scheme is Wu et al. 2016's WordPiece):

1. **Basic tokenisation** (:func:`basic_tokenize`): drop control characters and map every
   whitespace character to a space; put spaces around CJK ideographs; split on whitespace;
   lower-case and strip accents (Unicode NFD, then drop combining marks, category ``Mn``);
   split every punctuation character off as its own token.
2. **WordPiece** (:func:`wordpiece_split`): split each word greedily, longest match first,
   into vocabulary pieces; pieces after the first carry the ``##`` prefix. A word longer than
   ``max_chars_per_word`` characters, or one that cannot be covered by pieces, becomes ``[UNK]``
   as a whole.

Model inputs (:meth:`WordPieceTokenizer.encode_batch`): ``[CLS] A [SEP]`` or
``[CLS] A [SEP] B [SEP]``, segment ids 0 for ``[CLS] A [SEP]`` and 1 for ``B [SEP]``, padded
with ``[PAD]`` to the longest sequence, with a boolean ``token_mask`` (True on real tokens).

A special token spelled out in the text (``"[MASK]"``) is kept whole, as the reference tokenizer
keeps it; for training, masking happens on ids (see ``attnbook.tasks.masked_lm``).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
_SPECIAL = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")


# ----------------------------------------------------------------------------- character classes
def is_whitespace(char: str) -> bool:
    """Space, tab, newline, carriage return, or any Unicode space separator (category Zs)."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def is_control(char: str) -> bool:
    """A control or format character (category C*), except tab/newline/return (whitespace)."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def is_punctuation(char: str) -> bool:
    """Unicode punctuation (category P*), plus every non-alphanumeric printable ASCII character
    (``$``, ``+``, ``<``, ``^``, ``` ` ```, ``|``, ``~`` ... are symbols in Unicode; BERT splits them too)."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


_is_punctuation_cached = lru_cache(maxsize=65536)(is_punctuation)

_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def is_cjk(char: str) -> bool:
    """A CJK Unified Ideograph (the blocks BERT's tokenizer lists; not Hiragana, Katakana or Hangul)."""
    cp = ord(char)
    return any(low <= cp <= high for low, high in _CJK_RANGES)


# ----------------------------------------------------------------------------- basic tokenisation
def strip_accents(text: str) -> str:
    """Decompose (NFD) and drop combining marks: ``"café"`` -> ``"cafe"``."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def split_punctuation(word: str) -> list[str]:
    """``"don't!"`` -> ``["don", "'", "t", "!"]``: every punctuation character stands alone."""
    pieces: list[str] = []
    start_new = True
    for char in word:
        if _is_punctuation_cached(char):
            pieces.append(char)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += char
    return pieces


def basic_tokenize(text: str, lower_case: bool = True) -> list[str]:
    """Clean, isolate CJK ideographs, split on whitespace, lower-case + strip accents, split punctuation."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    words = []
    for word in "".join(_clean_char(char) for char in text).split():
        if lower_case:
            word = strip_accents(word.lower())
        words.extend(split_punctuation(word))
    return [w for w in words if w]


@lru_cache(maxsize=65536)
def _clean_char(char: str) -> str:
    """One character after cleaning: dropped (control, NUL, U+FFFD), a space, spaced (CJK), or itself.

    Cached because it is a pure function of one character and the corpus has few distinct ones.
    """
    if char == "\x00" or char == "\ufffd" or is_control(char):
        return ""
    if is_whitespace(char):
        return " "
    if is_cjk(char):
        return f" {char} "
    return char


# ----------------------------------------------------------------------------- WordPiece
def wordpiece_split(word: str, vocab: dict[str, int] | set[str], unk: str = UNK,
                    max_chars_per_word: int = 100) -> list[str]:
    """Greedy longest-match-first split of one word into vocabulary pieces.

    ``"unaffable"`` -> ``["una", "##ffa", "##ble"]`` (with BERT's uncased vocabulary). If some
    remainder matches no piece, or the word has more than ``max_chars_per_word`` characters,
    the whole word becomes ``[unk]``.
    """
    if len(word) > max_chars_per_word:
        return [unk]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:  # no piece matched: the word cannot be tokenised
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


@dataclass(frozen=True)
class BertInputs:
    """A padded batch of BERT inputs; all three tensors are ``(B, S)``."""

    input_ids: torch.Tensor     # (B, S) long, [PAD] after each sequence's end
    segment_ids: torch.Tensor   # (B, S) long, 0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding
    token_mask: torch.Tensor    # (B, S) bool, True on real tokens

    def to(self, device: torch.device | str) -> BertInputs:
        return BertInputs(self.input_ids.to(device), self.segment_ids.to(device), self.token_mask.to(device))


class WordPieceTokenizer:
    """BERT's tokenizer: :func:`basic_tokenize`, then :func:`wordpiece_split`, then special tokens.

    ``vocab`` lists the pieces in id order (line ``i`` of ``vocab.txt`` is id ``i``).
    """

    def __init__(self, vocab: Sequence[str], lower_case: bool = True, max_chars_per_word: int = 100):
        vocab = list(vocab)
        index = {piece: i for i, piece in enumerate(vocab)}
        if len(index) != len(vocab):
            raise ValueError(f"vocabulary has duplicate entries: {len(vocab)} lines, {len(index)} distinct")
        missing = [t for t in (PAD, UNK, CLS, SEP, MASK) if t not in index]
        if missing:
            raise ValueError(f"vocabulary lacks the special tokens {missing}")
        if max_chars_per_word < 1:
            raise ValueError(f"max_chars_per_word must be >= 1, got {max_chars_per_word}")
        self.vocab = vocab
        self.index = index
        self.lower_case = lower_case
        self.max_chars_per_word = max_chars_per_word
        self.pad_id, self.unk_id, self.cls_id = index[PAD], index[UNK], index[CLS]
        self.sep_id, self.mask_id = index[SEP], index[MASK]

    @classmethod
    def from_file(cls, path: str | Path, lower_case: bool = True) -> WordPieceTokenizer:
        """Read a ``vocab.txt`` (one piece per line, line number = id)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"vocabulary file not found: {path}")
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        return cls([line.rstrip("\r") for line in lines], lower_case=lower_case)

    def __len__(self) -> int:
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        """Text -> WordPiece strings. A special token written in the text (``"[MASK]"``, exactly
        so spelled) is kept whole, as the reference tokenizer does; no [CLS]/[SEP] are added."""
        tokens = []
        for part in _SPECIAL.split(text):
            if part in SPECIAL_TOKENS:
                tokens.append(part)
            else:
                tokens.extend(piece for word in basic_tokenize(part, self.lower_case)
                              for piece in wordpiece_split(word, self.index, UNK, self.max_chars_per_word))
        return tokens

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.index.get(t, self.unk_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab[int(i)] for i in ids]

    def encode(self, text: str, pair: str | None = None, max_len: int | None = None) -> tuple[list[int], list[int]]:
        """``([CLS] A [SEP] (B [SEP]))`` ids and their segment ids.

        With ``max_len``, the longer of A and B (B on a tie) loses tokens from its end until it fits
        (``longest_first`` truncation); A alone needs ``max_len >= 3``, a pair ``>= 5``.
        """
        a = self.convert_tokens_to_ids(self.tokenize(text))
        b = self.convert_tokens_to_ids(self.tokenize(pair)) if pair is not None else None
        return build_inputs(a, b, self.cls_id, self.sep_id, max_len)

    def encode_batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None,
                     max_len: int | None = None) -> BertInputs:
        """Encode and pad a batch: ``(B, S)`` ids, segment ids and token mask, S = longest sequence."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, got a single str")
        if len(texts) == 0:
            raise ValueError("texts is empty: expected at least one string")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"pairs must match texts in length: {len(texts)} texts, {len(pairs)} pairs")
        encoded = [self.encode(t, pairs[i] if pairs is not None else None, max_len) for i, t in enumerate(texts)]
        return pad_encodings(encoded, self.pad_id)

    def decode(self, ids: Sequence[int]) -> str:
        """Ids -> text, joining ``##`` pieces to their word and dropping [PAD]."""
        words: list[str] = []
        for token in self.convert_ids_to_tokens(ids):
            if token == PAD:
                continue
            if token.startswith("##") and words:
                words[-1] += token[2:]
            else:
                words.append(token)
        return " ".join(words)


def build_inputs(a: Sequence[int], b: Sequence[int] | None, cls_id: int, sep_id: int,
                 max_len: int | None = None) -> tuple[list[int], list[int]]:
    """``[CLS] a [SEP]`` or ``[CLS] a [SEP] b [SEP]`` ids and segment ids (0 for the first part, 1 for ``b [SEP]``).

    With ``max_len``, the longer of ``a`` and ``b`` (``b`` on a tie) loses its last token until the
    whole fits (the reference's ``longest_first``); ``a`` alone needs ``max_len >= 3``, a pair ``>= 5``.
    """
    a, b = list(a), (list(b) if b is not None else None)
    if max_len is not None:
        special = 2 if b is None else 3
        least = special + (1 if b is None else 2)
        if max_len < least:
            raise ValueError(f"max_len must leave room for the special tokens and one token per "
                             f"sentence: at least {least}, got {max_len}")
        while len(a) + (len(b) if b is not None else 0) + special > max_len:
            if b is not None and len(b) >= len(a):  # ties shorten b, as the reference does
                b.pop()
            else:
                a.pop()
    ids = [cls_id, *a, sep_id]
    segments = [0] * len(ids)
    if b is not None:
        ids += [*b, sep_id]
        segments += [1] * (len(b) + 1)
    return ids, segments


def pad_encodings(encoded: Sequence[tuple[list[int], list[int]]], pad_id: int) -> BertInputs:
    """Pad ``(ids, segment_ids)`` pairs to the longest one; returns a :class:`BertInputs`."""
    S = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(encoded), S), pad_id, dtype=torch.long)  # (B, S)
    segment_ids = torch.zeros((len(encoded), S), dtype=torch.long)        # (B, S)
    token_mask = torch.zeros((len(encoded), S), dtype=torch.bool)         # (B, S)
    for row, (ids, segments) in enumerate(encoded):
        if len(ids) != len(segments):
            raise ValueError(f"row {row}: {len(ids)} ids but {len(segments)} segment ids")
        input_ids[row, : len(ids)] = torch.tensor(ids)
        segment_ids[row, : len(ids)] = torch.tensor(segments)
        token_mask[row, : len(ids)] = True
    return BertInputs(input_ids, segment_ids, token_mask)
