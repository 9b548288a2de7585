"""Checkers for Chapter 2 (Bahdanau attention, and Luong's variant).

Expected answers come from the book's library (``attnbook.layers.masks``) or from the formulas
written out below; each checker lists the known mistakes it can name. ``EXERCISES`` maps the
notebook's function names to their checkers.
Legend: B batch, S source length, D hidden width, E input width, Dq query width, Dk key width,
A additive hidden width.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from attnbook.exercises.core import Case, CheckResult, Mistake, no_grad, run_cases
from attnbook.layers.masks import masked_softmax as _library_masked_softmax
from attnbook.layers.masks import token_mask


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _has_nan(got: object) -> bool:
    return isinstance(got, torch.Tensor) and got.is_floating_point() and bool(got.isnan().any())


# --- masked softmax -------------------------------------------------------------------------------
def _masked(scores, mask, dim=-1, fill=float("-inf"), zero_after=True):
    weights = torch.softmax(scores.masked_fill(~mask, fill), dim=dim)
    return weights.masked_fill(~mask, 0.0) if zero_after else weights


def _empty_rows_not_zero(args, got) -> bool:
    scores, mask = args
    empty = ~mask.any(-1)
    return (isinstance(got, torch.Tensor) and got.shape == scores.shape and bool(empty.any())
            and not bool((got[empty].nan_to_num(1.0) == 0).all()))


MASKED_SOFTMAX_MISTAKES = [
    Mistake("ignores mask", "padding got weight: set the scores of padding to -inf before the softmax.",
            gives=lambda s, m: torch.softmax(s, dim=-1)),
    Mistake("inverted mask", "your mask is inverted: True marks the real positions, the ones that keep their score.",
            gives=lambda s, m: _masked(s, ~m).nan_to_num(0.0)),
    Mistake("zeroed after softmax", "you zeroed padding after the softmax, so the real weights no longer sum "
            "to 1: mask the scores before it.", gives=lambda s, m: torch.softmax(s, dim=-1) * m),
    Mistake("wrong axis", "each row (one sequence) must sum to 1: take the softmax over the positions, dim=-1.",
            gives=lambda s, m: _masked(s, m, dim=0).nan_to_num(0.0)),
    Mistake("overflow", "your weights are NaN where the scores are large: exp overflows; use torch.softmax "
            "(it subtracts the row maximum first).",
            when=lambda args, got: _has_nan(got) and bool(args[1].any(-1).all())),
    Mistake("empty rows", "a row with no real position must get all-zero weights (not NaN, not uniform): "
            "fill the weights of padding with 0 after the softmax.", when=_empty_rows_not_zero),
]


def check_masked_softmax(fn: Callable) -> CheckResult:
    """``masked_softmax(scores (B, S), mask (B, S) bool, True = real) -> weights (B, S)``: a softmax over each
    row's real positions, exactly 0 on padding; a row without real positions is all zeros."""
    cases = [Case(
        "B=1, S=3: two real positions and one padding position",
        (torch.tensor([[0.0, math.log(3.0), 2.0]]), torch.tensor([[True, True, False]])),
        torch.tensor([[0.25, 0.75, 0.0]]),
        hint="set the scores of padding to -inf before the softmax, not after it.",
    )]
    g = _generator(3)
    for description, lengths, S, scale in [
        ("B=4, S=6, lengths 6, 1, 3, 4", [6, 1, 3, 4], 6, 3.0),
        ("a square batch: 3 rows of 3, where the wrong axis keeps the right shape", [3, 2, 1], 3, 1.0),
        ("S=1: a single position", [1, 1], 1, 1.0),
        ("large scores (around 100)", [5, 2], 5, 100.0),
        ("a row made only of padding", [2, 0, 4], 4, 1.0),
    ]:
        scores = torch.randn(len(lengths), S, generator=g) * scale
        if scale == 100.0:
            scores += 100.0
        mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S); a length may be 0
        cases.append(Case(description, (scores, mask), _library_masked_softmax(scores, mask),
                          hint="normalise each row over its real positions only (dim=-1); padding gets 0."))
    return run_cases("masked softmax", fn, cases, MASKED_SOFTMAX_MISTAKES)


# --- additive score -------------------------------------------------------------------------------
def _additive(query, keys, W, U, v, tanh=True, separate=False):
    if separate:
        return torch.tanh(query @ W.T)[:, None, :] @ v + torch.tanh(keys @ U.T) @ v
    hidden = (query @ W.T)[:, None, :] + keys @ U.T  # (B, S, A)
    return (torch.tanh(hidden) if tanh else hidden) @ v  # (B, S)


ADDITIVE_MISTAKES = [
    Mistake("untransposed", "W is (A, Dq): W q for a batch of row vectors is `query @ W.T` (and U k is `keys @ U.T`).",
            gives=lambda q, k, W, U, v: torch.tanh((q @ W)[:, None, :] + k @ U) @ v),
    Mistake("tanh twice", "one network: add W q and U k_j first, then one tanh, then v.",
            gives=lambda *a: _additive(*a, separate=True)),
    Mistake("no tanh", "the tanh is missing: e_j = vᵀ tanh(W q + U k_j).", gives=lambda *a: _additive(*a, tanh=False)),
    Mistake("W and U swapped", "W projects the query and U the keys (you swapped them).",
            gives=lambda q, k, W, U, v: _additive(q, k, U, W, v)),
]


