"""Checkers for Chapter 2 (Bahdanau attention, and Luong's variant).

Expected answers come from the book's library (``attnbook.layers.masks``) or from the formulas
written out below; each checker lists the known mistakes it can name. The chapter's exercises
are ``check_masked_softmax`` (the first: a masked softmax from exp, max and sum, stable for large
scores and all zeros on a row without real positions), ``check_local_p_attention`` (Luong's local-p attention: a predicted centre and a Gaussian
window), ``check_coverage_loss`` (See et al.'s coverage vector and loss), ``check_luong_step``
and the predict-then-measure ``check_trained_uniform_prediction`` (a three-way choice: a decoder
trained with uniform weights placed against the model without attention and the fixed band, read from the committed
``bahdanau_baselines.json``; the command line passes it the file's ``prediction_trained_uniform_wers``),
with ``check_uniform_attention`` as its second part (the page's trained model decoded with uniform
weights by ``measure_uniform_attention``; notebook only, it needs the trained models);
``check_uniform_prediction``,
``check_additive_score``, ``check_local_softmax`` and
``check_coverage_score`` are earlier editions' exercises, kept for their readers. ``EXERCISES`` maps the
notebook's function names to their checkers.
Legend: B batch, S source length, D hidden width, E input width, Dq query width, Dk key width,
A additive hidden width.
"""
from __future__ import annotations

import copy
import functools
import math
import os
import statistics
import traceback
from collections.abc import Callable

import torch
from torch import nn

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


def _overflow_zeroed(args, got) -> bool:
    """Large scores, and a row with real positions whose weights are all 0 (an overflow's NaN zeroed)."""
    scores, mask = args
    if not (isinstance(got, torch.Tensor) and got.shape == scores.shape) or _has_nan(got):
        return False
    return bool(scores.abs().max() > 50) and bool(((got.sum(-1) == 0) & mask.any(-1)).any())


def _max_over_padding(args, got) -> bool:
    """A row whose padding outscores its real positions by far, and whose real weights are all
    0 or NaN: the shift used a maximum that included the padding, so every real exp underflowed."""
    scores, mask = args
    if not (isinstance(got, torch.Tensor) and got.shape == scores.shape):
        return False
    real_top = scores.masked_fill(~mask, float("-inf")).amax(-1)  # (B,)
    pad_top = scores.masked_fill(mask, float("-inf")).amax(-1)  # (B,)
    rows = mask.any(-1) & (pad_top - real_top > 100)
    dead = (got.nan_to_num(0.0) == 0) | ~mask  # (B, S): real weights 0 or NaN
    return bool((rows & dead.all(-1)).any())


MASKED_SOFTMAX_MISTAKES = [
    Mistake("library softmax", "this exercise builds the softmax from torch.exp, a maximum and a sum: "
            "torch.softmax, F.softmax (and so nn.Softmax), Tensor.softmax, torch.special.softmax, "
            "their log_softmax forms and the library's masked_softmax are switched off while your "
            "function runs, and calling one stops it. Subtract each row's largest real score, "
            "exponentiate, and divide by the row's sum.",
            when=lambda args, got: isinstance(got, _LibrarySoftmaxUsed)),
    Mistake("max over padding", "your maximum includes padding: a large score on a padded position "
            "makes every real exp underflow to 0; subtract the largest real score (fill padding "
            "with -inf before taking the maximum).", when=_max_over_padding),
    Mistake("ignores mask", "padding got weight: set the scores of padding to -inf before the softmax.",
            gives=lambda s, m: torch.softmax(s, dim=-1)),
    Mistake("masked with zero", "padding got weight: a score of 0 still has exp(0) = 1; fill padding's scores "
            "with -inf, not 0, before the softmax.",
            gives=lambda s, m: torch.softmax(s.masked_fill(~m, 0.0), dim=-1)),
    Mistake("inverted mask", "your mask is inverted: True marks the real positions, the ones that keep their score.",
            gives=lambda s, m: _masked(s, ~m).nan_to_num(0.0)),
    Mistake("zeroed after softmax", "you zeroed padding after the softmax, so the real weights no longer sum "
            "to 1: mask the scores before it.", gives=lambda s, m: torch.softmax(s, dim=-1) * m),
    Mistake("wrong axis", "each row (one sequence) must sum to 1: take the softmax over the positions, dim=-1.",
            gives=lambda s, m: _masked(s, m, dim=0).nan_to_num(0.0)),
    Mistake("overflow", "your weights are NaN where the scores are large: exp overflows (float32 above about "
            "88), and inf / inf is NaN; subtract each row's largest real score before exp (torch.softmax "
            "does the same).",
            when=lambda args, got: _has_nan(got) and bool(args[1].any(-1).all())),
    Mistake("empty rows", "a row with no real position must get all-zero weights (not NaN, not uniform): "
            "fill the weights of padding with 0 after the softmax.", when=_empty_rows_not_zero),
    Mistake("overflow to zero", "a row with real positions got all-zero weights where the scores are large: "
            "exp overflowed to inf, inf / inf is NaN, and turning the NaN into 0 hid it; subtract each row's "
            "largest real score before exp.", when=_overflow_zeroed),
]


class _LibrarySoftmaxUsed:
    """What the reader's function "returns" when it called a library softmax (see below)."""

    def __init__(self, name: str, line: str) -> None:
        self.name, self.line = name, line

    def __repr__(self) -> str:
        return f"no weights: your function called {self.name}" + (f" ({self.line})" if self.line else "")


class _SoftmaxSwitchedOff(RuntimeError):
    pass


def _library_softmaxes() -> dict:
    """The ready-made softmaxes the exercise rules out, each with the name a verdict gives it."""
    import attnbook.layers.masks as masks
    F = nn.functional  # noqa: N806 - PyTorch's own name
    return {torch.softmax: "torch.softmax", F.softmax: "F.softmax (nn.Softmax calls it)",
            torch.special.softmax: "torch.special.softmax", torch.log_softmax: "torch.log_softmax",
            F.log_softmax: "F.log_softmax", torch.special.log_softmax: "torch.special.log_softmax",
            masks.masked_softmax: "the library's masked_softmax"}


