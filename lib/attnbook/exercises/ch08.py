"""Checkers for Chapter 8 (GPT).

Each ``check_*`` runs the reader's function on fixed cases whose answers come from the book's
library (``attnbook.data.bpe``, ``attnbook.tasks.language_modeling``, ``attnbook.layers.masks``)
and prints a verdict. When a wrong answer is exactly what a known mistake gives, or the function
changed its input, the verdict names the mistake in one line before showing the case.
``EXERCISES`` maps the notebook's function names to their checkers.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attnbook.data.bpe import merge_pair
from attnbook.exercises.core import Case, CheckResult, Mistake, run_cases
from attnbook.layers.masks import causal_mask
from attnbook.tasks.language_modeling import filter_logits

# --- 1. perplexity from per-token losses ------------------------------------------------------

def _perplexity(losses: list[torch.Tensor]) -> float:
    return math.exp(float(torch.cat(losses).sum()) / sum(len(x) for x in losses))


def check_perplexity(fn: Callable) -> CheckResult:
    """``fn(losses: list of 1-D tensors) -> float``: the perplexity of a model over several
    sequences, given each token's loss (cross-entropy in nats) sequence by sequence."""
    cases = []
    for seed, lengths in enumerate([(4,), (2, 7), (1, 3, 10), (5, 5)]):
        g = torch.Generator().manual_seed(seed)
        losses = [torch.rand(n, generator=g, dtype=torch.float64) * 4 for n in lengths]
        cases.append(Case(f"sequences of lengths {list(lengths)}", (losses,), _perplexity(losses),
                          hint="exp(total loss / number of tokens)", atol=1e-9, rtol=1e-6))
    cases.append(Case("every loss 0: a sure model", ([torch.zeros(3, dtype=torch.float64)],), 1.0, atol=1e-12))
    cases.append(Case("every loss ln 50: uniform over 50 tokens",
                      ([torch.full((6,), math.log(50), dtype=torch.float64)],), 50.0, atol=1e-9, rtol=1e-9))
    mistakes = [
        Mistake("mean of sequence means", "you averaged the sequences' mean losses: every *token* must count once, so long sequences weigh more.", gives=lambda losses: math.exp(sum(float(x.mean()) for x in losses) / len(losses))),
        Mistake("mean of perplexities", "you averaged per-sequence perplexities: average the losses first, then take one exp.", gives=lambda losses: sum(math.exp(float(x.mean())) for x in losses) / len(losses)),
        Mistake("base 2", "the losses are in nats (natural log): use exp, not 2 ** loss.", gives=lambda losses: 2 ** (float(torch.cat(losses).mean()))),
        Mistake("no exp", "that is the mean loss itself: the perplexity is its exp.", gives=lambda losses: float(torch.cat(losses).mean())),
    ]
    return run_cases("perplexity", fn, cases, mistakes)


# --- 2. one BPE merge step ---------------------------------------------------------------------

def _merge_step(pieces: dict, new_id: int) -> tuple[tuple[int, int], dict]:
    counts: dict = {}
    for ids, n in pieces.items():
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + n
    best = min(counts, key=lambda p: (-counts[p], p))
    merged: dict = {}
    for ids, n in pieces.items():
        key = tuple(merge_pair(list(ids), best, new_id))
        merged[key] = merged.get(key, 0) + n
    return best, merged


def _unweighted_step(pieces: dict, new_id: int) -> tuple[tuple[int, int], dict]:
    return _merge_step({ids: 1 for ids in pieces}, new_id)[0], _merge_step(pieces, new_id)[1]


def _largest_tie_step(pieces: dict, new_id: int):
    counts: dict = {}
    for ids, n in pieces.items():
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + n
    best = max(counts, key=lambda p: (counts[p], p))
    return best, {tuple(merge_pair(list(ids), best, new_id)): n for ids, n in pieces.items()}


def _first_seen_tie_step(pieces: dict, new_id: int):
    """``Counter.most_common`` (or ``max(counts, key=counts.get)``): on a tie, the pair
    seen first wins."""
    counts: dict = {}
    for ids, n in pieces.items():
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + n
    best = max(counts, key=counts.get)
    return best, {tuple(merge_pair(list(ids), best, new_id)): n
                  for ids, n in pieces.items()}


