"""The grapheme-to-phoneme task (Chapters 1, 2 and 5): the loss, the shared training recipe,
and evaluation (decode every word, then WER, PER and WER by word length).

Every G2P model is a seq2seq model ``model(src, src_lengths, tgt_in) -> logits (B, T, V)`` that
decodes through ``attnbook.decoding.Seq2SeqDecoder``; one recipe trains them all, so chapters
compare architectures on equal terms.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from attnbook.data.batching import iterate_batches, pad_sequences
from attnbook.data.g2p import G2PSplit
from attnbook.data.vocab import Vocab
from attnbook.decoding import greedy_decode
from attnbook.losses import sequence_cross_entropy
from attnbook.metrics import phoneme_error_rate, wer_by_bucket, word_error_rate
from attnbook.train import History, evaluating, fit


@dataclass(frozen=True)
class G2PRecipe:
    """How every G2P model in the book is trained: fixed steps, batch, optimizer and seed."""

    steps: int = 1200
    batch_size: int = 128
    lr: float = 3e-3
    clip_norm: float = 1.0
    label_smoothing: float = 0.0
    seed: int = 0


def g2p_loss(model: nn.Module, batch, pad_id: int, label_smoothing: float = 0.0) -> torch.Tensor:
    """Teacher-forced cross-entropy of a seq2seq model ``model(src, src_lengths, tgt_in) -> (B, T, V)``."""
    logits = model(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, V)
    return sequence_cross_entropy(logits, batch.tgt_out, pad_id, label_smoothing)


def train_g2p(
    model: nn.Module,
    data: G2PSplit,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    recipe: G2PRecipe,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    progress: bool = True,
) -> History:
    """Train ``model`` on the training split with ``recipe`` (Adam at ``recipe.lr`` by default).

    The batch order depends only on ``recipe.seed``, so two models trained with the same
    recipe see exactly the same batches.
    """
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(recipe.seed)
    batches = (b.to(device) for b in iterate_batches(data.train, src_vocab, tgt_vocab, recipe.batch_size, generator))
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=recipe.lr)
    return fit(
        model, batches, lambda m, b: g2p_loss(m, b, tgt_vocab.pad_id, recipe.label_smoothing),
        optimizer, recipe.steps, clip_norm=recipe.clip_norm, scheduler=scheduler, progress=progress,
    )


# --- Evaluation ---------------------------------------------------------------------------

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
    """Phonemes for each word, decoded in eval mode (each submodule's mode restored after).
    Words are batched by length; ``decode`` defaults to greedy."""
    if len(words) == 0:
        raise ValueError("no words to predict")
    device = next(model.parameters()).device
    if decode is None:
        def decode(m, src, lengths, max_len):
            return greedy_decode(m, src, lengths, tgt_vocab.bos_id, tgt_vocab.eos_id, max_len)
    order = sorted(range(len(words)), key=lambda i: len(words[i]))
    predictions: list[tuple[str, ...]] = [()] * len(words)
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            src, lengths = pad_sequences([src_vocab.encode(list(words[i])) for i in chunk], src_vocab.pad_id)
            ids = decode(model, src.to(device), lengths.to(device), src.shape[1] + 5)
            for i, row in zip(chunk, ids):
                predictions[i] = tuple(tgt_vocab.decode(row))
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
