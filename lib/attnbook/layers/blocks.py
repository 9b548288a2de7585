"""Transformer blocks: an encoder block, a decoder block with cross-attention, and the causal
block of a decoder-only model. Every sublayer sits in the same residual idiom:

- post-norm (the 2017 paper, BERT):  ``x = norm(x + sublayer(x))``
- pre-norm (GPT-2, ViT):             ``x = x + sublayer(norm(x))``

``ResidualBlock.sublayer_input`` and ``ResidualBlock.residual`` are those two lines; each block's
``forward`` is a sequence of them, as in PyTorch's ``_sa_block``/``_ff_block`` and nanoGPT's
``Block``. A pre-norm stack needs one final LayerNorm after its last block (the model adds it).
Submodule names follow ``nn.TransformerEncoderLayer`` (``self_attn``, ``norm1``, ...).

Legend: B batch, S source length, T target length (new positions), P positions in a cache,
D model width, H heads, F feed-forward width. Masks: boolean, ``True`` = may attend.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers.attention import KVCache, MultiHeadAttention, copy_to_torch_multihead
from attnbook.layers.feedforward import FeedForward
from attnbook.layers.masks import causal_mask
from attnbook.layers.validation import check_dropout, check_heads, check_positive


@dataclass(frozen=True)
class DecoderAttentionMaps:
    """Attention weights of one decoder block: ``self_attn (B, H, T, P+T)``, ``cross_attn (B, H, T, S)``."""

    self_attn: torch.Tensor
    cross_attn: torch.Tensor


class ResidualBlock(nn.Module):
    """What every block shares: post-norm or pre-norm residual connections."""

    def __init__(self, norm_first: bool) -> None:
        super().__init__()
        self.norm_first = norm_first

    def sublayer_input(self, x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        """Pre-norm normalises what goes into the sublayer; post-norm passes ``x`` as it is."""
        return norm(x) if self.norm_first else x

    def residual(self, x: torch.Tensor, update: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
        """Add the sublayer's output to the stream; post-norm then normalises the sum."""
        return x + update if self.norm_first else norm(x + update)


def _check_sizes(d_model: int, num_heads: int, d_ff: int, dropout: float, layer_norm_eps: float) -> None:
    check_positive(d_ff=d_ff)
    check_heads(d_model, num_heads)
    check_dropout(dropout)
    if layer_norm_eps <= 0:
        raise ValueError(f"layer_norm_eps must be > 0, got {layer_norm_eps}")


