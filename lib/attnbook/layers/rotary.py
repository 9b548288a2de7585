"""Rotary position embeddings (Su et al., 2021): position enters attention by rotating queries and keys.

Pair the head's dimensions (i, i + Dh/2) and rotate each pair of the vector at position p by the
angle ``p · θ_i`` with ``θ_i = base^(-2i/Dh)``. A rotation by ``p`` followed by the dot product with
a key rotated by ``s`` depends on ``p - s`` only, so attention scores see relative offsets while
nothing is added to the token vectors. The pairing ``(i, i + Dh/2)`` ("rotate half") is the one
``transformers``' Llama uses, so weights and results compare directly.

``MultiHeadAttention(rotary=RotaryEmbedding(Dh, max_len))`` applies it to queries and keys after
the projections; with a KV cache, ``offset`` is the position of the first new token.
Legend: B batch, H heads, T length, Dh head width.
"""
from __future__ import annotations

import torch
from torch import nn

from attnbook.layers.validation import check_positive


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` on the two halves of the last dimension: a 90° turn of every pair."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class RotaryEmbedding(nn.Module):
    """Rotates ``(B, H, T, Dh)`` queries or keys by their positions ``offset .. offset + T - 1``."""

    def __init__(self, head_dim: int, max_len: int, base: float = 10000.0,
                 position_scale: float = 1.0) -> None:
        """``position_scale``: turn position p as if it were p · position_scale (1: plain rotary;
        train_len / max_len: position interpolation, Chen et al., 2023)."""
        super().__init__()
        check_positive(head_dim=head_dim, max_len=max_len)
        if not position_scale > 0:
            raise ValueError(f"position_scale must be > 0, got {position_scale}")
        if head_dim % 2:
            raise ValueError(f"rotary embeddings rotate pairs of dimensions: head_dim must be even, got {head_dim}")
        self.head_dim, self.max_len, self.base = head_dim, max_len, base
        self.position_scale = position_scale
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (Dh/2,)
        positions = torch.arange(max_len, dtype=torch.float32) * position_scale  # (max_len,)
        angles = positions[:, None] * inv_freq  # (max_len, Dh/2)
        angles = torch.cat([angles, angles], dim=-1)  # (max_len, Dh): pair i and i + Dh/2 share an angle
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x ``(B, H, T, Dh)`` at positions ``offset ..`` -> the same shape, rotated."""
        T = x.shape[-2]
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"rotary embedding for head width {self.head_dim} got shape {tuple(x.shape)}")
        if offset < 0 or offset + T > self.max_len:
            raise ValueError(f"positions {offset}..{offset + T - 1} requested, the table holds 0..{self.max_len - 1}")
        cos = self.cos[offset : offset + T].to(x.dtype)  # (T, Dh)
        sin = self.sin[offset : offset + T].to(x.dtype)
        return x * cos + rotate_half(x) * sin  # (B, H, T, Dh)

    def extra_repr(self) -> str:
        scaled = "" if self.position_scale == 1.0 else f", position_scale={self.position_scale:g}"
        return f"head_dim={self.head_dim}, max_len={self.max_len}, base={self.base}{scaled}"