def _without_library_softmax(fn: Callable) -> Callable:
    """``fn`` run with the library softmaxes switched off: torch.softmax, F.softmax (so
    nn.Softmax), torch.special.softmax, the log_softmax forms, the methods x.softmax and
    x.log_softmax, and attnbook's masked_softmax, wherever they are bound (torch, F,
    torch.special, attnbook.layers.masks, and the reader's own globals). Calling one raises inside
    ``fn``; the wrapper turns that into a ``_LibrarySoftmaxUsed`` answer, which the mistake
    "library softmax" names. Everything is put back in ``finally``, so the checker's own
    expected answers and the rest of the page are unaffected."""
    if not callable(fn):
        return fn
    import attnbook.layers.masks as masks

    def switched_off(label):
        def refuse(*_, **__):
            raise _SoftmaxSwitchedOff(label)
        return refuse

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        banned = _library_softmaxes()
        spaces = [vars(torch), vars(nn.functional), vars(torch.special), vars(masks),
                  getattr(fn, "__globals__", {})]
        saved = [(space, name, value) for space in spaces for name, value in list(space.items())
                 if any(value is b for b in banned)]
        methods = {name: vars(torch.Tensor).get(name) for name in ("softmax", "log_softmax")}
        for space, name, value in saved:
            space[name] = switched_off(next(label for b, label in banned.items() if value is b))
        for name in methods:
            setattr(torch.Tensor, name, switched_off(f"Tensor.{name}"))
        try:
            return fn(*args, **kwargs)
        except _SoftmaxSwitchedOff as err:
            torch_dir = os.path.dirname(torch.__file__)
            frames = [f for f in traceback.extract_tb(err.__traceback__)
                      if f.filename != __file__ and not f.filename.startswith(torch_dir)]
            line = (f"at line {frames[-1].lineno}" + (f": {frames[-1].line}" if frames[-1].line else "")
                    if frames else "")
            return _LibrarySoftmaxUsed(str(err), line)
        finally:
            for space, name, value in saved:
                space[name] = value
            for name, value in methods.items():
                if value is None:
                    delattr(torch.Tensor, name)
                else:
                    setattr(torch.Tensor, name, value)

    return wrapped


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
    scores, mask = torch.tensor([[0.0, 1.0, 200.0]]), torch.tensor([[True, True, False]])
    cases.append(Case("a large score (200) on a padding position", (scores, mask),
                      _library_masked_softmax(scores, mask),
                      hint="shift by the largest real score; padding's score must not count."))
    return run_cases("masked softmax", _without_library_softmax(fn), cases, MASKED_SOFTMAX_MISTAKES)


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
           dim=-1, tanh=True, carry="h", joined="new", mean_pool=False, by_length=False, sigmoid=False,
           relu=False, swap=False, cosine=False, log_weights=False):
    new_hidden = cell(x, hidden)  # (B, D): h_t
    q = new_hidden if query == "new" else hidden
    if cosine:  # the cosine of the angle: both sides normalised to length 1 first
        scores = (nn.functional.normalize(memory, dim=-1) @ nn.functional.normalize(q, dim=-1)[:, :, None])[..., 0]
    else:
        scores = (memory @ q[:, :, None])[..., 0]  # (B, S)
    if scale:  # True: by sqrt(D); "S": by sqrt of the padded source length
        scores = scores / math.sqrt(memory.shape[-1] if scale is True else memory.shape[-2])
    if by_length:  # divided by each sequence's real length
        scores = scores / src_tokens.sum(-1, keepdim=True).clamp(min=1)
    if mean_pool:
        scores = torch.zeros_like(scores)  # every real position weighted alike
    if sigmoid:  # each weight squashed on its own: no softmax, so the weights need not sum to 1
        weights = torch.sigmoid(scores).masked_fill(~src_tokens, 0.0)
    elif masked == "after":  # padding zeroed after a softmax over every position, not renormalised
        weights = torch.softmax(scores, dim=dim) * src_tokens
    elif masked == "zero":  # padding's scores set to 0, not -inf, before the softmax
        weights = torch.softmax(scores.masked_fill(~src_tokens, 0.0), dim=dim)
    elif masked:
        weights = _masked(scores, src_tokens, dim=dim).nan_to_num(0.0)  # (B, S)
    else:
        weights = torch.softmax(scores, dim=dim)
    if log_weights:  # log_softmax over the real letters, padding then set to 0
        weights = torch.log_softmax(scores.masked_fill(~src_tokens, float("-inf")), dim=-1)
        weights = weights.masked_fill(~src_tokens, 0.0)
    context = (weights[:, None, :] @ memory)[:, 0]  # (B, D)
    state = {"new": new_hidden, "old": hidden, "none": torch.zeros_like(hidden)}[joined]  # "none": c_t alone
    if tanh == "context":  # tanh on c_t alone, before W_c, and none outside
        context_in = torch.tanh(context)
        pair = torch.cat([context_in, state] if order == "ch" else [state, context_in], dim=-1)
        out = pair @ W_c.T
    else:
        pair = torch.cat([context, state] if order == "ch" else [state, context], dim=-1)  # (B, 2D)
        out = pair @ W_c.T
        out = torch.relu(out) if relu else torch.tanh(out) if tanh else out  # (B, D): h~_t
    carried = {"h": new_hidden, "tilde": out, "context": context, "old": hidden,
               "tanh_h": torch.tanh(new_hidden)}[carry]
    if swap:  # (new_hidden, h_tilde, weights): the first two outputs in the wrong order
        return carried, out, weights
    return out, carried, weights


def _inverted_mask(args, got) -> bool:
    """The weights of a mask used the wrong way round: zero on every real letter, and NaN on a row
    with no padding (all its scores -inf) or weight on the padding."""
    weights, real = got[2], args[5]
    if not isinstance(weights, torch.Tensor) or weights.shape != real.shape:
        return False
    zero_on_real = bool((weights.nan_to_num(0.0)[real] == 0).all())
    full = weights[real.all(-1)]  # rows with no padding: all -inf under an inverted mask
    nan_or_empty_full = bool(full.isnan().any()) or bool((full.nan_to_num(0.0).sum(-1) == 0).any())
    return zero_on_real and (nan_or_empty_full or bool((weights[~real].nan_to_num(0.0) > 0).any()))


def _rows_short_of_one(args, got) -> bool:
    """Weights proportional to the right ones on every row, zero on padding, but some row's sum
    well below 1: an epsilon in the softmax's denominator that is not small against the sum."""
    if not (isinstance(got, tuple) and len(got) == 3 and isinstance(got[2], torch.Tensor)):
        return False
    with torch.no_grad():
        right = _luong(*args)[2]
    weights = got[2]
    if weights.shape != right.shape or bool(weights.isnan().any()):
        return False
    sums = weights.sum(-1, keepdim=True)
    proportional = torch.allclose(weights, right * sums, atol=1e-5, rtol=1e-4)
    return proportional and bool((sums < 1 - 2e-3).any())


LUONG_MISTAKES = [
    Mistake("inverted mask", "your mask is the wrong way round: src_tokens is True at the *real* letters, so "
            "fill the scores where it is False (masked_fill(~src_tokens, float('-inf'))). Filled where it is "
            "True, every real letter gets -inf: a row with no padding is all -inf and its softmax is NaN, "
            "and the other rows put all their weight on padding.", when=_inverted_mask),
    Mistake("attends with previous hidden", "you attended with the previous hidden state h_{t-1}, as Bahdanau "
            "does; Luong first runs the GRU step and attends with the new h_t.",
            gives=lambda *a: _luong(*a, query="old")),
    Mistake("scaled", "Luong's dot score is unscaled, h_tᵀ h̄_s: do not divide by √Hd here.",
            gives=lambda *a: _luong(*a, scale=True)),
    Mistake("scaled by source length", "you divided the scores by √S, the padded source length: Luong's dot "
            "score is h_tᵀ h̄_s as it stands (and S counts padding, so it would not even be the word's length).",
            gives=lambda *a: _luong(*a, scale="S")),
    Mistake("concat order", "concatenate [c_t; h_t], context first, as W_c expects.",
            gives=lambda *a: _luong(*a, order="hc")),
    Mistake("ignores mask", "padding got weight: mask the scores of padding (src_tokens False) before the softmax.",
            gives=lambda *a: _luong(*a, masked=False)),
    Mistake("masked after softmax", "you zeroed padding after a softmax over every position, so the real "
            "weights no longer sum to 1: mask the scores (-inf at padding) before the softmax.",
            gives=lambda *a: _luong(*a, masked="after")),
    Mistake("wrong axis", "the weights of each sequence must sum to 1 over its source positions: softmax over dim=-1.",
            gives=lambda *a: _luong(*a, dim=0)),
    Mistake("no tanh", "h̃_t = tanh(W_c [c_t; h_t]): the tanh is missing.", gives=lambda *a: _luong(*a, tanh=False)),
    Mistake("relu instead of tanh", "your h̃_t uses ReLU: Luong's attentional state is tanh(W_c [c_t; h_t]), "
            "so it lies in (-1, 1) and keeps its negative values.", gives=lambda *a: _luong(*a, relu=True)),
    Mistake("outputs swapped", "your first two outputs are the wrong way round: return (h_tilde, new_hidden, "
            "weights), the attentional state h̃_t first and the GRU's new state h_t second.",
            gives=lambda *a: _luong(*a, swap=True)),
    Mistake("carries h tilde", "the GRU's state is h_t: return it as the new hidden state (h̃_t is what "
            "predicts the token).", gives=lambda *a: _luong(*a, carry="tilde")),
    Mistake("carries tanh of h", "you returned tanh(h_t) as the new hidden state: the GRU cell's output h_t "
            "goes back unchanged; the only tanh is the one in h̃_t = tanh(W_c [c_t; h_t]).",
            gives=lambda *a: _luong(*a, carry="tanh_h")),
    Mistake("carries context", "you returned the context c_t as the new hidden state: the GRU's state is "
            "h_t; c_t is recomputed at every step.", gives=lambda *a: _luong(*a, carry="context")),
    Mistake("carries previous hidden", "you returned the previous state h_{t-1} (the `hidden` you were "
            "given) as the new hidden state, so the recurrence never moves on: return h_t, the GRU "
            "cell's output this step.", gives=lambda *a: _luong(*a, carry="old")),
    Mistake("divided by length", "your scores are divided by the source length: Luong's dot score is "
            "h_tᵀ h̄_s as it stands, with no division by the number of letters (or by anything else).",
            gives=lambda *a: _luong(*a, by_length=True)),
    Mistake("joins previous hidden", "you attended with h_t but joined the context with the previous state "
            "h_{t-1}: the attentional state is tanh(W_c [c_t; h_t]), both from this step.",
            gives=lambda *a: _luong(*a, joined="old")),
    Mistake("sigmoid weights", "your weights come from a sigmoid of each score on its own, so they do not "
            "sum to 1 and each ignores the other letters' scores: a = softmax(e) over the real source "
            "positions (padding's scores -inf first).", gives=lambda *a: _luong(*a, sigmoid=True)),
    Mistake("h tilde without h_t", "your h̃_t is built from the context c_t alone: it is tanh(W_c [c_t; h_t]), "
            "the context joined with this step's state h_t (W_c is (Hd, 2 Hd) and multiplies both).",
            gives=lambda *a: _luong(*a, joined="none")),
    Mistake("mean-pooled context", "your context is the plain average of the real source states: the "
            "weights must come from the scores h_tᵀ h̄_s, not be equal.",
            gives=lambda *a: _luong(*a, mean_pool=True)),
    Mistake("masked with zero", "you set the padding's scores to 0 before the softmax: exp(0) = 1, so padding "
            "still gets weight. Masked scores must be -inf (masked_fill(~mask, float('-inf'))).",
            gives=lambda *a: _luong(*a, masked="zero")),
    Mistake("epsilon not small", "on some rows your weights sum to less than 1, though they are in the right "
            "proportions: the epsilon in your denominator, sum(exp) + eps, is not small against the sum. That "
            "happens when the maximum you subtract is taken over the padding too, so the real letters' exp "
            "values can all be tiny. Take the maximum over the real letters only, or fill the padding's scores "
            "with -inf and call torch.softmax.", when=_rows_short_of_one),
    Mistake("tanh on the context only", "your tanh sits on c_t alone, before W_c: h̃_t = tanh(W_c [c_t; h_t]), "
            "one tanh over the whole product, after W_c multiplies the joined vector.",
            gives=lambda *a: _luong(*a, tanh="context")),
    Mistake("log-softmax weights", "your weights are log-probabilities (log_softmax): they are negative "
            "and do not sum to 1, so the context is not an average of the states. The weights are "
            "softmax(e) over the real letters.", gives=lambda *a: _luong(*a, log_weights=True)),
    Mistake("cosine score", "you normalised h_t and h̄_s to length 1, a cosine score: Luong's dot score is "
            "the plain dot product h_tᵀ h̄_s, so a state's length changes how sharp the weights are.",
            gives=lambda *a: _luong(*a, cosine=True)),
]


