"""A Llama-style decoder (Touvron et al., 2023): Chapter 8's GPT with today's block.

tokens ``(B, T)`` -> token embedding (no position table) -> ``CausalBlock`` x L -> final RMSNorm
-> ``readout`` to logits ``(B, T, V)``. The block is the library's ``CausalBlock`` with four
specs changed, one per idea of Chapter 9:

- ``norm``: RMSNorm (Zhang & Sennrich, 2019) instead of LayerNorm;
- ``feed_forward``: SwiGLU (Shazeer, 2020), ``down(silu(gate(x)) * up(x))``, no biases;
- ``attention``: rotary position embeddings on queries and keys (Su et al., 2021) instead of a
  learned position table, and ``num_kv_heads`` key/value heads shared by groups of query heads
  (grouped-query attention, Ainslie et al., 2023; one: multi-query, Shazeer, 2019); no biases.

Each choice is a field of ``LlamaConfig`` whose other value is GPT-2's (``norm="layernorm"``,
``feed_forward="gelu"``, ``positions="learned"``, ``bias=True``), so the chapter's ablation adds the
changes one at a time to one model; with all four at GPT-2's values the model is Chapter 8's GPT.

``Llama`` is a ``GPT``: it runs, decodes (``start``/``step``, a ``KVCache`` of only the key/value
heads per block) and generates (``attnbook.tasks.language_modeling.generate``) through the same
code; only the parts differ. ``to_transformers`` and ``from_transformers`` copy the weights to and
from ``transformers``' ``LlamaForCausalLM`` (``LLAMA_NAMES`` is the whole rename table).

Legend: B batch, T length, D model width, H query heads, Hkv key/value heads, Dh head width,
F feed-forward width, V vocabulary, L layers.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from attnbook.layers import (
    AttentionSpec, CausalBlock, Embeddings, FeedForwardSpec, LearnedPositionalEmbedding, Norm,
    RotaryEmbedding, SinusoidalPositionalEncoding,
)
from attnbook.layers.validation import check_choice, check_eps, check_heads, check_positive
from attnbook.models.gpt import GPT

NORMS = ("rmsnorm", "layernorm")
FEED_FORWARDS = ("swiglu", "gelu")
POSITIONS = ("rotary", "learned", "sinusoidal", "none")


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of a ``Llama`` and, for the ablation, which of GPT-2's parts it keeps.

    Llama 2 7B: ``vocab_size=32000, max_len=4096, d_model=4096, num_heads=32, num_kv_heads=32,
    d_ff=11008, num_layers=32``; Llama 3 8B has ``num_kv_heads=8, d_ff=14336, rope_base=500000``.
    ``max_len`` bounds the positions (the rotary table, or the learned or sinusoidal one;
    ``positions="none"`` adds no position signal at all, a control); ``tie_embeddings``
    reads the logits with the token table, as GPT does; ``qk_norm`` adds an RMSNorm on each
    head's queries and keys before the rotary turn (QK-norm: OLMo 2, Gemma 3, Qwen3; not Llama's).
    """

    vocab_size: int
    max_len: int = 256
    d_model: int = 64
    num_heads: int = 4
    num_kv_heads: int = 2
    d_ff: int = 172
    num_layers: int = 2
    norm_eps: float = 1e-6
    rope_base: float = 10000.0
    tie_embeddings: bool = False
    norm: str = "rmsnorm"
    feed_forward: str = "swiglu"
    positions: str = "rotary"
    bias: bool = False
    sinusoidal_rms: float = 0.02  # positions="sinusoidal" only: the table's rms (tokens start at 0.02)
    qk_norm: bool = False

    def __post_init__(self) -> None:
        check_positive(vocab_size=self.vocab_size, max_len=self.max_len, d_model=self.d_model,
                       d_ff=self.d_ff, num_layers=self.num_layers)
        check_heads(self.d_model, self.num_heads, self.num_kv_heads)
        check_eps(self.norm_eps)
        check_choice("norm", self.norm, NORMS)
        check_choice("feed_forward", self.feed_forward, FEED_FORWARDS)
        check_choice("positions", self.positions, POSITIONS)
        if self.positions == "rotary" and (self.d_model // self.num_heads) % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions: the head width "
                             f"{self.d_model // self.num_heads} must be even")
        if not self.rope_base > 1:
            raise ValueError(f"rope_base must be > 1, got {self.rope_base}")

    @property
    def is_llama(self) -> bool:
        """True when every part is Llama's (the configuration ``transformers`` can run)."""
        return ((self.norm, self.feed_forward, self.positions, self.bias, self.qk_norm)
                == ("rmsnorm", "swiglu", "rotary", False, False))

    def block_specs(self) -> tuple[Norm, FeedForwardSpec, AttentionSpec]:
        """The three recipes every ``CausalBlock`` of this model is built from."""
        rms = self.norm == "rmsnorm"
        norm = Norm(self.norm, self.norm_eps, bias=not rms)  # RMSNorm has no bias
        gated = self.feed_forward == "swiglu"
        feed_forward = FeedForwardSpec(self.d_ff, "silu" if gated else "gelu", gated=gated,
                                       bias=self.bias)
        rotary_max_len = self.max_len if self.positions == "rotary" else None
        attention = AttentionSpec(num_kv_heads=self.num_kv_heads, bias=self.bias,
                                  rotary_max_len=rotary_max_len, rotary_base=self.rope_base,
                                  qk_norm=self.qk_norm, qk_norm_eps=self.norm_eps)
        return norm, feed_forward, attention