def _right_to_left_step(pieces: dict, new_id: int):
    best, _ = _merge_step(pieces, new_id)
    flip = {ids[::-1]: n for ids, n in pieces.items()}
    return best, {tuple(merge_pair(list(ids), best[::-1], new_id))[::-1]: n for ids, n in flip.items()}


def check_bpe_merge_step(fn: Callable) -> CheckResult:
    """``fn(pieces: dict[tuple[int, ...], int], new_id: int) -> (pair, merged pieces)``: count
    adjacent pairs, each piece weighted by its count; pick the most frequent (ties: the smallest
    pair); replace it, left to right, by ``new_id`` in every piece."""
    examples = [
        ("hand example: 'aaab' once, ' aab' once", {(97, 97, 97, 98): 1, (32, 97, 97, 98): 1}, 256),
        # seen first (4, 4), largest (5, 3), smallest (2, 9): wrong tie-breaks differ
        ("ties: every pair once, the smallest wins",
         {(4, 4): 1, (5, 3): 1, (2, 9): 1}, 11),
        ("counts matter: 'the' once, ' the' twice", {(116, 104, 101): 1, (32, 116, 104, 101): 2}, 300),
        ("a frequent short piece beats a long rare one",
         {(1, 2): 10, (3, 4, 3, 4, 3, 4): 1}, 7),
        ("overlap: (1, 1, 1) holds one merge, not two", {(1, 1, 1): 3, (2, 1): 1}, 50),
        ("a piece of one token stays", {(7,): 5, (7, 8): 1}, 20),
    ]
    cases = [Case(d, (pieces, new_id), _merge_step(pieces, new_id),
                  hint="count pairs times the piece's count; ties -> min(pair); merge left to right, skipping "
                       "past each merged pair") for d, pieces, new_id in examples]
    mistakes = [
        Mistake("unweighted counts", "each pair must be counted as often as its piece occurs (weight by the piece's count).", gives=_unweighted_step),
        Mistake("first pair seen on ties",
                "on a tie you kept the first pair seen (what Counter.most_common and "
                "max(counts, key=counts.get) do): take the smallest pair (min over "
                "(-count, pair)).", gives=_first_seen_tie_step),
        Mistake("largest pair on ties", "on a tie take the smallest pair (min over (-count, pair)), not the largest.", gives=_largest_tie_step),
        Mistake("right to left", "merge from left to right: (1, 1, 1) becomes (new, 1), not (1, new).", gives=_right_to_left_step),
    ]
    return run_cases("BPE merge step", fn, cases, mistakes)


# --- 3. top-p (nucleus) filtering --------------------------------------------------------------