def check_luong_step(fn: Callable) -> CheckResult:
    """``luong_step(cell, W_c (Hd, 2 Hd), x (B, E), hidden (B, Hd), memory (B, S, Hd),
    src_tokens (B, S)) -> (h_tilde (B, Hd), new_hidden (B, Hd), weights (B, S))``: one step of a Luong decoder."""
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
            hint="compare each part with the formulas in turn: the state that scores the source (before or "
                 "after the recurrent step), the weights (a softmax over the real positions only, summing "
                 "to 1), the context, then which of the three outputs goes back into the cell next time.",
            # an epsilon added to the softmax's denominator for safety (up to 1e-3) is accepted
            atol=2e-3, rtol=2e-3,
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
                hint="which positions may a row attend to? Both conditions at once, and the softmax must only "
                     "see those.")


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
                          hint="coverage is one number per letter; the alignment network needs it as A numbers, "
                               "next to the projections of the query and of each key."))
    return run_cases("coverage score", fn, cases, COVERAGE_MISTAKES)


# --- Luong's local-p attention (predicted centre, Gaussian window) -----------------------------------
def _local_p(scores, lengths, query, W_p, v_p, sigma, *, span="L-1", use_lengths=True, squared=True,
             two=True, renorm=False, rounded=False, masked=True, transpose=True, tanh=True, inclusive=False,
             one_sided=False, density=False, one_based=False, absolute=False, window_inside=False,
             clamp=False, sigmoid=True, window_norm=None):
    S = scores.shape[-1]
    Wq = query @ W_p.T if transpose else query @ W_p  # (B, A)
    hidden = torch.tanh(Wq) if tanh is True else Wq
    gate = torch.sigmoid(torch.tanh(hidden @ v_p) if tanh == "after" else hidden @ v_p)  # (B,)
    if not sigmoid:  # v_pᵀ tanh(W_p q) used as it is: any real number, not a fraction in (0, 1)
        gate = hidden @ v_p
    L = lengths.to(scores.dtype) if use_lengths else torch.full_like(gate, float(S))
    centre = {"L-1": (L - 1) * gate, "L": L * gate, "L*g-0.5": L * gate - 0.5}[span]  # (B,)
    if clamp:  # kept half a letter inside the ends: [0.5, n - 1.5]
        centre = torch.minimum(centre.clamp(min=0.5), L - 1.5)
    if rounded:  # True or "round", "floor", "ceil"
        centre = getattr(torch, "round" if rounded is True else rounded)(centre)
    mask = token_mask(lengths, S) if masked else torch.ones_like(scores, dtype=torch.bool)
    if inclusive:
        mask = torch.arange(S)[None, :] <= lengths[:, None]  # one padding position too many
    align = _masked(scores, mask).nan_to_num(0.0)  # (B, S)
    if masked == "after":  # softmax over the padding too, then padding zeroed
        align = torch.softmax(scores, dim=-1).masked_fill(~token_mask(lengths, S), 0.0)
    if masked == "zero":  # padding's scores set to 0, not -inf, before the softmax
        align = torch.softmax(scores.masked_fill(~token_mask(lengths, S), 0.0), dim=-1)
    positions = torch.arange(S, dtype=scores.dtype) + (1 if one_based else 0)  # (S,)
    distance = positions[None, :] - centre[:, None]  # (B, S)
    spread = (2 if two else 1) * sigma ** 2 if squared else (2 if two else 1) * sigma
    window = torch.exp(-(distance.abs() if absolute else distance ** 2) / spread)
    if density:  # normalised as a probability density: divided by sigma * sqrt(2 pi)
        window = window / (sigma * math.sqrt(2 * math.pi))
    if one_sided:
        window = torch.where(distance < 0, torch.ones_like(window), window)  # letters before p undamped
    if window_norm:  # the Gaussian itself made to sum to 1 over the positions ("real" or "all")
        keep = token_mask(lengths, S) if window_norm == "real" else torch.ones_like(window, dtype=torch.bool)
        window = window * keep
        window = window / window.sum(-1, keepdim=True).clamp_min(1e-30)
    weights = align * window
    if window_inside:  # the Gaussian multiplied into the scores, inside the softmax
        weights = _masked(scores * window, mask).nan_to_num(0.0)
    if renorm:
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-30)
    return weights, centre


