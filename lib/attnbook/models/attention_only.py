"""An attention-only Transformer (Elhage et al., 2021; Olsson et al., 2022): token + learned
positions, L causal multi-head attention layers added to the residual stream, no feed-forward
layers, no LayerNorm, and an untied read-out. Small enough to find the heads that copy.

tokens ``(B, T)`` -> logits ``(B, T, V)``; with ``need_weights``, also each layer's attention
weights ``(B, H, T, T)``. Legend: B batch, T length, D width, H heads, V vocabulary.
"""
from __future__ import annotations

import torch
from torch import nn

from attnbook.layers import Embeddings, LearnedPositionalEmbedding, MultiHeadAttention, causal_mask


class AttentionOnly(nn.Module):
    """``num_layers`` causal attention layers on a residual stream, nothing else."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int = 64, num_heads: int = 2,
                 num_layers: int = 2) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.max_len = max_len
        self.embed = Embeddings(nn.Embedding(vocab_size, d_model), LearnedPositionalEmbedding(d_model, max_len))
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads) for _ in range(num_layers))
        self.unembed = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, need_weights: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        if tokens.dim() != 2 or tokens.shape[1] > self.max_len:
            raise ValueError(f"tokens must be (B, T) with T <= {self.max_len}, got shape {tuple(tokens.shape)}")
        x = self.embed(tokens)  # (B, T, D)
        mask = causal_mask(tokens.shape[1], device=tokens.device)  # (T, T)
        maps = []
        for attention in self.layers:
            out = attention(x, x, x, mask=mask, need_weights=need_weights)
            if need_weights:
                out, weights = out
                maps.append(weights)  # (B, H, T, T)
            x = x + out  # (B, T, D)
        logits = self.unembed(x)  # (B, T, V)
        return (logits, maps) if need_weights else logits
