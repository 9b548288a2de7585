"""The book's shared G2P training recipe, so chapters compare architectures on equal terms."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.data.batching import iterate_batches
from attnbook.data.g2p import G2PSplit
from attnbook.data.vocab import Vocab
from attnbook.train import History, fit, sequence_cross_entropy


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
