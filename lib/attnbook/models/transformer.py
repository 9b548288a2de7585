"""The Transformer encoder-decoder (Vaswani et al., 2017), built from the library's blocks.

Legend: B batch, S source length, T target length, D model width (``d_model``), H heads,
F feed-forward width (``d_ff``), V target vocabulary.

Each sublayer (attention or feed-forward) is wrapped in a residual connection and a
LayerNorm. Post-norm, as in the paper (the default): ``x = LayerNorm(x + Sublayer(x))``.
Pre-norm (``norm_first=True``): ``x = x + Sublayer(LayerNorm(x))``, plus one final LayerNorm
after each stack, as every pre-norm model needs (the residual stream is never normalised
otherwise). See ``attnbook.layers.blocks``.

Masks follow the book's convention: boolean, ``True`` = may attend (``attnbook.layers.masks``).
This file only builds the parts; encoding, decoding and the KV-cached ``start``/``step`` are the
generic driver's (``attnbook.models.encoder_decoder.EncoderDecoder``), which T5 reuses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers import DecoderBlock, Embeddings, EncoderBlock, SinusoidalPositionalEncoding
from attnbook.layers.torch_bridge import copy_block_to_torch_layer
from attnbook.layers.validation import check_transformer_sizes
from attnbook.models.encoder_decoder import EncoderDecoder


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
            self.d_model, self.num_heads, self.d_ff, self.dropout, self.activation, self.layer_norm_eps,
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


class Transformer(EncoderDecoder):
    """The 2017 encoder-decoder: scaled token embeddings + sinusoids, post-norm (or pre-norm)
    blocks with a ReLU MLP, and a read-out tied to the target embedding."""

    def __init__(self, config: TransformerConfig) -> None:
        c = config
        src_embeddings = token_embeddings(c.src_vocab_size, c)
        tgt_embeddings = token_embeddings(c.tgt_vocab_size, c)
        block = dict(d_model=c.d_model, num_heads=c.num_heads, d_ff=c.d_ff, dropout=c.dropout,
                     activation=c.activation, norm_first=c.norm_first, layer_norm_eps=c.layer_norm_eps)
        encoder_blocks = nn.ModuleList(EncoderBlock(**block) for _ in range(c.num_encoder_layers))
        decoder_blocks = nn.ModuleList(DecoderBlock(**block) for _ in range(c.num_decoder_layers))
        super().__init__(
            src_embeddings, tgt_embeddings, encoder_blocks, decoder_blocks,
            # Pre-norm leaves the residual stream unnormalised: one LayerNorm closes each stack.
            encoder_final_norm=_final_norm(c), decoder_final_norm=_final_norm(c),
            readout=nn.Linear(c.d_model, c.tgt_vocab_size), vocab_sizes=(c.src_vocab_size, c.tgt_vocab_size),
            max_len=c.max_len,
        )
        self.config = config
        if c.tie_output:
            self.readout.weight = self.tgt_embeddings.tokens.weight  # (V, D): one matrix, two uses


def _final_norm(config: TransformerConfig) -> nn.Module:
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else nn.Identity()


def to_torch_transformer(model: Transformer) -> nn.Transformer:
    """An ``nn.Transformer`` (batch_first, dropout 0) holding a copy of ``model``'s block weights.

    It covers the two stacks only: embeddings and the read-out stay in ``model``.
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
        ref.encoder.norm.load_state_dict(model.encoder_final_norm.state_dict())
        ref.decoder.norm.load_state_dict(model.decoder_final_norm.state_dict())
    else:
        ref.encoder.norm = None
        ref.decoder.norm = None
    for ours, theirs in zip(model.encoder_blocks, ref.encoder.layers):
        copy_block_to_torch_layer(ours, theirs)
    for ours, theirs in zip(model.decoder_blocks, ref.decoder.layers):
        copy_block_to_torch_layer(ours, theirs)
    return ref.eval()
