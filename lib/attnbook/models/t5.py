"""T5 (Raffel et al., 2020): Chapter 5's encoder-decoder, changed the way T5 changed it.

Only the parts differ; encoding, decoding and the cached ``start``/``step`` are the generic
driver's (``attnbook.models.encoder_decoder.EncoderDecoder``), as for Chapter 5's Transformer:

- one token table shared by the encoder, the decoder and the read-out; no √D scale and no
  position embeddings at the input;
- positions enter as a learned **relative position bias** on the self-attention scores, one
  ``RelativePositionBias`` per stack (bidirectional in the encoder, causal in the decoder),
  computed once and shared by the stack's blocks; cross-attention has none;
- pre-norm blocks with **RMSNorm** (no mean, no bias) and a final RMSNorm after each stack;
- attention **without the 1/√Dh scale** (``scale=1.0``; the initialisation absorbs it) and
  without projection biases;
- the **gated-GELU** feed-forward of T5 v1.1 (``FeedForwardSpec(d_ff, "gelu_tanh", gated=True,
  bias=False)``; Shazeer, 2020), or the original ReLU MLP with ``gated=False``;
- the read-out is the shared table, applied to the decoder output scaled by ``D ** -0.5``
  (``transformers``' ``scale_decoder_outputs``, the original T5's choice with tied weights).

``t5_state_dict`` renames the weights into ``transformers``' ``T5ForConditionalGeneration``
names and ``reference_config_kwargs`` gives the matching ``T5Config`` arguments; this module
never imports ``transformers`` (the chapter and the tests build the reference).

Legend: B batch, S source length, T target length, D model width, H heads, F feed-forward
width (``d_ff``), V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers import AttentionSpec, DecoderBlock, Embeddings, EncoderBlock, FeedForwardSpec, rms_norm
from attnbook.layers.relative_position import RelativePositionBias, check_buckets
from attnbook.layers.validation import check_transformer_sizes
from attnbook.models.encoder_decoder import EncoderDecoder


@dataclass(frozen=True)
class T5Config:
    """Sizes of a ``T5``. T5-small is ``d_model=512, num_heads=8, d_ff=2048`` (v1.1: 1024,
    gated-GELU), 6 + 6 layers, 32 buckets, ``max_distance=128``, vocabulary 32,128."""

    vocab_size: int
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    num_buckets: int = 32
    max_distance: int = 128
    dropout: float = 0.0
    gated: bool = True  # T5 v1.1's gated-GELU; False: the original ReLU MLP
    layer_norm_eps: float = 1e-6
    max_len: int = 512  # T5 has no position table: this only bounds the inputs the driver accepts
    pad_id: int = 0  # also the decoder's start token, as in T5

    def __post_init__(self) -> None:
        check_transformer_sizes(
            self.d_model, self.num_heads, self.d_ff, self.dropout, self.activation, self.layer_norm_eps,
            vocab_size=self.vocab_size, max_len=self.max_len,
            num_encoder_layers=self.num_encoder_layers, num_decoder_layers=self.num_decoder_layers,
        )
        check_buckets(self.num_buckets, self.max_distance, bidirectional=True)
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary of {self.vocab_size}")

    @property
    def activation(self) -> str:
        return "gelu_tanh" if self.gated else "relu"

    def block_parts(self) -> dict:
        """What a T5 block is built with: RMSNorm, no scale, no biases, the (gated) feed-forward."""
        return dict(
            norm=rms_norm(self.layer_norm_eps),
            attention=AttentionSpec(scale=1.0, bias=False),
            feed_forward=FeedForwardSpec(self.d_ff, self.activation, gated=self.gated, bias=False),
        )


class T5Readout(nn.Module):
    """Logits from the decoder output: ``(x · D^-0.5) Eᵀ`` with E the shared ``(V, D)`` table."""

    def __init__(self, shared: nn.Embedding) -> None:
        super().__init__()
        self.scale = shared.embedding_dim ** -0.5
        self.linear = nn.Linear(shared.embedding_dim, shared.num_embeddings, bias=False)
        self.linear.weight = shared.weight  # (V, D): one matrix for input and output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x * self.scale)  # (B, T, V)


class T5(EncoderDecoder):
    """The T5 encoder-decoder, built from the library's blocks and driven by ``EncoderDecoder``."""

    def __init__(self, config: T5Config) -> None:
        c = config
        shared = nn.Embedding(c.vocab_size, c.d_model)
        parts = c.block_parts()
        block = dict(d_model=c.d_model, num_heads=c.num_heads, dropout=c.dropout, norm_first=True, **parts)
        super().__init__(
            Embeddings(shared, None, dropout=c.dropout), Embeddings(shared, None, dropout=c.dropout),
            nn.ModuleList(EncoderBlock(**block) for _ in range(c.num_encoder_layers)),
            nn.ModuleList(DecoderBlock(**block) for _ in range(c.num_decoder_layers)),
            encoder_final_norm=parts["norm"](c.d_model), decoder_final_norm=parts["norm"](c.d_model),
            readout=T5Readout(shared), vocab_sizes=(c.vocab_size, c.vocab_size), max_len=c.max_len,
            encoder_position_bias=RelativePositionBias(c.num_heads, c.num_buckets, c.max_distance, True),
            decoder_position_bias=RelativePositionBias(c.num_heads, c.num_buckets, c.max_distance, False),
        )
        self.shared = shared
        self.config = c
        init_t5_weights(self)


