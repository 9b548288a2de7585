"""Each Chapter 2 checker accepts the reference solution, rejects a table of plausible wrong
answers, and names the mistake where it is a known one ("" = rejected without a diagnosis)."""
import math

import pytest
import torch

from attnbook.exercises.ch02 import check_additive_score, check_luong_step, check_masked_softmax
from attnbook.exercises.core import MUTATION
from attnbook.layers import masks as _masks
from conftest import assert_rejected


# --- reference solutions (they live here, not in the library) --------------------------------
def masked_softmax(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask, 0.0)


def additive_score(query, keys, W, U, v):
    return torch.tanh((query @ W.T)[:, None, :] + keys @ U.T) @ v  # (B, S)


def luong_step(cell, W_c, x, hidden, memory, src_tokens):
    h = cell(x, hidden)  # (B, D)
    scores = torch.einsum("bsd,bd->bs", memory, h)  # (B, S)
    weights = masked_softmax(scores, src_tokens)
    context = torch.einsum("bs,bsd->bd", weights, memory)  # (B, D)
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def not_done(*args):
    raise NotImplementedError


# the masked-softmax checker switches the library softmaxes off while the reader's function runs,
# so its reference and wrong answers build the softmax from exp (NaN on a row of -inf, as torch's)
def _softmax(x, dim=-1):
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def masked_softmax_by_hand(scores, mask):
    weights = _softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask, 0.0)


# --- wrong answers, each with the diagnosis it must get -----------------------------------------
def softmax_naive_exp(scores, mask):  # exp without subtracting the maximum
    e = scores.exp() * mask
    return e / e.sum(-1, keepdim=True)


def softmax_big_negative(scores, mask):  # -1e9 instead of -inf: an all-padding row becomes uniform
    return _softmax(scores.masked_fill(~mask, -1e9), dim=-1)


def softmax_nan_rows(scores, mask):  # right except that an all-padding row is NaN
    return _softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def softmax_overflow_zeroed(scores, mask):  # no shift by the maximum; the overflow's NaN set to 0
    e = scores.masked_fill(~mask, float("-inf")).exp()
    return (e / e.sum(-1, keepdim=True)).nan_to_num(0.0)


def softmax_max_over_padding(scores, mask):  # shifts by the maximum over all positions
    e = (scores - scores.amax(-1, keepdim=True)).exp() * mask
    return e / e.sum(-1, keepdim=True).clamp(min=1e-30)


def softmax_in_place(scores, mask):
    scores.masked_fill_(~mask, float("-inf"))
    return _softmax(scores, dim=-1).nan_to_num(0.0)


def softmax_from_nn_module(scores, mask):  # nn.Softmax calls F.softmax
    return torch.nn.Softmax(dim=-1)(scores.masked_fill(~mask, float("-inf"))).nan_to_num(0.0)


MASKED_SOFTMAX_WRONG = [
    # unnamed before review r64 (defect 2): a library softmax passed every case
    (lambda s, m: torch.softmax(s.masked_fill(~m, float("-inf")), -1).nan_to_num(0.0), "library softmax"),
    (lambda s, m: torch.nn.functional.softmax(s.masked_fill(~m, float("-inf")), -1).nan_to_num(0.0),
     "library softmax"),
    (lambda s, m: s.masked_fill(~m, float("-inf")).softmax(-1).nan_to_num(0.0), "library softmax"),
    (lambda s, m: torch.special.softmax(s.masked_fill(~m, float("-inf")), -1).nan_to_num(0.0),
     "library softmax"),
    (softmax_from_nn_module, "library softmax"),
    (lambda s, m: torch.log_softmax(s.masked_fill(~m, float("-inf")), -1).exp().nan_to_num(0.0),
     "library softmax"),
    (lambda s, m: _masks.masked_softmax(s, m), "library softmax"),
    (lambda s, m: _softmax(s, dim=-1), "ignores mask"),
    (lambda s, m: _softmax(s.masked_fill(~m, 0.0), dim=-1), "masked with zero"),
    (lambda s, m: masked_softmax_by_hand(s, ~m).nan_to_num(0.0), "inverted mask"),
    (lambda s, m: _softmax(s, dim=-1) * m, "zeroed after softmax"),
    (lambda s, m: masked_softmax_by_hand(s.T, m.T).T.nan_to_num(0.0), "wrong axis"),
    (softmax_naive_exp, "overflow"),
    (softmax_big_negative, "empty rows"),
    (softmax_nan_rows, "empty rows"),
    (softmax_overflow_zeroed, "overflow to zero"),
    (softmax_max_over_padding, "max over padding"),
    (softmax_in_place, MUTATION),
    (not_done, ""),
]

def additive_in_place(query, keys, W, U, v):
    scores = additive_score(query, keys, W, U, v)
    query.zero_()  # "frees" the caller's tensor
    return scores


ADDITIVE_WRONG = [
    (lambda q, k, W, U, v: torch.tanh((q @ W)[:, None, :] + k @ U) @ v, "untransposed"),
    (lambda q, k, W, U, v: torch.tanh(q @ W.T)[:, None, :] @ v + torch.tanh(k @ U.T) @ v, "tanh twice"),
    (lambda q, k, W, U, v: ((q @ W.T)[:, None, :] + k @ U.T) @ v, "no tanh"),
    (lambda q, k, W, U, v: additive_score(q, k, U, W, v), "W and U swapped"),
    (additive_in_place, MUTATION),
    (lambda q, k, W, U, v: torch.tanh((q @ W.T)[None, :, :] + k @ U.T) @ v, ""),  # queries broadcast over the batch
    (lambda q, k, W, U, v: torch.tanh((q @ W.T)[:, None, :] + k @ U.T).sum(-1), ""),  # ignores v
    (not_done, ""),
]


def luong_old_hidden(cell, W_c, x, hidden, memory, src_tokens):
    weights = masked_softmax(torch.einsum("bsd,bd->bs", memory, hidden), src_tokens)
    h = cell(x, hidden)
    context = torch.einsum("bs,bsd->bd", weights, memory)
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_variant(scale=1.0, order=0, mask=True, tanh=True, carry_tilde=False, dim=-1, in_place=False,
                  carry_context=False, join_old=False, mean=False, mask_after=False, carry_old=False,
                  by_length=False):
    def step(cell, W_c, x, hidden, memory, src_tokens):
        h = cell(x, hidden)
        scores = torch.einsum("bsd,bd->bs", memory, h) / scale
        if by_length:  # "normalised" by the number of real source positions
            scores = scores / src_tokens.sum(-1, keepdim=True)
        if mean:
            scores = scores * 0
        if mask_after:  # padding zeroed after the softmax, not renormalised
            weights = torch.softmax(scores, dim=dim).masked_fill(~src_tokens, 0.0)
        elif mask:
            weights = torch.softmax(scores.masked_fill(~src_tokens, float("-inf")), dim=dim)
            weights = weights.masked_fill(~src_tokens, 0.0).nan_to_num(0.0)
        else:
            weights = torch.softmax(scores, dim=dim)
        context = torch.einsum("bs,bsd->bd", weights, memory)
        joined = hidden if join_old else h
        pair = torch.cat([context, joined] if order == 0 else [joined, context], dim=-1)
        tilde = pair @ W_c.T
        tilde = torch.tanh(tilde) if tanh else tilde
        if in_place:
            hidden.copy_(h)  # "updates the state" in place
        if carry_old:  # hands back the state it was given, h_{t-1}
            return tilde, hidden, weights
        return tilde, context if carry_context else (tilde if carry_tilde else h), weights
    return step


