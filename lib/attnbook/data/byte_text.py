"""Text as bytes, the way ByT5 (Xue et al., 2022) reads it: no tokenizer to train, every string
of every language has ids.

Ids: 0 ``<pad>`` (also T5's decoder start), 1 ``</s>`` (end of sequence), 2 ``<unk>``; byte ``b``
is id ``b + 3``; the ``num_sentinels`` sentinels of span corruption take the top ids, counted
down as in T5 (``<extra_id_0>`` is the last id of the vocabulary).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

PAD_ID, EOS_ID, UNK_ID = 0, 1, 2
BYTE_OFFSET = 3


@dataclass(frozen=True)
class ByteVocab:
    """Bytes plus ``num_sentinels`` sentinel ids: ``len(vocab) = 259 + num_sentinels``."""

    num_sentinels: int = 16
    pad_id: int = PAD_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID

    def __post_init__(self) -> None:
        if self.num_sentinels < 1:
            raise ValueError(f"num_sentinels must be >= 1, got {self.num_sentinels}")

    def __len__(self) -> int:
        return BYTE_OFFSET + 256 + self.num_sentinels

    def sentinel(self, i: int) -> int:
        """Id of ``<extra_id_i>``: the last id for i = 0, counting down."""
        if not 0 <= i < self.num_sentinels:
            raise ValueError(f"sentinel index must be in [0, {self.num_sentinels}), got {i}")
        return len(self) - 1 - i

    def is_sentinel(self, token_id: int) -> bool:
        return len(self) - self.num_sentinels <= token_id < len(self)

    def encode(self, text: str, eos: bool = False) -> list[int]:
        """UTF-8 bytes of ``text`` as ids, with ``</s>`` at the end if asked."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return [b + BYTE_OFFSET for b in text.encode("utf-8")] + ([self.eos_id] if eos else [])

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` up to the first ``</s>``; pads dropped, sentinels shown as ``<extra_id_i>``."""
        out, raw = [], bytearray()
        for token in ids:
            token = int(token)
            if not 0 <= token < len(self):
                raise IndexError(f"id {token} is outside this vocabulary of {len(self)} entries")
            if token == self.eos_id:
                break
            if BYTE_OFFSET <= token < BYTE_OFFSET + 256:
                raw.append(token - BYTE_OFFSET)
                continue
            out.append(raw.decode("utf-8", errors="replace"))
            raw = bytearray()
            if self.is_sentinel(token):
                out.append(f"<extra_id_{len(self) - 1 - token}>")
            elif token == self.unk_id:
                out.append("<unk>")
        out.append(raw.decode("utf-8", errors="replace"))
        return "".join(out)