@torch.no_grad()
def init_t5_weights(model: T5) -> None:
    """T5's initialisation (as ``transformers``' ``_init_weights`` with factor 1), which stands in
    for the missing 1/√Dh: queries start with std ``(D·Dh)^-1/2``, so ``q·k`` has unit scale.

    Embedding std 1; keys and values ``D^-1/2``; output projection ``(H·Dh)^-1/2``; feed-forward
    in ``D^-1/2``, out ``F^-1/2``; the relative-bias tables ``D^-1/2``; norms 1.
    """
    c = model.config
    head_dim = c.d_model // c.num_heads
    nn.init.normal_(model.shared.weight, std=1.0)
    for bias in (model.encoder_position_bias, model.decoder_position_bias):
        nn.init.normal_(bias.relative_attention_bias.weight, std=c.d_model ** -0.5)
    for block in [*model.encoder_blocks, *model.decoder_blocks]:
        attentions = [block.self_attn] + ([block.cross_attn] if isinstance(block, DecoderBlock) else [])
        for attn in attentions:
            nn.init.normal_(attn.q_proj.weight, std=(c.d_model * head_dim) ** -0.5)
            nn.init.normal_(attn.k_proj.weight, std=c.d_model ** -0.5)
            nn.init.normal_(attn.v_proj.weight, std=c.d_model ** -0.5)
            nn.init.normal_(attn.out_proj.weight, std=c.d_model ** -0.5)
        ff = block.feed_forward
        for name, module in ff.named_children():
            if isinstance(module, nn.Linear):
                std = c.d_ff ** -0.5 if name in ("down_proj", "linear2") else c.d_model ** -0.5
                nn.init.normal_(module.weight, std=std)


# --- the bridge to transformers' T5ForConditionalGeneration ------------------------------------

def reference_config_kwargs(config: T5Config) -> dict:
    """Arguments of ``transformers.T5Config`` for the same model (tied, scaled read-out)."""
    return dict(
        vocab_size=config.vocab_size, d_model=config.d_model, d_kv=config.d_model // config.num_heads,
        d_ff=config.d_ff, num_layers=config.num_encoder_layers, num_decoder_layers=config.num_decoder_layers,
        num_heads=config.num_heads, relative_attention_num_buckets=config.num_buckets,
        relative_attention_max_distance=config.max_distance, dropout_rate=config.dropout,
        layer_norm_epsilon=config.layer_norm_eps,
        feed_forward_proj="gated-gelu" if config.gated else "relu",
        pad_token_id=config.pad_id, decoder_start_token_id=config.pad_id, eos_token_id=1,
    )


_ATTENTION = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "out_proj": "o"}
_FEED_FORWARD = {"gate_proj": "wi_0", "up_proj": "wi_1", "down_proj": "wo", "linear1": "wi", "linear2": "wo"}


def t5_state_dict(model: T5) -> dict[str, torch.Tensor]:
    """The model's weights under ``T5ForConditionalGeneration``'s names (the rename table).

    Layer ``l`` of the encoder is ``encoder.block.l.layer.0`` (self-attention + its norm) and
    ``.layer.1`` (feed-forward); the decoder has ``.layer.1`` for cross-attention and ``.layer.2``
    for the feed-forward. Each stack's bias table lives in its block 0, as in ``transformers``.
    """
    out = {"shared.weight": model.shared.weight, "lm_head.weight": model.shared.weight,
           "encoder.embed_tokens.weight": model.shared.weight, "decoder.embed_tokens.weight": model.shared.weight}
    for stack, blocks, bias, final in (
        ("encoder", model.encoder_blocks, model.encoder_position_bias, model.encoder_final_norm),
        ("decoder", model.decoder_blocks, model.decoder_position_bias, model.decoder_final_norm),
    ):
        out[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = bias.relative_attention_bias.weight
        out[f"{stack}.final_layer_norm.weight"] = final.weight
        for i, block in enumerate(blocks):
            prefix = f"{stack}.block.{i}.layer"
            sublayers = [("SelfAttention", block.self_attn, block.norm1)]
            if stack == "decoder":
                sublayers.append(("EncDecAttention", block.cross_attn, block.norm2))
            for n, (name, attn, norm) in enumerate(sublayers):
                out[f"{prefix}.{n}.layer_norm.weight"] = norm.weight
                for ours, theirs in _ATTENTION.items():
                    out[f"{prefix}.{n}.{name}.{theirs}.weight"] = getattr(attn, ours).weight
            n = len(sublayers)
            out[f"{prefix}.{n}.layer_norm.weight"] = (block.norm3 if stack == "decoder" else block.norm2).weight
            for ours, module in block.feed_forward.named_children():
                if isinstance(module, nn.Linear):
                    out[f"{prefix}.{n}.DenseReluDense.{_FEED_FORWARD[ours]}.weight"] = module.weight
    return {name: tensor.detach().clone() for name, tensor in out.items()}