def check_top_p(fn: Callable) -> CheckResult:
    """``fn(logits (B, V), p) -> (B, V)``: keep the smallest set of most likely tokens whose
    probabilities add up to at least p (always at least the most likely one); set the others to -inf."""
    def probs_to_logits(rows):
        return torch.tensor(rows, dtype=torch.float64).log()

    examples = [
        ("probabilities 0.5 0.3 0.2, p=0.7", probs_to_logits([[0.5, 0.3, 0.2]]), 0.7),
        ("unsorted row, p=0.65", probs_to_logits([[0.1, 0.6, 0.05, 0.25]]), 0.65),
        ("three tokens, p=0.7", probs_to_logits([[0.2, 0.5, 0.3]]), 0.7),
        ("p smaller than the top probability: only the top stays", probs_to_logits([[0.2, 0.7, 0.1]]), 0.3),
        ("p = 1 keeps everything", probs_to_logits([[0.4, 0.35, 0.25]]), 1.0),
        ("a batch of rows with different nuclei",
         torch.randn(3, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2, 0.8),
        ("raw logits (not log-probabilities), p=0.9", torch.tensor([[2.0, 1.0, 0.0, -1.0, 3.0]]), 0.9),
        ("ties: equal probabilities join the nucleus lower index first, p=0.45",
         probs_to_logits([[0.1, 0.2, 0.2, 0.2, 0.3], [0.24, 0.24, 0.24, 0.24, 0.04]]),
         0.45),
    ]
    cases = [Case(d, (logits, p), filter_logits(logits, top_p=p),
                  hint="softmax, sort descending, cumulative sum; drop a token when the mass *before* it "
                       "already reaches p; on a tie the lower index comes first")
             for d, logits, p in examples]

    def drops_crossing(logits, p):
        sorted_logits, order = logits.sort(-1, descending=True)
        drop = sorted_logits.softmax(-1).cumsum(-1) > p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    def on_logits(logits, p):
        sorted_logits, order = logits.sort(-1, descending=True)
        drop = sorted_logits.cumsum(-1) - sorted_logits >= p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    def unsorted(logits, p):
        probs = logits.softmax(-1)
        return logits.masked_fill(probs.cumsum(-1) - probs >= p, float("-inf"))

    def keeps_every_tie(logits, p):
        probs = logits.softmax(-1)
        ordered = probs.sort(-1, descending=True).values
        # (B, 1): where the token that reaches p sits in the sorted row
        last = (ordered.cumsum(-1) - ordered < p).sum(-1, keepdim=True) - 1
        return logits.masked_fill(probs < ordered.gather(-1, last), float("-inf"))

    mistakes = [
        Mistake("keeps every tie",
                "you kept every token as likely as the one that reaches p: tied tokens "
                "join the nucleus one at a time, lower index first, and it stops as soon "
                "as the mass reaches p.", gives=keeps_every_tie),
        Mistake("drops the crossing token", "you dropped the token that crosses p: keep it (drop only when the mass *before* a token reaches p).", gives=drops_crossing),
        Mistake("unsorted", "sort the probabilities from largest to smallest before the cumulative sum.", gives=unsorted),
        Mistake("cumsum of logits", "accumulate probabilities (softmax), not logits.", gives=on_logits),
    ]
    return run_cases("top-p filter", fn, cases, mistakes)


# --- 4. the mask of a cached decoding step -----------------------------------------------------

def check_cached_mask(fn: Callable) -> CheckResult:
    """``fn(num_new, num_cached) -> (num_new, num_cached + num_new)`` bool: what the new
    positions may attend to when ``num_cached`` earlier positions sit in the KV cache."""
    sizes = [(1, 0), (1, 5), (3, 0), (3, 4), (2, 1), (5, 2)]
    cases = [Case(f"{t} new after {p} cached", (t, p), causal_mask(t, p + t),
                  hint="new query i sits at position P + i and sees keys j <= P + i") for t, p in sizes]

    def no_offset(t, p):
        return torch.ones(t, p + t, dtype=torch.bool).tril()

    def future_visible(t, p):
        return torch.ones(t, p + t, dtype=torch.bool).tril(p + t)

    def blocks_cache(t, p):
        return torch.cat([torch.zeros(t, p, dtype=torch.bool), torch.ones(t, t, dtype=torch.bool).tril()], dim=1)

    def square(t, p):
        return torch.ones(t, t, dtype=torch.bool).tril()

    mistakes = [
        Mistake("no offset", "the new queries are the *last* positions: shift the triangle right by num_cached (tril(diagonal=P)).", gives=no_offset),
        Mistake("cache hidden", "every new position may see the whole cache: the cached positions are all in its past.", gives=blocks_cache),
        Mistake("future visible", "a new position must not see the new positions after it.", gives=future_visible),
        Mistake("inverted",
                "that is PyTorch's convention (True = blocked, as the attn_mask of "
                "nn.MultiheadAttention takes it); this book's masks say True = may "
                "attend.",
                gives=lambda t, p: ~causal_mask(t, p + t)),
        Mistake("square mask", "the keys are the cached positions plus the new ones: the mask has P + T columns.", gives=square),
    ]
    return run_cases("cached decoding mask", fn, cases, mistakes)


EXERCISES = {
    "perplexity_of": check_perplexity,
    "bpe_merge_step": check_bpe_merge_step,
    "top_p": check_top_p,
    "cached_mask": check_cached_mask,
}
