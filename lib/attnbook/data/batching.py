"""Padded batches for sequence-to-sequence training.

Legend: B batch, S source length, T target length.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from attnbook.data.vocab import Vocab


@dataclass(frozen=True)
class Seq2SeqBatch:
    """A padded batch. ``tgt_in`` starts with ``<bos>``; ``tgt_out`` ends with ``<eos>``."""

    src: torch.Tensor  # (B, S) source ids, padded
    src_lengths: torch.Tensor  # (B,)
    tgt_in: torch.Tensor  # (B, T) <bos> y1 .. yn, padded: the decoder's input (teacher forcing)
    tgt_out: torch.Tensor  # (B, T) y1 .. yn <eos>, padded: what the decoder must predict
    tgt_lengths: torch.Tensor  # (B,) n + 1

    def to(self, device: torch.device | str) -> "Seq2SeqBatch":
        return Seq2SeqBatch(*(t.to(device) for t in (self.src, self.src_lengths, self.tgt_in, self.tgt_out, self.tgt_lengths)))


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad lists of ids into a ``(B, L)`` tensor; also return the ``(B,)`` lengths."""
    if len(seqs) == 0:
        raise ValueError("cannot pad an empty batch: need at least one sequence")
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    if (lengths == 0).any():
        raise ValueError(f"sequence {int((lengths == 0).nonzero()[0])} is empty; every sequence needs a token")
    out = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    real = torch.arange(out.shape[1])[None, :] < lengths[:, None]  # (B, L): True on real tokens
    out[real] = torch.tensor([i for s in seqs for i in s], dtype=torch.long)  # fills row by row
    return out, lengths


def make_batch(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], src_vocab: Vocab, tgt_vocab: Vocab) -> Seq2SeqBatch:
    """Encode and pad ``(source symbols, target symbols)`` pairs, e.g. ``("phone", ("F","OW","N"))``."""
    if len(pairs) == 0:
        raise ValueError("cannot make a batch from zero pairs")
    src, src_lengths = pad_sequences([src_vocab.encode(list(s)) for s, _ in pairs], src_vocab.pad_id)
    tgt = [tgt_vocab.encode(list(t)) for _, t in pairs]
    tgt_in, tgt_lengths = pad_sequences([[tgt_vocab.bos_id, *t] for t in tgt], tgt_vocab.pad_id)
    tgt_out, _ = pad_sequences([[*t, tgt_vocab.eos_id] for t in tgt], tgt_vocab.pad_id)
    return Seq2SeqBatch(src, src_lengths, tgt_in, tgt_out, tgt_lengths)


def iterate_batches(
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int,
    generator: torch.Generator | None = None,
) -> Iterator[Seq2SeqBatch]:
    """Endless shuffled batches when a ``generator`` is given; one ordered pass when it is None.

    Every pair is encoded and padded once up front; a batch is then a slice of those tensors,
    trimmed to its own longest sequence.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    whole = make_batch(pairs, src_vocab, tgt_vocab)  # every pair, padded to the longest
    while True:
        order = torch.randperm(len(pairs), generator=generator) if generator is not None else torch.arange(len(pairs))
        for start in range(0, len(order), batch_size):
            yield _select(whole, order[start : start + batch_size])
        if generator is None:
            return


def _select(whole: Seq2SeqBatch, index: torch.Tensor) -> Seq2SeqBatch:
    src_lengths, tgt_lengths = whole.src_lengths[index], whole.tgt_lengths[index]
    S, T = int(src_lengths.max()), int(tgt_lengths.max())
    return Seq2SeqBatch(
        whole.src[index, :S], src_lengths, whole.tgt_in[index, :T], whole.tgt_out[index, :T], tgt_lengths
    )
