"""Position information for attention, which by itself ignores order.

Legend: B batch, T length, D model width.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from attnbook.layers.validation import check_positive


def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """``(T, D)`` table with PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...)."""
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (T, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)  # (T, D/2)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table  # (T, D)


def sinusoidal_shift_matrix(offset: int, d_model: int) -> torch.Tensor:
    """``(D, D)`` matrix M with ``sinusoidal_encoding(...)[pos + offset] == M @ PE[pos]`` for every pos.

    Each (sin, cos) pair of frequency w is rotated by the angle ``offset * w``:
    sin(w(p+k)) = cos(wk) sin(wp) + sin(wk) cos(wp), cos(w(p+k)) = -sin(wk) sin(wp) + cos(wk) cos(wp).
    M depends on the offset only, not on pos: a shift is a fixed linear map (a rotation).
    """
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even for sine/cosine pairs, got {d_model}")
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    angle = offset * inv_freq  # (D/2,)
    cos, sin = torch.cos(angle), torch.sin(angle)
    matrix = torch.zeros(d_model, d_model, dtype=torch.float64)
    even = torch.arange(0, d_model, 2)
    matrix[even, even], matrix[even, even + 1] = cos, sin
    matrix[even + 1, even], matrix[even + 1, even + 1] = -sin, cos
    return matrix.float()  # (D, D)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to ``(B, T, D)`` inputs. Nothing here is learned."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x ``(B, T, D)`` -> x + PE[offset : offset + T]; ``offset`` is the first position."""
        B, T, D = x.shape
        if D != self.table.shape[1]:
            raise ValueError(f"x has width {D}, the table was built for d_model={self.table.shape[1]}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if offset + T > self.table.shape[0]:
            raise ValueError(f"positions up to {offset + T} requested, table holds {self.table.shape[0]}")
        return x + self.table[offset : offset + T]  # (B, T, D)


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned vector per position (as BERT, GPT and ViT do).

    ``init_std``: the table starts as N(0, init_std²) (GPT-2 and ViT: 0.02, as small as the token
    table); None keeps ``nn.Embedding``'s N(0, 1), which makes positions about 50 times larger
    than 0.02-sized tokens. ``reset_parameters`` draws the table again with the same rule.
    """

    def __init__(self, d_model: int, max_len: int, init_std: float | None = None) -> None:
        super().__init__()
        check_positive(d_model=d_model, max_len=max_len)
        if init_std is not None and not init_std > 0:
            raise ValueError(f"init_std must be > 0 (or None for N(0, 1)), got {init_std}")
        self.init_std = init_std
        self.embedding = nn.Embedding(max_len, d_model)
        if init_std is not None:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw the table again: N(0, init_std²), or N(0, 1) when ``init_std`` is None."""
        nn.init.normal_(self.embedding.weight, std=1.0 if self.init_std is None else self.init_std)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x ``(B, T, D)`` -> x + E[offset : offset + T] with E a trained ``(max_len, D)`` table."""
        B, T, D = x.shape
        if D != self.embedding.embedding_dim:
            raise ValueError(f"x has width {D}, the table was built for d_model={self.embedding.embedding_dim}")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if offset + T > self.embedding.num_embeddings:
            raise ValueError(f"positions up to {offset + T} requested, only {self.embedding.num_embeddings} learned")
        positions = torch.arange(offset, offset + T, device=x.device)  # (T,)
        return x + self.embedding(positions)  # (B, T, D)
