"""BERT (Devlin et al., 2018): a stack of post-norm Transformer encoder blocks over token +
learned position + segment embeddings, and the two pretraining heads.

Built from the library's blocks: ``Embeddings`` (LayerNorm, eps 1e-12) and
``EncoderBlock(norm_first=False, activation="gelu", layer_norm_eps=1e-12)``. Checkpoints in the
common (Hugging Face) layout load through :data:`HF_RENAME`, twelve explicit rules.

Legend: B batch, S sequence length, D hidden width, H heads, F feed-forward width, V vocabulary,
L layers, N chosen (masked) positions. Masks: boolean, ``True`` = real token / may attend.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.checkpoints import load_checkpoint
from attnbook.layers import Embeddings, EncoderBlock, LearnedPositionalEmbedding, key_mask, run_blocks
from attnbook.layers.validation import check_token_ids, check_transformer_sizes


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT, in the book's names (a checkpoint's ``hidden_size``, ``intermediate_size``
    and ``max_position_embeddings`` are ``d_model``, ``d_ff`` and ``max_len``, read by
    ``from_hf_config``). Defaults are BERT-base (uncased vocabulary)."""

    vocab_size: int = 30522
    d_model: int = 768               # D
    num_layers: int = 12             # L
    num_heads: int = 12              # H
    d_ff: int = 3072                 # F
    max_len: int = 512
    num_segments: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12

    def __post_init__(self) -> None:
        check_transformer_sizes(
            self.d_model, self.num_heads, self.d_ff, self.dropout, "gelu", self.layer_norm_eps,
            vocab_size=self.vocab_size, num_layers=self.num_layers, max_len=self.max_len,
            num_segments=self.num_segments,
        )

    @classmethod
    def base(cls) -> BertConfig:
        """BERT-base: 12 layers, D = 768, 12 heads."""
        return cls()

    @classmethod
    def large(cls) -> BertConfig:
        """BERT-large: 24 layers, D = 1024, 16 heads."""
        return cls(d_model=1024, num_layers=24, num_heads=16, d_ff=4096)

    @classmethod
    def minilm_l6(cls) -> BertConfig:
        """all-MiniLM-L6-v2: 6 layers, D = 384, 12 heads of 32."""
        return cls(d_model=384, num_layers=6, num_heads=12, d_ff=1536)

    @classmethod
    def from_hf_config(cls, config: dict) -> BertConfig:
        """Read the fields of a Hugging Face ``config.json`` (a BERT with absolute positions and GELU)."""
        if config.get("model_type", "bert") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"expected a BERT with GELU, got model_type={config.get('model_type')!r}, "
                             f"hidden_act={config.get('hidden_act')!r}")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"only absolute positions are supported, got {config['position_embedding_type']!r}")
        return cls(
            vocab_size=config["vocab_size"], d_model=config["hidden_size"],
            num_layers=config["num_hidden_layers"], num_heads=config["num_attention_heads"],
            d_ff=config["intermediate_size"], max_len=config["max_position_embeddings"],
            num_segments=config["type_vocab_size"], dropout=config["hidden_dropout_prob"],
            layer_norm_eps=config["layer_norm_eps"],
        )

    def num_parameters(self, pooler: bool = True) -> int:
        """The parameter count, from the sizes alone (no model is built)."""
        D, F_, L = self.d_model, self.d_ff, self.num_layers
        embeddings = (self.vocab_size + self.max_len + self.num_segments) * D + 2 * D  # tables + LayerNorm
        attention = 4 * (D * D + D)                       # W^Q, W^K, W^V, W^O with biases
        feed_forward = (D * F_ + F_) + (F_ * D + D)
        norms = 2 * 2 * D
        return embeddings + L * (attention + feed_forward + norms) + (D * D + D if pooler else 0)


@dataclass(frozen=True)
class BertOutput:
    """What ``Bert.forward`` returns when asked for more than the last layer."""

    hidden: torch.Tensor                          # (B, S, D) the last layer
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 tensors (B, S, D): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None     # L tensors (B, H, S, S)