LOCAL_P_MISTAKES = [
    Mistake("tanh after v_p", "your tanh sits after v_p, on the scalar: local-p's centre is "
            "(n - 1)·sigmoid(v_pᵀ tanh(W_p h_t)), the tanh on the vector W_p h_t, before v_p.",
            gives=lambda *a: _local_p(*a, tanh="after")),
    Mistake("padded width", "your centre uses the padded width S for every row: p = (n - 1)·sigmoid(·) with n "
            "the row's own length, so that the centre lies on the word's letters.",
            gives=lambda *a: _local_p(*a, use_lengths=False)),
    Mistake("S in place of lengths", "you used the padded width S in place of each row's length n, "
            "for the centre and for the real letters: S counts the padding too. The centre is "
            "(n - 1)·sigmoid(·) and the alignment softmax runs over j < n, both with the row's own "
            "length from `lengths`.", gives=lambda *a: _local_p(*a, use_lengths=False, masked=False)),
    Mistake("L instead of L-1", "with 0-based positions 0..n-1 (n letters) the centre is (n - 1)·sigmoid(·), not "
            "n·sigmoid(·): n·sigmoid can land after the last letter.", gives=lambda *a: _local_p(*a, span="L")),
    Mistake("ignores lengths", "padding got weight: the alignment softmax runs over the real letters only "
            "(the first `length` positions of each row).", gives=lambda *a: _local_p(*a, masked=False)),
    Mistake("mask off by one", "the first padding position got weight: positions count from 0, so the real "
            "letters are j < length, not j <= length.", gives=lambda *a: _local_p(*a, inclusive=True)),
    Mistake("one-sided window", "only the letters after the centre are damped: the Gaussian depends on "
            "(j - p)², so it falls off on both sides of p.", gives=lambda *a: _local_p(*a, one_sided=True)),
    Mistake("absolute distance", "your window uses |j - p| where the Gaussian has (j - p)²: "
            "exp(-(j - p)² / (2σ²)) falls off with the squared distance, so it is flat near p and "
            "steep further out.", gives=lambda *a: _local_p(*a, absolute=True)),
    Mistake("renormalised", "you renormalised after the Gaussian, so each row sums to 1 (adding the log of "
            "the Gaussian, -(j - p)² / (2σ²), to the scores inside the softmax does exactly that); Luong et "
            "al. do not: the Gaussian factor multiplies the softmax weights and is left as it is.",
            gives=lambda *a: _local_p(*a, renorm=True)),
    *[Mistake("rounded centre", "you rounded the centre to a whole position (with round, floor or ceil): "
              "p_t stays real-valued, otherwise no gradient reaches W_p and v_p (that rounding is local-m's "
              "fixed centre, not local-p).", gives=lambda *a, how=how: _local_p(*a, rounded=how))
      for how in ("round", "floor", "ceil")],
    Mistake("masked with zero", "you set the padding's scores to 0 before the softmax: exp(0) = 1, so padding "
            "still takes weight from the real letters. Masked scores must be -inf "
            "(masked_fill(~mask, float('-inf'))).", gives=lambda *a: _local_p(*a, masked="zero")),
    Mistake("window inside the softmax", "you multiplied the scores by the Gaussian and then took the "
            "softmax, softmax(e·window): that only shrinks far letters' scores towards 0 (exp(0) = 1, not 0) "
            "and the weights still sum to 1. Luong et al. take the masked softmax of the scores first, then "
            "multiply the weights by the Gaussian.", gives=lambda *a: _local_p(*a, window_inside=True)),
    Mistake("padding zeroed after softmax", "your softmax ran over the padding too and you zeroed the "
            "padding afterwards, so the real letters' weights are too small: set the padding's scores to "
            "-inf before the softmax.", gives=lambda *a: _local_p(*a, masked="after")),
    Mistake("Gaussian density", "you divided the Gaussian by σ√(2π), as for a probability density: "
            "Luong et al.'s factor is exp(-(j - p)² / (2σ²)) alone, 1 at the centre.",
            gives=lambda *a: _local_p(*a, density=True)),
    *[Mistake("Gaussian normalised over positions", "you normalised the Gaussian to sum to 1 over the "
              "positions before multiplying: Luong et al.'s factor is exp(-(j - p)² / (2σ²)) as it is, 1 at "
              "the centre, so a letter at the centre keeps its whole softmax weight.",
              gives=lambda *a, over=over: _local_p(*a, window_norm=over))
      for over in ("real", "all")],
    Mistake("no factor 2", "the Gaussian is exp(-(j - p)² / (2σ²)): the 2 is missing.",
            gives=lambda *a: _local_p(*a, two=False)),
    Mistake("sigma not squared", "the Gaussian divides by 2σ², the variance, not by 2σ.",
            gives=lambda *a: _local_p(*a, squared=False)),
    *[Mistake("sigma ignored", "your window ignores the `sigma` argument (a fixed width, or none): the "
              "Gaussian is exp(-(j - p)² / (2σ²)) with the σ passed in, which changes from call to call.",
              gives=lambda *a, width=width: _local_p(*a[:5], width)) for width in (1.0, 1e9)],
    Mistake("untransposed", "W_p is (A, Dq): W_p q for a batch of row vectors is `query @ W_p.T`.",
            gives=lambda *a: _local_p(*a, transpose=False)),
    Mistake("no sigmoid", "your centre is (n - 1)·v_pᵀ tanh(W_p q), without the sigmoid: that can be "
            "negative or far past the last letter. The sigmoid turns it into a fraction in (0, 1) of the "
            "way along the word: p = (n - 1)·sigmoid(v_pᵀ tanh(W_p q)).",
            gives=lambda *a: _local_p(*a, sigmoid=False)),
    Mistake("no tanh", "the centre is (n - 1)·sigmoid(v_pᵀ tanh(W_p q)): the tanh is missing.",
            gives=lambda *a: _local_p(*a, tanh=False)),
    Mistake("1-based positions", "your positions count from 1: with the centre p in 0-based positions "
            "(0..n-1), the distance is j - p for j = 0, 1, ..., n-1.",
            gives=lambda *a: _local_p(*a, one_based=True)),
    Mistake("paper's centre shifted by half", "your centre is n·sigmoid(·) - 0.5, the paper's S·sigmoid(·) "
            "moved half a letter: it runs from -0.5 to n - 0.5, so it can sit outside the word. This "
            "exercise counts from 0 and keeps the centre on the letters: p = (n - 1)·sigmoid(·), from 0 "
            "(the first letter) to n - 1 (the last).", gives=lambda *a: _local_p(*a, span="L*g-0.5")),
    Mistake("clamped centre", "you clamped the centre into [0.5, n - 1.5]: p = (n - 1)·sigmoid(·) already "
            "lies between the first letter (0) and the last (n - 1), and a clamp moves every centre near "
            "an end (and a one-letter word's centre off its only letter). Use p as it is.",
            gives=lambda *a: _local_p(*a, clamp=True)),
]


def check_local_p_attention(fn: Callable) -> CheckResult:
    """``local_p_attention(scores (B, S), lengths (B,), query (B, Dq), W_p (A, Dq), v_p (A,), sigma)
    -> (weights (B, S), centre (B,))``: Luong's local-p attention, centre p = (n - 1)·sigmoid(v_pᵀ tanh(W_p q)) (n a row's length),
    weights = masked softmax of the scores × exp(-(j - p)² / (2σ²)), not renormalised."""
    cases = []
    for seed, (lengths, S, Dq, A, sigma, scale) in enumerate([
        ([5], 5, 3, 3, 1.0, 1.0), ([7, 3, 5], 7, 4, 5, 1.5, 2.0), ([4, 6], 6, 3, 2, 2.5, 1.0),
        ([1, 8, 2, 5], 8, 5, 4, 0.7, 1.0), ([6, 4], 6, 3, 3, 1.2, 100.0),
    ], start=1):
        g = _generator(70 + seed)
        scores = torch.randn(len(lengths), S, generator=g) * scale + (100.0 if scale == 100.0 else 0.0)
        query = torch.randn(len(lengths), Dq, generator=g)
        W_p, v_p = torch.randn(A, Dq, generator=g), 2.0 * torch.randn(A, generator=g)
        args = (scores, torch.tensor(lengths), query, W_p, v_p, sigma)
        cases.append(Case(
            f"lengths {lengths} (S={S}), Dq={Dq}, A={A}, sigma={sigma}"
            + (", large scores" if scale == 100.0 else ""), args, _local_p(*args),
            hint="two parts, computed separately and then multiplied: where the window is (a real number "
                 "between the first and the last letter of each row) and how well each letter matches.",
        ))
    return run_cases("local-p attention", fn, cases, LOCAL_P_MISTAKES)


