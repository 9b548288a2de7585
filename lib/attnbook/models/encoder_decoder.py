"""The encoder-decoder driver: everything a sequence-to-sequence Transformer does with its parts.

A model is its parts: source and target ``Embeddings``, a stack of ``EncoderBlock`` and one of
``DecoderBlock``, a final norm after each stack (``nn.Identity`` for post-norm), a read-out to
target-vocabulary logits, and optionally a module that gives each stack's self-attention a float
bias (T5's relative positions). Chapter 5's Transformer and T5 are two configurations of this
class: they build different parts and reuse the driver below unchanged.

Decoding follows the book's protocol (``attnbook.decoding``): ``start(src, src_lengths) ->
state``, ``step(tokens, state) -> (logits, new state)``, ``reorder_state(state, index)``. The state
holds each decoder block's ``KVCache`` of the positions decoded so far, so a step costs one
position; ``step`` never changes the state it is given.

A position-bias module is called as ``bias(num_queries, num_keys, offset)`` and returns a float
``(1, H, T, S)`` tensor for queries at positions ``offset .. offset + T - 1`` and keys ``0 .. S - 1``.

Legend: B batch, S source length, T target length, P decoded positions, D model width, H heads,
V target vocabulary. Masks: boolean, ``True`` = may attend.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers import DecoderAttentionMaps, KVCache, key_mask, run_blocks, token_mask
from attnbook.layers.validation import check_token_ids


@dataclass(frozen=True)
class Seq2SeqState:
    """What ``step`` carries between steps (returned, never stored on the model).

    Immutable: ``step`` returns a new state, so stepping twice from one state gives the same
    logits. ``memory_kvs`` are each decoder block's cross-attention keys and values of the
    encoder output (projected once in ``start``); ``self_caches`` each block's keys and values
    of the target positions decoded so far (None before the first step).
    """

    src_tokens: torch.Tensor  # (B, S) token mask: True on real source tokens
    memory_kvs: tuple[KVCache, ...]
    self_caches: tuple[KVCache, ...] | None
    position: int  # how many target positions have been decoded so far


@dataclass(frozen=True)
class Seq2SeqAttentionMaps:
    """All attention weights of one teacher-forced pass, for plotting.

    ``encoder[l]`` is ``(B, H, S, S)``; ``decoder[l]`` holds the block's self- and cross-attention.
    """

    encoder: tuple[torch.Tensor, ...]
    decoder: tuple[DecoderAttentionMaps, ...]


class EncoderDecoder(nn.Module):
    """Encoder-decoder Transformer: logits ``(B, T, V)`` by teacher forcing, or step by step."""

    def __init__(
        self, src_embeddings: nn.Module, tgt_embeddings: nn.Module, encoder_blocks: nn.ModuleList,
        decoder_blocks: nn.ModuleList, encoder_final_norm: nn.Module, decoder_final_norm: nn.Module,
        readout: nn.Module, vocab_sizes: tuple[int, int], max_len: int,
        encoder_position_bias: nn.Module | None = None, decoder_position_bias: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.src_embeddings, self.tgt_embeddings = src_embeddings, tgt_embeddings
        self.encoder_blocks, self.decoder_blocks = encoder_blocks, decoder_blocks
        self.encoder_final_norm, self.decoder_final_norm = encoder_final_norm, decoder_final_norm
        self.readout = readout
        self.encoder_position_bias, self.decoder_position_bias = encoder_position_bias, decoder_position_bias
        self.src_vocab_size, self.tgt_vocab_size = vocab_sizes
        self.max_len = max_len

    def _check_source(self, src: torch.Tensor, src_lengths: torch.Tensor) -> None:
        check_token_ids("src", src, self.src_vocab_size, self.max_len)
        if src_lengths.shape != (src.shape[0],):
            raise ValueError(f"src_lengths must have shape ({src.shape[0]},), got {tuple(src_lengths.shape)}")

    @staticmethod
    def _bias(module: nn.Module | None, num_queries: int, num_keys: int, offset: int) -> torch.Tensor | None:
        return None if module is None else module(num_queries, num_keys, offset)  # (1, H, T, S)

    def encode(self, src: torch.Tensor, src_lengths: torch.Tensor, need_weights: bool = False):
        """src ``(B, S)``, lengths ``(B,)`` -> memory ``(B, S, D)`` and the ``(B, S)`` token mask.

        With ``need_weights``, also each block's ``(B, H, S, S)`` self-attention weights (a tuple).
        """
        self._check_source(src, src_lengths)
        src_tokens = token_mask(src_lengths, src.shape[1]).to(src.device)  # (B, S), lengths may be on the CPU
        S = src.shape[1]
        out = run_blocks(self.encoder_blocks, self.src_embeddings(src), key_mask(src_tokens),  # no query sees padding
                         bias=self._bias(self.encoder_position_bias, S, S, 0), need_weights=need_weights)
        memory = self.encoder_final_norm(out.hidden)  # (B, S, D)
        return (memory, src_tokens, out.attention) if need_weights else (memory, src_tokens)

    def project_memory(self, memory: torch.Tensor) -> tuple[KVCache, ...]:
        """Each decoder block's cross-attention keys and values of the memory ``(B, S, D)``."""
        return tuple(block.project_memory(memory) for block in self.decoder_blocks)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_tokens: torch.Tensor, need_weights: bool = False):
        """Teacher forcing: tgt_in ``(B, T)`` (``<bos>`` first) -> decoder output ``(B, T, D)``.

        Position t sees target positions <= t (causal) and every real source position.
        With ``need_weights``, also each block's ``DecoderAttentionMaps`` (a tuple).
        """
        check_token_ids("tgt_in", tgt_in, self.tgt_vocab_size, self.max_len)
        if tgt_in.shape[0] != memory.shape[0]:
            raise ValueError(f"tgt_in must be (B, T) with B={memory.shape[0]}, got shape {tuple(tgt_in.shape)}")
        T = tgt_in.shape[1]
        out = run_blocks(self.decoder_blocks, self.tgt_embeddings(tgt_in),
                         bias=self._bias(self.decoder_position_bias, T, T, 0),
                         memory_kvs=self.project_memory(memory), memory_mask=key_mask(src_tokens),  # (B, 1, S)
                         need_weights=need_weights)
        x = self.decoder_final_norm(out.hidden)  # (B, T, D)
        return (x, out.attention) if need_weights else x

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits ``(B, T, V)`` for every target position at once."""
        memory, src_tokens = self.encode(src, src_lengths)
        return self.readout(self.decode(tgt_in, memory, src_tokens))  # (B, T, V)

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> Seq2SeqAttentionMaps:
        """Every block's attention weights for one teacher-forced pass (for heatmaps)."""
        memory, src_tokens, encoder_maps = self.encode(src, src_lengths, need_weights=True)
        _, decoder_maps = self.decode(tgt_in, memory, src_tokens, need_weights=True)
        return Seq2SeqAttentionMaps(encoder_maps, decoder_maps)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> Seq2SeqState:
        """Encode the source once; project the memory's keys and values for every decoder block."""
        memory, src_tokens = self.encode(src, src_lengths)
        return Seq2SeqState(src_tokens, self.project_memory(memory), self_caches=None, position=0)

    def step(self, tokens: torch.Tensor, state: Seq2SeqState) -> tuple[torch.Tensor, Seq2SeqState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and a new state.

        Only the new position is computed; the keys and values of earlier positions come from
        the caches, so no causal mask is needed (the cache holds only the past).
        """
        B, P = state.src_tokens.shape[0], state.position
        if tokens.shape != (B,):
            raise ValueError(f"tokens must have shape ({B},), got {tuple(tokens.shape)}")
        check_token_ids("tokens", tokens[:, None], self.tgt_vocab_size)
        if P + 1 > self.max_len:
            raise ValueError(f"decoding position {P + 1} would pass max_len={self.max_len}")
        out = run_blocks(self.decoder_blocks, self.tgt_embeddings(tokens[:, None], offset=P),  # (B, 1, D)
                         bias=self._bias(self.decoder_position_bias, 1, P + 1, P), pasts=state.self_caches,
                         memory_kvs=state.memory_kvs, memory_mask=key_mask(state.src_tokens))
        logits = self.readout(self.decoder_final_norm(out.hidden))[:, 0]  # (B, V)
        return logits, Seq2SeqState(state.src_tokens, state.memory_kvs, out.caches, P + 1)

    def reorder_state(self, state: Seq2SeqState, index: torch.Tensor) -> Seq2SeqState:
        """Pick rows ``index`` (new batch of size ``len(index)``) of every tensor in the state: beam search."""
        caches = None if state.self_caches is None else tuple(c.select(index) for c in state.self_caches)
        return Seq2SeqState(
            state.src_tokens.index_select(0, index), tuple(kv.select(index) for kv in state.memory_kvs),
            caches, state.position,
        )