class Bert(nn.Module):
    """The encoder: ``embeddings`` -> ``blocks`` (post-norm) -> hidden states; ``pooler``
    (a tanh layer on [CLS]) is what the next-sentence head reads."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        D = config.d_model
        self.config = config
        self.embeddings = Embeddings(
            tokens=nn.Embedding(config.vocab_size, D),
            positions=LearnedPositionalEmbedding(D, config.max_len),
            segments=nn.Embedding(config.num_segments, D),
            norm=nn.LayerNorm(D, eps=config.layer_norm_eps),
            dropout=config.dropout,
        )
        self.blocks = nn.ModuleList([
            EncoderBlock(D, config.num_heads, config.d_ff, dropout=config.dropout,
                         activation="gelu", norm_first=False, layer_norm_eps=config.layer_norm_eps)
            for _ in range(config.num_layers)
        ])
        self.pooler = nn.Linear(D, D)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """BERT's initialisation: N(0, 0.02) weights, zero biases, LayerNorm at (1, 0)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(
        self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
        token_mask: torch.Tensor | None = None, need_weights: bool = False, all_layers: bool = False,
    ) -> torch.Tensor | BertOutput:
        """input_ids ``(B, S)``; segment_ids ``(B, S)`` (None: all 0); token_mask ``(B, S)`` bool
        (None: no padding). Returns the last hidden states ``(B, S, D)``, or a :class:`BertOutput`
        with every layer's hidden states (``all_layers``) and attention weights (``need_weights``)."""
        check_token_ids("input_ids", input_ids, self.config.vocab_size, self.config.max_len)
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)
        else:
            if segment_ids.shape != input_ids.shape:
                raise ValueError(f"segment_ids must have the shape of input_ids {tuple(input_ids.shape)}, "
                                 f"got {tuple(segment_ids.shape)}")
            check_token_ids("segment_ids", segment_ids, self.config.num_segments)
        if token_mask is not None and (token_mask.shape != input_ids.shape or token_mask.dtype != torch.bool):
            raise ValueError(f"token_mask must be a bool tensor of shape {tuple(input_ids.shape)}, "
                             f"got {token_mask.dtype} {tuple(token_mask.shape)}")
        mask = key_mask(token_mask) if token_mask is not None else None  # (B, 1, S)
        x = self.embeddings(input_ids, segment_ids)  # (B, S, D)
        out = run_blocks(self.blocks, x, mask, need_weights=need_weights, all_hidden=all_layers)
        if not (need_weights or all_layers):
            return out.hidden  # (B, S, D)
        return BertOutput(out.hidden, out.hidden_states, out.attention)

    def pool(self, hidden: torch.Tensor) -> torch.Tensor:
        """BERT's pooled output: ``tanh(W h_[CLS] + b)``, ``(B, S, D) -> (B, D)``."""
        return torch.tanh(self.pooler(hidden[:, 0]))