def luong_scaled(cell, W_c, x, hidden, memory, src_tokens):
    return luong_variant(scale=math.sqrt(memory.shape[-1]))(cell, W_c, x, hidden, memory, src_tokens)


def luong_no_cell(cell, W_c, x, hidden, memory, src_tokens):  # forgets the GRU step
    return luong_variant()(lambda x, h: h, W_c, x, hidden, memory, src_tokens)


def luong_mask_zero(cell, W_c, x, hidden, memory, src_tokens):
    """Padding's scores set to 0 (not -inf) before the softmax: padding still gets weight."""
    h = cell(x, hidden)
    scores = torch.einsum("bsd,bd->bs", memory, h).masked_fill(~src_tokens, 0.0)
    weights = torch.softmax(scores, dim=-1)
    context = torch.einsum("bs,bsd->bd", weights, memory)
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_sigmoid(cell, W_c, x, hidden, memory, src_tokens):
    """Weights from a sigmoid of each score, padding zeroed: no softmax."""
    h = cell(x, hidden)
    scores = torch.einsum("bsd,bd->bs", memory, h)
    weights = torch.sigmoid(scores) * src_tokens
    context = torch.einsum("bs,bsd->bd", weights, memory)
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_context_only(cell, W_c, x, hidden, memory, src_tokens):
    """h~ from the context alone: the half of W_c that multiplies c_t, h_t left out."""
    h = cell(x, hidden)
    weights = masked_softmax(torch.einsum("bsd,bd->bs", memory, h), src_tokens)
    context = torch.einsum("bs,bsd->bd", weights, memory)
    return torch.tanh(context @ W_c[:, : h.shape[-1]].T), h, weights


def luong_inverted_mask(cell, W_c, x, hidden, memory, src_tokens):
    """The mask filled where it is True (the real letters): NaN on a row with no padding."""
    h = cell(x, hidden)
    scores = torch.einsum("bsd,bd->bs", memory, h).masked_fill(src_tokens, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = torch.einsum("bs,bsd->bd", weights, memory)
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_inverted_mask_no_nan(cell, W_c, x, hidden, memory, src_tokens):
    """The same inverted mask, NaN rows zeroed: the weights sit on the padding."""
    tilde, h, weights = luong_inverted_mask(cell, W_c, x, hidden, memory, src_tokens)
    weights = weights.nan_to_num(0.0)
    context = torch.einsum("bs,bsd->bd", weights, memory)
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_carries_tanh(cell, W_c, x, hidden, memory, src_tokens):
    tilde, h, weights = luong_step(cell, W_c, x, hidden, memory, src_tokens)
    return tilde, torch.tanh(h), weights


def luong_scaled_by_source(cell, W_c, x, hidden, memory, src_tokens):
    return luong_variant(scale=math.sqrt(memory.shape[-2]))(cell, W_c, x, hidden, memory, src_tokens)


def luong_swapped(cell, W_c, x, hidden, memory, src_tokens):
    """Returns (new_hidden, h_tilde, weights): the first two outputs swapped."""
    tilde, h, weights = luong_step(cell, W_c, x, hidden, memory, src_tokens)
    return h, tilde, weights


def luong_relu(cell, W_c, x, hidden, memory, src_tokens):
    """ReLU where h~_t has a tanh."""
    h = cell(x, hidden)
    scores = (memory @ h[:, :, None])[..., 0].masked_fill(~src_tokens, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    context = (weights[:, None, :] @ memory)[:, 0]
    return torch.relu(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_tanh_context(cell, W_c, x, hidden, memory, src_tokens):
    """tanh on c_t alone, before W_c, and none on the product (review rev02h)."""
    h = cell(x, hidden)
    weights = masked_softmax((memory @ h[:, :, None])[..., 0], src_tokens)
    context = (weights[:, None, :] @ memory)[:, 0]
    return torch.cat([torch.tanh(context), h], dim=-1) @ W_c.T, h, weights


def luong_cosine(cell, W_c, x, hidden, memory, src_tokens):
    """A cosine score: h_t and every h_s normalised to length 1 first (review rev02h)."""
    h = cell(x, hidden)
    unit = torch.nn.functional.normalize
    weights = masked_softmax((unit(memory, dim=-1) @ unit(h, dim=-1)[:, :, None])[..., 0], src_tokens)
    context = (weights[:, None, :] @ memory)[:, 0]
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def luong_epsilon(cell, W_c, x, hidden, memory, src_tokens, *, max_over_padding=True, eps=1e-3):
    """exp(s - max) / (sum + eps): with the max over the padding too, a row's sum can be tiny."""
    h = cell(x, hidden)
    scores = (memory @ h[:, :, None])[..., 0]
    top = scores if max_over_padding else scores.masked_fill(~src_tokens, float("-inf"))
    e = torch.exp(scores - top.max(-1, keepdim=True).values) * src_tokens
    weights = e / (e.sum(-1, keepdim=True) + eps)
    context = (weights[:, None, :] @ memory)[:, 0]
    return torch.tanh(torch.cat([context, h], dim=-1) @ W_c.T), h, weights


def test_luong_accepts_a_harmless_epsilon_in_the_softmax():
    """An epsilon up to 1e-3 against a sum of at least 1 (the max taken over real letters) passes."""
    assert check_luong_step(lambda *a: luong_epsilon(*a, max_over_padding=False))
    assert check_luong_step(lambda *a: luong_epsilon(*a, max_over_padding=False, eps=1e-9))


def luong_log_softmax(cell, W_c, x, hidden, memory, src_tokens):
    """log_softmax for softmax: negative weights that do not sum to 1 (padding set to 0)."""
    h = cell(x, hidden)
    scores = (memory @ h[:, :, None])[..., 0].masked_fill(~src_tokens, float("-inf"))
    a = torch.log_softmax(scores, dim=-1).masked_fill(~src_tokens, 0.0)
    context = (a[:, None, :] @ memory)[:, 0]
    return torch.tanh(torch.cat([context, h], -1) @ W_c.T), h, a


LUONG_WRONG = [
    (luong_log_softmax, "log-softmax weights"),  # unnamed before round ch2v25
    # unnamed before the seventeenth review (rev02h): tanh on c_t only, a cosine score, and an
    # epsilon that is not small because the max was taken over the padding too
    (luong_tanh_context, "tanh on the context only"),
    (luong_cosine, "cosine score"),
    (luong_epsilon, "epsilon not small"),
    # unnamed before the fifteenth review (rev02f): outputs swapped, ReLU for tanh
    (luong_swapped, "outputs swapped"),
    (luong_relu, "relu instead of tanh"),
    # unnamed before the thirteenth review (rev02e): an inverted mask (NaN), tanh(h) carried, / sqrt(S)
    (luong_inverted_mask, "inverted mask"),
    (luong_inverted_mask_no_nan, "inverted mask"),
    (luong_carries_tanh, "carries tanh of h"),
    (luong_scaled_by_source, "scaled by source length"),
    # unnamed before the twelfth review (rev02d): sigmoid weights, h~ without h_t
    (luong_sigmoid, "sigmoid weights"),
    (luong_context_only, "h tilde without h_t"),
    (luong_mask_zero, "masked with zero"),  # unnamed before the tenth review
    (luong_old_hidden, "attends with previous hidden"),
    (luong_scaled, "scaled"),
    (luong_variant(order=1), "concat order"),
    (luong_variant(mask=False), "ignores mask"),
    (luong_variant(mask_after=True), "masked after softmax"),
    (luong_variant(dim=0), "wrong axis"),
    (luong_variant(tanh=False), "no tanh"),
    (luong_variant(carry_tilde=True), "carries h tilde"),
    (luong_variant(carry_context=True), "carries context"),
    (luong_variant(join_old=True), "joins previous hidden"),
    (luong_variant(carry_old=True), "carries previous hidden"),  # unnamed before the eighth review
    (luong_variant(by_length=True), "divided by length"),  # unnamed before the eighth review
    (luong_variant(mean=True), "mean-pooled context"),
    (luong_variant(in_place=True), MUTATION),
    (luong_no_cell, ""),
    (not_done, ""),
]


@pytest.mark.parametrize(("checker", "reference"), [
    (check_masked_softmax, masked_softmax_by_hand), (check_additive_score, additive_score),
    (check_luong_step, luong_step),
])
def test_reference_passes(checker, reference):
    assert checker(reference)


@pytest.mark.parametrize(("wrong", "diagnosis"), MASKED_SOFTMAX_WRONG)
def test_masked_softmaxassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_masked_softmax, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), ADDITIVE_WRONG)
def test_additiveassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_additive_score, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), LUONG_WRONG)
def test_luongassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_luong_step, wrong, diagnosis, capsys)


