"""Transformer blocks: an encoder block, the causal block of a decoder-only model, and a decoder
block with cross-attention. Every sublayer sits in the same residual idiom:

- post-norm (the 2017 paper, BERT):  ``x = norm(x + sublayer(x))``
- pre-norm (GPT-2, ViT, T5, Llama):  ``x = x + sublayer(norm(x))``

``ResidualBlock.sublayer_input`` and ``ResidualBlock.residual`` are those two lines; each block's
``forward`` is a sequence of them, as in PyTorch's ``_sa_block``/``_ff_block`` and nanoGPT's
``Block``. A pre-norm stack needs one final norm after its last block (the model adds it).
Submodule names follow ``nn.TransformerEncoderLayer`` (``self_attn``, ``norm1``, ...).

What later models change is an argument, never an edit here: ``norm`` (a ``Norm``: LayerNorm with
or without bias, RMSNorm), ``feed_forward`` (a ``FeedForwardSpec``: MLP or gated SwiGLU/GeGLU, with
or without biases) and ``attention`` (an ``AttentionSpec``: grouped-query heads, scale, rotary
positions). Given ``d_ff``/``activation``/``layer_norm_eps`` instead, a block is the 2017 paper's.

**One interface.** Every block is called as ``block(x, mask, *, bias, past, memory_kv, memory_mask,
need_weights)`` (each block reads the inputs it has a use for and rejects the others) and returns
a ``BlockOutput``; ``run_blocks`` runs a stack and is the one place that collects caches and
attention maps.

Legend: B batch, S source length, T target length (new positions), P positions in a cache,
D model width, H heads, F feed-forward width. Masks: boolean, ``True`` = may attend; a float
``bias`` is added to the self-attention scores.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from attnbook.layers.attention import AttentionSpec, KVCache, MultiHeadAttention
from attnbook.layers.feedforward import FeedForwardSpec
from attnbook.layers.masks import causal_mask
from attnbook.layers.norms import Norm
from attnbook.layers.validation import check_dropout, check_heads


@dataclass(frozen=True)
class DecoderAttentionMaps:
    """Attention weights of one decoder block: ``self_attn (B, H, T, P+T)``, ``cross_attn (B, H, T, S)``."""

    self_attn: torch.Tensor
    cross_attn: torch.Tensor


@dataclass(frozen=True)
class BlockOutput:
    """What every block returns.

    ``hidden`` ``(B, T, D)``; ``cache`` the self-attention keys and values of all P + T positions
    (causal and decoder blocks; None for an encoder block); ``attention`` the weights, only when
    asked: ``(B, H, T, S)`` (``DecoderAttentionMaps`` for a decoder block).
    """

    hidden: torch.Tensor
    cache: KVCache | None = None
    attention: torch.Tensor | DecoderAttentionMaps | None = None


@dataclass(frozen=True)
class StackOutput:
    """What ``run_blocks`` returns: the last block's ``hidden``, each block's ``cache`` (None for
    encoder blocks), and when asked, each block's ``attention`` and the stream before the first
    block and after each (``hidden_states``, L + 1 tensors ``(B, T, D)``); else None."""

    hidden: torch.Tensor
    caches: tuple[KVCache | None, ...]
    attention: tuple[torch.Tensor | DecoderAttentionMaps, ...] | None
    hidden_states: tuple[torch.Tensor, ...] | None = None


def _parts(
    d_ff: int | None, activation: str | None, layer_norm_eps: float | None, norm: Norm | None,
    feed_forward: FeedForwardSpec | None,
) -> tuple[Norm, FeedForwardSpec]:
    """The block's norm and feed-forward recipes, from the 2017-style sizes or from the specs."""
    if feed_forward is None:
        if d_ff is None:
            raise ValueError("a block needs d_ff (with activation) or a feed_forward spec")
        feed_forward = FeedForwardSpec(d_ff, activation)
    elif d_ff is not None or activation is not None:
        raise ValueError("give a block either d_ff/activation or a feed_forward spec, not both")
    if norm is None:
        norm = Norm("layernorm", 1e-5 if layer_norm_eps is None else layer_norm_eps)
    elif layer_norm_eps is not None:
        raise ValueError("give a block either layer_norm_eps or a norm spec, not both")
    return norm, feed_forward


