"""Evaluating a G2P model: decode every word, then WER, PER and WER by word length."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from attnbook.data.batching import pad_sequences
from attnbook.data.vocab import Vocab
from attnbook.decoding import greedy_decode
from attnbook.metrics import phoneme_error_rate, wer_by_bucket, word_error_rate

Decoder = Callable[[nn.Module, torch.Tensor, torch.Tensor, int], list[list[int]]]


@dataclass(frozen=True)
class G2PResult:
    words: list[str]
    references: list[tuple[str, ...]]
    predictions: list[tuple[str, ...]]
    wer: float
    per: float
    wer_by_length: dict[str, float]

    def examples(self, words: Sequence[str]) -> list[tuple[str, str, str]]:
        """``(word, predicted, reference)`` rows for the words asked for, as space-joined strings."""
        index = {w: i for i, w in enumerate(self.words)}
        missing = [w for w in words if w not in index]
        if missing:
            raise KeyError(f"not in the evaluated set: {missing}")
        return [(w, " ".join(self.predictions[index[w]]), " ".join(self.references[index[w]])) for w in words]


@torch.no_grad()
def predict(
    model: nn.Module,
    words: Sequence[str],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int = 512,
    decode: Decoder | None = None,
) -> list[tuple[str, ...]]:
    """Phonemes for each word. Words are batched by length; ``decode`` defaults to greedy."""
    if len(words) == 0:
        raise ValueError("no words to predict")
    device = next(model.parameters()).device
    if decode is None:
        def decode(m, src, lengths, max_len):
            return greedy_decode(m, src, lengths, tgt_vocab.bos_id, tgt_vocab.eos_id, max_len)
    was_training = model.training
    model.eval()
    order = sorted(range(len(words)), key=lambda i: len(words[i]))
    predictions: list[tuple[str, ...]] = [()] * len(words)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src, lengths = pad_sequences([src_vocab.encode(list(words[i])) for i in chunk], src_vocab.pad_id)
        ids = decode(model, src.to(device), lengths.to(device), src.shape[1] + 5)
        for i, row in zip(chunk, ids):
            predictions[i] = tuple(tgt_vocab.decode(row))
    model.train(was_training)
    return predictions


def evaluate_g2p(
    model: nn.Module,
    pairs: Sequence[tuple[str, Sequence[str]]],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    batch_size: int = 512,
    decode: Decoder | None = None,
) -> G2PResult:
    """Decode every word of ``pairs`` and score the predictions."""
    words = [w for w, _ in pairs]
    refs = [tuple(p) for _, p in pairs]
    preds = predict(model, words, src_vocab, tgt_vocab, batch_size, decode)
    return G2PResult(
        words, refs, preds, word_error_rate(preds, refs), phoneme_error_rate(preds, refs),
        wer_by_bucket(words, preds, refs),
    )
