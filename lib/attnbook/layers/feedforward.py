"""The position-wise feed-forward network: the same small network applied to every position.

- ``FeedForward``: ``W2 act(W1 x + b1) + b2`` (the 2017 paper with ReLU; BERT, GPT-2, ViT with GELU).
- ``GatedFeedForward``: ``W_down (act(W_gate x) ⊙ W_up x)`` (Shazeer, 2020): SwiGLU with ``silu``
  (Llama), GeGLU with ``gelu_tanh`` (T5 v1.1); usually without biases.

``FeedForwardSpec`` is the immutable recipe a block builds its network from.
Legend: B batch, T length, D model width, F hidden width (``d_ff``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers.validation import ACTIVATIONS, check_activation, check_dropout, check_positive


def activation_function(name: str, x: torch.Tensor) -> torch.Tensor:
    """``relu``; ``gelu`` = x·Φ(x) exactly (BERT, ViT); ``gelu_tanh``, its tanh approximation (GPT-2,
    T5 v1.1); ``silu`` = x·σ(x) (SwiGLU)."""
    if name == "relu":
        return F.relu(x)
    if name == "gelu":
        return F.gelu(x)
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "silu":
        return F.silu(x)
    raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


def _checked(d_model: int, d_ff: int, activation: str, dropout: float) -> tuple[str, nn.Dropout]:
    """The checks both networks share; returns the activation's name and the hidden dropout."""
    check_positive(d_model=d_model, d_ff=d_ff)
    check_activation(activation)
    check_dropout(dropout)
    return activation, nn.Dropout(dropout)


class FeedForward(nn.Module):
    """``W2 act(W1 x + b1) + b2`` at every position: ``(B, T, D) -> (B, T, F) -> (B, T, D)``."""

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        self.activation, self.dropout = _checked(d_model, d_ff, activation, dropout)
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = activation_function(self.activation, self.linear1(x))  # (B, T, F)
        return self.linear2(self.dropout(hidden))  # (B, T, D)


class GatedFeedForward(nn.Module):
    """``down(act(gate(x)) * up(x))``: the gate decides, per hidden unit, how much of ``up(x)`` passes.

    Names as in Llama (``gate_proj``, ``up_proj``, ``down_proj``). With three matrices instead of
    two, ``d_ff ≈ 8/3 · D`` keeps the parameter count of a ``4 · D`` ``FeedForward``.
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "silu", dropout: float = 0.0, bias: bool = False
    ) -> None:
        super().__init__()
        self.activation, self.dropout = _checked(d_model, d_ff, activation, dropout)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = activation_function(self.activation, self.gate_proj(x)) * self.up_proj(x)  # (B, T, F)
        return self.down_proj(self.dropout(hidden))  # (B, T, D)


@dataclass(frozen=True)
class FeedForwardSpec:
    """Which feed-forward network a block builds: hidden width, activation, gated or not, biases.

    ``FeedForwardSpec(4 * D, "gelu")`` is BERT's; ``FeedForwardSpec(F, "silu", gated=True,
    bias=False)`` is Llama's SwiGLU; ``FeedForwardSpec(F, "gelu_tanh", gated=True, bias=False)``
    is T5 v1.1's GeGLU.
    """

    d_ff: int
    activation: str = "relu"
    gated: bool = False
    bias: bool = True

    def __post_init__(self) -> None:
        check_positive(d_ff=self.d_ff)
        check_activation(self.activation)

    def __call__(self, d_model: int, dropout: float = 0.0) -> nn.Module:
        """A new network of width ``d_model`` (hidden dropout ``dropout``)."""
        network = GatedFeedForward if self.gated else FeedForward
        return network(d_model, self.d_ff, self.activation, dropout, self.bias)
