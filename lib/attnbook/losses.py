"""Losses shared by several tasks. Models return logits; the loss is computed here, outside them."""
from __future__ import annotations

import torch
from torch import nn


def sequence_cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, pad_id: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over all non-padding target positions.

    logits ``(B, T, V)``, targets ``(B, T)``; positions where ``targets == pad_id`` are ignored.
    """
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(f"logits (B, T, V) and targets (B, T) disagree: {tuple(logits.shape)} vs {tuple(targets.shape)}")
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
        ignore_index=pad_id, label_smoothing=label_smoothing,
    )