def test_masked_softmax_checker_restores_the_library_softmaxes(capsys):
    """The softmaxes switched off during the reader's function work again afterwards, even when
    the function raised."""
    before = (torch.softmax, torch.nn.functional.softmax, torch.special.softmax)
    check_masked_softmax(lambda s, m: torch.softmax(s, -1))
    check_masked_softmax(not_done)
    assert (torch.softmax, torch.nn.functional.softmax, torch.special.softmax) == before
    assert "softmax" not in torch.Tensor.__dict__ and "log_softmax" not in torch.Tensor.__dict__
    x = torch.tensor([0.0, 0.0])
    assert _masks.masked_softmax(x[None], torch.tensor([[True, True]])).tolist() == [[0.5, 0.5]]
    assert torch.softmax(x, 0).tolist() == x.softmax(0).tolist() == [0.5, 0.5]


def test_luong_checker_leaves_the_cell_alone(capsys):
    """A learner's module argument is shared, not copied: changing its weights is caught."""
    def trains_the_cell(cell, W_c, x, hidden, memory, src_tokens):
        cell.weight_hh.mul_(1.0 + 1e-3)
        return luong_step(cell, W_c, x, hidden, memory, src_tokens)
    assert check_luong_step(trains_the_cell).diagnosis == MUTATION


@pytest.mark.parametrize("prefix", ['MASKED_SOFTMAX', 'ADDITIVE', 'LUONG'])
def test_every_diagnosis_is_triggered_by_a_wrong_answer(prefix):
    """Each known mistake a checker can name is named for at least one wrong answer above."""
    import attnbook.exercises.ch02 as checkers
    names = {m.name for m in getattr(checkers, f"{prefix}_MISTAKES")}
    triggered = {d for _, d in globals()[f"{prefix}_WRONG"]} - {"", MUTATION}
    assert names == triggered


# --- the chapter's current exercises: local window, coverage, uniform attention -----------------
from attnbook.exercises.ch02 import (  # noqa: E402
    LOCAL_MISTAKES, COVERAGE_MISTAKES, check_coverage_score, check_local_softmax, check_uniform_attention,
)


def local_softmax(scores, lengths, centre, radius, *, window=True, real=True, strict=False,
                  fill=float("-inf"), zero_after=True):
    positions = torch.arange(scores.shape[-1])[None, :]
    allowed = torch.ones_like(scores, dtype=torch.bool)
    if real:
        allowed &= positions < lengths[:, None]
    if window:
        d = (positions - centre[:, None]).abs()
        allowed &= (d < radius) if strict else (d <= radius)
    weights = torch.softmax(scores.masked_fill(~allowed, fill), dim=-1)
    return weights.masked_fill(~allowed, 0.0) if zero_after else weights


def local_naive_exp(scores, lengths, centre, radius):
    allowed = local_softmax(scores, lengths, centre, radius) > 0
    e = scores.exp() * allowed
    return e / e.sum(-1, keepdim=True)


LOCAL_WRONG = [
    (lambda *a: local_softmax(*a, window=False).nan_to_num(0.0), "ignores window"),
    (lambda *a: local_softmax(*a, real=False).nan_to_num(0.0), "ignores lengths"),
    (lambda *a: local_softmax(*a, strict=True).nan_to_num(0.0), "window too narrow"),
    (lambda s, l, c, r: torch.softmax(s, -1) * (local_softmax(s, l, c, r) > 0), "zeroed after softmax"),
    (lambda *a: local_softmax(*a, zero_after=False), "empty window"),
    (lambda *a: local_softmax(*a, fill=-1e9, zero_after=False), "empty window"),
    (local_naive_exp, "overflow"),
    (lambda s, l, c, r: local_softmax(s, l, c + 1, r).nan_to_num(0.0), ""),
]


@pytest.mark.parametrize("wrong, diagnosis", LOCAL_WRONG)
def test_local_softmax_rejects(wrong, diagnosis, capsys):
    result = check_local_softmax(wrong)
    assert not result and result.diagnosis == diagnosis, capsys.readouterr().out


def coverage_score(query, keys, coverage, W, U, w, v):
    return torch.tanh((query @ W.T)[:, None, :] + keys @ U.T + coverage[:, :, None] * w) @ v


