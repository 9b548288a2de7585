"""Input embeddings as one composable piece: what turns inputs into the ``(B, T, D)`` stream.

``Embeddings(tokens, positions, segments, scale, norm, dropout)`` computes
``dropout(norm(positions(tokens(inputs) · scale) + segments(segment_ids)))``. Each model picks its parts:

- seq2seq Transformer (2017): token table, ``scale=√D``, sinusoidal positions, no norm
- BERT: token table, learned positions, segment (token-type) table, LayerNorm
- GPT: token table, learned positions
- ViT: a patch embedding with a class token as ``tokens``, learned positions

Legend: B batch, T length, D model width.
"""
from __future__ import annotations

import torch
from torch import nn

from attnbook.layers.validation import check_dropout


class Embeddings(nn.Module):
    """Token (or patch) embedding + positions + optional segments, then optional norm and dropout.

    ``tokens`` maps the inputs to ``(B, T, D)`` (an ``nn.Embedding`` for ids). ``positions`` is
    a module ``positions(x, offset) -> x + P[offset : offset + T]`` (``SinusoidalPositionalEncoding``
    or ``LearnedPositionalEmbedding``), or None. ``segments`` is an ``nn.Embedding`` over segment ids.
    """

    def __init__(
        self, tokens: nn.Module, positions: nn.Module | None, segments: nn.Embedding | None = None,
        scale: float = 1.0, norm: nn.Module | None = None, dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_dropout(dropout)
        self.tokens = tokens
        self.positions = positions
        self.segments = segments
        self.scale = scale
        self.norm = norm if norm is not None else nn.Identity()
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, inputs: torch.Tensor, segment_ids: torch.Tensor | None = None, offset: int = 0
    ) -> torch.Tensor:
        """inputs (e.g. ids ``(B, T)``) -> ``(B, T, D)``; ``offset`` is the position of the first one."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        x = self.tokens(inputs)  # (B, T, D)
        if self.scale != 1.0:  # (a multiplication by 1 would only cost a pass over x)
            x = x * self.scale
        if self.positions is not None:
            x = self.positions(x, offset=offset)  # (B, T, D)
        if (segment_ids is None) != (self.segments is None):
            raise ValueError(
                "segment_ids must be given exactly when the embedding has a segment table "
                f"(segments={'yes' if self.segments is not None else 'none'}, "
                f"segment_ids={'given' if segment_ids is not None else 'none'})"
            )
        if segment_ids is not None:
            if segment_ids.shape != x.shape[:2]:
                raise ValueError(f"segment_ids must have shape {tuple(x.shape[:2])}, got {tuple(segment_ids.shape)}")
            x = x + self.segments(segment_ids)  # (B, T, D)
        return self.dropout(self.norm(x))  # (B, T, D)