class ResidualBlock(nn.Module):
    """What every block shares: post-norm or pre-norm residual connections."""

    def __init__(self, norm_first: bool) -> None:
        super().__init__()
        self.norm_first = norm_first

    def sublayer_input(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        """Pre-norm normalises what goes into the sublayer; post-norm passes ``x`` as it is."""
        return norm(x) if self.norm_first else x

    def residual(self, x: torch.Tensor, update: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        """Add the sublayer's output to the stream; post-norm then normalises the sum."""
        return x + update if self.norm_first else norm(x + update)

    @staticmethod
    def _reject(block: str, **unused: object) -> None:
        given = [name for name, value in unused.items() if value is not None]
        if given:
            raise ValueError(f"{block} has no use for {', '.join(given)}")


def _attend_with_optional_weights(
    attn: MultiHeadAttention, query: torch.Tensor, kv: KVCache, mask: torch.Tensor | None, need_weights: bool,
    bias: torch.Tensor | None = None, offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``attn.attend`` that always returns ``(out, weights or None)``; weights cost extra only if asked."""
    if need_weights:
        return attn.attend(query, kv, mask, need_weights=True, bias=bias, offset=offset)
    return attn.attend(query, kv, mask, bias=bias, offset=offset), None


def causal_self_attention(
    attn: MultiHeadAttention, x: torch.Tensor, past: KVCache | None, need_weights: bool,
    mask: torch.Tensor | None = None, bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, KVCache, torch.Tensor | None]:
    """Self-attention over the cached positions and the new ones, never into the future.

    x ``(B, T, D)`` holds the T new positions; ``past`` the keys and values of the P before
    them. ``mask`` (bool, broadcastable to ``(B, T, P+T)``) may forbid more keys (padding);
    ``bias`` (float) is added to the ``(B, H, T, P+T)`` scores. Returns the output ``(B, T, D)``,
    the cache of all P + T positions (a new object; ``past`` is unchanged) and the weights
    ``(B, H, T, P+T)`` if asked.
    """
    P = 0 if past is None else len(past)
    kv = attn.project_kv(x, x, offset=P)  # (B, Hkv, T, Dh) each
    if past is not None:
        kv = past.extend(kv.key, kv.value)  # (B, Hkv, P+T, Dh)
    T = x.shape[1]
    causal = causal_mask(T, len(kv), device=x.device) if T > 1 else None  # one new position sees all
    if mask is not None:
        mask = mask if causal is None else mask & causal  # (B, T, P+T)
    else:
        mask = causal
    out, weights = _attend_with_optional_weights(attn, x, kv, mask, need_weights, bias, offset=P)
    return out, kv, weights


class _SelfAttentionBlock(ResidualBlock):
    """The layers an encoder block and a causal block share: self-attention, then the feed-forward
    network, each with its norm and dropout. ``norm_first`` and ``activation`` left as None take
    the subclass's defaults."""

    default_norm_first: bool
    default_activation: str

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int | None = None, dropout: float = 0.0,
        activation: str | None = None, norm_first: bool | None = None, layer_norm_eps: float | None = None, *,
        norm: Norm | None = None, feed_forward: FeedForwardSpec | None = None,
        attention: AttentionSpec = AttentionSpec(),
    ) -> None:
        super().__init__(self.default_norm_first if norm_first is None else norm_first)
        check_heads(d_model, num_heads)
        check_dropout(dropout)
        if feed_forward is None and activation is None:
            activation = self.default_activation
        norm, feed_forward = _parts(d_ff, activation, layer_norm_eps, norm, feed_forward)
        self.self_attn = attention(d_model, num_heads, dropout)
        self.feed_forward = feed_forward(d_model, dropout)
        self.norm1, self.norm2 = norm(d_model), norm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def _feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.sublayer_input(x, self.norm2)
        return self.residual(x, self.dropout2(self.feed_forward(h)), self.norm2)  # (B, T, D)


class EncoderBlock(_SelfAttentionBlock):
    """Self-attention over the whole sequence, then the feed-forward network. Defaults are the
    2017 paper's: post-norm, ReLU."""

    default_norm_first, default_activation = False, "relu"

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
        past: KVCache | None = None, memory_kv: KVCache | None = None, memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> BlockOutput:
        """x ``(B, S, D)``, mask broadcastable to ``(B, S, S)`` (e.g. ``key_mask``'s ``(B, 1, S)``).

        Returns ``BlockOutput(hidden (B, S, D), cache None, attention (B, H, S, S) if asked)``.
        """
        self._reject("an encoder block", past=past, memory_kv=memory_kv, memory_mask=memory_mask)
        h = self.sublayer_input(x, self.norm1)
        attended, weights = _attend_with_optional_weights(self.self_attn, h, self.self_attn.project_kv(h, h), mask, need_weights, bias)
        x = self.residual(x, self.dropout1(attended), self.norm1)
        return BlockOutput(self._feed_forward(x), None, weights)


class CausalBlock(_SelfAttentionBlock):
    """A decoder-only (GPT) block: self-attention that never looks ahead and decodes with a KV
    cache, then the feed-forward network. Defaults are GPT-2's: pre-norm, GELU."""

    default_norm_first, default_activation = True, "gelu"

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
        past: KVCache | None = None, memory_kv: KVCache | None = None, memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> BlockOutput:
        """x ``(B, T, D)``: the new positions, after the P in ``past`` (None: P = 0); ``mask``
        (optional) forbids more keys than the future ones.

        Returns ``BlockOutput(hidden (B, T, D), cache of all P + T positions, attention
        (B, H, T, P+T) if asked)``; ``past`` is not changed.
        """
        self._reject("a causal block", memory_kv=memory_kv, memory_mask=memory_mask)
        h = self.sublayer_input(x, self.norm1)
        attended, present, weights = causal_self_attention(self.self_attn, h, past, need_weights, mask, bias)
        x = self.residual(x, self.dropout1(attended), self.norm1)
        return BlockOutput(self._feed_forward(x), present, weights)


class DecoderBlock(ResidualBlock):
    """Causal self-attention, cross-attention (queries from the decoder, keys and values from
    the encoder's output), then the feed-forward network."""

    def __init__(
        self, d_model: int, num_heads: int, d_ff: int | None = None, dropout: float = 0.0,
        activation: str | None = None, norm_first: bool = False, layer_norm_eps: float | None = None, *,
        norm: Norm | None = None, feed_forward: FeedForwardSpec | None = None,
        attention: AttentionSpec = AttentionSpec(),
    ) -> None:
        super().__init__(norm_first)
        check_heads(d_model, num_heads)
        check_dropout(dropout)
        norm, feed_forward = _parts(d_ff, "relu" if activation is None and feed_forward is None else activation,
                                    layer_norm_eps, norm, feed_forward)
        self.self_attn = attention(d_model, num_heads, dropout)
        self.cross_attn = replace(attention, rotary_max_len=None)(d_model, num_heads, dropout)  # no positions
        self.feed_forward = feed_forward(d_model, dropout)
        self.norm1, self.norm2, self.norm3 = norm(d_model), norm(d_model), norm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def project_memory(self, memory: torch.Tensor) -> KVCache:
        """The encoder output ``(B, S, D)`` as this block's cross-attention keys and values.

        Computed once per source: decoding step by step reuses it at every step.
        """
        return self.cross_attn.project_kv(memory, memory)  # (B, Hkv, S, Dh) each

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
        past: KVCache | None = None, memory_kv: KVCache | None = None, memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> BlockOutput:
        """x ``(B, T, D)``: new target positions after the P in ``past``; ``memory_kv`` from
        ``project_memory`` (required); ``memory_mask`` broadcastable to ``(B, T, S)``; ``mask`` and
        ``bias`` act on the self-attention as in ``CausalBlock``.

        Returns ``BlockOutput(hidden (B, T, D), self-attention cache of all P + T positions,
        DecoderAttentionMaps if asked)``; ``past`` is not changed.
        """
        if memory_kv is None:
            raise ValueError("a decoder block needs memory_kv: the encoder output through project_memory()")
        h = self.sublayer_input(x, self.norm1)
        attended, present, self_weights = causal_self_attention(self.self_attn, h, past, need_weights, mask, bias)
        x = self.residual(x, self.dropout1(attended), self.norm1)
        h = self.sublayer_input(x, self.norm2)
        attended, cross_weights = _attend_with_optional_weights(self.cross_attn, h, memory_kv, memory_mask, need_weights)
        x = self.residual(x, self.dropout2(attended), self.norm2)
        h = self.sublayer_input(x, self.norm3)
        x = self.residual(x, self.dropout3(self.feed_forward(h)), self.norm3)  # (B, T, D)
        maps = DecoderAttentionMaps(self_weights, cross_weights) if need_weights else None
        return BlockOutput(x, present, maps)


class AttentionOnlyBlock(ResidualBlock):
    """``x + causal_self_attention(x)``: no norm, no feed-forward (Elhage et al., 2021). The block
    of an attention-only Transformer, small enough to read off what each head does."""

    def __init__(self, d_model: int, num_heads: int, *, attention: AttentionSpec = AttentionSpec()) -> None:
        super().__init__(norm_first=True)
        self.self_attn = attention(d_model, num_heads)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, *, bias: torch.Tensor | None = None,
        past: KVCache | None = None, memory_kv: KVCache | None = None, memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> BlockOutput:
        """As ``CausalBlock.forward``: x ``(B, T, D)`` after the P positions in ``past``."""
        self._reject("an attention-only block", memory_kv=memory_kv, memory_mask=memory_mask)
        attended, present, weights = causal_self_attention(self.self_attn, x, past, need_weights, mask, bias)
        return BlockOutput(x + attended, present, weights)  # (B, T, D)


def run_blocks(
    blocks: nn.ModuleList, x: torch.Tensor, mask: torch.Tensor | None = None, *,
    bias: torch.Tensor | None = None, pasts: tuple[KVCache, ...] | None = None,
    memory_kvs: tuple[KVCache, ...] | None = None, memory_mask: torch.Tensor | None = None,
    need_weights: bool = False, all_hidden: bool = False,
) -> StackOutput:
    """Run ``x`` ``(B, T, D)`` through every block in turn: the one loop of every model.

    ``mask``, ``bias`` and ``memory_mask`` are the same for every block; ``pasts`` and
    ``memory_kvs`` hold one entry per block. Returns the last hidden state, each block's cache,
    each block's attention weights if ``need_weights``, and every hidden state if ``all_hidden``.
    """
    for name, per_block in (("pasts", pasts), ("memory_kvs", memory_kvs)):
        if per_block is not None and len(per_block) != len(blocks):
            raise ValueError(f"{name} must hold one entry per block ({len(blocks)}), got {len(per_block)}")
    caches, maps, hidden_states = [], [], [x] if all_hidden else []
    for i, block in enumerate(blocks):
        out = block(
            x, mask, bias=bias, past=None if pasts is None else pasts[i],
            memory_kv=None if memory_kvs is None else memory_kvs[i], memory_mask=memory_mask,
            need_weights=need_weights,
        )
        x = out.hidden  # (B, T, D)
        caches.append(out.cache)
        maps.append(out.attention)
        if all_hidden:  # kept only when asked: holding every layer's output costs memory and time
            hidden_states.append(x)
    return StackOutput(x, tuple(caches), tuple(maps) if need_weights else None,
                       tuple(hidden_states) if all_hidden else None)
