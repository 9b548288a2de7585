"""An attention-only Transformer (Elhage et al., 2021; Olsson et al., 2022): token + learned
positions, L causal multi-head attention blocks added to the residual stream, no feed-forward
layers, no LayerNorm, and an untied read-out. Small enough to find the heads that copy.

tokens ``(B, T)`` -> logits ``(B, T, V)``; with ``need_weights``, also each block's attention
weights ``(B, H, T, T)``. Legend: B batch, T length, D width, H heads, V vocabulary.
"""
from __future__ import annotations

import torch
from torch import nn

from attnbook.layers import AttentionOnlyBlock, Embeddings, LearnedPositionalEmbedding, run_blocks
from attnbook.layers.validation import check_positive, check_token_ids


class AttentionOnly(nn.Module):
    """``num_layers`` causal attention blocks on a residual stream, nothing else."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int = 64, num_heads: int = 2,
                 num_layers: int = 2) -> None:
        super().__init__()
        check_positive(vocab_size=vocab_size, max_len=max_len, num_layers=num_layers)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.embeddings = Embeddings(nn.Embedding(vocab_size, d_model), LearnedPositionalEmbedding(d_model, max_len))
        self.blocks = nn.ModuleList(AttentionOnlyBlock(d_model, num_heads) for _ in range(num_layers))
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor, need_weights: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        check_token_ids("tokens", tokens, self.vocab_size, self.max_len)
        out = run_blocks(self.blocks, self.embeddings(tokens), need_weights=need_weights)  # (B, T, D)
        logits = self.readout(out.hidden)  # (B, T, V)
        return (logits, out.attention) if need_weights else logits
