"""Exact (best-first) search for the most probable output of a sequence-to-sequence model, one
input at a time, and its comparison with greedy decoding (Chapter 1).

The search is exact because a sequence's probability only shrinks as its prefix grows: a prefix
already less probable than greedy's finished answer can never win, so it is dropped (greedy's
probability is the *bound*). Prefixes are expanded most probable first; the first finished one to
come off the heap is the most probable sequence. Any model with ``start(src, src_lengths)`` and
``step(tokens, state)`` (``attnbook.decoding.Seq2SeqDecoder``) works.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import torch

from attnbook.data import pad_sequences
from attnbook.data.vocab import Vocab
from attnbook.decoding import Seq2SeqDecoder, greedy_decode
from attnbook.train import evaluating


@torch.no_grad()
def sequence_log_prob(model: Seq2SeqDecoder, src: torch.Tensor, src_lengths: torch.Tensor, ids: list[int],
                      bos_id: int, eos_id: int) -> float:
    """log p(ids, <eos> | src) for one input ``src (1, S)``, by stepping the decoder along ``ids``.

    ``src`` may sit on any device: it is moved to the model's (``src_lengths`` stays where it is:
    the encoders read lengths on the CPU)."""
    if src.shape[0] != 1:
        raise ValueError(f"one input at a time: src must be (1, S), got {tuple(src.shape)}")
    src = src.to(next(model.parameters()).device)
    total = 0.0
    with evaluating(model):
        state = model.start(src, src_lengths)
        for previous, token in zip([bos_id, *ids], [*ids, eos_id]):
            logits, state = model.step(torch.tensor([previous], device=src.device), state)  # (1, V)
            total += logits.log_softmax(-1)[0, token].item()
    return total


@torch.no_grad()
def exact_decode(model: Seq2SeqDecoder, src: torch.Tensor, src_lengths: torch.Tensor, bos_id: int, eos_id: int,
                 max_len: int) -> tuple[list[int], list[int]]:
    """The most probable output (without ``<eos>``) for one input ``src (1, S)``, and greedy's answer.

    Prefixes longer than ``max_len`` are dropped; greedy's answer (which respects ``max_len``) is
    always inside the bound, so the search always ends with an answer. The model runs in eval
    mode and comes back in the modes it had.
    """
    with evaluating(model):
        return _best_first(model, src, src_lengths, bos_id, eos_id, max_len)


def _best_first(model: Seq2SeqDecoder, src: torch.Tensor, src_lengths: torch.Tensor, bos_id: int, eos_id: int,
                max_len: int) -> tuple[list[int], list[int]]:
    greedy = greedy_decode(model, src, src_lengths, bos_id, eos_id, max_len)[0]
    bound = -sequence_log_prob(model, src, src_lengths, greedy, bos_id, eos_id)  # greedy's cost, -log p
    frontier = [(0.0, 0, [], model.start(src, src_lengths))]  # (cost, tie-break, prefix, state)
    pushed = 1
    while frontier:
        cost, _, prefix, state = heapq.heappop(frontier)  # the most probable prefix left
        if prefix and prefix[-1] == eos_id:
            return prefix[:-1], greedy
        if len(prefix) > max_len:
            continue
        last = torch.tensor([prefix[-1] if prefix else bos_id], device=src.device)
        logits, next_state = model.step(last, state)  # (1, V)
        for token, log_p in enumerate(logits.log_softmax(-1)[0].tolist()):
            if cost - log_p <= bound + 1e-4:  # the bound, with room for rounding
                heapq.heappush(frontier, (cost - log_p, pushed, prefix + [token], next_state))
                pushed += 1
    raise RuntimeError("greedy's own answer is within the bound, so the search cannot end empty")


@dataclass(frozen=True)
class SearchComparison:
    """One word where the most probable output differs from greedy's."""

    word: str
    reference: tuple[str, ...]
    exact: tuple[str, ...]
    greedy: tuple[str, ...]
    exact_log_prob: float
    greedy_log_prob: float


def compare_with_greedy(model: Seq2SeqDecoder, pairs: list[tuple[str, tuple[str, ...]]], src_vocab: Vocab,
                        tgt_vocab: Vocab, extra_len: int = 5) -> list[SearchComparison]:
    """Run ``exact_decode`` on every (word, pronunciation) pair; return the words where it and greedy differ.

    The length limit is the word's letters plus ``extra_len``. The model runs in eval mode and
    comes back in the modes it had.
    """
    device = next(model.parameters()).device
    bos, eos = tgt_vocab.bos_id, tgt_vocab.eos_id
    differ = []
    for word, reference in pairs:
        src, lengths = pad_sequences([src_vocab.encode(list(word))], src_vocab.pad_id)
        src, lengths = src.to(device), lengths.to(device)
        exact, greedy = exact_decode(model, src, lengths, bos, eos, len(word) + extra_len)
        if exact != greedy:
            differ.append(SearchComparison(
                word, tuple(reference), tuple(tgt_vocab.decode(exact)), tuple(tgt_vocab.decode(greedy)),
                sequence_log_prob(model, src, lengths, exact, bos, eos),
                sequence_log_prob(model, src, lengths, greedy, bos, eos)))
    return differ