COVERAGE_WRONG = [
    (lambda q, k, c, W, U, w, v: torch.tanh((q @ W.T)[:, None, :] + k @ U.T) @ v, "no coverage"),
    (lambda q, k, c, W, U, w, v: torch.tanh((q @ W.T)[:, None, :] + k @ U.T) @ v + c * w.sum(),
     "coverage outside tanh"),
    (lambda q, k, c, W, U, w, v: torch.tanh((q @ W)[:, None, :] + k @ U + c[:, :, None] * w) @ v,
     "untransposed"),
    (lambda q, k, c, W, U, w, v: ((q @ W.T)[:, None, :] + k @ U.T + c[:, :, None] * w) @ v, "no tanh"),
    (lambda q, k, c, W, U, w, v: coverage_score(q, k, c, U, W, w, v), "W and U swapped"),
    (lambda q, k, c, W, U, w, v: torch.tanh((q @ W.T)[:, None, :] + k @ U.T + c[:, :, None] * v) @ w, ""),
]


@pytest.mark.parametrize("wrong, diagnosis", COVERAGE_WRONG)
def test_coverage_score_rejects(wrong, diagnosis, capsys):
    result = check_coverage_score(wrong)
    assert not result and result.diagnosis == diagnosis, capsys.readouterr().out


def test_new_references_pass():
    assert check_local_softmax(local_softmax)
    assert check_coverage_score(coverage_score)


@pytest.mark.parametrize("prefix, table", [("LOCAL", LOCAL_WRONG), ("COVERAGE", COVERAGE_WRONG)])
def test_every_new_diagnosis_is_triggered(prefix, table):
    names = {m.name for m in (LOCAL_MISTAKES if prefix == "LOCAL" else COVERAGE_MISTAKES)}
    assert names == {d for _, d in table} - {""}


UNIFORM_MEASURED = {"trained_wer": 0.50, "uniform_wer": 0.90, "trained_per": 0.14, "uniform_per": 0.5,
                    "no_attention_wer": 0.62}


@pytest.mark.parametrize("predicted, passed, diagnosis", [
    ("a", True, ""), (" A ", True, ""),
    ("b", False, "wrong choice"), ("c", False, "wrong choice"),
    ("d", False, "not a choice"), (0.8, False, "not a choice"), (None, False, ""),
])
def test_uniform_attention_prediction(predicted, passed, diagnosis, capsys):
    result = check_uniform_attention(predicted, lambda: dict(UNIFORM_MEASURED))
    assert bool(result) == passed and result.diagnosis == diagnosis, capsys.readouterr().out


@pytest.mark.parametrize("uniform, outcome", [(0.90, "a"), (0.76, "a"), (0.60, "c"), (0.52, "b")])
def test_uniform_attention_scores_the_measured_choice(uniform, outcome):
    """The verdict follows the measurement: the right choice changes when the numbers do."""
    from attnbook.exercises.ch02 import _uniform_outcome
    assert _uniform_outcome(0.50, 0.62, uniform) == outcome


@pytest.mark.parametrize("uniform, right, wrong", [(0.60, "c", "a"), (0.52, "b", "a"), (0.70, "a", "c")])
def test_uniform_attention_follows_other_measurements(uniform, right, wrong, capsys):
    measured = dict(UNIFORM_MEASURED, uniform_wer=uniform)
    assert check_uniform_attention(right, lambda: measured)
    assert check_uniform_attention(wrong, lambda: measured).diagnosis == "wrong choice"


@pytest.mark.parametrize("measured", [
    dict(UNIFORM_MEASURED, uniform_wer=0.50),  # the trained model measured twice: weights not replaced
    dict(UNIFORM_MEASURED, trained_wer=0.95),  # an untrained model
    {k: v for k, v in UNIFORM_MEASURED.items() if k != "no_attention_wer"},  # baseline not passed
    0.9,
])
def test_uniform_attention_rejects_a_wrong_measurement(measured):
    result = check_uniform_attention("a", lambda: measured)
    assert not result and result.diagnosis == "measurement"


# --- local-p attention and the coverage loss: the chapter's exercises since the fifth review -----
from attnbook.exercises.ch02 import (  # noqa: E402
    COVERAGE_LOSS_MISTAKES, LOCAL_P_MISTAKES, check_coverage_loss, check_local_p_attention,
)


def local_p_attention(scores, lengths, query, W_p, v_p, sigma, *, span=1, own_length=True, renorm=False,
                      rounded=False, mask=True, denom=None, tanh=True, transpose=True, zero_after=False,
                      density=False):
    B, S = scores.shape
    L = lengths.float() if own_length else torch.full((B,), float(S))
    hidden = query @ W_p.T if transpose else query @ W_p
    centre = (L - span) * torch.sigmoid((torch.tanh(hidden) if tanh else hidden) @ v_p)  # (B,)
    if rounded:
        centre = torch.floor(centre) if rounded == "floor" else torch.round(centre)
    real = torch.arange(S)[None, :] < lengths[:, None] if mask else torch.ones(B, S, dtype=torch.bool)
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1).masked_fill(~real, 0.0)
    if zero_after:  # a softmax over every position, padding zeroed afterwards
        align = torch.softmax(scores, dim=-1) * (torch.arange(S)[None, :] < lengths[:, None])
    j = torch.arange(S).float()[None, :]
    weights = align * torch.exp(-(j - centre[:, None]) ** 2 / (denom(sigma) if denom else 2 * sigma ** 2))
    if density:
        weights = weights / (sigma * math.sqrt(2 * math.pi))
    if renorm:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, centre


def local_p_mask_off_by_one(scores, lengths, query, W_p, v_p, sigma):
    """`j <= length`: the first padding position counts as a letter."""
    S = scores.shape[-1]
    real = torch.arange(S)[None, :] <= lengths[:, None]
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p)
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1).masked_fill(~real, 0.0)
    j = torch.arange(S).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_one_sided(scores, lengths, query, W_p, v_p, sigma):
    """Only positions after the centre are damped (a one-sided window)."""
    weights, centre = local_p_attention(scores, lengths, query, W_p, v_p, sigma)
    align, _ = local_p_attention(scores, lengths, query, W_p, v_p, 1e9)
    before = torch.arange(scores.shape[-1])[None, :] < centre[:, None]
    return torch.where(before, align, weights), centre


def local_p_ceil(scores, lengths, query, W_p, v_p, sigma):
    """The centre rounded up, then the window built on it."""
    S = scores.shape[-1]
    centre = torch.ceil((lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p))
    real = torch.arange(S)[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1).masked_fill(~real, 0.0)
    j = torch.arange(S).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_one_based(scores, lengths, query, W_p, v_p, sigma):
    """Positions counted from 1 in the Gaussian's distance j - p."""
    S = scores.shape[-1]
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p)
    real = torch.arange(S)[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1).masked_fill(~real, 0.0)
    j = torch.arange(1, S + 1).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_absolute(scores, lengths, query, W_p, v_p, sigma):
    """The window with |j - p| where the Gaussian has (j - p)^2."""
    S = scores.shape[-1]
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p)
    real = torch.arange(S)[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1).masked_fill(~real, 0.0)
    j = torch.arange(S).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]).abs() / (2 * sigma ** 2)), centre


