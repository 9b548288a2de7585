"""The tagging task of Chapters 3 and 4: every position of a synthetic sequence has R answers.

The loss and the accuracy of a model ``model(tokens (B, T)) -> logits (B, T, R, V)``, such as
``attnbook.models.tagger.SelfAttentionTagger``. Answers equal to ``IGNORE`` are not scored.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.data.synthetic import IGNORE
from attnbook.train import evaluating


def tagging_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over every answer that is not ``IGNORE`` (a ``loss_fn`` for ``fit``)."""
    tokens, targets = batch  # (B, T), (B, T, R)
    logits = model(tokens)  # (B, T, R, V)
    return F.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def tagging_accuracy(model: nn.Module, tokens: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """Accuracy on a fixed set: ``answer`` (share of answers right), ``position`` (share of
    positions with all R answers right) and ``output0``, ``output1``, ... (each answer alone).
    The model runs in eval mode; each submodule's mode is restored after."""
    with evaluating(model):
        logits = model(tokens)  # (B, T, R, V)
    scored = targets != IGNORE  # (B, T, R): answers that count
    right = (logits.argmax(-1) == targets) | ~scored  # (B, T, R)
    has_answer = scored.any(-1)  # (B, T)
    answer = (right & scored).sum() / scored.sum()
    position = (right.all(-1) & has_answer).sum() / has_answer.sum()
    result = {"answer": answer.item(), "position": position.item()}
    for k in range(targets.shape[-1]):
        result[f"output{k}"] = ((right[..., k] & scored[..., k]).sum() / scored[..., k].sum()).item()
    return result