# --- coverage vector and coverage loss (See et al., 2017) --------------------------------------------
def _cov_loss(weights, tgt_mask, *, exclusive=True, dim=1, op="min", sign=1.0, per_position=True,
              mask_steps=True, reduce="steps", zero_padded=False, rolled=False, others=False,
              returned_inclusive=False, source="earlier", clamp=False):
    if zero_padded:  # padded steps' weights zeroed before the coverage is accumulated
        weights = weights * tgt_mask[..., None].to(weights.dtype)
    if source == "batch":  # accumulated over the batch axis (dim 0), not the steps
        coverage = weights.cumsum(dim=0) - weights
    elif source == "previous":  # the previous step's weights only, not all earlier steps
        coverage = torch.cat([torch.zeros_like(weights[:, :1]), weights[:, :-1]], dim=1)
    elif source == "mean":  # the mean of the earlier steps' weights, not their sum
        steps_before = torch.arange(weights.shape[1], dtype=weights.dtype).clamp(min=1)
        coverage = (weights.cumsum(dim=1) - weights) / steps_before[None, :, None]
    elif source == "later":  # the steps after this one instead of those before it
        coverage = weights.sum(dim=1, keepdim=True) - weights.cumsum(dim=1)
    elif others:  # every other step's weights, the later ones included: total minus this step
        coverage = weights.sum(dim=1, keepdim=True) - weights
    elif rolled:  # shifted one step with torch.roll: the last step's weights wrap round to step 0
        coverage = torch.roll(weights, 1, dims=1).cumsum(dim=1)
    elif dim == 1:
        coverage = weights.cumsum(dim=1)
        if exclusive:
            coverage = coverage - weights  # attention received *before* this step
    else:
        coverage = weights.cumsum(dim=-1) - (weights if exclusive else 0)
    if not per_position:
        coverage = coverage.sum(-1, keepdim=True).expand_as(weights)
    if clamp:  # capped at 1, as if it were a probability
        coverage = coverage.clamp(max=1.0)
    coverage = sign * coverage
    ops = {"min": torch.minimum, "max": torch.maximum, "product": torch.mul}
    terms = ops[op](weights, coverage)
    per_step = terms.sum(-1)  # (B, T)
    real = tgt_mask.to(weights.dtype) if mask_steps else torch.ones_like(per_step)
    total = (per_step * real).sum()
    if reduce == "steps":
        loss = total / real.sum()
    elif reduce == "padded_over_real":  # padded steps summed too, divided by the N real steps
        loss = (per_step.sum()) / tgt_mask.to(weights.dtype).sum()
    elif reduce == "steps_positions":  # divided by N * S
        loss = total / (real.sum() * weights.shape[-1])
    elif reduce == "all_steps":  # divided by B * T, the padded steps counted in the denominator
        loss = total / (weights.shape[0] * weights.shape[1])
    elif reduce == "sequence_means":  # mean over the batch of each sequence's mean over its steps
        loss = ((per_step * real).sum(1) / real.sum(1)).mean()
    elif reduce == "n_plus_one":  # divided by N + 1
        loss = total / (real.sum() + 1)
    elif reduce == "no_first":  # divided by N less each sequence's first step (its term is always 0)
        loss = total / (real.sum() - real[:, 0].sum())
    elif reduce == "sum":  # the real steps' terms summed, not averaged
        loss = total
    else:
        loss = total / weights.shape[0]
    if returned_inclusive:  # the loss from the right coverage, the coverage returned with this step's own
        coverage = coverage + weights
    return coverage, loss


COVERAGE_LOSS_MISTAKES = [
    Mistake("cumsum over the batch", "you accumulated over axis 0, the batch: coverage adds up one "
            "sequence's own earlier decoder steps, axis 1 (weights.cumsum(dim=1) - weights), never another "
            "sequence's weights.", gives=lambda a, m: _cov_loss(a, m, source="batch")),
    Mistake("previous step only", "your coverage holds only the previous step's weights: it is the sum of "
            "*all* earlier steps' weights, Σ_{t' < t} a_{t'} (weights.cumsum(dim=1) - weights).",
            gives=lambda a, m: _cov_loss(a, m, source="previous")),
    Mistake("mean of earlier steps", "your coverage is the *mean* of the earlier steps' weights: it is "
            "their sum, Σ_{t' < t} a_{t'} (weights.cumsum(dim=1) - weights), so a letter read at two "
            "earlier steps has coverage near 2, not near 1.",
            gives=lambda a, m: _cov_loss(a, m, source="mean")),
    Mistake("later steps only", "your coverage sums the steps *after* this one: it is what a letter received "
            "at the steps before this one (weights.cumsum(dim=1) - weights), 0 at the first step.",
            gives=lambda a, m: _cov_loss(a, m, source="later")),
    Mistake("includes current step", "your coverage already includes this step's own weights (a plain "
            "cumulative sum), so min(a, c) is just a and the loss is 1 per step: coverage is the "
            "attention received at the steps *before* this one.",
            gives=lambda a, m: _cov_loss(a, m, exclusive=False)),
    Mistake("coverage includes current step", "your loss is right but the coverage you return is a plain "
            "(inclusive) cumulative sum: it already holds this step's own weights. Coverage at step t is the "
            "attention received at the steps *before* t (cumsum minus this step's weights), so it is 0 at "
            "the first step.", gives=lambda a, m: _cov_loss(a, m, returned_inclusive=True)),
    Mistake("cumsum over positions", "you accumulated over the input positions (the last axis): coverage "
            "adds up over the decoder steps, axis 1, for each letter separately.",
            gives=lambda a, m: _cov_loss(a, m, dim=-1)),
    Mistake("summed over positions", "your coverage is one number per step (summed over the letters): it "
            "must stay one number per letter, c_j, so that each letter is penalised for itself.",
            gives=lambda a, m: _cov_loss(a, m, per_position=False)),
    Mistake("coverage subtracted", "coverage is a sum of past weights, so it is never negative: add the "
            "earlier steps' weights, do not subtract them.", gives=lambda a, m: _cov_loss(a, m, sign=-1.0)),
    Mistake("max instead of min", "the penalty is min(a_j, c_j): only attention paid *again* to a letter "
            "already covered counts; max would penalise every first look.",
            gives=lambda a, m: _cov_loss(a, m, op="max")),
    Mistake("product instead of min", "you multiplied a_j by c_j: the penalty is min(a_j, c_j), the part of "
            "this step's look that repeats attention the letter already had, not their product.",
            gives=lambda a, m: _cov_loss(a, m, op="product")),
    Mistake("counts padded steps", "the padded output steps count in your loss: sum over the real steps "
            "only (tgt_mask) and divide by their number.", gives=lambda a, m: _cov_loss(a, m, mask_steps=False)),
    Mistake("includes later steps", "your coverage counts the attention of every other step, the later "
            "ones too (the total minus this step): coverage is what a letter received at the steps "
            "*before* this one, so it is 0 at the first step. Accumulate with cumsum along the steps and "
            "subtract this step's own weights.", gives=lambda a, m: _cov_loss(a, m, others=True)),
    Mistake("padded steps over N", "your loss sums the padded steps too and then divides by the number N of "
            "real ones: multiply each step's term by tgt_mask before summing, so the numerator holds "
            "the same N steps as the denominator.",
            gives=lambda a, m: _cov_loss(a, m, mask_steps=False, reduce="padded_over_real")),
    Mistake("not averaged", "your loss is the sum over the real steps, not their mean: divide by N, the "
            "number of real output steps (the True entries of tgt_mask).",
            gives=lambda a, m: _cov_loss(a, m, reduce="sum")),
    Mistake("divided by N + 1", "you divided by N + 1: the loss is the mean over the N real output steps "
            "(the True entries of tgt_mask), so divide by N.",
            gives=lambda a, m: _cov_loss(a, m, reduce="n_plus_one")),
    Mistake("mean over batch", "you divided by the batch size: the loss is the mean over the real output "
            "steps (the number of True entries of tgt_mask).",
            gives=lambda a, m: _cov_loss(a, m, reduce="batch")),
    Mistake("divided by N times S", "you divided by the number of real steps times the number of letters: "
            "the loss sums over the letters j and averages over the real steps only (divide by N).",
            gives=lambda a, m: _cov_loss(a, m, reduce="steps_positions")),
    Mistake("mean of sequence means", "you averaged each sequence over its own steps, then averaged the "
            "sequences: that weights a short sequence's steps more. Sum over all real steps of the batch "
            "and divide by their total number N.",
            gives=lambda a, m: _cov_loss(a, m, reduce="sequence_means")),
    Mistake("divided by B times T", "you divided by B * T, every output step of the padded batch: the "
            "padded steps are not real steps, so divide by their number N (the True entries of tgt_mask).",
            gives=lambda a, m: _cov_loss(a, m, reduce="all_steps")),
    Mistake("torch.roll wraps round", "your coverage at the first step is not zero: torch.roll moves the last "
            "step's weights round to step 0. Shift without wrapping (cumsum minus the step's own weights, "
            "or pad a zero step in front and drop the last).",
            gives=lambda a, m: _cov_loss(a, m, rolled=True)),
    Mistake("padded steps zeroed in coverage", "your coverage differs at the padded steps: you zeroed "
            "their weights first. Return the coverage of all T steps from the weights as given; only the "
            "loss leaves the padded steps out.",
            gives=lambda a, m: _cov_loss(a, m, zero_padded=True)),
    Mistake("first steps left out of N", "you divided by N minus each sequence's first step (its term is "
            "always 0, since nothing came before it): the loss is the mean over *all* N real output steps, "
            "the first ones included (divide by tgt_mask.sum()).",
            gives=lambda a, m: _cov_loss(a, m, reduce="no_first")),
    Mistake("coverage clamped at 1", "you capped the coverage at 1: it is a plain sum of the earlier steps' "
            "weights, so a letter looked at fully twice has coverage 2, not a probability. Do not clamp it.",
            gives=lambda a, m: _cov_loss(a, m, clamp=True)),
]