def local_p_mask_zero(scores, lengths, query, W_p, v_p, sigma):
    """Padding's scores set to 0, not -inf, before the softmax."""
    S = scores.shape[-1]
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p)
    real = torch.arange(S)[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, 0.0), dim=-1)
    j = torch.arange(S).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_window_inside(scores, lengths, query, W_p, v_p, sigma):
    """softmax(e * window): the Gaussian multiplied into the scores before the softmax."""
    S = scores.shape[-1]
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p)
    real = torch.arange(S)[None, :] < lengths[:, None]
    j = torch.arange(S).float()[None, :]
    window = torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2))
    weights = torch.softmax((scores * window).masked_fill(~real, float("-inf")), dim=-1)
    return weights.masked_fill(~real, 0.0), centre


def local_p_tanh_after(scores, lengths, query, W_p, v_p, sigma):
    """The tanh on the scalar v_p^T (W_p h_t) instead of on the vector W_p h_t."""
    S = scores.shape[-1]
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh((query @ W_p.T) @ v_p))
    real = torch.arange(S)[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1).masked_fill(~real, 0.0)
    j = torch.arange(S).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_paper_shift(scores, lengths, query, W_p, v_p, sigma):
    """The paper's 1-based S * sigmoid, moved to 0-based positions by subtracting 0.5 (review rev02h)."""
    weights, centre = local_p_attention(scores, lengths, query, W_p, v_p, sigma, span=0)
    shifted = centre - 0.5
    align, _ = local_p_attention(scores, lengths, query, W_p, v_p, 1e9)
    j = torch.arange(scores.shape[-1]).float()[None, :]
    return align * torch.exp(-(j - shifted[:, None]) ** 2 / (2 * sigma ** 2)), shifted


def local_p_clamped_centre(scores, lengths, query, W_p, v_p, sigma):
    """The centre clamped into [0.5, n - 1.5] 'to stay inside the word' (review rev02h)."""
    _, centre = local_p_attention(scores, lengths, query, W_p, v_p, sigma)
    centre = torch.minimum(centre.clamp(min=0.5), lengths.float() - 1.5)
    align, _ = local_p_attention(scores, lengths, query, W_p, v_p, 1e9)
    j = torch.arange(scores.shape[-1]).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_log_window(scores, lengths, query, W_p, v_p, sigma):
    """The log of the Gaussian added to the scores inside the softmax: a renormalised window."""
    _, centre = local_p_attention(scores, lengths, query, W_p, v_p, sigma)
    real = torch.arange(scores.shape[-1])[None, :] < lengths[:, None]
    j = torch.arange(scores.shape[-1]).float()[None, :]
    shifted = scores - (j - centre[:, None]) ** 2 / (2 * sigma ** 2)
    return torch.softmax(shifted.masked_fill(~real, float("-inf")), dim=-1), centre


def local_p_no_sigmoid(scores, lengths, query, W_p, v_p, sigma):
    """The centre (n - 1)·v_pᵀ tanh(W_p q), the sigmoid left out."""
    real = torch.arange(scores.shape[1])[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), -1).masked_fill(~real, 0.0)
    centre = (lengths.float() - 1) * (torch.tanh(query @ W_p.T) @ v_p)
    j = torch.arange(scores.shape[1]).float()[None, :]
    return align * torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2)), centre


def local_p_window_normalised(scores, lengths, query, W_p, v_p, sigma, over="real"):
    """The Gaussian made to sum to 1 over the (real or all) positions before it multiplies."""
    real = torch.arange(scores.shape[1])[None, :] < lengths[:, None]
    align = torch.softmax(scores.masked_fill(~real, float("-inf")), -1).masked_fill(~real, 0.0)
    centre = (lengths.float() - 1) * torch.sigmoid(torch.tanh(query @ W_p.T) @ v_p)
    j = torch.arange(scores.shape[1]).float()[None, :]
    window = torch.exp(-(j - centre[:, None]) ** 2 / (2 * sigma ** 2))
    if over == "real":
        window = window * real
    return align * window / window.sum(-1, keepdim=True), centre


LOCAL_P_WRONG = [
    # unnamed before round r54 (review r54-02, defect 8): the Gaussian normalised over positions
    (local_p_window_normalised, "Gaussian normalised over positions"),
    (lambda *a: local_p_window_normalised(*a, over="all"), "Gaussian normalised over positions"),
    (local_p_no_sigmoid, "no sigmoid"),  # unnamed before round ch2v25
    # unnamed before the seventeenth review (rev02h): the paper's centre shifted by half, a clamped centre
    (local_p_paper_shift, "paper's centre shifted by half"),
    (local_p_clamped_centre, "clamped centre"),
    (local_p_log_window, "renormalised"),
    (local_p_tanh_after, "tanh after v_p"),  # unnamed before the fifteenth review (rev02f)
    # unnamed before the thirteenth review (rev02e): masking with 0, the window inside the softmax
    (local_p_mask_zero, "masked with zero"),
    (local_p_window_inside, "window inside the softmax"),
    (local_p_absolute, "absolute distance"),  # unnamed before the twelfth review (rev02d)
    (local_p_one_based, "1-based positions"),  # unnamed before the tenth review
    (lambda *a: local_p_attention(*a, own_length=False), "padded width"),
    # named only "values differ" before review r64 (defect 8): S for every row's length, everywhere
    (lambda s, l, *a: local_p_attention(s, torch.full_like(l, s.shape[-1]), *a), "S in place of lengths"),
    # S·sigmoid with S everywhere fails first on case 1 (one row, n = S): "L instead of L-1"
    (lambda s, l, *a: local_p_attention(s, torch.full_like(l, s.shape[-1]), *a, span=0),
     "L instead of L-1"),
    (lambda *a: local_p_attention(*a, span=0), "L instead of L-1"),
    (lambda *a: local_p_attention(*a, mask=False), "ignores lengths"),
    (lambda *a: local_p_attention(*a, renorm=True), "renormalised"),
    (lambda *a: local_p_attention(*a, rounded=True), "rounded centre"),
    (lambda *a: local_p_attention(*a, rounded="floor"), "rounded centre"),
    (local_p_ceil, "rounded centre"),
    (lambda *a: local_p_attention(*a, zero_after=True), "padding zeroed after softmax"),
    (lambda *a: local_p_attention(*a, density=True), "Gaussian density"),
    (lambda *a: local_p_attention(*a, denom=lambda s: s ** 2), "no factor 2"),
    (lambda *a: local_p_attention(*a, denom=lambda s: 2 * s), "sigma not squared"),
    (lambda *a: local_p_attention(*a, transpose=False), "untransposed"),
    (lambda *a: local_p_attention(*a, tanh=False), "no tanh"),
    (local_p_mask_off_by_one, "mask off by one"),
    # unnamed before round r35: sigma ignored (a fixed width of 1, or no window at all)
    (lambda s, l, q, W, v, sigma: local_p_attention(s, l, q, W, v, 1.0), "sigma ignored"),
    (lambda s, l, q, W, v, sigma: local_p_attention(s, l, q, W, v, 1e9), "sigma ignored"),
    (local_p_one_sided, "one-sided window"),
    (lambda *a: local_p_attention(*a)[0], ""),  # forgets to return the centre
    (not_done, ""),
]