class Llama(GPT):
    """Decoder-only Transformer with Llama's block: logits ``(B, T, V)`` for the next token.

    Built from the same parts as ``GPT`` and named like it (``embeddings``, ``blocks``,
    ``final_norm``, ``readout``), so ``GPT``'s forward pass, ``start`` and ``step`` run it unchanged.
    """

    def __init__(self, config: LlamaConfig) -> None:
        nn.Module.__init__(self)  # not GPT.__init__: this model builds its own parts
        self.config = c = config
        tokens = nn.Embedding(c.vocab_size, c.d_model)
        nn.init.normal_(tokens.weight, std=0.02)
        positions = None
        if c.positions == "learned":
            positions = LearnedPositionalEmbedding(c.d_model, c.max_len, init_std=0.02)
        elif c.positions == "sinusoidal":  # the fixed table, scaled to the token table's size:
            positions = SinusoidalPositionalEncoding(c.d_model, c.max_len)  # entries of rms 1/√2
            positions.table.mul_(c.sinusoidal_rms * 2**0.5)  # -> rms 0.02 by default, as the tokens
        self.embeddings = Embeddings(tokens, positions)  # rotary or "none": positions=None, no table
        norm, feed_forward, attention = c.block_specs()
        self.blocks = nn.ModuleList(
            CausalBlock(c.d_model, c.num_heads, norm_first=True, norm=norm,
                        feed_forward=feed_forward, attention=attention)
            for _ in range(c.num_layers)
        )
        self.final_norm = norm(c.d_model)
        self.readout = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.readout.weight = tokens.weight
        else:
            nn.init.normal_(self.readout.weight, std=0.02)


# --- the bridge to transformers' LlamaForCausalLM ---------------------------------------------

# ours -> theirs, per block ("{i}") and for the whole model
LLAMA_NAMES = {
    "embeddings.tokens.weight": "model.embed_tokens.weight",
    "blocks.{i}.norm1.weight": "model.layers.{i}.input_layernorm.weight",
    "blocks.{i}.self_attn.q_proj.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blocks.{i}.self_attn.k_proj.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blocks.{i}.self_attn.v_proj.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blocks.{i}.self_attn.out_proj.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blocks.{i}.norm2.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blocks.{i}.feed_forward.gate_proj.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blocks.{i}.feed_forward.up_proj.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blocks.{i}.feed_forward.down_proj.weight": "model.layers.{i}.mlp.down_proj.weight",
    "final_norm.weight": "model.norm.weight",
    "readout.weight": "lm_head.weight",
}


