"""The Transformer encoder-decoder (Vaswani et al., 2017), built from the book's attention.

Legend: B batch, S source length, T target length, D model width (``d_model``), H heads,
F feed-forward width (``d_ff``), V target vocabulary.

Each sublayer (attention or feed-forward) is wrapped in a residual connection and a
LayerNorm. Post-norm, as in the paper (the default): ``x = LayerNorm(x + Sublayer(x))``.
Pre-norm (``norm_first=True``): ``x = x + Sublayer(LayerNorm(x))``, plus one final LayerNorm
after each stack, as every pre-norm model needs (the residual stream is never normalised
otherwise).

Masks follow the book's convention: boolean, ``True`` = may attend (``attnbook.masks``).
The model decodes through the book's protocol: ``start(src, src_lengths) -> state`` and
``step(tokens, state) -> (logits, state)``; ``step`` keeps the keys and values of the
positions already decoded in a ``KVCache`` per layer, so each step costs one position.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attnbook.attention import KVCache, MultiHeadAttention
from attnbook.masks import causal_mask, key_padding_to_attention_mask, padding_mask
from attnbook.positional import SinusoidalPositionalEncoding


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
    tie_output: bool = True  # share the output projection's weight with the target embedding
    max_len: int = 128
    pad_id: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.num_heads != 0:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if min(self.num_encoder_layers, self.num_decoder_layers) < 1:
            raise ValueError("the model needs at least one encoder layer and one decoder layer")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")


class FeedForward(nn.Module):
    """Position-wise feed-forward network: ``W2 ReLU(W1 x + b1) + b2``, the same at every position."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))  # (B, T, D)