def coverage_loss(weights, tgt_mask):
    coverage = weights.cumsum(dim=1) - weights  # (B, T, S): attention before step t
    per_step = torch.minimum(weights, coverage).sum(-1)  # (B, T)
    real = tgt_mask.float()
    return coverage, (per_step * real).sum() / real.sum()


def cov_variant(f_cov, op=torch.minimum, masked=True, by_batch=False, by_positions=False,
                seq_means=False, zero_padded=False, all_steps=False, padded_over_real=False):
    def fn(weights, tgt_mask):
        if zero_padded:  # the padded steps' weights zeroed before the cumulative sum
            weights = weights * tgt_mask[..., None]
        coverage = f_cov(weights)
        per_step = op(weights, coverage).sum(-1)
        real = tgt_mask.float() if masked else torch.ones_like(per_step)
        if seq_means:
            return coverage, ((per_step * real).sum(1) / real.sum(1)).mean()
        total = (per_step * real).sum()
        if padded_over_real:  # every step summed, padded ones too, divided by the N real steps
            return coverage, per_step.sum() / tgt_mask.sum()
        if by_positions:
            return coverage, total / (real.sum() * weights.shape[-1])
        if all_steps:  # B * T: the padded steps counted in the denominator
            return coverage, total / (weights.shape[0] * weights.shape[1])
        return coverage, total / (weights.shape[0] if by_batch else real.sum())
    return fn


def cov_loop(weights, tgt_mask):
    """Right, with loops (it must pass)."""
    B, T, S = weights.shape
    coverage = torch.zeros_like(weights)
    for t in range(1, T):
        coverage[:, t] = coverage[:, t - 1] + weights[:, t - 1]
    return coverage, (torch.minimum(weights, coverage).sum(-1) * tgt_mask).sum() / tgt_mask.sum()


def cov_in_place(weights, tgt_mask):
    coverage, loss = coverage_loss(weights, tgt_mask)
    weights.clamp_(max=0.5)
    return coverage, loss


def cov_not_averaged(weights, tgt_mask):
    """The real steps' terms summed, never divided by N (with B=1 first this read as 'batch')."""
    coverage = weights.cumsum(dim=1) - weights
    return coverage, (torch.minimum(weights, coverage).sum(-1) * tgt_mask).sum()


def cov_inclusive_returned(weights, tgt_mask):
    """The loss from the right (exclusive) coverage, but the inclusive cumsum returned."""
    coverage, loss = coverage_loss(weights, tgt_mask)
    return weights.cumsum(dim=1), loss


def cov_n_plus_one(weights, tgt_mask):
    coverage, loss = coverage_loss(weights, tgt_mask)
    n = tgt_mask.sum()
    return coverage, loss * n / (n + 1)


def cov_first_steps_left_out(weights, tgt_mask):
    """Divided by N less each sequence's first step, whose term is always 0 (review rev02h)."""
    coverage, loss = coverage_loss(weights, tgt_mask)
    n = tgt_mask.sum()
    return coverage, loss * n / (n - tgt_mask[:, 0].sum())


def cov_mean_of_earlier(weights, tgt_mask):
    """The mean of the earlier steps' weights as the coverage, not their sum."""
    before = torch.arange(weights.shape[1]).clamp(min=1).float()[None, :, None]
    coverage = (weights.cumsum(1) - weights) / before
    return coverage, (torch.minimum(weights, coverage).sum(-1) * tgt_mask).sum() / tgt_mask.sum()


COVERAGE_LOSS_WRONG = [
    (cov_mean_of_earlier, "mean of earlier steps"),  # unnamed before round ch2v25
    # unnamed before the seventeenth review (rev02h): N without the first steps, coverage capped at 1
    (cov_first_steps_left_out, "first steps left out of N"),
    (cov_variant(lambda a: (a.cumsum(1) - a).clamp(max=1.0)), "coverage clamped at 1"),
    # unnamed or misnamed before the thirteenth review (rev02e): the inclusive coverage with a right
    # loss; a loss over N + 1, which case 1 (B * T = N + 1 there) read as "divided by B times T"
    (cov_inclusive_returned, "coverage includes current step"),
    (cov_n_plus_one, "divided by N + 1"),
    (cov_not_averaged, "not averaged"),  # misnamed "mean over batch" before the twelfth review
    (cov_variant(lambda a: a.cumsum(1)), "includes current step"),
    # unnamed before the fifteenth review (rev02f): the batch axis, the previous step only, later steps
    (cov_variant(lambda a: a.cumsum(0) - a), "cumsum over the batch"),
    (cov_variant(lambda a: torch.nn.functional.pad(a[:, :-1], (0, 0, 1, 0))), "previous step only"),
    (cov_variant(lambda a: torch.nn.functional.pad(a[:, 1:], (0, 0, 0, 1)).flip(1).cumsum(1).flip(1)),
     "later steps only"),
    (cov_variant(lambda a: a.cumsum(-1) - a), "cumsum over positions"),
    (cov_variant(lambda a: (a.cumsum(1) - a).sum(-1, keepdim=True).expand_as(a)), "summed over positions"),
    (cov_variant(lambda a: a - a.cumsum(1)), "coverage subtracted"),
    (cov_variant(lambda a: a.cumsum(1) - a, op=torch.maximum), "max instead of min"),
    (cov_variant(lambda a: a.cumsum(1) - a, masked=False), "counts padded steps"),
    (cov_variant(lambda a: a.cumsum(1) - a, by_batch=True), "mean over batch"),
    (cov_variant(lambda a: a.cumsum(1) - a, by_positions=True), "divided by N times S"),
    (cov_variant(lambda a: a.cumsum(1) - a, seq_means=True), "mean of sequence means"),
    (cov_variant(lambda a: a.cumsum(1) - a, zero_padded=True), "padded steps zeroed in coverage"),
    (cov_variant(lambda a: a.cumsum(1) - a, all_steps=True), "divided by B times T"),
    (cov_variant(lambda a: torch.roll(a, 1, dims=1).cumsum(1)), "torch.roll wraps round"),
    # unnamed before the eighth review: the later steps counted, and padded steps over N
    (cov_variant(lambda a: a.sum(1, keepdim=True) - a), "includes later steps"),
    (cov_variant(lambda a: a.cumsum(1) - a, padded_over_real=True), "padded steps over N"),
    # a product, not a min: unnamed before the tenth review
    (cov_variant(lambda a: a.cumsum(1) - a, op=lambda a, c: a * c), "product instead of min"),
    (cov_in_place, MUTATION),
    (not_done, ""),
]


