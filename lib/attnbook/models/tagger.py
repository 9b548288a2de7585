"""A one-layer self-attention tagger: the smallest model in which attention does all the work.

tokens ``(B, T)`` -> embedding (+ position information) -> multi-head self-attention ->
R linear read-outs -> logits ``(B, T, R, V)``. There is no residual connection and no
feed-forward layer, so whatever a position knows about other positions came through attention.
Legend: B batch, T length, D model width, H heads, R answers (read-outs) per position, V vocabulary.
"""
from __future__ import annotations

import torch
from torch import nn

from attnbook.layers import LearnedPositionalEmbedding, MultiHeadAttention, SinusoidalPositionalEncoding
from attnbook.layers.blocks import EncoderBlock
from attnbook.layers.validation import check_positive, check_token_ids

POSITIONAL = ("none", "sinusoidal", "learned")


class SelfAttentionTagger(nn.Module):
    """One self-attention layer and ``num_outputs`` read-outs per position.

    ``positional`` is ``"none"`` (order-blind), ``"sinusoidal"`` (fixed table added to the
    embeddings) or ``"learned"`` (one trained vector per position, added).
    """

    def __init__(
        self, vocab_size: int, d_model: int, num_heads: int, max_len: int,
        positional: str = "sinusoidal", num_outputs: int = 1,
    ) -> None:
        super().__init__()
        if positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {POSITIONAL}, got {positional!r}")
        check_positive(vocab_size=vocab_size, max_len=max_len, num_outputs=num_outputs)
        self.vocab_size, self.num_outputs = vocab_size, num_outputs
        self.embedding = nn.Embedding(vocab_size, d_model)
        if positional == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(d_model, max_len)
        elif positional == "learned":
            self.position = LearnedPositionalEmbedding(d_model, max_len)
        else:
            self.position = nn.Identity()
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, num_outputs * vocab_size)

    def forward(
        self, tokens: torch.Tensor, need_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """tokens ``(B, T)`` -> logits ``(B, T, R, V)`` (and weights ``(B, H, T, T)`` if asked)."""
        check_token_ids("tokens", tokens, self.vocab_size)
        B, T = tokens.shape
        x = self.position(self.embedding(tokens))  # (B, T, D)
        if need_weights:
            z, weights = self.attention(x, x, x, need_weights=True)  # (B, T, D), (B, H, T, T)
        else:
            z = self.attention(x, x, x)  # (B, T, D)
        logits = self.readout(z).view(B, T, self.num_outputs, self.vocab_size)  # (B, T, R, V)
        return (logits, weights) if need_weights else logits


class BlockTagger(nn.Module):
    """The same task inside a standard block (Chapter 4, section 4.6): embedding + sinusoidal
    positions -> one pre-norm ``EncoderBlock`` (residuals, feed-forward of width ``d_ff``) ->
    LayerNorm -> ``num_outputs`` linear read-outs per position."""

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, max_len: int,
                 d_ff: int = 256, num_outputs: int = 2) -> None:
        super().__init__()
        check_positive(vocab_size=vocab_size, max_len=max_len, d_ff=d_ff, num_outputs=num_outputs)
        self.vocab_size, self.num_outputs = vocab_size, num_outputs
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.position = SinusoidalPositionalEncoding(d_model, max_len)
        self.block = EncoderBlock(d_model, num_heads, d_ff, norm_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, num_outputs * vocab_size)

    def forward(
        self, tokens: torch.Tensor, need_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """tokens ``(B, T)`` -> logits ``(B, T, R, V)`` (and weights ``(B, H, T, T)`` if asked)."""
        check_token_ids("tokens", tokens, self.vocab_size)
        B, T = tokens.shape
        out = self.block(self.position(self.embedding(tokens)), need_weights=need_weights)
        logits = self.readout(self.norm(out.hidden)).view(B, T, self.num_outputs, self.vocab_size)
        return (logits, out.attention) if need_weights else logits  # (B, T, R, V), (B, H, T, T)
