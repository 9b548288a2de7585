"""Checkers for Chapter 2 (Bahdanau attention, and Luong's variant).

Expected answers come from the book's library (``attnbook.layers.masks``) or from the formulas
written out below; each checker lists the known mistakes it can name. The chapter's exercises
are ``check_local_softmax`` (a windowed masked softmax), ``check_coverage_score`` (the additive
score with a coverage input), ``check_luong_step`` and the predict-then-measure
``check_uniform_attention``; ``check_masked_softmax`` and ``check_additive_score`` are the
plain versions, kept for readers of earlier editions. ``EXERCISES`` maps the
notebook's function names to their checkers.
Legend: B batch, S source length, D hidden width, E input width, Dq query width, Dk key width,
A additive hidden width.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

import copy

from attnbook.data.vocab import Vocab
from attnbook.exercises.core import Case, CheckResult, Mistake, _finish, no_grad, run_cases
from attnbook.layers.masks import masked_softmax as _library_masked_softmax
from attnbook.layers.masks import token_mask
from attnbook.layers.scores import Score
from attnbook.models.rnn import RNNAttentionSeq2Seq
from attnbook.tasks.g2p import evaluate_g2p


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


# --- local (windowed) masked softmax ---------------------------------------------------------------
def _local(scores, lengths, centre, radius, *, window=True, real=True, strict=False, fill=float("-inf"),
           zero_after=True, dim=-1):
    positions = torch.arange(scores.shape[-1])[None, :]  # (1, S)
    allowed = torch.ones_like(scores, dtype=torch.bool)
    if real:
        allowed &= positions < lengths[:, None]
    if window:
        distance = (positions - centre[:, None]).abs()
        allowed &= (distance < radius) if strict else (distance <= radius)
    weights = torch.softmax(scores.masked_fill(~allowed, fill), dim=dim)
    return weights.masked_fill(~allowed, 0.0) if zero_after else weights


def _local_case(description, scores, lengths, centre, radius):
    args = (scores, torch.tensor(lengths), torch.tensor(centre), radius)
    return Case(description, args, _local(*args),
                hint="allowed = (j < length) & (|j - centre| <= radius); softmax over the allowed positions "
                     "of each row (-inf elsewhere first), then 0 where not allowed.")


LOCAL_MISTAKES = [
    Mistake("ignores window", "weight landed outside the window: allow only |j - centre| <= radius.",
            gives=lambda s, l, c, r: _local(s, l, c, r, window=False).nan_to_num(0.0)),
    Mistake("ignores lengths", "padding got weight: a window that reaches past the end of the word must stop "
            "at its last real letter (j < length).",
            gives=lambda s, l, c, r: _local(s, l, c, r, real=False).nan_to_num(0.0)),
    Mistake("window too narrow", "the window is one position too narrow on each side: |j - centre| <= radius "
            "includes both ends (2·radius + 1 positions).",
            gives=lambda s, l, c, r: _local(s, l, c, r, strict=True).nan_to_num(0.0)),
    Mistake("zeroed after softmax", "you zeroed the positions outside the window after the softmax, so the "
            "weights no longer sum to 1: mask the scores before it.",
            gives=lambda s, l, c, r: torch.softmax(s, -1) * (_local(s, l, c, r) > 0)),
    Mistake("empty window", "a row whose window holds no real letter must get all-zero weights, not NaN "
            "and not uniform: fill the disallowed weights with 0 after the softmax.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == args[0].shape
            and bool((_local(*args).sum(-1) == 0).any())
            and not bool((got[_local(*args).sum(-1) == 0].nan_to_num(1.0) == 0).all())),
    Mistake("overflow", "your weights are NaN where the scores are large: exp overflows; use torch.softmax "
            "(it subtracts the row maximum first).",
            when=lambda args, got: _has_nan(got) and bool((_local(*args).sum(-1) > 0).all())),
]


def check_local_softmax(fn: Callable) -> CheckResult:
    """``local_softmax(scores (B, S), lengths (B,), centre (B,), radius) -> weights (B, S)``: a softmax over
    the real positions within ``radius`` of ``centre``, exactly 0 elsewhere; an empty window gives zeros."""
    g = _generator(11)
    cases = [_local_case("B=1, S=5, length 5, centre 2, radius 1: three positions",
                         torch.tensor([[5.0, 0.0, math.log(3.0), 0.0, 5.0]]), [5], [2], 1)]
    for description, lengths, centre, radius, S, scale in [
        ("B=3, S=7: windows cut by the start, the end of the word, and neither", [7, 4, 6], [0, 3, 3], 2, 7, 2.0),
        ("radius 0: one position each", [5, 3], [1, 2], 0, 5, 1.0),
        ("a radius wider than the word", [3, 6, 2], [1, 5, 0], 9, 6, 1.0),
        ("large scores (around 100)", [6, 5], [2, 4], 1, 6, 100.0),
        ("a window entirely in the padding", [2, 6, 3], [5, 2, 1], 1, 6, 1.0),
    ]:
        scores = torch.randn(len(lengths), S, generator=g) * scale + (100.0 if scale == 100.0 else 0.0)
        cases.append(_local_case(f"{description}: lengths {lengths}, centre {centre}, radius {radius}",
                                 scores, lengths, centre, radius))
    return run_cases("local softmax", fn, cases, LOCAL_MISTAKES)


# --- additive score with coverage ---------------------------------------------------------------------
def _coverage(query, keys, coverage, W, U, w, v, *, inside=True, use_cov=True, tanh=True, transpose=True):
    Wq = query @ W.T if transpose else query @ W
    Uk = keys @ U.T if transpose else keys @ U
    hidden = Wq[:, None, :] + Uk  # (B, S, A)
    if use_cov and inside:
        hidden = hidden + coverage[:, :, None] * w
    out = (torch.tanh(hidden) if tanh else hidden) @ v  # (B, S)
    if use_cov and not inside:
        out = out + coverage * w.sum()
    return out


COVERAGE_MISTAKES = [
    Mistake("no coverage", "the coverage is missing: add w·c_j inside the tanh, next to W q and U k_j.",
            gives=lambda *a: _coverage(*a, use_cov=False)),
    Mistake("coverage outside tanh", "the coverage term goes *inside* the tanh, with W q and U k_j, so that it "
            "shapes the alignment network's hidden layer.", gives=lambda *a: _coverage(*a, inside=False)),
    Mistake("untransposed", "W is (A, Dq): W q for a batch of row vectors is `query @ W.T` (and U k is "
            "`keys @ U.T`).", gives=lambda *a: _coverage(*a, transpose=False)),
    Mistake("no tanh", "the tanh is missing: e_j = vᵀ tanh(W q + U k_j + w c_j).",
            gives=lambda *a: _coverage(*a, tanh=False)),
    Mistake("W and U swapped", "W projects the query and U the keys (you swapped them).",
            gives=lambda q, k, c, W, U, w, v: _coverage(q, k, c, U, W, w, v)),
]


def check_coverage_score(fn: Callable) -> CheckResult:
    """``coverage_score(query (B, Dq), keys (B, S, Dk), coverage (B, S), W (A, Dq), U (A, Dk), w (A,), v (A,))
    -> scores (B, S)``: e_j = vᵀ tanh(W q + U k_j + w c_j)."""
    cases = []
    for seed, (B, S, Dq, Dk, A) in enumerate([(1, 3, 2, 2, 2), (2, 5, 3, 4, 6), (3, 1, 4, 4, 2),
                                              (2, 4, 5, 3, 3), (4, 3, 6, 6, 6)], start=1):
        g = _generator(40 + seed)
        q, k = torch.randn(B, Dq, generator=g), torch.randn(B, S, Dk, generator=g)
        coverage = torch.rand(B, S, generator=g) * 2  # attention received so far: >= 0
        W, U = torch.randn(A, Dq, generator=g), torch.randn(A, Dk, generator=g)
        w, v = torch.randn(A, generator=g), torch.randn(A, generator=g)
        args = (q, k, coverage, W, U, w, v)
        cases.append(Case(f"B={B}, S={S}, Dq={Dq}, Dk={Dk}, A={A}", args, _coverage(*args),
                          hint="(query @ W.T)[:, None, :] + keys @ U.T + coverage[:, :, None] * w, then tanh, "
                               "then @ v."))
    return run_cases("coverage score", fn, cases, COVERAGE_MISTAKES)


# --- predict, then measure: uniform attention ----------------------------------------------------------
UNIFORM_RANGE = (0.75, 1.00)  # test WER of Chapter 2's 360-step additive model with uniform weights
UNIFORM_TOLERANCE = 0.12


class _UniformScore(Score):
    """Scores that are all zero: the masked softmax then weights every real letter 1/S."""

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return query.new_zeros(query.shape[0], query.shape[1], prepared.shape[1])  # (B, T, S)


@torch.no_grad()
def measure_uniform_attention(model: RNNAttentionSeq2Seq, pairs: list, src_vocab: Vocab,
                              tgt_vocab: Vocab) -> dict[str, float]:
    """Test WER and PER of ``model`` as trained (``trained_*``) and with uniform weights (``uniform_*``);
    the model itself is not changed (a copy gets the uniform score)."""
    uniform = copy.deepcopy(model)
    uniform.decoder.score = _UniformScore()
    trained, flat = evaluate_g2p(model, pairs, src_vocab, tgt_vocab), evaluate_g2p(uniform, pairs, src_vocab,
                                                                                   tgt_vocab)
    return {"trained_wer": trained.wer, "uniform_wer": flat.wer, "trained_per": trained.per,
            "uniform_per": flat.per}


def check_uniform_attention(predicted: float | None, measure: Callable[[], dict]) -> CheckResult:
    """Compare the reader's predicted WER (a fraction) of the uniform-attention model with ``measure()``."""
    name = "uniform attention"
    if predicted is None:
        return _finish(name, False, "not done yet: write your prediction into predicted_wer, then run the cell.")
    if not isinstance(predicted, (int, float)) or isinstance(predicted, bool):
        return _finish(name, False, f"predicted_wer must be a number (a fraction such as 0.6), got "
                       f"{type(predicted).__name__}.", "not a number")
    if 1.0 < predicted <= 100:
        return _finish(name, False, f"write the WER as a fraction: {predicted} looks like a percentage "
                       f"(use {predicted / 100:g}).", "percent")
    measured = measure()
    keys = {"trained_wer", "uniform_wer", "trained_per", "uniform_per"}
    if not isinstance(measured, dict) or not keys <= set(measured):
        return _finish(name, False, "run the measurement as given: measure_uniform_attention(...) returns a dict "
                       f"with {sorted(keys)}.", "measurement")
    low, high = UNIFORM_RANGE
    flat, trained = measured["uniform_wer"], measured["trained_wer"]
    if not (low <= flat <= high and 0.30 <= trained <= 0.65 and flat > trained):
        return _finish(name, False, f"the measurement (uniform WER {100 * flat:.1f}%) is not what the chapter's "
                       f"trained additive model gives (expected {100 * low:.1f}%-{100 * high:.1f}%): run it on "
                       "`attn`, as given.", "measurement")
    print(f"   test WER, trained weights: {100 * trained:.1f}% (expected 30.0%–65.0%)")
    print(f"   test WER, uniform weights: {100 * flat:.1f}% (expected {100 * low:.1f}%–{100 * high:.1f}%)")
    meaning = ("an average of every letter is an input the trained decoder never saw, and it cannot tell "
               "which letter comes next: it does worse than the model that never had attention, because "
               "that model was trained to work from its one summary C.")
    if abs(predicted - flat) <= UNIFORM_TOLERANCE:
        return _finish(name, True, f"your prediction is within {UNIFORM_TOLERANCE:.0%} of the measurement: "
                       + meaning)
    if predicted < flat:
        return _finish(name, False, "you expected the model to cope better than it does: " + meaning,
                       "too optimistic")
    return _finish(name, False, "you expected even more errors: some short words still come out right. "
                   + meaning, "too pessimistic")


EXERCISES = {
    "local_softmax": check_local_softmax,
    "coverage_score": check_coverage_score,
    "luong_step": check_luong_step,
}
# ``check_uniform_attention`` takes a prediction and a measurement, not a function, so the CLI
# (``python -m attnbook.exercises ch02 answers.py``) does not list it.
