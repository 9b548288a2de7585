"""The Transformer encoder-decoder (Vaswani et al., 2017), built from the library's blocks.

Legend: B batch, S source length, T target length, D model width (``d_model``), H heads,
F feed-forward width (``d_ff``), V target vocabulary.

Each sublayer (attention or feed-forward) is wrapped in a residual connection and a
LayerNorm. Post-norm, as in the paper (the default): ``x = LayerNorm(x + Sublayer(x))``.
Pre-norm (``norm_first=True``): ``x = x + Sublayer(LayerNorm(x))``, plus one final LayerNorm
after each stack, as every pre-norm model needs (the residual stream is never normalised
otherwise). See ``attnbook.layers.blocks``.

Masks follow the book's convention: boolean, ``True`` = may attend (``attnbook.layers.masks``).
The model decodes through the book's protocol (``attnbook.decoding.Seq2SeqDecoder``):
``start(src, src_lengths) -> state`` and ``step(tokens, state) -> (logits, new state)``. The
state holds each decoder layer's ``KVCache`` of the positions decoded so far, so each step costs
one position; ``step`` never changes the state it is given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers import (
    DecoderAttentionMaps, DecoderBlock, Embeddings, EncoderBlock, KVCache, SinusoidalPositionalEncoding,
    key_mask, token_mask,
)
from attnbook.layers.attention import copy_to_torch_multihead
from attnbook.layers.validation import check_transformer_sizes


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes and switches of a ``Transformer``. The paper's base model is
    ``d_model=512, num_heads=8, d_ff=2048, num_encoder_layers=num_decoder_layers=6, dropout=0.1``."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 128
    num_heads: int = 4
    d_ff: int = 256
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    dropout: float = 0.1
    norm_first: bool = False  # False: post-norm as in the paper; True: pre-norm
    activation: str = "relu"  # the paper's; "gelu" or "gelu_tanh" in later models
    layer_norm_eps: float = 1e-5
    tie_output: bool = True  # share the output projection's weight with the target embedding
    max_len: int = 128
    pad_id: int = 0

    def __post_init__(self) -> None:
        check_transformer_sizes(
            self.d_model, self.num_heads, self.d_ff, self.dropout, self.activation,
            src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size, max_len=self.max_len,
            num_encoder_layers=self.num_encoder_layers, num_decoder_layers=self.num_decoder_layers,
        )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabularies")


def token_embeddings(vocab_size: int, config: TransformerConfig) -> Embeddings:
    """The paper's input: token embedding · √D + the fixed sinusoidal positions, then dropout.

    The table starts at std 1/√D, so that √D · embedding has unit scale; the padding row is zero.
    """
    tokens = nn.Embedding(vocab_size, config.d_model, padding_idx=config.pad_id)
    nn.init.normal_(tokens.weight, std=config.d_model ** -0.5)
    with torch.no_grad():
        tokens.weight[config.pad_id].zero_()
    positions = SinusoidalPositionalEncoding(config.d_model, config.max_len)
    return Embeddings(tokens, positions, scale=math.sqrt(config.d_model), dropout=config.dropout)


@dataclass(frozen=True)
class TransformerState:
    """What ``Transformer.step`` carries between steps (returned, never stored on the model).

    Immutable: ``step`` returns a new state, so stepping twice from one state gives the same
    logits. ``memory_kvs`` are each decoder layer's cross-attention keys and values of the
    encoder output (projected once in ``start``); ``self_caches`` each layer's keys and values
    of the target positions decoded so far (None before the first step).
    """

    src_tokens: torch.Tensor  # (B, S) token mask: True on real source tokens
    memory_kvs: tuple[KVCache, ...]
    self_caches: tuple[KVCache, ...] | None
    position: int  # how many target positions have been decoded so far


@dataclass(frozen=True)
class TransformerAttentionMaps:
    """All attention weights of one forward pass, for plotting.

    ``encoder[l]`` is ``(B, H, S, S)``; ``decoder[l]`` holds the layer's self- and cross-attention.
    """

    encoder: list[torch.Tensor]
    decoder: list[DecoderAttentionMaps]


class Transformer(nn.Module):
    """Encoder-decoder Transformer: logits ``(B, T, V)`` by teacher forcing, or step by step."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = token_embeddings(c.src_vocab_size, c)
        self.tgt_embed = token_embeddings(c.tgt_vocab_size, c)
        block = dict(d_model=c.d_model, num_heads=c.num_heads, d_ff=c.d_ff, dropout=c.dropout,
                     activation=c.activation, norm_first=c.norm_first, layer_norm_eps=c.layer_norm_eps)
        self.encoder_layers = nn.ModuleList(EncoderBlock(**block) for _ in range(c.num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderBlock(**block) for _ in range(c.num_decoder_layers))
        # Pre-norm leaves the residual stream unnormalised: one LayerNorm closes each stack.
        self.encoder_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.norm_first else nn.Identity()
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size)
        if c.tie_output:
            self.output.weight = self.tgt_embed.tokens.weight  # (V, D): one matrix, two uses

    def _check_source(self, src: torch.Tensor, src_lengths: torch.Tensor) -> None:
        if src.dim() != 2:
            raise ValueError(f"src must be (B, S) token ids, got shape {tuple(src.shape)}")
        if src_lengths.shape != (src.shape[0],):
            raise ValueError(f"src_lengths must have shape ({src.shape[0]},), got {tuple(src_lengths.shape)}")
        if src.shape[1] > self.config.max_len:
            raise ValueError(f"source of length {src.shape[1]} is longer than max_len={self.config.max_len}")

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor, need_weights: bool = False):
        """src ``(B, S)``, lengths ``(B,)`` -> memory ``(B, S, D)`` and the ``(B, S)`` token mask.

        With ``need_weights``, also the list of each layer's ``(B, H, S, S)`` self-attention weights.
        """
        self._check_source(src, src_lengths)
        src_tokens = token_mask(src_lengths, src.shape[1])  # (B, S)
        mask = key_mask(src_tokens)  # (B, 1, S): no query attends to padding
        x = self.src_embed(src)  # (B, S, D)
        maps = []
        for layer in self.encoder_layers:
            if need_weights:
                x, weights = layer(x, mask, need_weights=True)
                maps.append(weights)
            else:
                x = layer(x, mask)  # (B, S, D)
        memory = self.encoder_norm(x)  # (B, S, D)
        return (memory, src_tokens, maps) if need_weights else (memory, src_tokens)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_tokens: torch.Tensor, need_weights: bool = False):
        """Teacher forcing: tgt_in ``(B, T)`` (``<bos>`` first) -> decoder output ``(B, T, D)``.

        Position t sees target positions <= t (causal) and every real source position.
        With ``need_weights``, also each layer's ``DecoderAttentionMaps``.
        """
        if tgt_in.dim() != 2 or tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"tgt_in must be (B, T) with B={memory.shape[0]}, got shape {tuple(tgt_in.shape)}")
        if tgt_in.shape[1] > self.config.max_len:
            raise ValueError(f"target of length {tgt_in.shape[1]} is longer than max_len={self.config.max_len}")
        memory_mask = key_mask(src_tokens)  # (B, 1, S)
        x = self.tgt_embed(tgt_in)  # (B, T, D)
        maps = []
        for layer in self.decoder_layers:
            out = layer(x, layer.project_memory(memory), memory_mask, need_weights=need_weights)
            x = out[0]  # (B, T, D)
            if need_weights:
                maps.append(out[2])
        x = self.decoder_norm(x)  # (B, T, D)
        return (x, maps) if need_weights else x

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits ``(B, T, V)`` for every target position at once."""
        memory, src_tokens = self.encode(src, src_lengths)
        return self.output(self.decode(tgt_in, memory, src_tokens))  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> TransformerAttentionMaps:
        """Every layer's attention weights for one teacher-forced pass (for heatmaps)."""
        memory, src_tokens, encoder_maps = self.encode(src, src_lengths, need_weights=True)
        _, decoder_maps = self.decode(tgt_in, memory, src_tokens, need_weights=True)
        return TransformerAttentionMaps(encoder_maps, decoder_maps)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> TransformerState:
        """Encode the source once; project the memory's keys and values for every decoder layer."""
        memory, src_tokens = self.encode(src, src_lengths)
        memory_kvs = tuple(layer.project_memory(memory) for layer in self.decoder_layers)
        return TransformerState(src_tokens, memory_kvs, self_caches=None, position=0)

    def step(self, tokens: torch.Tensor, state: TransformerState) -> tuple[torch.Tensor, TransformerState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and a new state.

        Only the new position is computed; the keys and values of earlier positions come from
        the caches, so no causal mask is needed (the cache holds only the past).
        """
        B = state.src_tokens.shape[0]
        if tokens.shape != (B,):
            raise ValueError(f"tokens must have shape ({B},), got {tuple(tokens.shape)}")
        x = self.tgt_embed(tokens[:, None], offset=state.position)  # (B, 1, D)
        memory_mask = key_mask(state.src_tokens)  # (B, 1, S)
        caches = []
        for i, layer in enumerate(self.decoder_layers):
            past = state.self_caches[i] if state.self_caches is not None else None
            x, present = layer(x, state.memory_kvs[i], memory_mask, past=past)  # (B, 1, D)
            caches.append(present)
        logits = self.output(self.decoder_norm(x))[:, 0]  # (B, V)
        return logits, TransformerState(state.src_tokens, state.memory_kvs, tuple(caches), state.position + 1)

    def reorder_state(self, state: TransformerState, index: torch.Tensor) -> TransformerState:
        """Pick rows ``index`` (new batch of size ``len(index)``) of every tensor in the state: beam search."""
        caches = None if state.self_caches is None else tuple(c.select(index) for c in state.self_caches)
        return TransformerState(
            state.src_tokens.index_select(0, index), tuple(kv.select(index) for kv in state.memory_kvs),
            caches, state.position,
        )


def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """An ``nn.Transformer`` (batch_first, dropout 0) holding a copy of ``model``'s layer weights.

    It covers the two stacks only: embeddings and the output projection stay in ``model``.
    ``nn.Transformer`` always ends each stack with a LayerNorm; for a post-norm model, which
    has none, those two norms are removed.
    """
    c = model.config
    if c.activation not in ("relu", "gelu"):
        raise ValueError(f"nn.Transformer has no {c.activation!r} activation; only 'relu' and 'gelu' (exact)")
    sizes = dict(d_model=c.d_model, nhead=c.num_heads, dim_feedforward=c.d_ff, dropout=0.0, activation=c.activation,
                 layer_norm_eps=c.layer_norm_eps, batch_first=True, norm_first=c.norm_first)
    # Built by hand only to switch off the nested-tensor fast path, which zeroes padded positions.
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**sizes), c.num_encoder_layers,
                                    norm=nn.LayerNorm(c.d_model, eps=c.layer_norm_eps), enable_nested_tensor=False)
    ref = nn.Transformer(
        num_encoder_layers=c.num_encoder_layers, num_decoder_layers=c.num_decoder_layers,
        custom_encoder=encoder, **sizes,
    ).to(next(model.parameters()).device)
    if c.norm_first:
        ref.encoder.norm.load_state_dict(model.encoder_norm.state_dict())
        ref.decoder.norm.load_state_dict(model.decoder_norm.state_dict())
    else:
        ref.encoder.norm = None
        ref.decoder.norm = None
    with torch.no_grad():
        for ours, theirs in zip(model.encoder_layers, ref.encoder.layers):
            copy_to_torch_multihead(ours.self_attn, theirs.self_attn)
            _copy_common(ours, theirs, ("norm1", "norm2"))
        for ours, theirs in zip(model.decoder_layers, ref.decoder.layers):
            copy_to_torch_multihead(ours.self_attn, theirs.self_attn)
            copy_to_torch_multihead(ours.cross_attn, theirs.multihead_attn)
            _copy_common(ours, theirs, ("norm1", "norm2", "norm3"))
    return ref.eval()


def _copy_common(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> None:
    theirs.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
    for name in norms:
        getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