def _attend(
    attn: MultiHeadAttention, query: torch.Tensor, kv: KVCache, mask: torch.Tensor | None, need_weights: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``attn.attend`` that always returns ``(out, weights or None)``; weights cost extra only if asked."""
    if need_weights:
        return attn.attend(query, kv, mask, need_weights=True)
    return attn.attend(query, kv, mask), None


def causal_self_attention(
    attn: MultiHeadAttention, x: torch.Tensor, past: KVCache | None, need_weights: bool
) -> tuple[torch.Tensor, KVCache, torch.Tensor | None]:
    """Self-attention over the cached positions and the new ones, never into the future.

    x ``(B, T, D)`` holds the T new positions; ``past`` the keys and values of the P before
    them. Returns the output ``(B, T, D)``, the cache of all P + T positions (a new object;
    ``past`` is unchanged) and the weights ``(B, H, T, P+T)`` if asked.
    """
    kv = attn.project_kv(x, x)  # (B, H, T, Dh) each
    if past is not None:
        kv = past.extend(kv.key, kv.value)  # (B, H, P+T, Dh)
    T = x.shape[1]
    mask = causal_mask(T, len(kv), device=x.device) if T > 1 else None  # one new position sees all
    out, weights = _attend(attn, x, kv, mask, need_weights)
    return out, kv, weights


class EncoderBlock(ResidualBlock):
    """Self-attention over the whole sequence, then the feed-forward network."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
        norm_first: bool = False, layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__(norm_first)
        _check_sizes(d_model, num_heads, d_ff, dropout, layer_norm_eps)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """x ``(B, S, D)``, mask broadcastable to ``(B, S, S)`` (e.g. ``key_mask``'s ``(B, 1, S)``).

        Returns ``(B, S, D)``, plus the weights ``(B, H, S, S)`` if ``need_weights``.
        """
        h = self.sublayer_input(x, self.norm1)
        attended, weights = _attend(self.self_attn, h, self.self_attn.project_kv(h, h), mask, need_weights)
        x = self.residual(x, self.dropout1(attended), self.norm1)
        h = self.sublayer_input(x, self.norm2)
        x = self.residual(x, self.dropout2(self.feed_forward(h)), self.norm2)  # (B, S, D)
        return (x, weights) if need_weights else x


class CausalBlock(EncoderBlock):
    """A decoder-only (GPT) block: the layers of an ``EncoderBlock``, but its self-attention is
    causal and decodes with a KV cache. Defaults are GPT-2's: pre-norm, GELU."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "gelu",
        norm_first: bool = True, layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__(d_model, num_heads, d_ff, dropout, activation, norm_first, layer_norm_eps)

    def forward(
        self, x: torch.Tensor, past: KVCache | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, KVCache] | tuple[torch.Tensor, KVCache, torch.Tensor]:
        """x ``(B, T, D)``: the new positions, after the P in ``past`` (None: P = 0).

        Returns ``(B, T, D)`` and the cache of all P + T positions (``past`` is not changed),
        plus the weights ``(B, H, T, P+T)`` if ``need_weights``.
        """
        h = self.sublayer_input(x, self.norm1)
        attended, present, weights = causal_self_attention(self.self_attn, h, past, need_weights)
        x = self.residual(x, self.dropout1(attended), self.norm1)
        h = self.sublayer_input(x, self.norm2)
        x = self.residual(x, self.dropout2(self.feed_forward(h)), self.norm2)  # (B, T, D)
        return (x, present, weights) if need_weights else (x, present)


class DecoderBlock(ResidualBlock):
    """Causal self-attention, cross-attention (queries from the decoder, keys and values from
    the encoder's output), then the feed-forward network."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, activation: str = "relu",
        norm_first: bool = False, layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__(norm_first)
        _check_sizes(d_model, num_heads, d_ff, dropout, layer_norm_eps)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, activation, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def project_memory(self, memory: torch.Tensor) -> KVCache:
        """The encoder output ``(B, S, D)`` as this block's cross-attention keys and values.

        Computed once per source: decoding step by step reuses it at every step.
        """
        return self.cross_attn.project_kv(memory, memory)  # (B, H, S, Dh) each

    def forward(
        self, x: torch.Tensor, memory_kv: KVCache, memory_mask: torch.Tensor | None = None,
        past: KVCache | None = None, need_weights: bool = False,
    ) -> tuple[torch.Tensor, KVCache] | tuple[torch.Tensor, KVCache, DecoderAttentionMaps]:
        """x ``(B, T, D)``: new target positions after the P in ``past``; ``memory_kv`` from
        ``project_memory``; ``memory_mask`` broadcastable to ``(B, T, S)``.

        Returns ``(B, T, D)`` and the self-attention cache of all P + T positions (``past`` is
        not changed), plus ``DecoderAttentionMaps`` if ``need_weights``.
        """
        h = self.sublayer_input(x, self.norm1)
        attended, present, self_weights = causal_self_attention(self.self_attn, h, past, need_weights)
        x = self.residual(x, self.dropout1(attended), self.norm1)
        h = self.sublayer_input(x, self.norm2)
        attended, cross_weights = _attend(self.cross_attn, h, memory_kv, memory_mask, need_weights)
        x = self.residual(x, self.dropout2(attended), self.norm2)
        h = self.sublayer_input(x, self.norm3)
        x = self.residual(x, self.dropout3(self.feed_forward(h)), self.norm3)  # (B, T, D)
        if need_weights:
            return x, present, DecoderAttentionMaps(self_weights, cross_weights)
        return x, present


@torch.no_grad()
def to_torch_encoder_layer(block: EncoderBlock) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer`` (batch_first, dropout 0, eval mode) holding ``block``'s weights.

    Works for a ``CausalBlock`` too (pass PyTorch a causal mask). PyTorch has ReLU and exact GELU
    only, so a ``gelu_tanh`` block has no equivalent.
    """
    ff = block.feed_forward
    if ff.activation not in ("relu", "gelu"):
        raise ValueError(f"nn.TransformerEncoderLayer has no {ff.activation!r} activation; only 'relu' and 'gelu'")
    attn = block.self_attn
    ref = nn.TransformerEncoderLayer(
        attn.d_model, attn.num_heads, ff.linear1.out_features, dropout=0.0, activation=ff.activation,
        layer_norm_eps=block.norm1.eps, batch_first=True, norm_first=block.norm_first,
    ).to(attn.q_proj.weight.device)
    copy_to_torch_multihead(attn, ref.self_attn)
    for name in ("linear1", "linear2"):
        getattr(ref, name).load_state_dict(getattr(ff, name).state_dict())
    ref.norm1.load_state_dict(block.norm1.state_dict())
    ref.norm2.load_state_dict(block.norm2.state_dict())
    return ref.eval()