def interpolate_positions(model: Llama, train_len: int, max_len: int | None = None) -> Llama:
    """Position interpolation (Chen et al., 2023) *without* its fine-tuning: a copy of ``model``
    (same weights) that reads up to ``max_len`` positions (default: the model's ``max_len``),
    turning position p as if it were p · train_len / max_len, so that every angle stays inside the
    range of the ``train_len`` positions the model was trained on. The published method then
    fine-tunes briefly (about 1,000 steps) on long texts; this copy is not trained at all."""
    c = model.config
    max_len = c.max_len if max_len is None else max_len
    if c.positions != "rotary":
        raise ValueError(f"position interpolation rescales rotary positions, this model has {c.positions!r}")
    check_positive(train_len=train_len, max_len=max_len)
    if max_len < train_len:
        raise ValueError(f"interpolate to at least the training length {train_len}, got max_len={max_len}")
    longer = Llama(replace(c, max_len=max_len)).to(next(model.parameters()).device)
    longer.load_state_dict(model.state_dict())
    for block in longer.blocks:  # every block's rotary table, computed at the scaled positions
        rotary = block.self_attn.rotary
        block.self_attn.rotary = RotaryEmbedding(rotary.head_dim, max_len, rotary.base,
                                                 position_scale=train_len / max_len).to(rotary.cos.device)
    return longer.train(model.training)


def _names(num_layers: int) -> dict[str, str]:
    """The rename table with the block index filled in: every parameter, ours -> theirs."""
    names = {}
    for ours, theirs in LLAMA_NAMES.items():
        for i in range(num_layers) if "{i}" in ours else [None]:
            names[ours.format(i=i)] = theirs.format(i=i)
    return names


def transformers_config(config: LlamaConfig):
    """The ``transformers.LlamaConfig`` of the same model (only Llama's own parts have one)."""
    from transformers import LlamaConfig as HFLlamaConfig

    if not config.is_llama:
        raise ValueError("only a configuration with all of Llama's parts (rmsnorm, swiglu, rotary, no bias, "
                         "no qk_norm) "
                         "has a transformers LlamaForCausalLM to compare with")
    return HFLlamaConfig(
        vocab_size=config.vocab_size, hidden_size=config.d_model, intermediate_size=config.d_ff,
        num_hidden_layers=config.num_layers, num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads, head_dim=config.d_model // config.num_heads,
        max_position_embeddings=config.max_len, rms_norm_eps=config.norm_eps,
        rope_theta=config.rope_base, tie_word_embeddings=config.tie_embeddings, hidden_act="silu",
        attention_bias=False, mlp_bias=False, attention_dropout=0.0,
    )


@torch.no_grad()
def to_transformers(model: Llama):
    """A ``transformers`` ``LlamaForCausalLM`` with this model's weights (eval mode, float32)."""
    from transformers import LlamaForCausalLM

    hf = LlamaForCausalLM(transformers_config(model.config)).eval()
    theirs = hf.state_dict()
    for ours, name in _names(model.config.num_layers).items():
        theirs[name].copy_(model.get_parameter(ours))
    return hf.to(next(model.parameters()).device)


@torch.no_grad()
def from_transformers(hf, max_len: int | None = None) -> Llama:
    """The library's ``Llama`` with the weights of a ``transformers`` ``LlamaForCausalLM`` ``hf``."""
    c = hf.config
    rope = getattr(c, "rope_parameters", None) or {}
    base = rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"only the default rotary embedding is supported, not {rope.get('rope_type')!r}")
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    if head_dim * c.num_attention_heads != c.hidden_size:
        raise ValueError("head_dim * num_attention_heads must equal hidden_size")
    config = LlamaConfig(
        vocab_size=c.vocab_size, max_len=max_len or c.max_position_embeddings, d_model=c.hidden_size,
        num_heads=c.num_attention_heads, num_kv_heads=c.num_key_value_heads, d_ff=c.intermediate_size,
        num_layers=c.num_hidden_layers, norm_eps=c.rms_norm_eps, rope_base=base,
        tie_embeddings=bool(c.tie_word_embeddings),
    )
    model = Llama(config)
    theirs = hf.state_dict()
    for ours, name in _names(config.num_layers).items():
        model.get_parameter(ours).copy_(theirs[name])
    return model.eval()
