"""The position-wise feed-forward network: the same two-layer MLP applied to every position.

Legend: B batch, T length, D model width, F hidden width (``d_ff``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers.validation import ACTIVATIONS, check_activation, check_dropout, check_positive


def activation_function(name: str, x: torch.Tensor) -> torch.Tensor:
    """``relu``; ``gelu`` = x·Φ(x) exactly (BERT, ViT); ``gelu_tanh``, its tanh approximation (GPT-2)."""
    if name == "relu":
        return F.relu(x)
    if name == "gelu":
        return F.gelu(x)
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


class FeedForward(nn.Module):
    """``W2 act(W1 x + b1) + b2`` at every position: ``(B, T, D) -> (B, T, F) -> (B, T, D)``."""

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0) -> None:
        super().__init__()
        check_positive(d_model=d_model, d_ff=d_ff)
        check_activation(activation)
        check_dropout(dropout)
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = activation_function(self.activation, self.linear1(x))  # (B, T, F)
        return self.linear2(self.dropout(hidden))  # (B, T, D)
