"""Checkers for Chapter 8 (GPT).

Each ``check_*`` runs the reader's function on fixed cases whose answers come from the book's
library (``attnbook.data.bpe``, ``attnbook.tasks.language_modeling``, ``attnbook.layers.masks``)
and prints a verdict. When a wrong answer is exactly what a known mistake gives, or the function
changed its input, the verdict names the mistake in one line before showing the case.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch

from attnbook.data.bpe import merge_pair
from attnbook.exercises.core import Case, CheckResult, _short, compare, run_cases
from attnbook.layers.masks import causal_mask
from attnbook.tasks.language_modeling import filter_logits

Mistake = tuple[Callable, str]  # a wrong function and the one-line diagnosis it earns


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.equal(a, b) if not a.is_floating_point() else torch.allclose(a, b, equal_nan=True))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def check_with_diagnoses(exercise: str, fn: Callable, cases: Sequence[Case],
                         mistakes: Sequence[Mistake] = ()) -> CheckResult:
    """``run_cases``, preceded by two probes on every case: did ``fn`` change its arguments,
    and does its wrong answer equal what a known mistake gives? Either earns a one-line diagnosis."""
    if callable(fn):
        for n, case in enumerate(cases, start=1):
            args = copy.deepcopy(case.args)
            try:
                got = fn(*args, **case.kwargs)
            except Exception:  # noqa: BLE001 - run_cases reports errors with their line
                break
            changed = [i for i, (a, b) in enumerate(zip(args, case.args)) if not _same(a, b)]
            if changed:
                return _fail(exercise, f"your function changed its argument {changed[0] + 1} in place: "
                                       "work on a copy (e.g. x.clone(), dict(pieces)).", n, case, got)
            if compare(got, case.expected, case.atol, case.rtol) is None:
                continue
            for wrong, diagnosis in mistakes:
                try:
                    expected_wrong = wrong(*copy.deepcopy(case.args), **case.kwargs)
                except Exception:  # noqa: BLE001 - a mistake may not apply to every case
                    continue
                if compare(got, expected_wrong, case.atol, case.rtol) is None:
                    return _fail(exercise, diagnosis, n, case, got)
            break
    return run_cases(exercise, fn, cases)


def _fail(exercise: str, diagnosis: str, n: int, case: Case, got: object) -> CheckResult:
    message = (f"✗ {exercise}: {diagnosis}\n   case {n} ({case.description})\n"
               f"   expected: {_short(case.expected)}\n   got:      {_short(got)}")
    print(message)
    return CheckResult(exercise, False, message)


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
        (lambda losses: math.exp(sum(float(x.mean()) for x in losses) / len(losses)),
         "you averaged the sequences' mean losses: every *token* must count once, so long sequences weigh more."),
        (lambda losses: sum(math.exp(float(x.mean())) for x in losses) / len(losses),
         "you averaged per-sequence perplexities: average the losses first, then take one exp."),
        (lambda losses: 2 ** (float(torch.cat(losses).mean())),
         "the losses are in nats (natural log): use exp, not 2 ** loss."),
        (lambda losses: float(torch.cat(losses).mean()),
         "that is the mean loss itself: the perplexity is its exp."),
    ]
    return check_with_diagnoses("perplexity", fn, cases, mistakes)


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
        ("counts matter: 'the' once, ' the' twice", {(116, 104, 101): 1, (32, 116, 104, 101): 2}, 300),
        ("a frequent short piece beats a long rare one",
         {(1, 2): 10, (3, 4, 3, 4, 3, 4): 1}, 7),
        ("ties: every pair once, the smallest wins", {(5, 3): 1, (2, 9): 1, (4, 4): 1}, 11),
        ("overlap: (1, 1, 1) holds one merge, not two", {(1, 1, 1): 3, (2, 1): 1}, 50),
        ("a piece of one token stays", {(7,): 5, (7, 8): 1}, 20),
    ]
    cases = [Case(d, (pieces, new_id), _merge_step(pieces, new_id),
                  hint="count pairs times the piece's count; ties -> min(pair); merge left to right, skipping "
                       "past each merged pair") for d, pieces, new_id in examples]
    mistakes = [
        (_unweighted_step, "each pair must be counted as often as its piece occurs (weight by the piece's count)."),
        (_largest_tie_step, "on a tie take the smallest pair (min over (-count, pair)), not the largest."),
        (_right_to_left_step, "merge from left to right: (1, 1, 1) becomes (new, 1), not (1, new)."),
    ]
    return check_with_diagnoses("BPE merge step", fn, cases, mistakes)


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
    ]
    cases = [Case(d, (logits, p), filter_logits(logits, top_p=p),
                  hint="softmax, sort descending, cumulative sum; drop a token when the mass *before* it "
                       "already reaches p") for d, logits, p in examples]

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

    mistakes = [
        (drops_crossing, "you dropped the token that crosses p: keep it (drop only when the mass *before* a token reaches p)."),
        (unsorted, "sort the probabilities from largest to smallest before the cumulative sum."),
        (on_logits, "accumulate probabilities (softmax), not logits."),
    ]
    return check_with_diagnoses("top-p filter", fn, cases, mistakes)


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
        (no_offset, "the new queries are the *last* positions: shift the triangle right by num_cached (tril(diagonal=P))."),
        (blocks_cache, "every new position may see the whole cache: the cached positions are all in its past."),
        (future_visible, "a new position must not see the new positions after it."),
        (square, "the keys are the cached positions plus the new ones: the mask has P + T columns."),
    ]
    return check_with_diagnoses("cached decoding mask", fn, cases, mistakes)