class EncoderLayer(nn.Module):
    """Multi-head self-attention, then the feed-forward network; each in a residual + LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False):
        """x ``(B, S, D)``, mask broadcastable to ``(B, S, S)`` (e.g. ``(B, 1, S)`` for padding).

        Returns ``(B, S, D)``, plus the attention weights ``(B, H, S, S)`` if ``need_weights``.
        """
        h = self.norm1(x) if self.norm_first else x
        attended, weights = self.self_attn(h, h, h, mask=mask, need_weights=True)  # (B, S, D), (B, H, S, S)
        x = x + self.dropout1(attended)
        x = x if self.norm_first else self.norm1(x)
        h = self.norm2(x) if self.norm_first else x
        x = x + self.dropout2(self.feed_forward(h))
        x = x if self.norm_first else self.norm2(x)  # (B, S, D)
        return (x, weights) if need_weights else x


@dataclass(frozen=True)
class DecoderLayerWeights:
    """Attention weights of one decoder layer: ``self_attn (B, H, T, T)``, ``cross_attn (B, H, T, S)``."""

    self_attn: torch.Tensor
    cross_attn: torch.Tensor


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention (Q from the decoder, K and V from the encoder
    output), then the feed-forward network; each in a residual + LayerNorm."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm_first: bool = False) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)
        self.norm_first = norm_first

    def _sublayer(self, x: torch.Tensor, norm: nn.LayerNorm, dropout: nn.Dropout, fn) -> torch.Tensor:
        """Residual + LayerNorm around ``fn``, post-norm or pre-norm."""
        if self.norm_first:
            return x + dropout(fn(norm(x)))
        return norm(x + dropout(fn(x)))

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        need_weights: bool = False,
    ):
        """x ``(B, T, D)`` decoder positions, memory ``(B, S, D)`` the encoder output.

        ``self_mask`` broadcasts to ``(B, T, T')`` (T' = positions in the cache plus T) and is
        causal in training; ``memory_mask`` broadcasts to ``(B, T, S)``. With caches, ``x`` holds
        only the new positions; ``cross_cache``, when filled, already holds the projected memory
        (see ``Transformer.start``), so the memory is not projected again.
        Returns ``(B, T, D)``, plus ``DecoderLayerWeights`` if ``need_weights``.
        """
        found: dict[str, torch.Tensor] = {}

        def self_attend(h: torch.Tensor) -> torch.Tensor:
            out, found["self"] = self.self_attn(h, h, h, mask=self_mask, need_weights=True, cache=self_cache)
            return out  # (B, T, D)

        def cross_attend(h: torch.Tensor) -> torch.Tensor:
            kv = memory
            if cross_cache is not None and len(cross_cache) > 0:
                kv = memory[:, :0]  # (B, 0, D): no new keys, all S of them are in the cache
            out, found["cross"] = self.cross_attn(h, kv, kv, mask=memory_mask, need_weights=True, cache=cross_cache)
            return out  # (B, T, D)

        x = self._sublayer(x, self.norm1, self.dropout1, self_attend)
        x = self._sublayer(x, self.norm2, self.dropout2, cross_attend)
        x = self._sublayer(x, self.norm3, self.dropout3, self.feed_forward)  # (B, T, D)
        return (x, DecoderLayerWeights(found["self"], found["cross"])) if need_weights else x


class Embedding(nn.Module):
    """Token embedding scaled by √D, plus the fixed sinusoidal positions, then dropout."""

    def __init__(self, vocab_size: int, d_model: int, max_len: int, dropout: float, pad_id: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.tokens.weight, std=d_model ** -0.5)  # so that √D · embedding has unit scale
        with torch.no_grad():
            self.tokens.weight[pad_id].zero_()
        self.positions = SinusoidalPositionalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(dropout)
        self.scale = math.sqrt(d_model)

    def forward(self, ids: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """ids ``(B, T)`` -> ``(B, T, D)``; ``offset`` is the position of the first id."""
        return self.dropout(self.positions(self.tokens(ids) * self.scale, offset=offset))  # (B, T, D)


@dataclass(frozen=True)
class TransformerState:
    """What ``Transformer.step`` carries between steps (returned, never stored on the model).

    The caches are per decoder layer. ``memory`` is only kept so that ``step`` knows B, S and
    the device; the cross-attention keys and values of the memory are already in ``cross_caches``.
    """

    memory: torch.Tensor  # (B, S, D)
    memory_valid: torch.Tensor  # (B, S) True on real source tokens
    self_caches: tuple[KVCache, ...]
    cross_caches: tuple[KVCache, ...]

    @property
    def position(self) -> int:
        """How many target positions have been decoded so far."""
        return len(self.self_caches[0])


@dataclass(frozen=True)
class TransformerWeights:
    """All attention weights of one forward pass, for plotting.

    ``encoder[l]`` is ``(B, H, S, S)``; ``decoder[l]`` holds the layer's self- and cross-attention.
    """

    encoder: list[torch.Tensor]
    decoder: list[DecoderLayerWeights]


class Transformer(nn.Module):
    """Encoder-decoder Transformer: logits ``(B, T, V)`` by teacher forcing, or step by step."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = Embedding(c.src_vocab_size, c.d_model, c.max_len, c.dropout, c.pad_id)
        self.tgt_embed = Embedding(c.tgt_vocab_size, c.d_model, c.max_len, c.dropout, c.pad_id)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first) for _ in range(c.num_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first) for _ in range(c.num_decoder_layers)
        )
        # Pre-norm leaves the residual stream unnormalised: one LayerNorm closes each stack.
        self.encoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(c.d_model) if c.norm_first else nn.Identity()
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
        """src ``(B, S)``, lengths ``(B,)`` -> memory ``(B, S, D)`` and the ``(B, S)`` mask of real tokens.

        With ``need_weights``, also the list of each layer's ``(B, H, S, S)`` self-attention weights.
        """
        self._check_source(src, src_lengths)
        valid = padding_mask(src_lengths, src.shape[1])  # (B, S)
        mask = key_padding_to_attention_mask(valid)  # (B, 1, S): no query attends to padding
        x = self.src_embed(src)  # (B, S, D)
        weights = []
        for layer in self.encoder_layers:
            x, w = layer(x, mask, need_weights=True)
            weights.append(w)
        memory = self.encoder_norm(x)  # (B, S, D)
        return (memory, valid, weights) if need_weights else (memory, valid)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, memory_valid: torch.Tensor, need_weights: bool = False):
        """Teacher forcing: tgt_in ``(B, T)`` (``<bos>`` first) -> decoder output ``(B, T, D)``.

        Position t sees target positions <= t (causal mask) and every real source position.
        """
        T = tgt_in.shape[1]
        self_mask = causal_mask(T, device=tgt_in.device)  # (T, T), the same for every sequence
        memory_mask = key_padding_to_attention_mask(memory_valid)  # (B, 1, S)
        x = self.tgt_embed(tgt_in)  # (B, T, D)
        weights = []
        for layer in self.decoder_layers:
            x, w = layer(x, memory, self_mask, memory_mask, need_weights=True)
            weights.append(w)
        x = self.decoder_norm(x)  # (B, T, D)
        return (x, weights) if need_weights else x

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits ``(B, T, V)`` for every target position at once."""
        if tgt_in.dim() != 2 or tgt_in.shape[0] != src.shape[0]:
            raise ValueError(f"tgt_in must be (B, T) with B={src.shape[0]}, got shape {tuple(tgt_in.shape)}")
        memory, valid = self.encode(src, src_lengths)
        return self.output(self.decode(tgt_in, memory, valid))  # (B, T, V)

    @torch.no_grad()
    def attention_weights(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> TransformerWeights:
        """Every layer's attention weights for one teacher-forced pass (for heatmaps)."""
        memory, valid, enc_w = self.encode(src, src_lengths, need_weights=True)
        _, dec_w = self.decode(tgt_in, memory, valid, need_weights=True)
        return TransformerWeights(enc_w, dec_w)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> TransformerState:
        """Encode the source once; project the memory's keys and values for every decoder layer."""
        memory, valid = self.encode(src, src_lengths)
        cross_caches = []
        for layer in self.decoder_layers:
            attn = layer.cross_attn
            cache = KVCache()
            cache.append(attn.split_heads(attn.k_proj(memory)), attn.split_heads(attn.v_proj(memory)))  # (B, H, S, Dh)
            cross_caches.append(cache)
        return TransformerState(memory, valid, tuple(KVCache() for _ in self.decoder_layers), tuple(cross_caches))

    def step(self, tokens: torch.Tensor, state: TransformerState) -> tuple[torch.Tensor, TransformerState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and the state.

        Only the new position is computed; the keys and values of earlier positions come from
        the caches, so no causal mask is needed (the cache holds only the past).
        """
        B = state.memory.shape[0]
        if tokens.shape != (B,):
            raise ValueError(f"tokens must have shape ({B},), got {tuple(tokens.shape)}")
        x = self.tgt_embed(tokens[:, None], offset=state.position)  # (B, 1, D)
        memory_mask = key_padding_to_attention_mask(state.memory_valid)  # (B, 1, S)
        for layer, self_cache, cross_cache in zip(self.decoder_layers, state.self_caches, state.cross_caches):
            x = layer(x, state.memory, None, memory_mask, self_cache=self_cache, cross_cache=cross_cache)
        return self.output(self.decoder_norm(x))[:, 0], state  # (B, V)

    def reorder_state(self, state: TransformerState, index: torch.Tensor) -> TransformerState:
        """Pick rows ``index`` (new batch of size ``len(index)``) of every tensor in the state: beam search."""
        def pick(caches: tuple[KVCache, ...]) -> tuple[KVCache, ...]:
            out = []
            for cache in caches:
                new = KVCache()
                if len(cache):
                    new.append(cache.key.index_select(0, index), cache.value.index_select(0, index))
                out.append(new)
            return tuple(out)

        return TransformerState(
            state.memory.index_select(0, index), state.memory_valid.index_select(0, index),
            pick(state.self_caches), pick(state.cross_caches),
        )


def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """An ``nn.Transformer`` (batch_first, dropout 0) holding a copy of ``model``'s layer weights.

    It covers the two stacks only: embeddings and the output projection stay in ``model``.
    ``nn.Transformer`` always ends each stack with a LayerNorm; for a post-norm model, which
    has none, those two norms are removed.
    """
    c = model.config
    sizes = dict(d_model=c.d_model, nhead=c.num_heads, dim_feedforward=c.d_ff, dropout=0.0,
                 batch_first=True, norm_first=c.norm_first)
    # Built by hand only to switch off the nested-tensor fast path, which zeroes padded positions.
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(**sizes), c.num_encoder_layers,
                                    norm=nn.LayerNorm(c.d_model), enable_nested_tensor=False)
    ref = nn.Transformer(
        d_model=c.d_model, nhead=c.num_heads, num_encoder_layers=c.num_encoder_layers,
        num_decoder_layers=c.num_decoder_layers, dim_feedforward=c.d_ff, dropout=0.0,
        batch_first=True, norm_first=c.norm_first, custom_encoder=encoder,
    ).to(next(model.parameters()).device)
    if c.norm_first:
        ref.encoder.norm.load_state_dict(model.encoder_norm.state_dict())
        ref.decoder.norm.load_state_dict(model.decoder_norm.state_dict())
    else:
        ref.encoder.norm = None
        ref.decoder.norm = None
    with torch.no_grad():
        for ours, theirs in zip(model.encoder_layers, ref.encoder.layers):
            _copy_attention(ours.self_attn, theirs.self_attn)
            _copy_common(ours, theirs, ("norm1", "norm2"))
        for ours, theirs in zip(model.decoder_layers, ref.decoder.layers):
            _copy_attention(ours.self_attn, theirs.self_attn)
            _copy_attention(ours.cross_attn, theirs.multihead_attn)
            _copy_common(ours, theirs, ("norm1", "norm2", "norm3"))
    return ref.eval()


def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """nn.MultiheadAttention keeps W_Q, W_K, W_V stacked in one ``(3D, D)`` in_proj matrix."""
    theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
    theirs.out_proj.load_state_dict(ours.out_proj.state_dict())


def _copy_common(ours: nn.Module, theirs: nn.Module, norms: tuple[str, ...]) -> None:
    theirs.linear1.load_state_dict(ours.feed_forward.linear1.state_dict())
    theirs.linear2.load_state_dict(ours.feed_forward.linear2.state_dict())
    for name in norms:
        getattr(theirs, name).load_state_dict(getattr(ours, name).state_dict())