def check_additive_score(fn: Callable) -> CheckResult:
    """``additive_score(query (B, Dq), keys (B, S, Dk), W (A, Dq), U (A, Dk), v (A,)) -> scores (B, S)``."""
    cases = []
    for seed, (B, S, Dq, Dk, A) in enumerate([(1, 2, 2, 2, 2), (2, 5, 3, 4, 6), (3, 1, 4, 4, 2), (2, 4, 5, 3, 3),
                                              (4, 3, 6, 6, 6)], start=1):
        g = _generator(seed)
        args = tuple(torch.randn(*shape, generator=g) for shape in ((B, Dq), (B, S, Dk), (A, Dq), (A, Dk), (A,)))
        cases.append(Case(
            f"B={B}, S={S}, Dq={Dq}, Dk={Dk}, A={A}", args, _additive(*args),
            hint="W is (A, Dq) and U is (A, Dk): W q is `query @ W.T`; broadcast the query over the S keys.",
        ))
    return run_cases("additive score", fn, cases, ADDITIVE_MISTAKES)


# --- Luong (dot) attention decoder step ------------------------------------------------------------
def _luong(cell, W_c, x, hidden, memory, src_tokens, *, query="new", scale=False, order="ch", masked=True,
           dim=-1, tanh=True, carry="h"):
    new_hidden = cell(x, hidden)  # (B, D): h_t
    q = new_hidden if query == "new" else hidden
    scores = (memory @ q[:, :, None])[..., 0]  # (B, S)
    if scale:
        scores = scores / math.sqrt(memory.shape[-1])
    if masked:
        weights = _masked(scores, src_tokens, dim=dim).nan_to_num(0.0)  # (B, S)
    else:
        weights = torch.softmax(scores, dim=dim)
    context = (weights[:, None, :] @ memory)[:, 0]  # (B, D)
    pair = torch.cat([context, new_hidden] if order == "ch" else [new_hidden, context], dim=-1)  # (B, 2D)
    out = pair @ W_c.T
    out = torch.tanh(out) if tanh else out  # (B, D): h~_t
    return out, (new_hidden if carry == "h" else out), weights


LUONG_MISTAKES = [
    Mistake("attends with previous hidden", "you attended with the previous hidden state h_{t-1}, as Bahdanau "
            "does; Luong first runs the GRU step and attends with the new h_t.",
            gives=lambda *a: _luong(*a, query="old")),
    Mistake("scaled", "Luong's dot score is unscaled, h_tᵀ h̄_s: do not divide by √D here.",
            gives=lambda *a: _luong(*a, scale=True)),
    Mistake("concat order", "concatenate [c_t; h_t], context first, as W_c expects.",
            gives=lambda *a: _luong(*a, order="hc")),
    Mistake("ignores mask", "padding got weight: mask the scores of padding (src_tokens False) before the softmax.",
            gives=lambda *a: _luong(*a, masked=False)),
    Mistake("wrong axis", "the weights of each sequence must sum to 1 over its source positions: softmax over dim=-1.",
            gives=lambda *a: _luong(*a, dim=0)),
    Mistake("no tanh", "h̃_t = tanh(W_c [c_t; h_t]): the tanh is missing.", gives=lambda *a: _luong(*a, tanh=False)),
    Mistake("carries h tilde", "the GRU's state is h_t: return it as the new hidden state (h̃_t is what "
            "predicts the token).", gives=lambda *a: _luong(*a, carry="tilde")),
]


def check_luong_step(fn: Callable) -> CheckResult:
    """``luong_step(cell, W_c (D, 2D), x (B, E), hidden (B, D), memory (B, S, D), src_tokens (B, S))
    -> (h_tilde (B, D), new_hidden (B, D), weights (B, S))``: one step of a Luong decoder."""
    cases = []
    for seed, (B, S, D, E, lengths) in enumerate([
        (1, 3, 4, 3, [3]), (3, 5, 8, 5, [5, 2, 1]), (2, 1, 6, 2, [1, 1]), (4, 6, 4, 7, [6, 6, 3, 4]),
    ]):
        torch.manual_seed(seed)
        cell = nn.GRUCell(E, D)
        g = _generator(100 + seed)
        W_c = torch.randn(D, 2 * D, generator=g) / math.sqrt(2 * D)
        x, hidden = torch.randn(B, E, generator=g), torch.randn(B, D, generator=g)
        memory = 2.0 * torch.randn(B, S, D, generator=g)
        src_tokens = token_mask(torch.tensor(lengths), S)
        args = (cell, W_c, x, hidden, memory, src_tokens)
        with torch.no_grad():
            expected = _luong(*args)
        cases.append(Case(
            f"B={B}, S={S}, D={D}, E={E}, source lengths {lengths}", args, expected,
            hint="h_t = cell(x, hidden); scores = memory · h_t; masked softmax over S; c_t = Σ a_s h̄_s; "
                 "h̃_t = tanh([c_t; h_t] @ W_c.T); return (h̃_t, h_t, a).",
            atol=1e-5,
        ))
    return run_cases("Luong attention step", no_grad(fn), cases, LUONG_MISTAKES)


EXERCISES = {
    "masked_softmax": check_masked_softmax,
    "additive_score": check_additive_score,
    "luong_step": check_luong_step,
}
