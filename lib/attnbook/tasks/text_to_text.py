"""The book's G2P task as text to text (Chapter 10): letters in, phonemes out, both as bytes.

A word's phonemes become a string (``"hh ah l ow"``), so one byte-level T5 reads and writes
every task; a prefix (``"g2p: "``, ``"p2g: "``) says which task a multi-task model is asked.
The loss is the teacher-forced cross-entropy of ``attnbook.tasks.g2p``; evaluation decodes
greedily from T5's start token (``<pad>``) and scores the phoneme strings with the book's
WER and PER.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import nn

from attnbook.data.byte_text import ByteVocab
from attnbook.data.batching import Seq2SeqBatch
from attnbook.decoding import greedy_decode
from attnbook.metrics import phoneme_error_rate, word_error_rate
from attnbook.tasks.span_corruption import seq2seq_batch
from attnbook.train import evaluating

DIRECTIONS = ("g2p", "p2g")


def phoneme_text(phonemes: Sequence[str]) -> str:
    """``("HH", "AH")`` -> ``"hh ah"``."""
    return " ".join(p.lower() for p in phonemes)


def text_pairs(pairs: Sequence[tuple[str, Sequence[str]]], direction: str = "g2p",
               prefix: bool = False) -> list[tuple[str, str]]:
    """``(word, phonemes)`` pairs as ``(input text, target text)`` for one direction."""
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; expected one of {DIRECTIONS}")
    head = f"{direction}: " if prefix else ""
    if direction == "g2p":
        return [(head + word, phoneme_text(ph)) for word, ph in pairs]
    return [(head + phoneme_text(ph), word) for word, ph in pairs]


def byte_batches(pairs: Sequence[tuple[str, str]], vocab: ByteVocab, batch_size: int,
                 generator: torch.Generator) -> Iterator[Seq2SeqBatch]:
    """Endless shuffled batches of text pairs as bytes; inputs and targets end with ``</s>``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    encoded = [(vocab.encode(s, eos=True), vocab.encode(t, eos=True)) for s, t in pairs]
    while True:
        order = torch.randperm(len(encoded), generator=generator).tolist()
        for start in range(0, len(order), batch_size):
            yield seq2seq_batch([encoded[i] for i in order[start : start + batch_size]], vocab.pad_id)


@torch.no_grad()
def generate_text(model: nn.Module, inputs: Sequence[str], vocab: ByteVocab, max_len: int = 64,
                  batch_size: int = 512) -> list[str]:
    """Greedy output text for each input text (batched by length, eval mode, modes restored)."""
    device = next(model.parameters()).device
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i].encode("utf-8")))
    out = [""] * len(inputs)
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = seq2seq_batch([(vocab.encode(inputs[i], eos=True), [vocab.eos_id]) for i in chunk],
                                  vocab.pad_id)
            rows = greedy_decode(model, batch.src.to(device), batch.src_lengths.to(device),
                                 vocab.pad_id, vocab.eos_id, max_len)
            for i, row in zip(chunk, rows):
                out[i] = vocab.decode(row)
    return out


def evaluate_text_g2p(model: nn.Module, pairs: Sequence[tuple[str, Sequence[str]]], vocab: ByteVocab,
                      direction: str = "g2p", prefix: bool = False) -> dict[str, float]:
    """Word and symbol error rates: phonemes for ``g2p``, letters for ``p2g``."""
    texts = text_pairs(pairs, direction, prefix)
    predictions = generate_text(model, [s for s, _ in texts], vocab)
    if direction == "g2p":
        preds = [tuple(p.split()) for p in predictions]
        refs = [tuple(ph) for _, ph in pairs]
        preds = [tuple(p.upper() for p in row) for row in preds]
    else:
        preds = [tuple(p) for p in predictions]
        refs = [tuple(word) for word, _ in pairs]
    return {"wer": word_error_rate(preds, refs), "per": phoneme_error_rate(preds, refs)}