def test_local_p_and_coverage_loss_references_pass():
    assert check_local_p_attention(local_p_attention)
    assert check_coverage_loss(coverage_loss)
    assert check_coverage_loss(cov_loop)


@pytest.mark.parametrize(("wrong", "diagnosis"), LOCAL_P_WRONG)
def test_local_p_rejects(wrong, diagnosis, capsys):
    assert_rejected(check_local_p_attention, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), COVERAGE_LOSS_WRONG)
def test_coverage_loss_rejects(wrong, diagnosis, capsys):
    assert_rejected(check_coverage_loss, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("mistakes", "table"), [(LOCAL_P_MISTAKES, LOCAL_P_WRONG),
                                                 (COVERAGE_LOSS_MISTAKES, COVERAGE_LOSS_WRONG)])
def test_every_local_p_and_coverage_loss_diagnosis_is_triggered(mistakes, table):
    assert {m.name for m in mistakes} == {d for _, d in table} - {"", MUTATION}


# --- uniform weights against hard attention: the chapter's predict-then-measure edition ----------
from attnbook.exercises.ch02 import EXERCISES, check_uniform_prediction  # noqa: E402

HARD_MEASURED = {"trained_wer": 0.49, "argmax_wer": 0.58, "sampled_wer": 0.77, "uniform_wer": 0.96,
                 "trained_per": 0.13, "uniform_per": 0.6}


@pytest.mark.parametrize("predicted, passed, diagnosis", [
    ("c", True, ""), (" C ", True, ""),
    ("a", False, "wrong choice"), ("b", False, "wrong choice"),  # the two plausible wrong predictions
    ("d", False, "not a choice"), (0.9, False, "not a choice"), (None, False, ""),
])
def test_uniform_prediction(predicted, passed, diagnosis, capsys):
    result = check_uniform_prediction(lambda: dict(HARD_MEASURED), predicted)
    assert bool(result) == passed and result.diagnosis == diagnosis, capsys.readouterr().out


@pytest.mark.parametrize("uniform, right, wrong", [(0.55, "a", "c"), (0.70, "b", "c"), (0.90, "c", "b")])
def test_uniform_prediction_follows_the_measurement(uniform, right, wrong, capsys):
    """The verdict is computed from the measurement, not stored: other numbers, another answer."""
    measured = dict(HARD_MEASURED, uniform_wer=uniform)
    assert check_uniform_prediction(lambda: measured, right)
    assert check_uniform_prediction(lambda: measured, wrong).diagnosis == "wrong choice"


@pytest.mark.parametrize("measured", [
    dict(HARD_MEASURED, uniform_wer=0.49),  # the trained model measured twice: scores not replaced
    dict(HARD_MEASURED, trained_wer=0.95, uniform_wer=0.97),  # an untrained model
    dict(HARD_MEASURED, argmax_wer=0.80),  # argmax and sampled swapped
    {k: v for k, v in HARD_MEASURED.items() if k != "sampled_wer"},  # measured without hard=True
    0.96,
])
def test_uniform_prediction_rejects_a_wrong_measurement(measured, capsys):
    result = check_uniform_prediction(lambda: measured, "c")
    assert not result and result.diagnosis == "measurement"


def test_uniform_prediction_is_kept_but_off_the_command_line():
    assert check_uniform_prediction not in EXERCISES.values()


# --- a decoder trained with uniform weights: the chapter's predict-then-measure edition ----------
from attnbook.exercises.ch02 import (  # noqa: E402
    baseline_wers, check_trained_uniform_prediction, _trained_uniform_outcome,
)

TRAINED_MEASURED = {"none": [0.617, 0.612, 0.625], "uniform": [0.618, 0.620, 0.621],
                    "band": [0.528, 0.530, 0.525], "additive": [0.496, 0.50, 0.49]}


@pytest.mark.parametrize("predicted, passed, diagnosis", [
    ("c", True, ""), (" C ", True, ""), ("(c)", True, ""),  # "(c)" refused before the tenth review
    ("a", False, "wrong choice"), ("b", False, "wrong choice"),  # the two plausible wrong predictions
    ("yes", False, "not a choice"), (0.6, False, "not a choice"), (None, False, ""),
])
def test_trained_uniform_prediction(predicted, passed, diagnosis, capsys):
    result = check_trained_uniform_prediction(lambda: dict(TRAINED_MEASURED), predicted)
    assert bool(result) == passed and result.diagnosis == diagnosis, capsys.readouterr().out


COMMITTED_NONE = [0.617, 0.613, 0.617]  # bahdanau_baselines.json, seeds 0-2
COMMITTED_BAND = [0.499, 0.494, 0.502]  # the corrected band


@pytest.mark.parametrize("none, uniform, band, accepted", [
    (TRAINED_MEASURED["none"], [0.53, 0.535, 0.53], TRAINED_MEASURED["band"], "a"),  # level with the band
    (TRAINED_MEASURED["none"], [0.49, 0.50, 0.51], TRAINED_MEASURED["band"], "a"),  # better than the band
    (TRAINED_MEASURED["none"], [0.57, 0.58, 0.56], TRAINED_MEASURED["band"], "b"),  # between the two
    (TRAINED_MEASURED["none"], [0.66, 0.67, 0.70], TRAINED_MEASURED["band"], "c"),  # far above no attention
    # the committed pattern: +0.0, +3.9, +2.5 against no attention, 12 to 16 points above the band
    (COMMITTED_NONE, [0.618, 0.652, 0.642], COMMITTED_BAND, "c"),
    # one seed 1.2 points below no attention (b), the others within a point (c): both accepted
    (COMMITTED_NONE, [0.605, 0.61, 0.615], COMMITTED_BAND, "bc"),
    # seeds in all three places: no choice is ruled out
    (COMMITTED_NONE, [0.505, 0.58, 0.62], COMMITTED_BAND, "abc"),
])
def test_trained_uniform_prediction_follows_the_seeds(none, uniform, band, accepted, capsys):
    """The verdict is computed from each seed's WERs, not stored: other numbers, another answer;
    a choice is refused only when no seed makes it."""
    measured = dict(TRAINED_MEASURED, none=none, uniform=uniform, band=band)
    assert _trained_uniform_outcome(none, uniform, band) == accepted
    for choice in "abc":
        result = check_trained_uniform_prediction(lambda: measured, choice)
        assert bool(result) == (choice in accepted), capsys.readouterr().out
        if choice not in accepted:
            assert result.diagnosis == "wrong choice"


def test_trained_uniform_committed_file_accepts_only_c(capsys):
    """The review's case: on the committed runs only (c) is right; (a) and (b) are refused."""
    from attnbook.results import load_result
    measure = lambda: baseline_wers(load_result("bahdanau_baselines.json"))  # noqa: E731
    assert check_trained_uniform_prediction(measure, "c")
    assert check_trained_uniform_prediction(measure, "a").diagnosis == "wrong choice"
    assert check_trained_uniform_prediction(measure, "b").diagnosis == "wrong choice"