def check_coverage_loss(fn: Callable) -> CheckResult:
    """``coverage_loss(weights (B, T, S), tgt_mask (B, T)) -> (coverage (B, T, S), loss scalar)``:
    coverage[b, t, j] = Σ_{t' < t} weights[b, t', j]; loss = mean over real steps of Σ_j min(a, c)."""
    two = torch.tensor([[[1.0, 0.0], [0.75, 0.25], [0.0, 1.0], [0.5, 0.5]],
                        [[0.5, 0.5], [0.5, 0.5], [0.2, 0.8], [0.3, 0.7]]])  # (2, 4, 2)
    # 6 real steps; B * T = 8, N + 1 = 7, N * S = 12, B = 2: every wrong divisor gives its own loss
    two_mask = torch.tensor([[True, True, True, True], [True, True, False, False]])
    cases = [Case(
        "B=2, T=4, S=2, real steps 4 and 2 (hand-checkable: the real steps' terms sum to 3.0, N = 6)",
        (two, two_mask), _cov_loss(two, two_mask),
        hint="coverage adds the earlier steps' weights letter by letter; the loss sums min(a, c) over the "
             "letters and the real steps, then divides by N, the number of real steps (6 here)."),
        Case(
        "B=1, T=3, S=2: looks at letter 1, then letter 1 again, then letter 2",
        (torch.tensor([[[1.0, 0.0], [0.75, 0.25], [0.0, 1.0]]]), torch.tensor([[True, True, True]])),
        (torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.75, 0.25]]]), torch.tensor(1.0 / 3.0)),
        hint="at each step, which earlier looks count, and how much of this step's look repeats them?")]
    for seed, (T_lengths, T, S) in enumerate([([4, 2, 3], 4, 5), ([1, 5], 5, 3), ([6, 6, 2, 4], 6, 1 + 3)],
                                             start=1):
        g = _generator(90 + seed)
        weights = torch.softmax(2.0 * torch.randn(len(T_lengths), T, S, generator=g), dim=-1)  # padded steps too
        tgt_mask = token_mask(torch.tensor(T_lengths), T)
        args = (weights, tgt_mask)
        cases.append(Case(f"B={len(T_lengths)}, T={T}, S={S}, real steps {T_lengths}", args, _cov_loss(*args),
                          hint="coverage runs along the decoder steps for each letter; the loss averages over "
                               "the real steps only."))
    return run_cases("coverage loss", fn, cases, COVERAGE_LOSS_MISTAKES)


# --- predict, then measure: uniform attention ----------------------------------------------------------
UNIFORM_RANGE = (0.40, 1.00)  # plausible test WERs of the 360-step additive model with uniform weights


class _UniformScore(Score):
    """Scores that are all zero: the masked softmax then weights every real letter 1/S."""

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return query.new_zeros(query.shape[0], query.shape[1], prepared.shape[1])  # (B, T, S)


