"""Checkers for Chapter 2 (Bahdanau attention).

Each ``check_*`` runs the reader's function on fixed cases whose answers come from the book's
library (``attnbook.layers.scores``, ``attnbook.layers.masks``) and prints a verdict.
Legend: B batch, S source length, Dq query width, Dk key width, A additive hidden width.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attnbook.exercises.core import Case, CheckResult, run_cases
from attnbook.layers.masks import masked_softmax, token_mask


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _additive_reference(query, keys, W, U, v):
    return torch.tanh(query[:, None, :] @ W.T + keys @ U.T) @ v  # (B, S)


def check_additive_score(fn: Callable) -> CheckResult:
    """``fn(query (B, Dq), keys (B, S, Dk), W (A, Dq), U (A, Dk), v (A,)) -> scores (B, S)``."""
    cases = []
    q1, k1 = torch.tensor([[1.0, 0.0]]), torch.tensor([[[0.0, 2.0], [1.0, 1.0]]])
    eye, v1 = torch.eye(2), torch.tensor([1.0, -1.0])
    cases.append(Case(
        "one query, two keys, W = U = I, v = [1, -1]", (q1, k1, eye, eye, v1),
        torch.tensor([[math.tanh(1) - math.tanh(2), math.tanh(2) - math.tanh(1)]]),
        hint="e_j = vᵀ tanh(W q + U k_j): add the two projections before the tanh.",
    ))
    for seed, (B, S, Dq, Dk, A) in enumerate([(2, 5, 3, 4, 6), (3, 1, 4, 4, 2)], start=1):
        g = _generator(seed)
        args = tuple(torch.randn(*shape, generator=g) for shape in ((B, Dq), (B, S, Dk), (A, Dq), (A, Dk), (A,)))
        cases.append(Case(
            f"random B={B}, S={S}, Dq={Dq}, Dk={Dk}, A={A}", args, _additive_reference(*args),
            hint="W is (A, Dq) and U is (A, Dk): W q is `query @ W.T`; broadcast the query over the S keys.",
        ))
    return run_cases("additive score", fn, cases)


def check_masked_softmax(fn: Callable) -> CheckResult:
    """``fn(scores (B, S), mask (B, S) bool, True = real) -> weights (B, S)``, exactly 0 on padding."""
    cases = [Case(
        "two real positions and one padding position",
        (torch.tensor([[0.0, math.log(3.0), 50.0]]), torch.tensor([[True, True, False]])),
        torch.tensor([[0.25, 0.75, 0.0]]),
        hint="set the scores of padding to -inf before the softmax, not after it.",
    )]
    g = _generator(3)
    scores = torch.randn(4, 6, generator=g) * 3
    mask = token_mask(torch.tensor([6, 1, 3, 4]), 6)
    cases.append(Case(
        "a batch of 4 with lengths 6, 1, 3, 4", (scores, mask), masked_softmax(scores, mask),
        hint="normalise each row over its S positions (dim=-1), and only over the real ones.",
    ))
    square = torch.randn(3, 3, generator=g)
    cases.append(Case(
        "a square batch (3 rows of 3), where the wrong axis would still have the right shape",
        (square, token_mask(torch.tensor([3, 2, 1]), 3)),
        masked_softmax(square, token_mask(torch.tensor([3, 2, 1]), 3)),
        hint="each row (one sequence) must sum to 1: softmax over dim=-1.",
    ))
    return run_cases("masked softmax", fn, cases)


def check_scaled_dot_score(fn: Callable) -> CheckResult:
    """``fn(query (B, D), keys (B, S, D)) -> scores (B, S)``: qᵀ k_j / √D."""
    cases = [Case(
        "D = 4: q = [1, 2, 3, 4], keys [1, 1, 1, 1] and [0, 0, 0, -1]",
        (torch.tensor([[1.0, 2.0, 3.0, 4.0]]), torch.tensor([[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, -1.0]]])),
        torch.tensor([[5.0, -2.0]]),
        hint="the dot products are 10 and -4; divide by √D = 2.",
    )]
    g = _generator(4)
    query, keys = torch.randn(3, 16, generator=g), torch.randn(3, 7, 16, generator=g)
    cases.append(Case(
        "random B=3, S=7, D=16", (query, keys), (keys @ query[:, :, None])[..., 0] / 4.0,
        hint="score every key of a sequence against that sequence's own query: `(keys @ query[:, :, None])`.",
    ))
    return run_cases("scaled dot-product score", fn, cases)