@pytest.mark.parametrize("measured, diagnosis", [
    (dict(HARD_MEASURED), "decode-time swap"),  # the earlier edition's decode-time measurement
    (dict(TRAINED_MEASURED, uniform=TRAINED_MEASURED["none"]), "measurement"),  # one model read twice
    (dict(TRAINED_MEASURED, uniform=[0.95, 0.96, 0.97]), "measurement"),  # untrained / swapped numbers
    (dict(TRAINED_MEASURED, uniform=TRAINED_MEASURED["band"]), "measurement"),  # the band read as uniform
    ({k: v for k, v in TRAINED_MEASURED.items() if k != "band"}, "measurement"),  # the band missing
    ({k: v for k, v in TRAINED_MEASURED.items() if k != "none"}, "measurement"),  # a model missing
    (dict(TRAINED_MEASURED, none=0.617), "measurement"),  # one seed as a float, not a list per seed
    (0.62, "measurement"),
])
def test_trained_uniform_prediction_rejects_a_wrong_measurement(measured, diagnosis, capsys):
    result = check_trained_uniform_prediction(lambda: measured, "b")
    assert not result and result.diagnosis == diagnosis


def test_trained_uniform_prediction_is_on_the_command_line():
    assert EXERCISES["trained_uniform_wers"] is check_trained_uniform_prediction


def test_baseline_wers_reads_the_committed_file():
    from attnbook.results import load_result
    wers = baseline_wers(load_result("bahdanau_baselines.json"))
    assert set(wers) == {"none", "uniform", "band", "additive"} and all(len(v) == 3 for v in wers.values())
    assert baseline_wers({"runs": [{"score": "none", "seed": 1, "test_wer": 0.2},
                                   {"score": "none", "seed": 0, "test_wer": 0.1}]}) == {"none": [0.1, 0.2]}


def test_measure_uniform_attention_with_hard_copies_leaves_the_model_alone():
    """On a tiny untrained model: every key present, the model's weighting and scores unchanged."""
    from attnbook.data import build_vocabs, load_g2p
    from attnbook.exercises.ch02 import measure_uniform_attention
    from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    torch.manual_seed(0)
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(len(src_vocab), len(tgt_vocab), emb_dim=8,
                                                          enc_hidden=8, dec_hidden=8)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = torch.random.get_rng_state()
    out = measure_uniform_attention(model, data.test[:20], src_vocab, tgt_vocab, hard=True)
    assert {"trained_wer", "uniform_wer", "argmax_wer", "sampled_wer"} <= set(out)
    assert model.decoder.weighting == "soft" and type(model.decoder.score).__name__ == "AdditiveScore"
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert torch.equal(state, torch.random.get_rng_state())


def test_command_line_needs_only_the_prediction(tmp_path, capsys):
    """``python -m attnbook.exercises ch02 answers.py``: an answers file with the prediction
    variable alone (no helper copied from the notebook) is checked against the committed WERs."""
    from attnbook.exercises import ch02
    from attnbook.exercises.__main__ import check_file
    saved = dict(ch02.EXERCISES)
    try:  # only this exercise: the others need their functions
        ch02.EXERCISES.clear()
        ch02.EXERCISES["trained_uniform_wers"] = saved["trained_uniform_wers"]
        answers = tmp_path / "answers.py"
        for text, status, says in (('prediction_trained_uniform_wers = "c"\n', 0, "1 of 1"),
                                   ('prediction_trained_uniform_wers = "a"\n', 1, "you chose (a)"),
                                   ("x = 1\n", 1, "not done yet")):
            answers.write_text(text)
            assert check_file("ch02", answers) == status
            assert says in capsys.readouterr().out
    finally:
        ch02.EXERCISES.clear()
        ch02.EXERCISES.update(saved)


@pytest.mark.parametrize("predicted, passed, diagnosis", [
    ((0.28, 0.73), True, ""), ([0.279, 0.725], True, ""), ((0.31, 0.73), False, "wrong totals"),
    ((0.30, 0.70), False, "wrong totals"),
    ((1.0, 1.0), False, "renormalised"), ((2.51, 6.59), False, "softmax left out"),
    ((0.73, 0.28), False, "swapped"), ((0.5, 0.5), False, "wrong totals"),
    ((0.11, 0.11), False, "Gaussian normalised"), ((0.20, 0.80), False, "wrong totals"),
    ("big", False, "not two numbers"), (None, False, ""),
])
def test_local_p_totals_prediction(predicted, passed, diagnosis, capsys):
    from attnbook.exercises.ch02 import check_local_p_totals
    result = check_local_p_totals(predicted)
    assert bool(result) == passed and result.diagnosis == diagnosis, capsys.readouterr().out


def test_local_p_totals_unrecognised_pairs_get_no_diagnosis_line(capsys):
    """An unrecognised pair is told only that neither total matches (review r54-02, defect 8)."""
    from attnbook.exercises.ch02 import check_local_p_totals
    check_local_p_totals((0.20, 0.80))
    out = capsys.readouterr().out
    assert "neither total matches" in out and "Gaussian factor" not in out


@pytest.mark.parametrize("predicted, verdicts", [
    ((0.20, 0.80), ("too low", "too high")), ((0.31, 0.73), ("too high", "right")),
    ((0.28, 0.60), ("right", "too low")),
])
def test_local_p_totals_name_the_direction_never_the_value(predicted, verdicts, capsys):
    """A wrong guess is told which total is too high or too low, never the measured totals
    (review r60-02, defect 6)."""
    from attnbook.exercises.ch02 import check_local_p_totals
    check_local_p_totals(predicted)
    out = capsys.readouterr().out
    assert f"sigma 1 is {verdicts[0]}, at sigma 3 {verdicts[1]}" in out
    assert "0.28" not in out and "0.73" not in out and "0.2785" not in out


def test_local_p_totals_match_the_reference_formula():
    from attnbook.exercises.ch02 import _local_p_total
    j = torch.arange(9.0)
    for sigma in (1.0, 3.0):
        assert abs(_local_p_total(sigma) - float((torch.exp(-(j - 4) ** 2 / (2 * sigma**2)) / 9).sum())) < 1e-6


@pytest.mark.parametrize("new_hidden, h_tilde, passed, diagnosis", [
    (False, True, True, ""), (True, True, False, "state reads the memory"),
    (True, False, False, "state reads the memory"), (False, False, False, "h_tilde unchanged"),
    ("no", True, False, "not a choice"), (None, True, False, ""),
])
def test_luong_prediction(new_hidden, h_tilde, passed, diagnosis, capsys):
    from attnbook.exercises.ch02 import check_luong_prediction
    result = check_luong_prediction(new_hidden, h_tilde)
    assert bool(result) == passed and result.diagnosis == diagnosis, capsys.readouterr().out