@torch.no_grad()
def _copy_model(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy whose GRUs keep their weights in one block: on CUDA, a copied ``nn.GRU``'s weights
    are separate tensors, and cuDNN warns at every call until ``flatten_parameters`` joins them."""
    copied = copy.deepcopy(model)
    for module in copied.modules():
        if isinstance(module, torch.nn.RNNBase):
            module.flatten_parameters()
    return copied


def measure_uniform_attention(model: RNNAttentionSeq2Seq, pairs: list, src_vocab: Vocab, tgt_vocab: Vocab,
                              baseline: torch.nn.Module | None = None, hard: bool = False) -> dict[str, float]:
    """Test WER and PER of ``model`` as trained (``trained_*``) and with uniform weights (``uniform_*``),
    and the WER of ``baseline`` (the model without attention, ``no_attention_wer``) on the same words;
    with ``hard``, also the WER of the trained model decoded with hard attention (``argmax_wer``, and
    ``sampled_wer`` with sampling seeded 0, the global generator left as it was). The model itself is
    not changed (copies get the uniform score and the hard weightings)."""
    uniform = _copy_model(model)
    uniform.decoder.score = _UniformScore()
    trained, flat = evaluate_g2p(model, pairs, src_vocab, tgt_vocab), evaluate_g2p(uniform, pairs, src_vocab,
                                                                                   tgt_vocab)
    out = {"trained_wer": trained.wer, "uniform_wer": flat.wer, "trained_per": trained.per,
           "uniform_per": flat.per}
    if baseline is not None:
        out["no_attention_wer"] = evaluate_g2p(baseline, pairs, src_vocab, tgt_vocab).wer
    if hard:
        for weighting in ("argmax", "sample"):
            copied = _copy_model(model)
            copied.decoder.weighting = weighting
            with torch.random.fork_rng():
                torch.manual_seed(0)
                out["argmax_wer" if weighting == "argmax" else "sampled_wer"] = evaluate_g2p(
                    copied, pairs, src_vocab, tgt_vocab).wer
    return out


UNIFORM_CHOICES = {  # the right letter differs from the trained-uniform exercise's (c) by design
    "a": "worse than both",
    "b": "close to the trained attention model",
    "c": "close to the model without attention",
}
NO_ATTENTION_RANGE = (0.50, 0.75)  # test WER of Chapter 2's 360-step model without attention


def _uniform_outcome(trained: float, no_attention: float, flat: float) -> str:
    """Which of the three choices the measurement is: worse than both, else the nearer of the two."""
    if flat > max(trained, no_attention):
        return "a"
    return "b" if abs(flat - trained) <= abs(flat - no_attention) else "c"


def check_uniform_attention(predicted: str | None, measure: Callable[[], dict]) -> CheckResult:
    """The reader's choice (``"a"``, ``"b"`` or ``"c"``, see ``UNIFORM_CHOICES``) for the WER of the
    uniform-attention model, compared with the outcome ``measure()`` gives."""
    name = "uniform attention"
    if predicted is None:
        return _finish(name, False, "not done yet: write your choice (\"a\", \"b\" or \"c\") into your prediction "
                       "variable (prediction_uniform_decode in the chapter), then run the cell.")
    if not isinstance(predicted, str) or predicted.strip().lower() not in UNIFORM_CHOICES:
        return _finish(name, False, f"prediction must be one of \"a\", \"b\", \"c\", got {predicted!r}.",
                       "not a choice")
    choice = predicted.strip().lower()
    measured = measure()
    keys = {"trained_wer", "uniform_wer", "no_attention_wer"}
    if not isinstance(measured, dict) or not keys <= set(measured):
        return _finish(name, False, "run the measurement as given: measure_uniform_attention(..., baseline=gru) "
                       f"returns a dict with {sorted(keys)}.", "measurement")
    low, high = UNIFORM_RANGE
    flat, trained, none = measured["uniform_wer"], measured["trained_wer"], measured["no_attention_wer"]
    if not (low <= flat <= high and 0.30 <= trained <= 0.65 and flat > trained
            and NO_ATTENTION_RANGE[0] <= none <= NO_ATTENTION_RANGE[1]):
        return _finish(name, False, f"the measurement (uniform WER {100 * flat:.1f}%) is not what the chapter's "
                       f"trained models give (expected {100 * low:.1f}%-{100 * high:.1f}%): run it on `attn`, "
                       "with baseline=gru, as given.", "measurement")
    print(f"   test WER, trained weights: {100 * trained:.1f}% (expected 30.0%–65.0%)")
    print(f"   test WER, no attention: {100 * none:.1f}% (expected {100 * NO_ATTENTION_RANGE[0]:.1f}%–"
          f"{100 * NO_ATTENTION_RANGE[1]:.1f}%)")
    print(f"   test WER, uniform weights: {100 * flat:.1f}% (expected {100 * low:.1f}%–{100 * high:.1f}%)")
    outcome = _uniform_outcome(trained, none, flat)
    verdict = f"the measurement is ({outcome}), {UNIFORM_CHOICES[outcome]}"
    meaning = {
        "a": ": the decoder was trained on contexts that each weight a few letters; a plain average of every "
             "letter is not one of those, so the trained weights, not merely access to every letter, are what "
             "it relies on. (Why it falls below the model without attention, a different network trained "
             "on its own summary, this measurement does not say.)",
        "c": ": the decoder reads a plain average about as well as Chapter 1's model reads its summary C.",
        "b": ": the choice of letters adds little here; an average of the encoder states carries the word.",
    }[outcome]
    if choice == outcome:
        return _finish(name, True, f"you chose ({choice}); {verdict}{meaning}")
    return _finish(name, False, f"you chose ({choice}), {UNIFORM_CHOICES[choice]}; {verdict}{meaning}",
                   "wrong choice")


# --- predict, then measure: uniform weights against hard attention (the chapter's edition) ---------
HARD_RANGES = {"argmax": (0.40, 0.80), "sampled": (0.55, 0.95)}  # the 360-step model decoded hard (§2.9)
UNIFORM_HARD_CHOICES = {
    "a": "no worse than hard argmax attention (each step reads only its best letter)",
    "b": "between hard argmax and hard sampled attention",
    "c": "worse than hard sampled attention (each step reads one letter drawn from the weights)",
}


def _uniform_hard_outcome(argmax: float, sampled: float, flat: float) -> str:
    """Which choice the measurement is: uniform at most argmax's WER (a), at most sampled's (b), else (c)."""
    return "a" if flat <= argmax else "b" if flat <= sampled else "c"


def check_uniform_prediction(measure: Callable[[], dict], prediction: str | None = None) -> CheckResult:
    """``measure() -> dict``: ``measure_uniform_attention(model, pairs, ..., hard=True)`` on the trained
    additive model; ``prediction`` (``"a"``, ``"b"`` or ``"c"``, see ``UNIFORM_HARD_CHOICES``), written
    before measuring (the command line passes the file's ``prediction_uniform_attention_wers`` or
    ``prediction``), is compared with the choice the measurement is."""
    name = "uniform attention"
    if prediction is None:
        return _finish(name, False, "not done yet: write your choice (\"a\", \"b\" or \"c\") into "
                       "prediction_uniform_attention_wers, then run the cell.")
    if not isinstance(prediction, str) or prediction.strip().lower() not in UNIFORM_HARD_CHOICES:
        return _finish(name, False, f"prediction must be one of \"a\", \"b\", \"c\", got {prediction!r}.",
                       "not a choice")
    choice = prediction.strip().lower()
    measured = measure()
    keys = {"trained_wer", "uniform_wer", "argmax_wer", "sampled_wer"}
    if not isinstance(measured, dict) or not keys <= set(measured):
        return _finish(name, False, "run the measurement as given: measure_uniform_attention(..., hard=True) "
                       f"returns a dict with {sorted(keys)}.", "measurement")
    flat, trained = measured["uniform_wer"], measured["trained_wer"]
    argmax, sampled = measured["argmax_wer"], measured["sampled_wer"]
    if abs(flat - trained) < 1e-9:
        return _finish(name, False, "the uniform WER equals the trained model's: the copy kept its trained "
                       "scores. Measure with measure_uniform_attention, which replaces them.", "measurement")
    rows = (("trained weights", trained, (0.30, 0.65)), ("hard, argmax", argmax, HARD_RANGES["argmax"]),
            ("hard, sampled", sampled, HARD_RANGES["sampled"]), ("uniform weights", flat, UNIFORM_RANGE))
    if not (all(low <= value <= high for _, value, (low, high) in rows) and trained < argmax < sampled):
        return _finish(name, False, f"the measurement (uniform WER {100 * flat:.1f}%, trained {100 * trained:.1f}%, "
                       f"argmax {100 * argmax:.1f}%, sampled {100 * sampled:.1f}%) is not what the chapter's "
                       "trained model gives: run it on `attn` (§2.6), as given.", "measurement")
    for label, value, (low, high) in rows:
        print(f"   test WER, {label}: {100 * value:.1f}% (expected {100 * low:.1f}%–{100 * high:.1f}%)")
    outcome = _uniform_hard_outcome(argmax, sampled, flat)
    verdict = f"the measurement is ({outcome}), {UNIFORM_HARD_CHOICES[outcome]}"
    meaning = {
        "c": ": reading every letter at once, as a plain average, does worse than reading one letter drawn "
             "from the trained weights. For this trained decoder, access to all letters is not what it "
             "relies on: which letters its weights pick is. (Why a random draw does better than the "
             "average, this measurement does not say; it does not count how often a draw is the "
             "argmax letter.)",
        "b": ": a uniform average lies between reading the best letter and reading a random draw.",
        "a": ": the choice of letters adds little here; an average of the encoder states carries the word.",
    }[outcome]
    if choice == outcome:
        return _finish(name, True, f"you chose ({choice}); {verdict}{meaning}")
    return _finish(name, False, f"you chose ({choice}), {UNIFORM_HARD_CHOICES[choice]}; {verdict}{meaning}",
                   "wrong choice")


# --- predict, then measure: a decoder *trained* with uniform weights (the chapter's edition) --------
TRAINED_UNIFORM_CHOICES = {
    "a": "as good as the fixed band or better (test WER at most 1 point above the band's, seed for seed: "
         "one fixed average of every letter serves as well as a context that moves along the word)",
    "b": "between the two (more than 1 point above the band's WER and more than 1 point below the model "
         "without attention's, seed for seed)",
    "c": "no better than the model without attention (test WER not more than 1 point below its, seed for "
         "seed)",
}
TRAINED_UNIFORM_TOLERANCE = 0.01  # one point of WER: the bound between the choices
TRAINED_RANGES = {"none": (0.45, 0.75), "uniform": (0.40, 0.90), "band": (0.40, 0.75)}  # 360-step test WERs (§2.6's recipe)


def baseline_wers(result: dict) -> dict[str, list[float]]:
    """Test WER of each seed, per model, from ``bahdanau_baselines.json`` (``load_result``):
    ``{"none": [...], "uniform": [...], "band": [...], "additive": [...]}``, seeds in order."""
    out: dict[str, list[float]] = {}
    for run in sorted(result["runs"], key=lambda r: r["seed"]):
        out.setdefault(run["score"], []).append(run["test_wer"])
    return out


def _seed_gaps(none: list[float], uniform: list[float]) -> list[float]:
    """Uniform minus no attention, seed by seed (both lists in seed order)."""
    return [u - n for u, n in zip(uniform, none)]


def _seed_choice(none: float, uniform: float, band: float) -> str:
    """The choice one seed's WERs make: (a) at most 1 point above the band, else (c) at most 1 point
    below no attention (or above it), else (b)."""
    tol = TRAINED_UNIFORM_TOLERANCE
    if uniform - band <= tol:
        return "a"
    return "c" if uniform - none >= -tol else "b"


def _trained_uniform_outcome(none: list[float], uniform: list[float], band: list[float]) -> str:
    """The choices the seeds allow, as a string ("c", "bc", ...): each seed's choice; where the seeds
    disagree they do not settle between their choices, and each is accepted."""
    return "".join(sorted({_seed_choice(n, u, b) for n, u, b in zip(none, uniform, band)}))


def committed_trained_uniform_wers() -> dict[str, list[float]]:
    """``baseline_wers`` of the committed ``bahdanau_baselines.json``: what the notebook's
    ``trained_uniform_wers`` returns, for an answers file that defines no such function."""
    from attnbook.results import load_result
    return baseline_wers(load_result("bahdanau_baselines.json"))


def check_trained_uniform_prediction(measure: Callable[[], dict] | None = None,
                                     prediction: str | None = None) -> CheckResult:
    """``prediction_trained_uniform_wers``: ``"a"``, ``"b"`` or ``"c"`` (see
    ``TRAINED_UNIFORM_CHOICES``), written before reading the measurement, compared with the choice
    the measurement is. ``measure() -> dict`` gives the test WERs of the models trained with §2.6's
    recipe, three seeds each: ``baseline_wers(load_result("bahdanau_baselines.json"))``; left out
    (None, as on the command line when the file defines no ``trained_uniform_wers``), the checker
    reads that committed file itself, so an answers file needs only the prediction variable."""
    name = "trained uniform attention"
    if measure is None:
        measure = committed_trained_uniform_wers
    if prediction is None:
        return _finish(name, False, "not done yet: write your choice (\"a\", \"b\" or \"c\") into "
                       "prediction_trained_uniform_wers, then run the cell.")
    choice = prediction.strip().strip("()").strip().lower() if isinstance(prediction, str) else None
    if choice not in TRAINED_UNIFORM_CHOICES:  # "c", " C " and "(c)" are all choice (c)
        return _finish(name, False, f"prediction must be one of \"a\", \"b\", \"c\", got {prediction!r}.",
                       "not a choice")
    measured = measure()
    if isinstance(measured, dict) and "uniform_wer" in measured:
        return _finish(name, False, "that is the decode-time swap (a trained decoder given uniform weights only "
                       "when it decodes); this exercise asks about a decoder trained with uniform weights from "
                       "the start: return baseline_wers(load_result(\"bahdanau_baselines.json\")).",
                       "decode-time swap")
    ok = isinstance(measured, dict) and all(
        isinstance(measured.get(k), list) and len(measured[k]) >= 2
        and all(isinstance(x, float) for x in measured[k]) for k in TRAINED_RANGES)
    if not ok:
        return _finish(name, False, "run the measurement as given: baseline_wers(load_result("
                       "\"bahdanau_baselines.json\")) returns test WERs per model, one per seed.", "measurement")
    none, uniform, band = measured["none"], measured["uniform"], measured["band"]
    if none == uniform or band == uniform:
        return _finish(name, False, "the two models' WERs are identical: the same model was read twice.",
                       "measurement")
    for label, key in (("no attention", "none"), ("fixed band", "band"),
                       ("uniform weights, trained", "uniform")):
        low, high = TRAINED_RANGES[key]
        if not all(low <= x <= high for x in measured[key]):
            return _finish(name, False, f"the {label} WERs {measured[key]} are not what the committed runs give "
                           f"(expected {100 * low:.1f}%-{100 * high:.1f}%): read bahdanau_baselines.json.",
                           "measurement")
        shown = ", ".join(f"{100 * x:.1f}%" for x in measured[key])
        print(f"   test WER, {label}, by seed: {shown} (expected {100 * low:.1f}%–{100 * high:.1f}% each); "
              f"mean {100 * statistics.mean(measured[key]):.1f}%")
    outcome = _trained_uniform_outcome(none, uniform, band)
    gaps = ", ".join(f"{100 * g:+.1f}" for g in _seed_gaps(none, uniform))
    band_gaps = ", ".join(f"{100 * g:+.1f}" for g in _seed_gaps(band, uniform))
    print(f"   uniform minus no attention, seed by seed (points of WER): {gaps}")
    print(f"   uniform minus the band, seed by seed (points of WER): {band_gaps}")
    if len(outcome) == 1:
        verdict = f"every seed puts the measurement in ({outcome}), {TRAINED_UNIFORM_CHOICES[outcome]}"
    else:
        allowed = " and ".join(f"({c})" for c in outcome)
        verdict = (f"the seeds disagree (uniform minus no attention {gaps}, minus the band {band_gaps} "
                   f"points), so three seeds do not settle between {allowed}: each is accepted")
    meaning = {
        "a": ": one fixed average of every letter served as well as the band's moving context; the gain would "
             "not need a context per step.",
        "b": ": the average helped over Chapter 1's final-state C, but a context that moves along the word "
             "(the band) helped more.",
        "c": ": uniform weights give every step the same context, the average of the h_j, so this decoder is "
             "Chapter 1's model with an averaged C, and that bought nothing over its final-state C at this "
             "budget; the band, whose context moves along the word from step to step, gained: the gain "
             "comes from a context that changes per step, not from every letter entering one summary.",
    }
    meaning_text = meaning[outcome] if len(outcome) == 1 else "."
    if choice in outcome:
        return _finish(name, True, f"you chose ({choice}); {verdict}{meaning_text}")
    return _finish(name, False, f"you chose ({choice}), {TRAINED_UNIFORM_CHOICES[choice]}; {verdict}"
                   f"{meaning_text}", "wrong choice")


check_trained_uniform_prediction.prediction_only = True  # the file needs only the prediction variable


# --- predict, then measure: the local-p totals and the Luong step's two outputs ------------------
def _local_p_total(sigma: float, n: int = 9) -> float:
    """Total weight of local-p on an n-letter word with equal scores and the centre at (n - 1) / 2."""
    centre = (n - 1) / 2
    return sum(math.exp(-((j - centre) ** 2) / (2 * sigma**2)) for j in range(n)) / n


def check_local_p_totals(predicted) -> CheckResult:
    """``predicted``: the reader's (total at sigma 1, total at sigma 3) for the local-p exercise's
    9-letter word with equal scores and the centre at 4, written before measuring; each within 0.015
    (right to two decimals). A wrong total is named only as too high or too low, never given."""
    name = "local-p totals"
    if predicted is None:
        return _finish(name, False, "not done yet: write (total at sigma 1, total at sigma 3) into "
                       "prediction_local_p_totals, then run the cell.")
    try:
        one, three = (float(x) for x in predicted)
    except (TypeError, ValueError):
        return _finish(name, False, f"write two numbers, (total at sigma 1, total at sigma 3); got {predicted!r}.",
                       "not two numbers")
    truth = (_local_p_total(1.0), _local_p_total(3.0))
    if all(abs(a - b) <= _TOTAL_TOLERANCE for a, b in zip((one, three), truth)):
        return _finish(name, True, f"measured {truth[0]:.2f} and {truth[1]:.2f}: the row keeps only the share "
                       "of the word inside the window, so the context shrinks with it.")
    gauss = tuple(9 * t for t in truth)
    known = [
        (lambda: abs(one - 1) <= 0.05 and abs(three - 1) <= 0.05, "renormalised",
         "1 and 1 is the renormalised window; the product is not renormalised, so the total is what the "
         "Gaussian leaves of the softmax's mass."),
        (lambda: all(abs(a - b) <= 0.3 for a, b in zip((one, three), gauss)), "softmax left out",
         "those are the Gaussian's sums alone; each letter's softmax weight is 1/9, so divide by 9."),
        (lambda: abs(one - truth[1]) <= 0.05 and abs(three - truth[0]) <= 0.05, "swapped",
         "swapped: the narrow window (sigma 1) keeps less of the word than the wide one."),
        (lambda: abs(one - 1 / 9) <= 0.02 and abs(three - 1 / 9) <= 0.02, "Gaussian normalised",
         "1/9 at both widths is a Gaussian normalised to sum to 1 over the positions; Luong et al.'s "
         "factor is 1 at the centre and is not normalised, so the total changes with sigma."),
    ]
    for test, diagnosis, text in known:
        if test():
            return _finish(name, False, text, diagnosis)
    verdicts = [("right" if abs(a - b) <= _TOTAL_TOLERANCE else "too high" if a > b else "too low")
                for a, b in zip((one, three), truth)]
    start = "neither total matches" if "right" not in verdicts else "one total is off"
    return _finish(name, False, f"{start}: your total at sigma 1 is {verdicts[0]}, at sigma 3 "
                   f"{verdicts[1]} (each must be right to two decimals). Work it out again, or "
                   "measure it with your function.", "wrong totals")


_TOTAL_TOLERANCE = 0.015  # right to two decimals: (0.31, 0.73) is not (0.28, 0.73)


def check_luong_prediction(new_hidden_changes, h_tilde_changes) -> CheckResult:
    """The reader's two predictions (``True``/``False``) for the Luong exercise: doubling ``memory``
    from the same ``hidden``, does ``new_hidden`` change, and does ``h_tilde``?"""
    name = "Luong step prediction"
    if new_hidden_changes is None or h_tilde_changes is None:
        return _finish(name, False, "not done yet: write True or False into both prediction variables, "
                       "then run the cell.")
    if not all(isinstance(x, bool) for x in (new_hidden_changes, h_tilde_changes)):
        return _finish(name, False, "write True or False into both prediction variables.", "not a choice")
    if (new_hidden_changes, h_tilde_changes) == (False, True):
        return _finish(name, True, "new_hidden is h_t, computed by the GRU before the memory is read; "
                       "h_tilde reads c_t, which doubles with the memory.")
    if new_hidden_changes:
        return _finish(name, False, "new_hidden is h_t = GRU(x_t, h_{t-1}), computed before the memory is "
                       "read, so it cannot change; only h_tilde sees c_t.", "state reads the memory")
    return _finish(name, False, "h_tilde = tanh(W_c [c_t; h_t]) and c_t doubles with the memory, so h_tilde "
                   "changes (the weights may change too: the scores double).", "h_tilde unchanged")


EXERCISES = {
    "masked_softmax": check_masked_softmax,
    "local_p_attention": check_local_p_attention,
    "coverage_loss": check_coverage_loss,
    "luong_step": check_luong_step,
    "trained_uniform_wers": check_trained_uniform_prediction,
}
# ``check_uniform_prediction`` (uniform weights swapped in at decoding time, against hard attention)
# and ``check_uniform_attention`` (the same swap against the model without attention) are earlier
# editions' predict-then-measure exercises, kept for their readers.
