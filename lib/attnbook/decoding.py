"""Generating output sequences from a trained sequence-to-sequence model.

A model decodes through two methods (the book's decoding protocol, ``Seq2SeqDecoder``):
``start(src, src_lengths) -> state`` and ``step(tokens (B,), state) -> (logits (B, V), new state)``.
The state is returned, never stored on the model, and ``step`` never changes the state it is
given: stepping twice from one state gives the same logits. Beam search also needs
``reorder_state(state, index) -> state``, which keeps the batch rows ``index`` (in that order).
A decoder-only model (GPT) has no source: ``PromptDecoder.start(prompt)`` reads the prompt and
returns the logits of the token after it with the state.

Legend: B batch, K beams, V vocabulary, L generated length.
"""
from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import nn

State = Any  # each model defines its own immutable state type


class Seq2SeqDecoder(Protocol):
    """A sequence-to-sequence model that decodes one token at a time."""

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> State:
        """Encode the source ``(B, S)`` once; return the state before the first step."""
        ...

    def step(self, tokens: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and a new state (``state`` unchanged)."""
        ...


class BeamSearchDecoder(Seq2SeqDecoder, Protocol):
    """A ``Seq2SeqDecoder`` whose state can be reordered, as beam search needs."""

    def reorder_state(self, state: State, index: torch.Tensor) -> State:
        """The state of batch rows ``index`` (in that order)."""
        ...


class PromptDecoder(Protocol):
    """A decoder-only model: no source, only a prompt to continue."""

    def start(self, prompt: torch.Tensor) -> tuple[torch.Tensor, State]:
        """Read the prompt ``(B, T)``; return the logits ``(B, V)`` of the next token and the state."""
        ...

    def step(self, tokens: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Tokens ``(B,)`` just chosen -> logits ``(B, V)`` of the next one and a new state."""
        ...


def _strip(rows: list[list[int]], eos_id: int) -> list[list[int]]:
    """Cut each row at its first ``<eos>`` (dropping it)."""
    return [row[: row.index(eos_id)] if eos_id in row else row for row in rows]


@torch.no_grad()
def greedy_decode(
    model: Seq2SeqDecoder, src: torch.Tensor, src_lengths: torch.Tensor, bos_id: int, eos_id: int, max_len: int
) -> list[list[int]]:
    """Pick the most likely token at each step until ``<eos>`` or ``max_len`` tokens.

    Returns one list of ids per sequence, without ``<bos>`` and ``<eos>``. Greedy search is
    not the most likely *sequence*: that would need a search over V^T candidates.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    B = src.shape[0]
    state = model.start(src, src_lengths)
    tokens = torch.full((B,), bos_id, dtype=torch.long, device=src.device)  # (B,)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    out = []
    for _ in range(max_len):
        logits, state = model.step(tokens, state)  # (B, V)
        tokens = logits.argmax(dim=-1)  # (B,)
        out.append(tokens)
        finished |= tokens == eos_id
        if finished.all():
            break
    return _strip(torch.stack(out, dim=1).tolist(), eos_id)  # (B, T) -> lists


@torch.no_grad()
def greedy_decode_uncached(
    model: nn.Module, src: torch.Tensor, src_lengths: torch.Tensor, bos_id: int, eos_id: int, max_len: int
) -> list[list[int]]:
    """Greedy decoding the slow way: at every step run the whole teacher-forced model
    ``model(src, src_lengths, prefix) -> (B, t, V)`` on the prefix so far and keep the last
    position. It recomputes every earlier position each time (no cache); it is the reference
    that cached decoding must reproduce token for token.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    B = src.shape[0]
    prefix = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        tokens = model(src, src_lengths, prefix)[:, -1].argmax(dim=-1)  # (B,)
        prefix = torch.cat([prefix, tokens[:, None]], dim=1)  # (B, t + 1)
        finished |= tokens == eos_id
        if finished.all():
            break
    return _strip(prefix[:, 1:].tolist(), eos_id)


@torch.no_grad()
def beam_search(
    model: BeamSearchDecoder,
    src: torch.Tensor,
    src_lengths: torch.Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    beam_size: int = 4,
    length_penalty: float = 0.0,
) -> list[list[int]]:
    """Keep the ``beam_size`` most likely prefixes at each step instead of one.

    Every prefix is extended by every token; of the K·V candidates of a sequence the K with
    the highest total log-probability survive. A prefix that has produced ``<eos>`` is
    finished: it stays in the beam with its score frozen. At the end the best hypothesis is
    the one with the highest score / L^``length_penalty`` (0: plain log-probability, which
    favours short outputs; 1: mean log-probability per token). ``beam_size=1`` is greedy search.
    Returns one list of ids per sequence, without ``<bos>`` and ``<eos>``.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if not hasattr(model, "reorder_state"):
        raise TypeError(f"beam search needs model.reorder_state(state, index); {type(model).__name__} has none")
    B, K, device = src.shape[0], beam_size, src.device
    rows = torch.arange(B, device=device).repeat_interleave(K)  # (B*K,): beam k of sequence b is row b*K + k
    state = model.reorder_state(model.start(src, src_lengths), rows)
    tokens = torch.full((B * K,), bos_id, dtype=torch.long, device=device)  # (B*K,)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start as the same empty prefix: keep only one of them alive
    finished = torch.zeros(B, K, dtype=torch.bool, device=device)
    lengths = torch.zeros(B, K, device=device)  # tokens produced, counting <eos>
    history = torch.zeros(B, K, 0, dtype=torch.long, device=device)  # (B, K, L)
    for _ in range(max_len):
        logits, state = model.step(tokens, state)  # (B*K, V)
        logp = torch.log_softmax(logits.float(), dim=-1).view(B, K, -1)  # (B, K, V)
        V = logp.shape[-1]
        # A finished beam may only "produce" <eos> again, at no cost: its score stays as it is.
        frozen = torch.full_like(logp, float("-inf"))
        frozen[..., eos_id] = 0.0
        logp = torch.where(finished[..., None], frozen, logp)
        candidates = (scores[..., None] + logp).view(B, K * V)  # (B, K*V)
        scores, flat = candidates.topk(K, dim=-1)  # (B, K)
        beam, token = flat // V, flat % V  # which beam each survivor extends, and with what
        history = torch.cat([history.gather(1, beam[..., None].expand(-1, -1, history.shape[-1])), token[..., None]], dim=-1)
        lengths = lengths.gather(1, beam) + (~finished.gather(1, beam)).float()
        finished = finished.gather(1, beam) | (token == eos_id)
        state = model.reorder_state(state, (torch.arange(B, device=device)[:, None] * K + beam).view(-1))
        tokens = token.view(-1)  # (B*K,)
        if finished.all():
            break
    final = scores / lengths.clamp(min=1.0) ** length_penalty if length_penalty else scores
    best = final.argmax(dim=-1)  # (B,)
    return _strip(history[torch.arange(B, device=device), best].tolist(), eos_id)