def mean_pool(hidden: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Average of the real tokens' vectors, ``(B, S, D), (B, S) -> (B, D)``: padding is excluded
    from both the sum and the count (sentence-transformers' mean pooling)."""
    if token_mask.shape != hidden.shape[:2]:
        raise ValueError(f"token_mask {tuple(token_mask.shape)} must match hidden (B, S) = {tuple(hidden.shape[:2])}")
    weights = token_mask.to(hidden.dtype).unsqueeze(-1)  # (B, S, 1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)  # (B, D)


def sentence_embeddings(model: Bert, input_ids: torch.Tensor, segment_ids: torch.Tensor | None,
                        token_mask: torch.Tensor) -> torch.Tensor:
    """Mean-pooled, L2-normalised last hidden states ``(B, D)``: all-MiniLM-L6-v2's sentence embedding."""
    return F.normalize(mean_pool(model(input_ids, segment_ids, token_mask), token_mask), dim=-1)


class MaskedLMHead(nn.Module):
    """BERT's MLM head: dense + GELU + LayerNorm, then ``readout``: scores against the (tied) token table."""

    def __init__(self, config: BertConfig, token_embedding: nn.Embedding) -> None:
        super().__init__()
        D = config.d_model
        self.dense = nn.Linear(D, D)
        self.norm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.readout = nn.Linear(D, config.vocab_size)
        self.readout.weight = token_embedding.weight  # tied: one (V, D) table reads and writes tokens

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``(..., D) -> (..., V)`` logits."""
        return self.readout(self.norm(F.gelu(self.dense(hidden))))


class BertForPreTraining(nn.Module):
    """A BERT with its two pretraining heads: masked-token logits and next-sentence logits."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.bert = Bert(config)
        self.mlm = MaskedLMHead(config, self.bert.embeddings.tokens)
        self.nsp = nn.Linear(config.d_model, 2)  # 0 = IsNext, 1 = NotNext: one softmax over two classes
        nn.init.normal_(self.mlm.dense.weight, std=0.02)
        nn.init.zeros_(self.mlm.dense.bias)
        nn.init.zeros_(self.mlm.readout.bias)
        nn.init.normal_(self.nsp.weight, std=0.02)
        nn.init.zeros_(self.nsp.bias)

    def forward(
        self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None = None,
        token_mask: torch.Tensor | None = None, predict_at: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns MLM logits ``(B, S, V)`` — or ``(N, V)`` for the N positions where
        ``predict_at`` ``(B, S)`` is True (row-major order), which saves scoring the whole
        vocabulary at positions no loss reads — and NSP logits ``(B, 2)`` from the pooled [CLS]."""
        hidden = self.bert(input_ids, segment_ids, token_mask)  # (B, S, D)
        if predict_at is not None:
            if predict_at.shape != input_ids.shape or predict_at.dtype != torch.bool:
                raise ValueError(f"predict_at must be a bool tensor of shape {tuple(input_ids.shape)}, "
                                 f"got {predict_at.dtype} {tuple(predict_at.shape)}")
            mlm_logits = self.mlm(hidden[predict_at])  # (N, V)
        else:
            mlm_logits = self.mlm(hidden)  # (B, S, V)
        return mlm_logits, self.nsp(self.bert.pool(hidden))  # (B, 2)


POOLINGS = ("cls", "pooler", "mean")
"""How a classifier reads one vector from the hidden states: the [CLS] vector, BERT's pooler
(``tanh(W h_[CLS] + b)``), or the mean of the real tokens."""


class BertForSequenceClassification(nn.Module):
    """An encoder with a classification head: ``pooling`` (one of :data:`POOLINGS`) reads one
    ``(B, D)`` vector, dropout, then a linear layer to ``num_classes`` logits. Fine-tuning trains
    it all; the head starts at BERT's initialisation (N(0, 0.02), zero bias)."""

    def __init__(self, encoder: Bert, num_classes: int, pooling: str, dropout: float = 0.1) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if num_classes < 2:
            raise ValueError(f"need at least 2 classes, got {num_classes}")
        self.bert, self.pooling = encoder, pooling
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(encoder.config.d_model, num_classes)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None,
                token_mask: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` ids and bool token mask -> ``(B, num_classes)`` logits."""
        hidden = self.bert(input_ids, segment_ids, token_mask)  # (B, S, D)
        if self.pooling == "cls":
            pooled = hidden[:, 0]  # (B, D)
        elif self.pooling == "pooler":
            pooled = self.bert.pool(hidden)  # (B, D)
        else:
            pooled = mean_pool(hidden, token_mask)  # (B, D)
        return self.head(self.dropout(pooled))


# ----------------------------------------------------------------------------- checkpoints
_LAYER = r"encoder\.layer\.(\d+)\."
HF_RENAME: tuple[tuple[str, str], ...] = (
    (r"embeddings\.word_embeddings\.weight", "embeddings.tokens.weight"),
    (r"embeddings\.position_embeddings\.weight", "embeddings.positions.embedding.weight"),
    (r"embeddings\.token_type_embeddings\.weight", "embeddings.segments.weight"),
    (r"embeddings\.LayerNorm\.(weight|bias)", r"embeddings.norm.\1"),
    (_LAYER + r"attention\.self\.query\.(weight|bias)", r"blocks.\1.self_attn.q_proj.\2"),
    (_LAYER + r"attention\.self\.key\.(weight|bias)", r"blocks.\1.self_attn.k_proj.\2"),
    (_LAYER + r"attention\.self\.value\.(weight|bias)", r"blocks.\1.self_attn.v_proj.\2"),
    (_LAYER + r"attention\.output\.dense\.(weight|bias)", r"blocks.\1.self_attn.out_proj.\2"),
    (_LAYER + r"attention\.output\.LayerNorm\.(weight|bias)", r"blocks.\1.norm1.\2"),
    (_LAYER + r"intermediate\.dense\.(weight|bias)", r"blocks.\1.feed_forward.linear1.\2"),
    (_LAYER + r"output\.dense\.(weight|bias)", r"blocks.\1.feed_forward.linear2.\2"),
    (_LAYER + r"output\.LayerNorm\.(weight|bias)", r"blocks.\1.norm2.\2"),
    (r"pooler\.dense\.(weight|bias)", r"pooler.\1"),
)
"""Hugging Face BERT tensor names (regular expressions, full match) -> this module's names."""

HF_IGNORE: tuple[str, ...] = (r"embeddings\.position_ids",)
"""Checkpoint entries read and dropped: ``position_ids`` is the buffer 0..511, not a weight."""


def load_pretrained_bert(folder: str | Path, sha256: str | None) -> Bert:
    """A :class:`Bert` sized by ``folder/config.json`` with ``folder/model.safetensors`` loaded
    (hash checked first), in eval mode."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"no config.json in the checkpoint folder {folder}")
    model = Bert(BertConfig.from_hf_config(json.loads(config_path.read_text())))
    load_checkpoint(model, folder / "model.safetensors", sha256, HF_RENAME, HF_IGNORE)
    return model.eval()
