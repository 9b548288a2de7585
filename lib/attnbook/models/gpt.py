"""A decoder-only Transformer (GPT; Radford et al., 2018, 2019), built from the library's blocks.

tokens ``(B, T)`` -> token embedding + learned positions -> ``CausalBlock`` x L (pre-norm,
GELU) -> final LayerNorm -> ``readout`` to logits ``(B, T, V)``, tied to the token table.
Each position sees itself and the positions before it, never after.

It decodes through ``attnbook.decoding.PromptDecoder``: ``start(prompt) -> (logits, state)`` reads
the prompt once and keeps every block's ``KVCache``; ``step(tokens, state) -> (logits, new state)``
computes only the new position. The state is immutable: ``step`` never changes the one it is given.

Legend: B batch, T length (new positions), P positions in the cache, D model width, H heads,
F feed-forward width, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers import CausalBlock, Embeddings, KVCache, LearnedPositionalEmbedding, run_blocks
from attnbook.layers.validation import check_token_ids, check_transformer_sizes


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a ``GPT``. GPT-2 small: ``vocab_size=50257, max_len=1024, d_model=768,
    num_heads=12, d_ff=3072, num_layers=12, activation="gelu_tanh"``.

    ``position_init_std``: the position table starts as N(0, std²); GPT-2's 0.02 is as small as
    the token table (PyTorch's default would be 1.0, about 50 times larger).
    """

    vocab_size: int
    max_len: int = 128
    d_model: int = 128
    num_heads: int = 4
    d_ff: int = 512
    num_layers: int = 4
    dropout: float = 0.0
    activation: str = "gelu"
    layer_norm_eps: float = 1e-5
    position_init_std: float = 0.02

    def __post_init__(self) -> None:
        check_transformer_sizes(
            self.d_model, self.num_heads, self.d_ff, self.dropout, self.activation, self.layer_norm_eps,
            vocab_size=self.vocab_size, max_len=self.max_len, num_layers=self.num_layers,
        )
        if not self.position_init_std > 0:
            raise ValueError(f"position_init_std must be > 0, got {self.position_init_std}")


@dataclass(frozen=True)
class GPTState:
    """What ``GPT.step`` carries between steps: each block's cache of the P positions so far."""

    caches: tuple[KVCache, ...]

    @property
    def position(self) -> int:
        return len(self.caches[0])


class GPT(nn.Module):
    """Decoder-only Transformer: logits ``(B, T, V)`` for the next token at every position."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = c = config
        tokens = nn.Embedding(c.vocab_size, c.d_model)
        nn.init.normal_(tokens.weight, std=0.02)  # GPT-2's initialisation
        positions = LearnedPositionalEmbedding(c.d_model, c.max_len)  # drawn again below, with its std
        self.embeddings = Embeddings(tokens, positions, dropout=c.dropout)
        self.blocks = nn.ModuleList(
            CausalBlock(c.d_model, c.num_heads, c.d_ff, c.dropout, c.activation, norm_first=True,
                        layer_norm_eps=c.layer_norm_eps)
            for _ in range(c.num_layers)
        )
        self.final_norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps)  # pre-norm stacks end with one
        self.readout = nn.utils.skip_init(nn.Linear, c.d_model, c.vocab_size, bias=False)
        self.readout.weight = tokens.weight  # tied: one (V, D) table reads and writes tokens
        # The position table is drawn last, as in the book's earlier versions, so a seed still
        # gives the weights (and the results) stored in the chapters.
        positions.init_std = c.position_init_std
        positions.reset_parameters()

    def _run(
        self, tokens: torch.Tensor, caches: tuple[KVCache, ...] | None, need_weights: bool
    ) -> tuple[torch.Tensor, tuple[KVCache, ...], tuple[torch.Tensor, ...] | None]:
        past_len = 0 if caches is None else len(caches[0])
        check_token_ids("tokens", tokens, self.config.vocab_size)
        if past_len + tokens.shape[1] > self.config.max_len:
            raise ValueError(
                f"{past_len} cached + {tokens.shape[1]} new positions exceed max_len={self.config.max_len}"
            )
        x = self.embeddings(tokens, offset=past_len)  # (B, T, D)
        out = run_blocks(self.blocks, x, pasts=caches, need_weights=need_weights)
        return self.readout(self.final_norm(out.hidden)), out.caches, out.attention  # (B, T, V)

    def forward(
        self, tokens: torch.Tensor, need_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """tokens ``(B, T)`` -> logits ``(B, T, V)``; with ``need_weights``, also each block's
        ``(B, H, T, T)`` attention weights."""
        logits, _, maps = self._run(tokens, None, need_weights)
        return (logits, maps) if need_weights else logits

    def start(self, prompt: torch.Tensor) -> tuple[torch.Tensor, GPTState]:
        """Read the prompt ``(B, T)``, T >= 1, once: logits ``(B, V)`` of the token after it, and the state."""
        logits, caches, _ = self._run(prompt, None, need_weights=False)
        return logits[:, -1], GPTState(caches)

    def step(self, tokens: torch.Tensor, state: GPTState) -> tuple[torch.Tensor, GPTState]:
        """The tokens ``(B,)`` just chosen -> logits ``(B, V)`` of the next one, and a new state."""
        B = state.caches[0].key.shape[0]
        if tokens.shape != (B,):
            raise ValueError(f"tokens must have shape ({B},), got {tuple(tokens.shape)}")
        logits, caches, _ = self._run(tokens[:, None], state.caches, need_weights=False)
        return logits[:, 0], GPTState(caches)
