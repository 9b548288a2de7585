"""Checkers for Chapter 3 (self-attention and positional encoding).

Expected answers come from the library (``attnbook.layers``) or from closed forms written out
below; each checker lists the known mistakes it can name. ``EXERCISES`` maps the notebook's
function names to their checkers.
Legend: B batch, T query length, S key length, Dk query/key width, Dv value width, D model width.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import torch

from attnbook.exercises.core import Case, CheckResult, Mistake, compare, run_cases
from attnbook.exercises.predictions import PREDICTION_OFF, Outcome, check_prediction
from attnbook.layers.attention import scaled_dot_product_attention
from attnbook.layers.masks import token_mask
from attnbook.layers.positional import sinusoidal_encoding
from attnbook.data.synthetic import reversal_task
from attnbook.train import evaluating


def _qkv(seed: int, batch: tuple[int, ...], t: int, s: int, dk: int, dv: int, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(*batch, t, dk, generator=g)
    k = scale * torch.randn(*batch, s, dk, generator=g)
    v = torch.randn(*batch, s, dv, generator=g)
    return q, k, v


def _sdpa(q, k, v, divisor=None, dim=-1):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if divisor is None else divisor)  # (..., T, S)
    return torch.softmax(scores, dim=dim) @ v


def _sdpa_weights(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (..., T, S)


def _sdpa_global_max(q, k, v):
    """The softmax shifted by the largest score of the whole tensor, not of each row."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    e = (scores - scores.max()).exp()
    return (e / e.sum(-1, keepdim=True)) @ v


def _sdpa_shifted(q, k, v, how):
    """Known slips in the row-max shift: ``how`` = "no keepdim" (a (..., T) max broadcast along
    the keys, which runs only when T = S), "query axis" (each key's max over the queries), or
    "numerator only" (the shifted exponentials over the unshifted ones' sum), or "query sum" (the
    shifted exponentials over their sum along the queries)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if how == "no keepdim":
        return ((scores - scores.amax(dim=-1)).exp()
                / (scores - scores.amax(dim=-1)).exp().sum(-1, keepdim=True)) @ v
    if how == "query axis":
        e = (scores - scores.amax(dim=-2, keepdim=True)).exp()
        return (e / e.sum(-1, keepdim=True)) @ v
    shifted = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    if how == "query sum":  # each row shifted by its own max, divided by a sum over the queries
        return (shifted / shifted.sum(-2, keepdim=True)) @ v
    return (shifted / scores.exp().sum(-1, keepdim=True)) @ v


def _same_with_nan(got: torch.Tensor, wrong: torch.Tensor) -> bool:
    return bool(torch.equal(got.isnan(), wrong.isnan())
                and torch.allclose(got.nan_to_num(0.0), wrong.nan_to_num(0.0), atol=1e-4, rtol=1e-4))


class _KeyTransposedAll:
    """What the checker sees when the answer called ``key.T`` on a key of 3 or more dimensions."""

    def __init__(self, error: object):
        self.error = error

    def __repr__(self) -> str:
        return f"key.T on a batched key ({self.error})"


class _KeyTransposed12:
    """What the checker sees when the answer swapped dimensions 1 and 2 of the key (right only
    for a 3-dimensional key) and then raised."""

    def __init__(self, error: object):
        self.error = error

    def __repr__(self) -> str:
        return f"key.transpose(1, 2) on a key of another number of dimensions ({self.error})"


def _uses_transpose_1_2(fn: Callable) -> bool:
    import inspect
    import re
    try:
        source = inspect.getsource(getattr(fn, "__wrapped__", fn))
    except (OSError, TypeError):
        return False
    return re.search(r"\.transpose\(\s*1\s*,\s*2\s*\)", source) is not None


def _key_t_named(fn: Callable) -> Callable:
    """``fn``, but when it calls ``.T`` on a tensor of 3 or more dimensions (PyTorch warns) and
    then raises or returns a wrongly shaped answer, the checker gets a ``_KeyTransposedAll``."""
    import warnings

    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def wrapped(query, key, value, *args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = fn(query, key, value, *args, **kwargs)
            except NotImplementedError:
                raise
            except Exception as err:  # noqa: BLE001 - named below when key.T caused it
                if key.dim() >= 3 and (_warned_t(caught) or _uses_dot_t(fn)):
                    return _KeyTransposedAll(f"{type(err).__name__}: {err}")
                if key.dim() != 3 and isinstance(err, (IndexError, RuntimeError)) \
                        and _uses_transpose_1_2(fn):
                    return _KeyTransposed12(f"{type(err).__name__}: {err}")
                raise
        for w in caught:  # let the reader still see their warnings
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        wrong_shape = not isinstance(got, torch.Tensor) or got.shape != (*query.shape[:-1], value.shape[-1])
        if key.dim() >= 3 and _warned_t(caught) and wrong_shape:
            return _KeyTransposedAll(f"output shape {getattr(got, 'shape', None)}")
        return got

    return wrapped


def _warned_t(caught) -> bool:
    return any("x.T" in str(w.message) for w in caught)


def _uses_dot_t(fn: Callable) -> bool:
    import inspect
    import re
    try:
        source = inspect.getsource(getattr(fn, "__wrapped__", fn))
    except (OSError, TypeError):
        return False
    return re.search(r"\.T\b", source) is not None


def _empty_rows(mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """(..., T, 1): True for the queries that may attend to no key."""
    return ~mask.expand(*shape[:-1], mask.shape[-1]).any(-1, keepdim=True)


def _nan_only_in_empty_rows(args: tuple, got: object) -> bool:
    q, k, v, mask = args
    right = scaled_dot_product_attention(q, k, v, mask)[0]
    if not isinstance(got, torch.Tensor) or got.shape != right.shape:
        return False
    empty = _empty_rows(mask, right.shape).expand_as(right)
    return bool(got[empty].isnan().all() and torch.allclose(got[~empty], right[~empty], atol=1e-5))


def _finite_fill(q, k, v, mask):
    """A finite fill (-1e9): a query with no allowed key spreads its weight evenly."""
    right = scaled_dot_product_attention(q, k, v, mask)[0]  # (..., T, Dv)
    even = v.mean(-2, keepdim=True).expand_as(right)  # (..., T, Dv): uniform weights
    return torch.where(_empty_rows(mask, right.shape), even, right)


SDPA_MISTAKES = [
    Mistake("mask ignored", "your output is the UNMASKED attention: set the scores where the mask is "
            "False to -inf before the softmax (mask: True = may attend).",
            gives=lambda q, k, v, mask: scaled_dot_product_attention(q, k, v)[0]),
    Mistake("mask inverted", "you hid the keys where the mask is True: in this book True = may "
            "attend, so fill the scores where the mask is False (scores.masked_fill(~mask, -inf)).",
            gives=lambda q, k, v, mask: scaled_dot_product_attention(q, k, v, ~mask)[0]),
    Mistake("masked row gives nan", "the query whose every key is masked got nan: its scores are "
            "all -inf, so its largest score is -inf and -inf - (-inf) is nan. Give such a row "
            "weights 0, so that its output is 0 (the library's masked_softmax does): e.g. replace "
            "a row maximum of -inf by 0 before subtracting it, and divide by the sum only where it "
            "is above 0.", when=lambda args, got: len(args) == 4 and _nan_only_in_empty_rows(args, got)),
    Mistake("finite fill", "the query with no allowed key got the mean of the values: a finite fill "
            "such as -1e9 leaves all its scores equal, so the softmax spreads its row evenly over "
            "keys it may not see. Fill with -inf and give a row with no allowed key weights 0 "
            "(output 0), as masked_softmax does.", gives=_finite_fill),
    Mistake("unscaled", "the scores look unscaled: divide Q Kᵀ by √d_k.", gives=lambda q, k, v: _sdpa(q, k, v, 1.0)),
    Mistake("wrong axis", "the softmax runs over the wrong axis: each query's weights over the keys must sum "
            "to 1, so softmax over the last dimension of the (..., T, S) scores.",
            gives=lambda q, k, v: _sdpa(q, k, v, dim=-2)),
    Mistake("scaled by length", "you divided by √(sequence length); d_k is the width of a query, query.shape[-1].",
            when=lambda args, got: any(
                isinstance(got, torch.Tensor) and got.shape == _sdpa(*args).shape
                and torch.allclose(got, _sdpa(*args, math.sqrt(n)), atol=1e-5)
                for n in (args[0].shape[-2], args[1].shape[-2]))),
    Mistake("scaled by d_k", "divide by √d_k, not by d_k.",
            gives=lambda q, k, v: _sdpa(q, k, v, q.shape[-1])),
    Mistake("scaled by √d_v", "you divided by √(the value's width), value.shape[-1]; the scale "
            "belongs to the scores Q Kᵀ, so it is √d_k, the width of a query and a key, "
            "query.shape[-1] (the two differ when d_v ≠ d_k).",
            gives=lambda q, k, v: _sdpa(q, k, v, math.sqrt(v.shape[-1]))),
    Mistake("multiplied by √d_k", "you multiplied the scores by √d_k: divide by it, to bring their "
            "variance back to 1.", gives=lambda q, k, v: _sdpa(q, k, v, 1 / math.sqrt(q.shape[-1]))),
    Mistake("key.T", "`key.T` reverses ALL the dimensions of a tensor: a (B, S, Dk) key becomes (Dk, S, B), "
            "not (B, Dk, S). Swap only the last two: key.mT or key.transpose(-2, -1).",
            when=lambda args, got: isinstance(got, _KeyTransposedAll)),
    Mistake("key.transpose(1, 2)", "`key.transpose(1, 2)` swaps dimensions 1 and 2, which are the last "
            "two only for a (B, S, Dk) key: a (S, Dk) key has no dimension 2 (IndexError), and a "
            "(B, H, S, Dk) key becomes (B, S, H, Dk). Count from the end: key.transpose(-2, -1) or key.mT.",
            when=lambda args, got: isinstance(got, _KeyTransposed12)),
    Mistake("global max subtracted", "your output holds nan where some rows' scores are far below the "
            "largest score of the whole tensor: you subtracted ONE maximum for everything, so every "
            "exponential of such a row underflows to 0 and 0 / 0 is nan. Subtract each row's own "
            "largest score (amax over the last dimension, keepdim=True).",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _sdpa(*args).shape
            and _same_with_nan(got, _sdpa_global_max(*args))
            and not bool(torch.isfinite(got).all())),
    Mistake("max without keepdim", "your row maximum lost its last dimension: scores.amax(dim=-1) "
            "is (..., T), and subtracting it from the (..., T, S) scores lines it up with the KEYS, "
            "so key j's scores are shifted by query j's maximum (it runs only when T = S, and then "
            "gives wrong weights). Keep the dimension: amax(dim=-1, keepdim=True).",
            gives=lambda q, k, v: _sdpa_shifted(q, k, v, "no keepdim")),
    Mistake("sum over the queries", "you shifted each row by its own maximum but divided by a sum "
            "over the QUERIES (sum(dim=-2)): each query's weights over the keys must sum to 1, so "
            "divide by the sum over the last dimension, sum(-1, keepdim=True).",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _sdpa(*args).shape
            and bool(torch.isfinite(got).all())
            and torch.allclose(got, _sdpa_shifted(*args, "query sum"), atol=1e-5, rtol=1e-5)),
    Mistake("max over the queries", "you subtracted each key's maximum over the queries "
            "(amax(dim=-2)): that shifts the scores of one row by different amounts, which changes "
            "its weights. Subtract each row's own maximum, amax(dim=-1, keepdim=True): one number "
            "per query.", gives=lambda q, k, v: _sdpa_shifted(q, k, v, "query axis")),
    Mistake("shift in the numerator only", "you shifted the numerator, exp(s - max), but divided "
            "by the sum of the unshifted exp(s): the factor e^-max cancels only when both are "
            "shifted, so each row is scaled by e^-max and no longer sums to 1. Divide by the sum "
            "of the shifted exponentials.", gives=lambda q, k, v: _sdpa_shifted(q, k, v, "numerator only")),
    Mistake("softmax overflowed", "your output holds inf or nan where the scores are large: exp of a "
            "score above about 88 is inf in float32, and inf / inf is nan. Subtract each row's largest "
            "score before the exponential; the weights do not change.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.is_floating_point()
            and not bool(torch.isfinite(got).all()) and bool(torch.isfinite(_sdpa(*args)).all())),
    Mistake("weights transposed", "you multiplied the value by the TRANSPOSED weights, Aᵀ V: row i "
            "of Aᵀ holds the weights every query gives key i, not query i's weights over the keys "
            "(it runs only when T = S). Query i's output is row i of A times V: weights @ value.",
            gives=lambda q, k, v: _sdpa_weights(q, k).transpose(-2, -1) @ v),
    Mistake("returns weights", "you returned the attention weights: multiply them by the value.",
            gives=lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)),
]


_NOT_ASKED = object()  # a checker called with no prediction checks the function alone

# --- exercise 1 as predict, then measure: scores (1000, 999, 0) ---------------------------------
# One query, d_k = 1, three keys whose scores are 1000, 999 and 0; the values are the identity, so
# the output row is the weights. Exactly: key 0 gets e / (e + 1) = 0.7311, key 2 e^-1000 = 0.
SHIFT_OUTCOME = Outcome(
    exercise="scores 1000, 999 and 0",
    label="weight on key 0",
    low=0.730, high=0.732,
    how_to_measure="run the checker with your function: it calls batched_attention(query [[1.0]], "
                   "key [[1000.0], [999.0], [0.0]], value torch.eye(3)), whose output row is the "
                   "weights.",
    below="Only the gaps between scores matter: subtracting the largest, 1000, leaves (0, -1, "
          "-1000), whose exponentials are 1, e^-1 = 0.37 and e^-1000 = 0 (exactly, in float32). "
          "Key 0 gets 1 / (1 + 0.37) = 0.73: the gap of 1 between 1000 and 999 decides, not the "
          "size of the scores, and key 2, 1000 below the top, gets nothing.",
    inside="Only the gaps between scores matter: (1000, 999, 0) weighs like (1, 0, -999), so key "
           "0 gets e / (e + 1) = 0.73, key 1 the rest and key 2 nothing. That is why subtracting "
           "each row's largest score changes the weights not at all, only the overflow.",
    above="Large scores do not make a softmax sharper by themselves; only their gaps do. 1000 and "
          "999 differ by 1, so key 0 gets e / (e + 1) = 0.73 and key 1 keeps 0.27; only key 2, "
          "1000 below the top, gets 0. (Section 3.2's saturation comes from gaps that grow with "
          "d_k, not from large values.)",
)


def _shift_measurement(fn: Callable) -> float:
    """Key 0's weight for the scores (1000, 999, 0), measured with the reader's function."""
    query = torch.tensor([[1.0]])  # (T, Dk) = (1, 1)
    key = torch.tensor([[1000.0], [999.0], [0.0]])  # (S, Dk) = (3, 1)
    out = torch.as_tensor(_without_softmax(fn)(query, key, torch.eye(3)))  # (1, 3): the weights
    return out.reshape(-1)[0].item()


def check_scaled_dot_product_attention(fn: Callable, prediction: object = _NOT_ASKED,
                                       ) -> CheckResult:
    """``batched_attention(query (..., T, Dk), key (..., S, Dk), value (..., S, Dv), mask=None)
    -> (..., T, Dv)``; ``mask`` is boolean, broadcastable to ``(..., T, S)``, True = may attend.
    Given a ``prediction`` (the weight on key 0 for the scores 1000, 999 and 0), the checker then
    measures it with ``fn`` and explains the gap (``SHIFT_OUTCOME``)."""
    result = _check_sdpa_cases(fn)
    if prediction is _NOT_ASKED or not result:
        return result
    return check_prediction(SHIFT_OUTCOME, prediction, _shift_measurement(fn))


def _empty_row_mask(seed: int, batch: tuple[int, ...], t: int, s: int) -> torch.Tensor:
    """A random (..., T, S) mask (True = may attend) in which the first query of the first
    sequence may attend to no key, and every other row keeps at least one key and hides one."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*batch, t, s, generator=g) < 0.6  # (..., T, S)
    mask[..., 0] = True  # every row keeps key 0 ...
    mask[..., -1] = False  # ... and hides the last key
    mask.view(-1, t, s)[0, 0] = False  # ... except one query with no allowed key at all
    return mask


def _check_sdpa_cases(fn: Callable) -> CheckResult:
    cases = []
    hint = ("scores = Q Kᵀ / √d_k with d_k = query.shape[-1]; masked scores -inf; softmax over "
            "the keys (the last dimension of the scores), each row shifted by its own largest "
            "score; a row with no allowed key gets weights 0; then weights @ V.")
    # a case that breaks a textbook softmax comes first: scores near 1000 (exp overflows)
    q, k, v = _qkv(6, (), 4, 4, 8, 3, 30.0)
    cases.append(Case(f"scores near 1000: query {tuple(q.shape)}, key {tuple(k.shape)}, value "
                      f"{tuple(v.shape)}", (q, k, v), scaled_dot_product_attention(q, k, v)[0],
                      hint=hint))
    for n, (batch, t, s, dk, dv, scale) in enumerate([
        ((), 3, 3, 4, 4, 1.0), ((2,), 3, 5, 16, 2, 1.0), ((2, 3), 4, 6, 64, 8, 1.0), ((1,), 2, 4, 8, 3, 3.0),
        ((3,), 1, 7, 9, 5, 1.0), ((2,), 5, 1, 4, 3, 1.0),
        ((2,), 3, 4, 8, 3, 30.0),  # scores in the hundreds: exp overflows without the row max
    ]):
        q, k, v = _qkv(n, batch, t, s, dk, dv, scale)
        expected = scaled_dot_product_attention(q, k, v)[0]
        cases.append(Case(
            f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}", (q, k, v), expected,
            hint=hint,
        ))
    # then masks (True = may attend), one with a query whose every key is masked: its output
    # must be 0, as the library's masked_softmax gives, not nan
    for n, (batch, t, s) in enumerate([((2,), 3, 5), ((2, 2), 4, 4)], start=20):
        q, k, v = _qkv(n, batch, t, s, 8, 3)
        mask = _empty_row_mask(n, batch, t, s)  # (..., T, S)
        cases.append(Case(
            f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}, mask "
            f"{tuple(mask.shape)} in which query 0 of the first sequence may see no key",
            (q, k, v, mask), scaled_dot_product_attention(q, k, v, mask)[0], hint=hint))
    q, k, v = _qkv(22, (2, 3), 4, 4, 8, 3)
    causal = torch.ones(4, 4, dtype=torch.bool).tril()  # (T, S): broadcast over (2, 3)
    cases.append(Case(f"query {tuple(q.shape)}, a causal (4, 4) mask for every sequence",
                      (q, k, v, causal), scaled_dot_product_attention(q, k, v, causal)[0],
                      hint=hint))
    return run_cases("scaled dot-product attention", _key_t_named(_without_softmax(fn)), cases,
                     SDPA_MISTAKES)


class _LibrarySoftmax(RuntimeError):
    pass


def _without_softmax(fn: Callable) -> Callable:
    """``fn`` with PyTorch's softmax and every ready-made attention out of reach: while it runs,
    ``torch.softmax``, ``F.softmax``, ``Tensor.softmax``, ``masked_softmax``,
    ``F.scaled_dot_product_attention`` and
    the library's ``scaled_dot_product_attention`` raise, and are put back afterwards."""
    import attnbook.layers as layers
    import attnbook.layers.attention as attention
    import attnbook.layers.masks as masks
    import torch.nn.functional as F  # noqa: N812 - PyTorch's own name

    def refuse(*args, **kwargs):
        raise _LibrarySoftmax("the exercise asks for your own softmax: torch.softmax, F.softmax, "
                              "torch.special.softmax, log_softmax (then .exp()), Tensor.softmax, "
                              "masked_softmax and ready-made attention are off limits here; "
                              "subtract each row's largest score, exponentiate, divide by the sum.")
    hidden = _hiding(fn, {torch.softmax, F.softmax, torch.special.softmax, torch.log_softmax,
                          F.log_softmax, torch.special.log_softmax, masks.masked_softmax,
                          F.scaled_dot_product_attention, attention.scaled_dot_product_attention},
                     [vars(torch), vars(F), vars(torch.special), vars(attention), vars(masks),
                      vars(layers)],
                     refuse)
    if not callable(fn):
        return fn

    def wrapped(*args, **kwargs):
        methods = ("softmax", "log_softmax")  # the method forms, x.softmax(-1), x.log_softmax(-1)
        saved = {name: vars(torch.Tensor).get(name) for name in methods}
        for name in methods:
            setattr(torch.Tensor, name, refuse)
        try:
            return hidden(*args, **kwargs)
        finally:
            for name, value in saved.items():
                if value is not None:
                    setattr(torch.Tensor, name, value)
                else:
                    delattr(torch.Tensor, name)

    wrapped.__wrapped__ = fn
    return wrapped


# --- attention pooling: one query summarises a padded sequence ------------------------------------
def _pool(x, query, lengths, divisor=None, mask=True, dim=-1, renormalise=True, weights_only=False):
    B, S, D = x.shape
    scores = x @ query / (math.sqrt(D) if divisor is None else divisor)  # (B, S)
    real = token_mask(lengths, S)  # (B, S)
    if mask and renormalise:
        scores = scores.masked_fill(~real, float("-inf"))
    weights = torch.softmax(scores, dim=dim)  # (B, S)
    if mask and not renormalise:
        weights = weights * real
    if weights_only:
        return weights
    return (weights[:, :, None] * x).sum(1)  # (B, D)


def _pool_fill(x, query, lengths, value):
    scores = x @ query / math.sqrt(x.shape[-1])  # (B, S)
    weights = torch.softmax(scores.masked_fill(~token_mask(lengths, x.shape[1]), value), dim=-1)
    return (weights[:, :, None] * x).sum(1)  # (B, D)


def _pool_zeroed_tokens(x, query, lengths):
    real = token_mask(lengths, x.shape[1])[:, :, None]  # (B, S, 1)
    zeroed = x * real  # (B, S, D): padding set to 0, scores left unmasked
    weights = torch.softmax(zeroed @ query / math.sqrt(x.shape[-1]), dim=-1)  # (B, S)
    return (weights[:, :, None] * zeroed).sum(1)  # (B, D)


def _pool_inputs(seed: int, B: int, S: int, D: int, lengths: list[int], scale: float,
                 shift: float = 0.0):
    """``shift``: added to every score (through x, along the query), real and padded alike."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, S, D, generator=g)  # (B, S, D), padding included
    query = scale * torch.randn(D, generator=g)  # (D,)
    x = x + shift * math.sqrt(D) * query / query.dot(query)  # each score moves by `shift`
    return x, query, torch.tensor(lengths)


def _pool_count_divided(x, query, lengths):
    real = token_mask(lengths, x.shape[1])  # (B, S)
    weights = torch.exp(x @ query / math.sqrt(x.shape[-1])) * real / lengths[:, None]  # (B, S)
    return (weights[:, :, None] * x).sum(1)  # (B, D)


def _pool_left_padded(x, query, lengths):
    S = x.shape[1]
    real = torch.arange(S)[None, :] >= (S - lengths)[:, None]  # (B, S): the last n as if real
    scores = (x @ query / math.sqrt(x.shape[-1])).masked_fill(~real, float("-inf"))  # (B, S)
    return (torch.softmax(scores, dim=1)[:, :, None] * x).sum(1)  # (B, D)


POOL_MISTAKES = [
    Mistake("left padding", "you treated the last `lengths[b]` positions as the real ones (padding on the "
            "left); here the padding comes after the tokens: position j is real when j < lengths[b] "
            "(token_mask(lengths, S)).",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _pool(*args).shape
            and bool((args[2] < args[0].shape[1]).any())
            and torch.allclose(got, _pool_left_padded(*args), atol=1e-5)),
    Mistake("divided by the length again", "the softmax weights already sum to 1, so their weighted sum "
            "is already an average: do not divide it by the length as well.",
            gives=lambda x, q, n: _pool(x, q, n) / n[:, None]),
    Mistake("mean instead of sum", "you took the mean of the weighted tokens (.mean(1)), which "
            "divides the answer by S, padding included: the softmax weights already sum to 1, "
            "so add the weighted tokens up (.sum(1)).",
            gives=lambda x, q, n: _pool(x, q, n) / x.shape[1]),
    Mistake("scaled after the softmax", "you divided the pooled vector by √D after the softmax; the "
            "scaling belongs to the scores, before the softmax, where it changes the weights "
            "(afterwards it only shrinks the answer).",
            gives=lambda x, q, n: _pool(x, q, n, divisor=1.0) / math.sqrt(x.shape[-1])),
    Mistake("softmax over a size-1 dimension", "every weight came out 1, so you returned the sum of the "
            "real tokens: the softmax ran over a dimension of size 1 (scores shaped (B, S, 1), softmax "
            "over the last). Make the scores (B, S) and take the softmax over the positions, dim 1.",
            gives=lambda x, q, n: (x * token_mask(n, x.shape[1])[:, :, None]).sum(1)),
    Mistake("scaled by each length", "you divided each sequence's scores by √(its own length); the "
            "divisor is √D, the width of a vector, the same for every sequence.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _pool(*args).shape
            and any(torch.allclose(got, _pool(*args, divisor=d * args[2][:, None].float().sqrt()),
                                   atol=1e-5) for d in (1.0, math.sqrt(args[0].shape[-1])))),
    Mistake("divided by the count", "you divided exp(score) by the number of real tokens, so the weights "
            "do not sum to 1: a softmax divides by the sum of exp(score) over the real tokens.",
            gives=_pool_count_divided),
    Mistake("padding attended", "the padded positions got weight: set their scores to -inf before the "
            "softmax (token_mask(lengths, S) is True on the real tokens).",
            gives=lambda x, q, n: _pool(x, q, n, mask=False)),
    Mistake("masked after the softmax", "you zeroed the padding's weights after the softmax, so each row "
            "no longer sums to 1: mask the scores (-inf) before it.",
            gives=lambda x, q, n: _pool(x, q, n, renormalise=False)),
    Mistake("padding filled with a finite number", "masked_fill(..., -1e4) (or another finite number) "
            "still gives the padding weight when the real scores are lower than the fill: here they "
            "are about -20000, so the padding took the weight. The padding's weight must be exactly 0 "
            "whatever the scores are: fill with float('-inf').",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _pool(*args).shape
            and any(torch.allclose(got, _pool_fill(*args, fill), atol=1e-3, rtol=1e-4)
                    for fill in (-1e4, -1e3, -1e5))),
    Mistake("padding scored 0", "masked_fill(..., 0.0) gives the padding a score of 0, and exp(0) = 1 is "
            "still weight: fill the padded scores with -inf.",
            gives=lambda x, q, n: _pool_fill(x, q, n, 0.0)),
    Mistake("padded tokens zeroed", "you zeroed the padded tokens instead of masking their scores: a zero "
            "vector still scores 0, and exp(0) = 1 takes weight away from the real tokens. Set the padded "
            "scores to -inf before the softmax.",
            gives=lambda x, q, n: _pool_zeroed_tokens(x, q, n)),
    Mistake("padding mask off by one", "one padded position too many is treated as real: position j is "
            "real when j < lengths[b] (token_mask(lengths, S)), not j <= lengths[b].",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _pool(*args).shape
            and torch.allclose(got, _pool(args[0], args[1], (args[2] + 1).clamp(max=args[0].shape[1])),
                               atol=1e-5)),
    Mistake("padding mask one short", "the last real token is treated as padding: position j is real when "
            "j < lengths[b], so a sequence of length n keeps positions 0 .. n - 1.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _pool(*args).shape
            and bool((args[2] > 1).all())
            and torch.allclose(got, _pool(args[0], args[1], args[2] - 1), atol=1e-5)),
    Mistake("multiplied by √D", "you multiplied the scores by √D: divide x · query by √D.",
            gives=lambda x, q, n: _pool(x, q, n, divisor=1 / math.sqrt(x.shape[-1]))),
    Mistake("max pooling", "that is the largest real value of each feature (max pooling): weight the "
            "tokens by softmax(x · query / √D) and add them up instead.",
            gives=lambda x, q, n: x.masked_fill(~token_mask(n, x.shape[1])[:, :, None],
                                                float("-inf")).amax(1)),
    Mistake("unscaled", "the scores look unscaled: divide x · query by √D.",
            gives=lambda x, q, n: _pool(x, q, n, divisor=1.0)),
    Mistake("scaled by D", "divide by √D, not by D.",
            gives=lambda x, q, n: _pool(x, q, n, divisor=float(x.shape[-1]))),
    Mistake("scaled by length", "divide by √D, the width of a vector, not by √(sequence length).",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == _pool(*args).shape
            and any(torch.allclose(got, _pool(*args, divisor=math.sqrt(float(n))), atol=1e-5)
                    for n in {args[0].shape[1], *args[2].tolist()})),
    Mistake("softmax over the batch", "the softmax runs over the positions of each sequence (dim 1 of the "
            "(B, S) scores), not over the batch.", gives=lambda x, q, n: _pool(x, q, n, dim=0)),
    Mistake("mean of the real tokens", "that is the mean of the real tokens: weight them by "
            "softmax(x · query / √D) instead, so the query decides what counts.",
            gives=lambda x, q, n: (x * token_mask(n, x.shape[1])[:, :, None]).sum(1) / n[:, None]),
    Mistake("weights @ x", "weights @ x with weights (B, S) and x (B, S, D) multiplies the whole "
            "(B, S) matrix into every sequence and gives (B, B, D): each sequence mixed with the "
            "others' weights. Weight each sequence by its own row: (weights[:, :, None] * x).sum(1), "
            "or (weights[:, None, :] @ x)[:, 0].",
            gives=lambda x, query, lengths: _pool(x, query, lengths, weights_only=True) @ x),
    Mistake("returns weights", "you returned the (B, S) weights: return their weighted sum of the tokens.",
            gives=lambda x, q, n: _pool(x, q, n, weights_only=True)),
]


# --- exercise 2 as predict, then measure: a repeated token ---------------------------------------
# Two real tokens whose scores tie (each weight 1/2), then a copy of token 0 appended: three tied
# positions, 1/3 each, so the two copies of token 0 get 2/3 together (a padded position follows).
REPEAT_OUTCOME = Outcome(
    exercise="a repeated token",
    label="weight on the two copies of token 0",
    low=0.79, high=0.81,
    how_to_measure="run the checker with your function: it pools x = [e_0, e_1, e_0, padding] "
                   "(one-hot tokens, length 3) with the query 2 ln 2 · e_0, so token 0 scores ln 2 "
                   "and token 1 scores 0, and the pooled vector's first entry is the weight on the "
                   "copies of e_0.",
    below="A softmax over positions gives each position its own share, e^score: each copy of "
          "token 0 gets e^(ln 2) = 2 parts and token 1 gets 1, so the two copies get 4/5 = 0.8, up "
          "from 2/3 with one copy. Attention pooling ignores order (section 3.3), not repetition: "
          "it weights a multiset, so a copy adds its own e^score to the total. Max pooling would "
          "not change at all.",
    inside="Each copy gets its own share of the softmax, e^score: 2 + 2 parts against token 1's "
           "1, so 4/5. Attention pooling weights a multiset, not a set; max pooling would ignore "
           "the copy.",
    above="The copy has the same score as the original, so it does not sharpen the softmax: "
          "each copy keeps its 2 parts and token 1 its 1, so the two copies get 4/5 together, "
          "not more.",
)


def _repeat_measurement(fn: Callable) -> float:
    """The pooled weight on the two copies of token 0, measured with the reader's function."""
    x = torch.zeros(1, 4, 4)  # (B, S, D)
    x[0, 0, 0] = x[0, 2, 0] = 1.0  # token 0, twice
    x[0, 1, 1] = 1.0  # token 1
    x[0, 3] = 5.0  # padding: must get no weight
    query = torch.tensor([2 * math.log(2), 0.0, 0.0, 0.0])  # /√D = 2: token 0 scores ln 2
    pooled = torch.as_tensor(fn(x, query, torch.tensor([3])))
    return pooled.reshape(-1)[0].item()  # (B, D) -> the first entry


def check_attention_pool(fn: Callable, prediction: object = _NOT_ASKED) -> CheckResult:
    """``attention_pool(x (B, S, D), query (D,), lengths (B,)) -> (B, D)``: softmax over the real
    tokens of x · query / √D, then the weighted sum of the tokens. Given a ``prediction`` (the
    weight on a token that occurs twice, ``REPEAT_OUTCOME``), the checker then measures it."""
    result = _check_pool_cases(fn)
    if prediction is _NOT_ASKED or not result:
        return result
    return check_prediction(REPEAT_OUTCOME, prediction, _repeat_measurement(fn))


def _check_pool_cases(fn: Callable) -> CheckResult:
    cases = []
    for n, (B, S, D, lengths, scale, *shift) in enumerate([
        (2, 4, 8, [4, 2], 1.0), (3, 5, 16, [1, 5, 3], 2.0), (1, 6, 4, [6], 1.0), (2, 3, 9, [3, 1], 3.0),
        (4, 7, 6, [2, 7, 5, 1], 1.5), (1, 1, 5, [1], 1.0),
        (2, 5, 8, [3, 2], 10.0, -2e4),  # every score near -20000: a finite fill leaks
    ]):
        x, query, lengths = _pool_inputs(n, B, S, D, lengths, scale, *shift)
        far = f", scores near {shift[0]:g}" if shift else ""
        cases.append(Case(
            f"x {tuple(x.shape)}, query ({D},), lengths {lengths.tolist()}{far}", (x, query, lengths),
            _pool(x, query, lengths),
            hint="one score per position, scaled as in this chapter; the padded positions must end "
                 "with exactly zero weight and the real ones share all of it; then a weighted sum "
                 "of the tokens, (B, D).",
            atol=1e-3 if shift else 1e-5, rtol=1e-4 if shift else 1e-5,
        ))
    return run_cases("attention pooling", fn, cases, POOL_MISTAKES)


# --- a sliding-window causal mask for queries that come after a cache ---------------------------
def _window_mask(t: int, s: int, window: int, offset: int | None = None, lo: int = 0, hi: int = 0,
                 causal: bool = True) -> torch.Tensor:
    """(T, S) bool: query i at position S - T + i (or ``offset`` + i) sees keys j with
    position - window + lo < j <= position + hi."""
    position = (s - t if offset is None else offset) + torch.arange(t)[:, None]  # (T, 1)
    j = torch.arange(s)[None, :]  # (1, S)
    if not causal:
        return (j - position).abs() < window
    return (j <= position + hi) & (j > position - window + lo)  # (T, S)


def _is_mask_shaped(args, got) -> bool:
    return isinstance(got, torch.Tensor) and tuple(got.shape) == (args[0], args[1])


WINDOW_MASK_MISTAKES = [
    Mistake("additive float mask", "that is a float mask of 0 and -inf added to the scores; the book's masks "
            "are boolean, True = may attend (masked_softmax fills the False ones).",
            when=lambda args, got: _is_mask_shaped(args, got) and got.is_floating_point()
            and torch.equal(got == 0, _window_mask(*args)) and bool((got[got != 0] == float("-inf")).all())),
    Mistake("not bool", "return a bool tensor (True = may attend), not numbers.",
            when=lambda args, got: _is_mask_shaped(args, got) and got.dtype != torch.bool
            and torch.equal(got.bool(), _window_mask(*args))),
    Mistake("ignores num_keys", "the mask must be (num_queries, num_keys): one row per new query, one column "
            "per key, cached ones included.",
            when=lambda args, got: isinstance(got, torch.Tensor) and args[0] != args[1]
            and got.shape[-1] != args[1]),
    Mistake("window from the query index", "your window counts back from the query's index i, but the "
            "query sits at position S - T + i (your causal limit already uses that): keep keys "
            "position - window < j <= position, with position = S - T + i for both limits.",
            gives=lambda t, s, w: _window_mask(t, s, s)
            & (torch.arange(s)[None, :] > torch.arange(t)[:, None] - w)),
    Mistake("window counted from the cache start", "your window holds the first `window` keys of the "
            "cache (key < window) for every query: it must end at the query itself, keys "
            "position - window < j <= position for the query at position S - T + i.",
            gives=lambda t, s, w: _window_mask(t, s, s) & (torch.arange(s)[None, :] < w)),
    Mistake("no window", "that is the plain causal mask: each query may see only the last `window` "
            "positions, itself included (keys position - window < j <= position).",
            gives=lambda t, s, w: _window_mask(t, s, s)),
    Mistake("window one too wide", "each query sees window + 1 keys: the window counts the query's own "
            "position, so keep j > position - window, not j >= position - window.",
            gives=lambda t, s, w: _window_mask(t, s, w, lo=-1)),
    Mistake("window one too narrow", "each query sees window - 1 keys: the window includes the query's "
            "own position, so keep j > position - window (itself and the window - 1 before it).",
            gives=lambda t, s, w: _window_mask(t, s, w, lo=1)),
    Mistake("cached keys hidden", "your queries never see the cached keys (positions 0 .. S - T - 1): "
            "only the window limits a query, and a cached key inside it may be attended to.",
            gives=lambda t, s, w: _window_mask(t, s, w) & (torch.arange(s)[None, :] >= s - t)),
    Mistake("window from the first query", "your window starts where the first query's window starts, "
            "for every query: it must move with the query, keys position - window < j <= position for "
            "the query at position S - T + i.",
            gives=lambda t, s, w: _window_mask(t, s, s) & (torch.arange(s)[None, :] > s - t - w)),
    Mistake("one window for all queries", "every query's window is the last query's (the last `window` "
            "keys): the window moves "
            "with the query, keys position - window < j <= position for the query at position "
            "S - T + i.", gives=lambda t, s, w: _window_mask(t, s, s) & (torch.arange(s)[None, :] >= s - w)),
    Mistake("aligned to the first keys", "your queries sit at positions 0..T-1; after a cache they are the "
            "LAST T of the S positions: query i is at position S - T + i.",
            gives=lambda t, s, w: _window_mask(t, s, w, offset=0)),
    Mistake("strictly causal", "a position may attend to itself: keep j <= position, not j < position.",
            gives=lambda t, s, w: _window_mask(t, s, w, hi=-1)),
    Mistake("not causal", "the window reaches into the future: a query may see only keys at or before "
            "its own position.", gives=lambda t, s, w: _window_mask(t, s, w, causal=False)),
    Mistake("inverted", "True means 'may attend': you marked the blocked keys instead.",
            gives=lambda t, s, w: ~_window_mask(t, s, w)),
]


class _LibraryMask(RuntimeError):
    pass


# --- exercise 3 as predict, then measure: how much of a cached window mask is True ----------------
# window_causal_mask(3, 8, 4): the queries sit at positions 5, 6, 7, each sees itself and the 3
# keys before it, so 12 of the 3 x 8 = 24 pairs: 0.5 exactly.
WINDOW_OUTCOME = Outcome(
    exercise="a window after a cache",
    label="share of the (query, key) pairs kept by window_causal_mask(3, 8, 4)",
    low=0.499, high=0.501,
    how_to_measure="run the checker with your function: it calls window_causal_mask(3, 8, 4) "
                   "and takes the mean of the (3, 8) mask.",
    below="The 3 queries are the LAST 3 of 8 positions (5, 6 and 7), so each has at least 3 "
          "keys before it and sees a full window of 4 (itself and the 3 before): 12 of the 24 "
          "pairs, 0.5. Placing the queries at positions 0, 1, 2 gives 1 + 2 + 3 = 6 pairs, 0.25: "
          "that is a prompt without a cache, not a cached decoder.",
    inside="Each query sits at S - T + i = 5, 6 or 7, far enough in to see a full window of 4 "
           "keys: 12 of 24 pairs. The window, not the causal limit, sets the count.",
    above="The window caps every query at 4 keys, itself included, so 3 queries keep at most 12 "
          "of the 24 pairs, 0.5; a plain causal mask at positions 5, 6, 7 would keep 6 + 7 + 8 = "
          "21 (0.875).",
)


def _window_measurement(fn: Callable) -> float:
    """The share of True entries of ``fn(3, 8, 4)``."""
    return torch.as_tensor(fn(3, 8, 4)).float().mean().item()


def check_window_causal_mask(fn: Callable, prediction: object = _NOT_ASKED) -> CheckResult:
    """``window_causal_mask(num_queries, num_keys, window) -> (T, S)`` bool: the T queries are the
    last T of S positions; each sees itself and the window - 1 keys before it. Given a
    ``prediction`` (the share of pairs kept by ``window_causal_mask(3, 8, 4)``,
    ``WINDOW_OUTCOME``), the checker then measures it with ``fn``."""
    result = _check_window_cases(fn)
    if prediction is _NOT_ASKED or not result:
        return result
    return check_prediction(WINDOW_OUTCOME, prediction, _window_measurement(fn))


def _check_window_cases(fn: Callable) -> CheckResult:
    cases = [
        Case(f"num_queries={t}, num_keys={s}, window={w}" + (f" ({s - t} cached)" if s > t else ""),
             (t, s, w), _window_mask(t, s, w),
             hint="query i is position S - T + i; it may attend to keys j with "
                  "position - window < j <= position (itself included).")
        for t, s, w in ((3, 3, 3), (4, 9, 2), (2, 5, 3), (1, 5, 3), (1, 1, 1), (4, 6, 1), (5, 7, 3), (3, 4, 10),
                        (6, 6, 2))
    ]
    return run_cases("sliding-window causal mask", _without_library_masks(fn), cases, WINDOW_MASK_MISTAKES)


def _without_library_masks(fn: Callable) -> Callable:
    """``fn`` with ``causal_mask`` and ``key_mask`` out of reach: while it runs they raise, wherever
    the reader's code finds them (its globals, ``attnbook.layers`` or ``attnbook.layers.masks``)."""
    import attnbook.layers as layers
    import attnbook.layers.masks as masks

    def refuse(*args, **kwargs):
        raise _LibraryMask("the exercise asks you to build the mask from positions: causal_mask and "
                           "key_mask are off limits here; compare torch.arange positions instead.")
    return _hiding(fn, {masks.causal_mask, masks.key_mask}, [vars(masks), vars(layers)], refuse)


def _hiding(fn: Callable, originals: set, spaces: list[dict], refuse: Callable) -> Callable:
    """``fn`` with every name bound to one of ``originals`` (in ``spaces`` and fn's globals) set to
    ``refuse`` while it runs, and put back afterwards."""
    if not callable(fn):
        return fn

    def wrapped(*args, **kwargs):
        found = [*spaces, getattr(fn, "__globals__", {})]
        saved = [(space, name, value) for space in found for name, value in list(space.items())
                 if any(value is o for o in originals)]
        for space, name, _ in saved:
            space[name] = refuse
        try:
            return fn(*args, **kwargs)
        finally:
            for space, name, value in saved:
                space[name] = value

    wrapped.__wrapped__ = fn
    return wrapped


# --- how similar are two positions' encodings? -------------------------------------------------------
def _similarity(offsets, d_model, exponent="2i", pairs=1.0, func=torch.cos, base=10000.0,
                over=1.0):
    index = torch.arange(0, d_model, 2, dtype=torch.float64) if exponent == "2i" else \
        torch.arange(d_model // 2, dtype=torch.float64)
    inv_freq = base ** (-index / (d_model * over))  # (D/2,); over = 1/2: a mistake
    return (pairs * func(offsets.double()[:, None] * inv_freq).sum(-1)).float()  # (K,)


def _cos_terms(offsets: torch.Tensor, d_model: int, p: int) -> torch.Tensor:
    """Only the cos · cos half of each pair, at position p (a mistake)."""
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    first = torch.cos(p * inv_freq)  # (D/2,)
    return (first * torch.cos((p + offsets.double()[:, None]) * inv_freq)).sum(-1).float()  # (K,)


def _expected_similarity(offsets: torch.Tensor, d_model: int) -> torch.Tensor:
    """PE[p] · PE[p + k] from the library's table, at a p where every p + k is in it."""
    if offsets.numel() == 0:
        return torch.zeros(0)
    p = max(0, -int(offsets.min())) + 3
    table = sinusoidal_encoding(p + max(0, int(offsets.max())) + 1, d_model).double()  # (P, D)
    return (table[p] * table[p + offsets]).sum(-1).float()  # (K,)


SIMILARITY_MISTAKES = [
    Mistake("exponent over D/2", "the frequency of pair i is 10000^(-2i/d_model): with the even index 2i "
            "the exponent divides by d_model, not by d_model / 2 (that would make the slowest pairs "
            "run to 10000^(-1), far slower than the table's).",
            gives=lambda k, d: _similarity(k, d, over=0.5)),
    Mistake("exponent i", "the frequency of pair i is 10000^(-2i/d_model): the exponent uses the even column "
            "index 2i, not i.", gives=lambda k, d: _similarity(k, d, exponent="i")),
    Mistake("pairs counted twice", "there are d_model / 2 (sin, cos) pairs and each contributes one cosine: "
            "do not sum over all d_model columns.", gives=lambda k, d: _similarity(k, d, pairs=2.0)),
    Mistake("mean instead of sum", "the dot product adds the pairs' cosines: sum over the d_model / 2 "
            "pairs, not the mean.", gives=lambda k, d: _similarity(k, d, pairs=2.0 / d)),
    Mistake("base 1000", "the base of the frequencies is 10000: ω_i = 10000^(-2i/d_model).",
            gives=lambda k, d: _similarity(k, d, base=1000.0)),
    Mistake("zero for negative offsets", "a negative offset is as alike as a positive one: cos(-δω) = "
            "cos(δω), so PE[p] · PE[p - δ] = PE[p] · PE[p + δ], not 0.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == args[0].shape
            and bool((args[0] < 0).any()) and bool((got[args[0] < 0] == 0).all())
            and torch.allclose(got[args[0] >= 0].float(), _expected_similarity(args[0], args[1])[args[0] >= 0],
                               atol=1e-4, rtol=1e-4)),
    Mistake("sine plus cosine", "you added sin(δω_i) and cos(δω_i): in sin(a) sin(b) + cos(a) cos(b) the sines "
            "of the two positions multiply, and the pair comes to cos(a - b) = cos(δω_i) alone.",
            gives=lambda k, d: _similarity(k, d) + _similarity(k, d, func=torch.sin)),
    Mistake("cosine terms only", "that looks like cos(pω_i) cos((p + δ)ω_i) alone, at one position p: add the "
            "sine term sin(pω_i) sin((p + δ)ω_i) of each pair, and p drops out.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == args[0].shape
            and any(torch.allclose(got.float(), _cos_terms(args[0], args[1], p), atol=1e-4, rtol=1e-4)
                    for p in range(4))),
    Mistake("sine instead of cosine", "sin(a) sin(b) + cos(a) cos(b) = cos(a - b): each pair contributes "
            "cos(offset · ω_i), not a sine.", gives=lambda k, d: _similarity(k, d, func=torch.sin)),
]


# --- exercise 4's prediction: how alike are positions 100 apart? --------------------------------
# d_model = 64: PE(p)·PE(p+100) = sum of cos(100 ω_i) over the 32 pairs = 17.87, that is 0.559 of
# PE(p)·PE(p) = 32; at k = 50 it is 0.490. The slowest 13 pairs turn by less than 0.45 rad in 100
# positions; the fast pairs' cosines point every way and nearly cancel.
FAR_OUTCOME = Outcome(
    exercise="positions 100 apart",
    label="PE(p)·PE(p+100) / PE(p)·PE(p), d_model=64",
    low=0.55, high=0.57,
    how_to_measure="run the checker with your pe_similarity: it divides pe_similarity(tensor([100]), "
                   "64) by pe_similarity(tensor([0]), 64), which is d_model / 2 = 32.",
    below="Distant positions are not unalike: the slowest pairs barely turn in 100 positions (the "
          "slowest 13 of the 32 by less than 0.45 radians, so each still gives cos > 0.9), while "
          "the fast pairs' cosines point every way and nearly cancel. The similarity stays at "
          "about half its maximum, and is even higher than at δ = 50 (0.49): it does not fall "
          "steadily with the distance.",
    inside="The slow pairs (the slowest 13 of 32 turn by less than 0.45 radians in 100 "
           "positions) keep about half the similarity while the fast pairs' cosines nearly "
           "cancel. It does not fall steadily: at δ = 50 it is 0.49, lower than at δ = 100.",
    above="The fast pairs do not stay aligned: a pair with ω_i = 1 turns about 16 full circles in "
          "100 positions, and the fast pairs' cosines point every way and nearly cancel; only the "
          "slow pairs (the slowest 13 of 32 turn by less than 0.45 radians) keep the similarity, "
          "at about half its maximum.",
)


def _far_measurement(fn: Callable) -> float | None:
    """PE(p)·PE(p+100) / PE(p)·PE(p) at d_model = 64, with the reader's function."""
    try:
        near, far = (float(torch.as_tensor(fn(torch.tensor([k]), 64)).reshape(-1)[0])
                     for k in (0, 100))
    except Exception:  # noqa: BLE001 - a function that fails here was caught by the cases
        return None
    return far / near if near else None


def check_pe_similarity(fn: Callable, prediction: object = _NOT_ASKED) -> CheckResult:
    """``pe_similarity(offsets (K,) long, d_model) -> (K,)`` float: ``PE[p] · PE[p + δ]`` for each offset δ,
    which is the same for every position p. Given a ``prediction`` (PE(p)·PE(p+100) as a fraction of
    PE(p)·PE(p), d_model = 64), the checker then measures it with ``fn`` (``FAR_OUTCOME``)."""
    result = _check_similarity_cases(fn)
    if prediction is _NOT_ASKED or not result:
        return result
    return check_prediction(FAR_OUTCOME, prediction, _far_measurement(fn))


def _check_similarity_cases(fn: Callable) -> CheckResult:
    cases = []
    for offsets, d in [([0], 4), ([1, 2, 3], 2), ([0, 1, 5, 10], 16), ([-3, 3], 8), ([7, 50, 200], 64),
                       ([], 6)]:
        offsets = torch.tensor(offsets, dtype=torch.long)
        cases.append(Case(f"offsets {offsets.tolist()}, d_model={d}", (offsets, d),
                          _expected_similarity(offsets, d), atol=1e-4, rtol=1e-4,
                          hint="write out one (sin, cos) pair of frequency ω_i = 10000^(-2i/d): what is "
                               "sin(pω)sin((p+δ)ω) + cos(pω)cos((p+δ)ω)? The answer has no p in it."))
    return run_cases("positional-encoding similarity", _without_table(fn), cases, SIMILARITY_MISTAKES)


class _TableBuilt(RuntimeError):
    pass


def _without_table(fn: Callable) -> Callable:
    """``fn`` with the sinusoidal table out of reach: while it runs, ``sinusoidal_encoding`` and
    ``SinusoidalPositionalEncoding`` raise, wherever the reader's code finds them (its globals,
    ``attnbook.layers`` or ``attnbook.layers.positional``)."""
    import attnbook.layers as layers
    import attnbook.layers.positional as positional

    def refuse(*args, **kwargs):
        raise _TableBuilt("the exercise asks for the similarity without building the table: "
                          "sinusoidal_encoding is off limits here; use the closed form of one pair.")
    return _hiding(fn, {positional.sinusoidal_encoding, positional.SinusoidalPositionalEncoding},
                   [vars(positional), vars(layers)], refuse)


# --- exercise 4 (a measurement): does reversal carry over to another length? ---------
# The chapter's sinusoidal model, trained on length 10, scored on
# reversal_task(500, 8, VOCAB, ...). Measured by benchmarks/reversal_length_transfer.py
# (results/reversal_length_transfer.json, one CPU thread) for training seeds 0-11 (the
# chapter trains with seed 0): on the checker's test seed 7, 12.5% for eleven seeds (12.48%
# for seed 0), 11.5% for seed 8; over test seeds 7-10, 11.2% to 12.5%. The model answers
# position i with the token at 9 - i (or the last one, 7, where 9 - i is past the end), so only position 0 is
# right: 1 of 8. On test seed 7 the range reaches 0.2 point below the lowest and one point
# above the highest measurement (tests/test_exercises_ch03.py reads the file); it stops
# short of 1/9 = 11.1% (the order-blind model at the training length 10, 10.9% in the
# chapter) and of 1/7 = 14.3% (the order-blind model at length 8: guessing among the other
# 7 letters, 14.4% on the chapter's test seed), so either is named, not accepted.
LENGTH_TRANSFER_RANGE = (0.113, 0.135)
NO_POSITIONS_RANGE = (0.1351, 0.175)
NO_POSITIONS_AT_10 = (0.095, 0.1129)
_LENGTH_TRANSFER = "reversal accuracy on length 8, trained on length 10"


_AT_10 = ("that is about 1/9, guessing among the other 9 letters at length 10: the model without "
          "positions (models['none']) on the training length; score models['sinusoidal'] on length 8.")


def _length_transfer_mistake(value: float) -> tuple[str, str]:
    low, high = LENGTH_TRANSFER_RANGE
    if 1.0 < value <= 100.0 and low <= value / 100 <= high:
        return ("percent, not a fraction",
                "give the accuracy as a fraction (0.125), not a percentage.")
    if NO_POSITIONS_AT_10[0] <= value <= NO_POSITIONS_AT_10[1]:
        return ("model without positions", _AT_10)
    if NO_POSITIONS_RANGE[0] <= value <= NO_POSITIONS_RANGE[1]:
        return ("model without positions",
                "that is about 1/7, guessing among the other 7 letters: you scored the model "
                "without positions (models['none']); score models['sinusoidal'].")
    if value >= 0.97:
        return ("training length",
                "that is the accuracy at the training length 10: score the model on "
                "reversal_task(500, 8, VOCAB, ...), sequences of length 8.")
    return "", ("score the sinusoidal model (trained on length 10) on "
                "reversal_task(500, 8, VOCAB, ...) with tagging_accuracy(...)['answer'].")


def check_length_transfer(accuracy: float) -> CheckResult:
    """The accuracy measured in exercise 4 (a fraction) against ``LENGTH_TRANSFER_RANGE``,
    which another model, the training length or a percentage misses."""
    low, high = LENGTH_TRANSFER_RANGE
    expected = f"(expected {100 * low:.1f}%–{100 * high:.1f}%)"
    if isinstance(accuracy, torch.Tensor) and accuracy.numel() == 1:
        accuracy = accuracy.item()
    if (isinstance(accuracy, bool) or not isinstance(accuracy, (int, float))
            or math.isnan(accuracy)):
        return _measured(False, "expected a number (the accuracy as a fraction), "
                                f"got {accuracy!r}.")
    if low <= accuracy <= high:
        return _measured(True, f"{_LENGTH_TRANSFER}: {100 * accuracy:.1f}% {expected} ok")
    name, message = _length_transfer_mistake(accuracy)
    return _measured(False, f"{message}\n   {_LENGTH_TRANSFER}: got {accuracy:.4g}, "
                            f"expected a fraction from {low} to {high}.", name)


def _measured(passed: bool, detail: str, diagnosis: str = "") -> CheckResult:
    message = f"{'✓' if passed else '✗'} {detail}"
    print(message)
    return CheckResult("length transfer", passed, message, diagnosis)


# --- exercise 4 as predict, then measure ---------------------------------------------------------
LENGTH_OUTCOME = Outcome(
    exercise="reversal on length 8",
    label="accuracy on length 8, trained on length 10",
    low=LENGTH_TRANSFER_RANGE[0], high=LENGTH_TRANSFER_RANGE[1],
    how_to_measure="measure models['sinusoidal'] on reversal_task(500, 8, VOCAB, ...), "
                   "sequences of length 8.",
    below="The model is not guessing: it still answers position i with the letter at 9 - i, "
          "which at length 8 is right only for position 0 (key 9 is past the end, so its "
          "attention falls on the last key, 7, its mirror): 1 of 8 positions, 12.5%.",
    inside="The rule it learned, position i looks at position 9 - i, belongs to the training "
           "length; at length 8 only position 0 still finds its mirror.",
    above="Positional encodings give positions, not the task's rule: the model learned 'position "
          "i looks at position 9 - i', and at length 8 the mirror of i is 7 - i. Query i's vector "
          "(its letter plus PE(i)) holds no T, so in this one layer its score for each key is the "
          "same at every length; T only decides which keys are there to be scored.",
    mistakes=((*NO_POSITIONS_AT_10, "model without positions", _AT_10),
              (*NO_POSITIONS_RANGE, "model without positions",
               "that is about 1/7, guessing among the other 7 letters: you scored the model "
               "without positions (models['none']); score models['sinusoidal']."),),
)


def check_length_prediction(prediction: object, measured: object) -> CheckResult:
    """The reader's predicted accuracy on length 8, then a measured one (a fraction)."""
    guess = prediction.item() if isinstance(prediction, torch.Tensor) and prediction.numel() == 1 else prediction
    if (isinstance(guess, (int, float)) and not isinstance(guess, bool)
            and NO_POSITIONS_RANGE[0] <= guess <= NO_POSITIONS_RANGE[1]):
        return check_prediction(dataclasses.replace(LENGTH_OUTCOME, above=_GUESSING_PREDICTED),
                                prediction, measured)
    return check_prediction(LENGTH_OUTCOME, prediction, measured)


_GUESSING_PREDICTED = (
    "About 1/7 is what a model that guesses among the other 7 letters scores (the model without "
    "positions, which at length 8 does exactly that). The sinusoidal model does not guess: it keeps "
    "the rule it learned at length 10, position i looks at position 9 - i, and at length 8 that is "
    "the mirror only for position 0 (key 9 is past the end; its attention falls on the last key, "
    "7): 1 of 8, a little below 1/7.")


# --- exercise 4 in full: per-position accuracy, then the prediction ------------------------------
_TRAINED: dict[str, torch.nn.Module] = {}


def chapter_model() -> torch.nn.Module:
    """The chapter's sinusoidal reversal model (seed 0, 400 steps, one thread; about a second)."""
    if "sinusoidal" not in _TRAINED:
        from attnbook.data.synthetic import task_batches
        from attnbook.env import seed_everything
        from attnbook.models.tagger import SelfAttentionTagger
        from attnbook.tasks.tagging import tagging_loss
        from attnbook.train import fit
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            gen = seed_everything(0)
            model = SelfAttentionTagger(20, 32, num_heads=1, max_len=10, positional="sinusoidal")
            opt = torch.optim.Adam(model.parameters(), lr=3e-3)
            fit(model, task_batches(reversal_task, 64, 10, 20, gen, "cpu"), tagging_loss, opt, 400,
                progress=False)
        finally:
            torch.set_num_threads(threads)
        _TRAINED["sinusoidal"] = model
    return _TRAINED["sinusoidal"]


def standin_model() -> torch.nn.Module:
    """An untrained sinusoidal reversal model (fixed seed, up to 12 positions): the checker's
    cases run on it, so a failing case's expected answer says nothing about the trained
    model's accuracy at length 8, which the reader predicts before measuring it."""
    if "standin" not in _TRAINED:
        from attnbook.models.tagger import SelfAttentionTagger
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(2024)
            _TRAINED["standin"] = SelfAttentionTagger(20, 32, num_heads=1, max_len=12,
                                                      positional="sinusoidal").eval()
    return _TRAINED["standin"]


def _answers(model, tokens):
    with evaluating(model), torch.no_grad():
        return model(tokens).argmax(-1)[..., 0]  # (B, T): the first (only) answer


def _position_accuracy(model, tokens, against=None, dim=0):
    gold = tokens.flip(1) if against is None else against
    return (_answers(model, tokens) == gold).float().mean(dim)


def _argmax_over(model, tokens, dim):
    with evaluating(model), torch.no_grad():
        answers = model(tokens).argmax(dim)[..., 0]  # not a letter: a position or the answer slot
    return (answers == tokens.flip(1)).float().mean(0)


def _whole_sequence_accuracy(model, tokens):
    """The share of sequences answered right at every position at once (a scalar tensor)."""
    return (_answers(model, tokens) == tokens.flip(1)).all(1).float().mean()


def _is_whole_sequence(args, got) -> bool:
    """Whether ``got`` is the whole-sequence accuracy, as one number or repeated T times."""
    whole = _whole_sequence_accuracy(*args)
    got = torch.as_tensor(got).float()
    return got.numel() in (1, args[1].shape[1]) and bool(torch.allclose(got, whole.expand_as(got)))


def _partly_right_case() -> tuple[torch.nn.Module, torch.Tensor]:
    """A stand-in with fixed logits that answers most letters (about 88%) right, so that a
    sequence is right as a whole often enough (about 60% at length 4) to tell the
    whole-sequence accuracy from the per-position one. Elsewhere it answers a letter from a
    random position of the same sequence, so that comparing with the wrong position (not
    reversed, off by one) is right now and then, not never."""
    tokens, _ = reversal_task(64, 4, 20, torch.Generator().manual_seed(31))  # (64, 4)
    g = torch.Generator().manual_seed(32)
    right = torch.rand(64, 4, generator=g) < 0.8  # (64, 4): where the right letter wins
    elsewhere = tokens.gather(1, torch.randint(4, (64, 4), generator=g))  # (64, 4)
    answer = torch.where(right, tokens.flip(1), elsewhere)  # (64, 4)
    boost = torch.zeros(64, 4, 20).scatter(-1, answer[..., None], 10.0)  # (64, 4, V)
    logits = torch.randn(64, 4, 1, 20, generator=g) + boost[:, :, None, :]
    return _FixedLogits(logits), tokens


def _right_probability(model, tokens):
    with evaluating(model), torch.no_grad():
        probabilities = model(tokens).softmax(-1)[..., 0, :]  # (B, T, V)
    return probabilities.gather(-1, tokens.flip(1)[..., None])[..., 0].mean(0)  # (T,)


class RaisedError:
    """What a function returned that raised on the model's ``(B, T, 1, V)`` logits, for a
    mistake to name (see ``_diagnosing_answer_dim``). ``kind``: ``"answer dimension"`` when it
    gives the right answer once the answer dimension is gone, ``"positions"`` when it takes
    the argmax over the positions (it runs only where T = V)."""

    def __init__(self, err: Exception, kind: str = "answer dimension") -> None:
        self.err = err
        self.kind = kind

    def __repr__(self) -> str:
        return f"{type(self.err).__name__}: {self.err}"


class _OneAnswer(torch.nn.Module):
    """``model`` with its answer dimension taken: logits ``(B, T, V)``."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.model(tokens)[..., 0, :]  # (B, T, V)


class _FixedLogits(torch.nn.Module):
    """A stand-in model that returns the same logits whatever it reads."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits.clone()


def _argmax_over_positions(fn: Callable, model, tokens) -> bool:
    """Whether ``fn`` takes the argmax over the positions, not the letters: on the model's
    logits that gives (B, V), which crashes against the (B, T) tokens. Run where T = V on
    fixed random logits, it gives one share per position that the argmax over dimension 1 of
    the (B, T, V) logits gives."""
    with torch.no_grad():
        vocab = model(tokens[:1]).shape[-1]
    if vocab % 2:
        return False
    square, _ = reversal_task(64, vocab, vocab, torch.Generator().manual_seed(11))  # (64, V)
    logits = torch.randn(64, vocab, 1, vocab, generator=torch.Generator().manual_seed(12))
    wrong = (logits[..., 0, :].argmax(1) == square.flip(1)).float().mean(0)  # (V,)
    try:
        got = fn(_FixedLogits(logits), square)
    except Exception:  # noqa: BLE001 - another mistake: not this one
        return False
    return compare(got, wrong, 1e-5, 1e-5) is None


def _diagnosing_answer_dim(fn: Callable) -> Callable:
    """``fn``, except that an error which goes away once the model's logits lose their answer
    dimension (a missing ``[..., 0]``), or one that comes from an argmax over the positions,
    comes back as a ``RaisedError`` for a mistake to name."""
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def wrapped(model, tokens):
        try:
            return fn(model, tokens)
        except RuntimeError as err:
            if _argmax_over_positions(fn, model, tokens):
                return RaisedError(err, "positions")
            try:
                fixed = fn(_OneAnswer(model), tokens)
            except Exception:  # noqa: BLE001 - another error: report the original one
                raise err from None
            if compare(fixed, _position_accuracy(model, tokens), 1e-5, 1e-5) is None:
                return RaisedError(err)
            raise

    return wrapped


POSITION_MISTAKES = [
    Mistake("answer dimension kept", "model(tokens) is (B, T, 1, V): the one answer per position has a "
            "dimension of its own, so argmax(-1) gives (B, T, 1), which does not line up with the "
            "(B, T) tokens. Take the answer with [..., 0] before comparing.",
            when=lambda args, got: isinstance(got, RaisedError) and got.kind == "answer dimension"),
    Mistake("answer dimension R kept", "your result has shape (T, 1): you kept the extra answer "
            "dimension R of the (B, T, R, V) logits (R = 1 here), so the comparison gave (B, T, 1) "
            "and its mean (T, 1). Take the answer with [..., 0] before comparing, for a (T,) result.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (args[1].shape[1], 1)
            and compare(got[:, 0], _position_accuracy(*args), 1e-5, 1e-5) is None),
    Mistake("argmax over the positions", "the argmax ran over the positions (dimension 1 of the "
            "(B, T, V) logits left after [..., 0, :]), so it gave (B, V): for each letter, the "
            "position where it scores highest, which does not line up with the (B, T) tokens "
            "(the RuntimeError below). The answer at a position is the letter with the largest logit: "
            "the argmax over the vocabulary, the last dimension (argmax(-1)).",
            when=lambda args, got: isinstance(got, RaisedError) and got.kind == "positions"),
    Mistake("argmax over the wrong axis", "the answer at a position is the letter with the largest "
            "logit: the argmax over the vocabulary, the last dimension of the (B, T, 1, V) logits "
            "(argmax(-1)). An argmax over dimension 1 or 2 (-2) picks a position or the one answer "
            "slot, an index that is not a letter.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (args[1].shape[1],)
            and any(compare(got, _argmax_over(*args, d), 1e-5, 1e-5) is None for d in (1, 2))),
    Mistake("whole sequences", "that is the share of whole sequences answered right (a sequence "
            "counts only if all T answers are right), given as the same number at every position. "
            "Compare answer by answer and average over the batch only (dim 0): position i gets the "
            "share of sequences right at position i, whatever the other positions did.",
            when=lambda args, got: isinstance(got, (torch.Tensor, float)) and _is_whole_sequence(args, got)),
    Mistake("one number", "that is the accuracy over all positions: keep one share per position, "
            "the mean over the batch only (dim 0), shape (T,).",
            when=lambda args, got: isinstance(got, (torch.Tensor, float)) and torch.as_tensor(got).numel() == 1
            and abs(float(got) - _position_accuracy(*args).mean().item()) < 1e-5),
    Mistake("overall repeated", "every position shows the same share: the accuracy over all "
            "positions, repeated T times. Average over the batch only (dim 0), so that each "
            "position keeps its own share.",
            gives=lambda m, tok: _position_accuracy(m, tok).mean().expand(tok.shape[1])),
    Mistake("per sequence", "you averaged over the positions (one number per sequence): average over "
            "the batch, dim 0, to get one share per position.",
            gives=lambda m, tok: _position_accuracy(m, tok, dim=1)),
    Mistake("not reversed", "you compared each answer with the token at the same position: the answer "
            "at position i is the token at T - 1 - i (tokens.flip(1)).",
            gives=lambda m, tok: _position_accuracy(m, tok, against=tok)),
    Mistake("mirror off by one", "the right answer at position i is tokens[:, T - 1 - i] (tokens.flip(1)), "
            "not the token one place beside it.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (args[1].shape[1],)
            and any(torch.allclose(got.float(), _position_accuracy(*args, against=args[1].flip(1).roll(r, 1)))
                    for r in (1, -1))),  # the second looks like 'not reversed' on case 1
    Mistake("mirror T - i", "the mirror of position i is T - 1 - i, not T - i: positions run from 0 "
            "to T - 1, so tokens[:, T - i] is one place off (and T - 0 is out of range). "
            "tokens.flip(1) gives every mirror at once.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (args[1].shape[1],)
            and _is_t_minus_i(args, got)),
    Mistake("shifted, not reversed", "tokens.roll(1, 1) shifts every letter one place along the "
            "sequence, it does not reverse it: the answer at position i is the letter at T - 1 - i, "
            "tokens.flip(1).",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (args[1].shape[1],)
            and any(torch.allclose(got.float(), _position_accuracy(*args, against=args[1].roll(r, 1)))
                    for r in (1, -1))),
    Mistake("both dimensions flipped", "tokens.flip(0, 1) reverses the positions and also the order "
            "of the sequences in the batch, so each answer is compared with another sequence's "
            "letter: flip only the positions, tokens.flip(1).",
            gives=lambda m, tok: _position_accuracy(m, tok, against=tok.flip(0, 1))),
    Mistake("batch flipped", "tokens.flip(0) reverses the batch (the order of the sequences); the answer "
            "at position i is in the same sequence, at T - 1 - i: tokens.flip(1).",
            gives=lambda m, tok: _position_accuracy(m, tok, against=tok.flip(0))),
    Mistake("mean probability", "that is the mean probability the model gives the right letter, not "
            "the share of answers that are right: take the argmax of the logits and compare it with "
            "the right letter.", gives=lambda m, tok: _right_probability(m, tok)),
    Mistake("percent", "give shares from 0 to 1, not percentages.",
            gives=lambda m, tok: 100 * _position_accuracy(m, tok)),
    Mistake("counts", "you counted the right answers: divide by the batch size (take the mean).",
            gives=lambda m, tok: _position_accuracy(m, tok) * tok.shape[0]),
]


def check_position_accuracy(fn: Callable, prediction: object = None, model=None) -> CheckResult:
    """``position_accuracy(model, tokens (B, T)) -> (T,)``: the share of the B reversal sequences the
    model answers right at each position, checked on an untrained stand-in model (so that a
    failing case shows nothing of the measurement). Then the prediction: the mean at length 8 of
    the sinusoidal model trained on length 10 (``model``; left out, the checker trains it)."""
    import copy
    model = chapter_model() if model is None else copy.deepcopy(model).cpu()  # cases are on the CPU
    standin = standin_model()  # untrained: its expected answers give nothing away
    partly, partly_tokens = _partly_right_case()  # first: where whole sequences stand apart
    cases = [Case("a stand-in with fixed logits, mostly right, tokens (64, 4)",
                  (partly, partly_tokens), _position_accuracy(partly, partly_tokens),
                  hint="the answer at position i is the argmax of model(tokens)[:, i, 0]; "
                       "compare it with tokens[:, T - 1 - i] and average over the batch.")]
    for n, (batch, length) in enumerate([(500, 8), (37, 10), (5, 4), (64, 6), (1, 2)]):
        tokens, _ = reversal_task(batch, length, 20, torch.Generator().manual_seed(7 + n))
        cases.append(Case(f"an untrained model, tokens ({batch}, {length})", (standin, tokens),
                          _position_accuracy(standin, tokens),
                          hint="the answer at position i is the argmax of model(tokens)[:, i, 0]; "
                               "compare it with tokens[:, T - 1 - i] and average over the batch."))
    result = run_cases("per-position accuracy", _diagnosing_answer_dim(fn), cases, POSITION_MISTAKES)
    if not result:
        return result
    tokens, _ = reversal_task(500, 8, 20, torch.Generator().manual_seed(7))
    by_position = torch.as_tensor(fn(model, tokens)).float()
    print("   accuracy at each position of length 8:", " ".join(f"{a:.2f}" for a in by_position.tolist()))
    return check_length_prediction(prediction, by_position.mean().item())


# --- Exercise: a self-attention nn.Module, checked against MultiHeadAttention(num_heads=1) ---

_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def _is_t_minus_i(args, got) -> bool:
    """Position i compared with tokens[:, T - i] (position 0 with any letter of the sequence)."""
    model, tokens = args
    answers = _answers(model, tokens)  # (B, T)
    T = tokens.shape[1]
    rest = (answers[:, 1:] == tokens.flip(1)[:, :-1]).float().mean(0)  # T - i for i = 1 .. T-1
    if not torch.allclose(got[1:].float(), rest, atol=1e-6):
        return False
    return not torch.allclose(got[1:].float(), _position_accuracy(model, tokens)[1:], atol=1e-6)


def _module_weights(seed: int, d: int, bias: bool) -> dict[str, torch.Tensor]:
    """Fixed weights for the four projections (a state dict), so that every answer is comparable."""
    g = torch.Generator().manual_seed(seed)
    weights = {f"{n}.weight": torch.randn(d, d, generator=g) / math.sqrt(d) for n in _PROJECTIONS}
    if bias:
        weights.update({f"{n}.bias": 0.5 * torch.randn(d, generator=g) for n in _PROJECTIONS})
    return weights


def _attend(x, mask, weights, bias, *, divisor=None, dim=-1, invert=False, use_mask=True,
            dropout=0.0, dropout_on="weights", value_only=False, multiply_mask=False,
            mask_after=False, swap_qk=False, transpose_mask=False, fill=float("-inf")):
    """Self-attention written out from a state dict; the keyword arguments make known mistakes
    (``dropout_on``: "weights", the right place, or "scores" (before the mask), "masked scores"
    (after it), "renormalised", "unscaled", "value",
    "context" (A V, before out_proj), "output", "weights and output"; ``mask_after``: blocked weights zeroed after the softmax; ``swap_qk``: K Qᵀ;
    ``fill``: the score given to blocked keys, -inf when right)."""
    def linear(name, t):
        return t @ weights[name + ".weight"].T + (weights[name + ".bias"] if bias else 0.0)
    q, k, v = (linear(n, x) for n in _PROJECTIONS[:3])  # (B, T, D)
    if swap_qk:
        q, k = k, q
    scores = q @ k.mT / (math.sqrt(x.shape[-1]) if divisor is None else divisor)  # (B, T, T)
    torch.manual_seed(0)
    if dropout_on == "scores":
        scores = torch.nn.functional.dropout(scores, dropout)
    if mask is not None and transpose_mask:
        mask = mask.mT  # a mistake: the mask read as (keys, queries)
    if mask is not None and use_mask and multiply_mask:
        scores = scores * mask  # (B, T, T): blocked scores become 0, not -inf
    elif mask is not None and use_mask and not mask_after:
        scores = scores.masked_fill(mask if invert else ~mask, fill)
    if dropout_on == "masked scores":  # dropout after the mask: a dropped -inf becomes nan
        scores = torch.nn.functional.dropout(scores, dropout)
    a = torch.softmax(scores, dim=dim)  # (B, T, T)
    if mask is not None and use_mask and mask_after:
        a = a * mask  # blocked weights zeroed after the softmax: rows no longer sum to 1
    if dropout_on in ("weights", "renormalised", "renormalised, guarded", "unscaled",
                      "weights and output"):
        a = torch.nn.functional.dropout(a, dropout)
    if dropout_on == "unscaled":
        a = a * (1 - dropout)  # the kept weights not divided by 1 - p
    if dropout_on == "renormalised":
        a = a / a.sum(-1, keepdim=True)  # rows back to 1 (0 / 0 where every weight dropped)
    if dropout_on == "renormalised, guarded":  # the same, a row that lost every weight left 0
        total = a.sum(-1, keepdim=True)
        a = torch.where(total > 0, a / total.clamp_min(1e-30), torch.zeros_like(a))
    if dropout_on == "value":
        v = torch.nn.functional.dropout(v, dropout)
    context = a @ v  # (B, T, D)
    if dropout_on == "context":
        context = torch.nn.functional.dropout(context, dropout)
    out = context if value_only else linear("out_proj", context)  # (B, T, D)
    if dropout_on in ("output", "weights and output"):
        out = torch.nn.functional.dropout(out, dropout)
    return out


def _far_weights(weights: dict[str, torch.Tensor], d: int, score: float = -2e4) -> dict[str, torch.Tensor]:
    """The same projections with q_proj's bias moved by +c·e_0 and k_proj's by -c·e_0, so that
    every score q · k / √d lies near ``score`` (c² / √d = -score; a few hundred either side):
    a blocked key filled with a finite number above that, -1e4 say, outscores every real one."""
    c = math.sqrt(-score * math.sqrt(d))
    far = dict(weights)
    far["q_proj.bias"] = weights["q_proj.bias"].clone()
    far["k_proj.bias"] = weights["k_proj.bias"].clone()
    far["q_proj.bias"][0] += c
    far["k_proj.bias"][0] -= c
    return far


def _reference_self_attention(x, mask, weights, bias, dropout, training):
    from attnbook.layers.attention import MultiHeadAttention
    mha = MultiHeadAttention(x.shape[-1], num_heads=1, dropout=dropout, bias=bias)
    mha.load_state_dict(weights)
    mha.train(training)
    torch.manual_seed(0)
    with torch.no_grad():
        return mha(x, x, x, mask, need_weights=True)[0]  # the written-out path: dropout on A


def _self_attention_runner(cls: Callable) -> Callable:
    def run(x, mask, weights, bias, dropout, training):
        try:
            module = cls(x.shape[-1], bias=bias, dropout=dropout)
        except TypeError as err:
            raise TypeError(f"the class must be built as SelfAttention(d_model, bias=..., "
                            f"dropout=...): {err}") from None
        try:
            module.load_state_dict(weights)
        except (RuntimeError, AttributeError) as err:
            raise ValueError("the module's parameters must be exactly q_proj, k_proj, v_proj and "
                             "out_proj, four nn.Linear(d_model, d_model) with a bias only when "
                             f"bias=True; load_state_dict said: {err}") from None
        module.train(training)
        torch.manual_seed(0)
        with torch.no_grad():
            return module(x) if mask is None else module(x, mask)
    run.__name__ = getattr(cls, "__name__", "SelfAttention")
    return run


def _dropped(kind):
    return lambda x, m, w, b, p, training: _attend(x, m, w, b, dropout=p, dropout_on=kind)


SELF_ATTENTION_MISTAKES = [
    Mistake("unscaled", "the scores look unscaled: divide Q Kᵀ by √d_k (here d_k = d_model).",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, divisor=1.0)),
    Mistake("scaled by length", "you divided the scores by √T, the sequence length; the scale is "
            "√d_k, the width of a query and a key: here x.shape[-1] (d_model), not x.shape[-2].",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, divisor=math.sqrt(x.shape[-2]))),
    Mistake("wrong axis", "the softmax runs over the queries: each query's weights over the keys "
            "must sum to 1, so softmax over the last dimension.",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, dim=-2)),
    Mistake("mask inverted", "you blocked the positions where the mask is True; in this book True "
            "means may attend: fill the scores with -inf where the mask is False (~mask).",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, invert=True)),
    Mistake("mask transposed", "you used the mask transposed (mask.mT, or mask.transpose(...)): entry "
            "(i, j) says whether QUERY i may attend to KEY j, the same layout as the (B, T, T) "
            "scores, so fill scores.masked_fill(~mask, -inf) without transposing. (A causal mask "
            "transposed lets each position see only the future.)",
            when=lambda args, got: args[1] is not None and isinstance(got, torch.Tensor)
            and not torch.equal(args[1], args[1].mT)
            and _same_with_nan(got, _attend(*args[:4], transpose_mask=True,
                                            dropout=args[4] if args[5] else 0.0))),
    Mistake("mask ignored", "the mask changed nothing: set the scores where it is False to -inf "
            "before the softmax.", when=lambda args, got: args[1] is not None
            and isinstance(got, torch.Tensor)
            and compare(got, _attend(*args[:4], use_mask=False), 1e-5, 1e-5) is None),
    Mistake("no output projection", "you returned A V without out_proj: the module ends with the "
            "output projection, as MultiHeadAttention does.",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, value_only=True)),
    Mistake("dropout on the output", "you applied dropout to the output, after out_proj; the "
            "exercise (and MultiHeadAttention) drop attention weights, A, after the softmax and "
            "before A V: a dropped link, not a dropped output feature.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and compare(got, _dropped("output")(*args), 1e-5, 1e-5) is None),
    Mistake("dropout on A V", "you applied dropout to A V, the mix of values, before out_proj: "
            "that drops features of the output, not links. The exercise (and MultiHeadAttention) "
            "drop attention weights, A, after the softmax and before A V.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and compare(got, _dropped("context")(*args), 1e-5, 1e-5) is None),
    Mistake("dropout on A and on the output", "you applied dropout twice: on A (right) and again "
            "on the output. The exercise (and MultiHeadAttention) drop only A; dropout on a "
            "layer's output belongs to the residual block around it (Chapter 5), not inside "
            "attention.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and compare(got, _dropped("weights and output")(*args), 1e-5, 1e-5) is None),
    Mistake("dropout on V", "you applied dropout to the values V (or to v_proj's output); the exercise "
            "(and MultiHeadAttention) drop attention weights, A, after the softmax and before A V: "
            "a dropped link, not a dropped feature.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and compare(got, _dropped("value")(*args), 1e-5, 1e-5) is None),
    Mistake("blocked scores filled with a finite number", "masked_fill(~mask, -1e4) (or another "
            "finite number) still gives blocked keys weight when the real scores are lower than "
            "the fill: here every score is near -20000, so the blocked keys took all the weight. "
            "A blocked key's weight must be exactly 0 whatever the scores are: fill with "
            "float('-inf') (section 3.5), as exercise 2 does for padding.",
            when=lambda args, got: args[1] is not None and isinstance(got, torch.Tensor)
            and any(compare(got, _attend(*args[:4], fill=fill), 1e-3, 1e-4) is None
                    for fill in (-1e4, -1e3, -5e3))),
    Mistake("blocked scores set to 0", "the blocked scores became 0, not -inf (what "
            "scores.masked_fill(~mask, 0.0) does, and multiplying the scores by the mask too): "
            "exp(0) = 1 still gives those keys weight, as much as a key that scores 0. Fill them "
            "with -inf before the softmax: scores.masked_fill(~mask, float('-inf')).",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, multiply_mask=True)),
    Mistake("dropout on the scores", "you applied dropout to the scores, before the softmax: a "
            "dropped score becomes 0, which still gets weight, and the softmax renormalises the "
            "row. Dropout belongs on A, after the softmax: a dropped link gets weight 0.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and (_same_with_nan(got, _dropped("scores")(*args))
                 or _same_with_nan(got, _dropped("masked scores")(*args)))),
    Mistake("rows renormalised after dropout", "you divided the dropped A by its row sums "
            "(renormalised after dropout): nn.Dropout already divides the kept weights by 1 - p, "
            "so the rows sum to 1 on average; renormalising every row undoes that (and gives "
            "0 / 0 = nan, or 0 with a guard, where a row lost all its weights). Use the dropped A "
            "as it is.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and (_same_with_nan(got, _dropped("renormalised")(*args))
                 or compare(got, _dropped("renormalised, guarded")(*args), 1e-4, 1e-4) is None)),
    Mistake("scaled by d_k", "you divided the scores by d_k; divide by its square root, √d_k "
            "(here √d_model): the variance of q · k is d_k, so √d_k brings it back to 1.",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, divisor=float(x.shape[-1]))),
    Mistake("queries and keys swapped", "you computed K Qᵀ: entry (i, j) is then k_i · q_j, how much "
            "token j looks for token i. The scores are Q Kᵀ, q_i · k_j: the query of row i against "
            "every key (section 3.1: the matrix is not symmetric).",
            gives=lambda x, m, w, b, p, t: _attend(x, m, w, b, swap_qk=True)),
    Mistake("mask applied after the softmax", "you zeroed the blocked weights after the softmax, so "
            "each masked row sums to less than 1 (section 3.5). Set the blocked scores to -inf "
            "before the softmax, which gives them weight 0 and the allowed keys the whole unit.",
            when=lambda args, got: args[1] is not None and isinstance(got, torch.Tensor)
            and compare(got, _attend(*args[:4], mask_after=True, dropout=args[4] if args[5] else 0.0),
                        1e-5, 1e-5) is None),
    Mistake("dropout without the rescale", "you zeroed weights with probability p but did not divide "
            "the kept ones by 1 - p, so in training each row sums to 1 - p on average and the "
            "layer's output shrinks by that factor, unlike in eval mode. nn.Dropout (or F.dropout) "
            "does the rescaling: use it on A.",
            when=lambda args, got: args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and _same_with_nan(got, _dropped("unscaled")(*args))),
    Mistake("dropout in eval mode", "dropout is on in eval mode: use nn.Dropout (a submodule, "
            "which follows module.train()/eval()) or F.dropout(..., training=self.training).",
            when=lambda args, got: not args[5] and args[4] > 0 and isinstance(got, torch.Tensor)
            and compare(got, _dropped("weights")(*args), 1e-5, 1e-5) is None),
]


def check_self_attention_module(cls: Callable) -> CheckResult:
    """``SelfAttention(d_model, bias=True, dropout=0.0)``, called as ``module(x (B, T, D), mask=None)``
    with a boolean mask broadcastable to ``(B, T, T)`` (True = may attend), returns ``(B, T, D)``:
    the same numbers as ``MultiHeadAttention(d_model, num_heads=1)`` with the same weights."""
    cases = []
    for n, (b, t, d, bias, mask_kind, dropout, training, *far) in enumerate([
        (2, 3, 4, True, None, 0.0, False), (1, 5, 8, False, None, 0.0, False),
        (2, 4, 6, True, "causal", 0.0, False), (2, 5, 4, False, "keys", 0.0, False),
        (1, 1, 4, True, "causal", 0.0, False),
        (2, 4, 8, True, "causal", 0.5, True), (2, 4, 8, False, None, 0.3, False),
        (2, 5, 4, True, "causal", 0.0, False, -2e4),  # every score near -20000: a finite fill leaks
    ], start=1):
        g = torch.Generator().manual_seed(100 + n)
        x = torch.randn(b, t, d, generator=g)
        mask = None
        if mask_kind == "causal":
            mask = torch.ones(t, t, dtype=torch.bool).tril()  # (T, T)
        elif mask_kind == "keys":
            lengths = torch.tensor([t, max(1, t - 2)])
            mask = token_mask(lengths, t)[:, None, :].expand(b, t, t)  # (B, T, T)
        weights = _module_weights(n, d, bias)
        if far:
            weights = _far_weights(weights, d, far[0])
        expected = _reference_self_attention(x, mask, weights, bias, dropout, training)
        mode = f"{'train' if training else 'eval'} mode, dropout {dropout}"
        scores = f", scores near {far[0]:g}" if far else ""
        cases.append(Case(
            f"x {tuple(x.shape)}, bias={bias}, mask {mask_kind or 'none'}, {mode}{scores}",
            (x, mask, weights, bias, dropout, training), expected,
            hint="q, k, v = q_proj(x), k_proj(x), v_proj(x); scores = q kᵀ / √D; -inf where the "
                 "mask is False; A = softmax over the keys; dropout on A; out_proj(A v).",
            atol=1e-3 if far else 1e-5, rtol=1e-4 if far else 1e-5))
    unscaled = _unscaled_dropout(cls)  # found whatever random numbers the reader's mask uses
    if unscaled:
        message = f"✗ SelfAttention module: {unscaled}"
        print(message)
        return CheckResult("SelfAttention module", False, message, "dropout without the rescale")
    return run_cases("SelfAttention module", _self_attention_runner(cls), cases,
                     SELF_ATTENTION_MISTAKES)


def _unscaled_dropout(cls: Callable | None) -> str:
    """The "dropout without 1/(1 - p)" message when the reader's module, in training mode with
    p = 0.5, gives rows of ``A`` that sum to 1 - p on average (a right module: 1); else ""."""
    with torch.random.fork_rng(devices=[]):  # leaves the caller's random numbers alone
        sums, how = _row_sums_with(cls)
    if not how.startswith("your") or not torch.isfinite(sums).all() or abs(sums.mean() - 0.5) > 0.05:
        return ""
    return ("dropout without the 1/(1 - p) rescale: with p = 0.5 in training mode, your rows of "
            f"A sum to {sums.mean():.2f} on average, not 1. You zeroed weights with probability p "
            "but did not divide the kept ones by 1 - p, so the layer's output shrinks by 1 - p in "
            "training and not in eval mode. nn.Dropout (or F.dropout) does the rescaling: use it "
            "on A.")


def _row_sums_with(cls: Callable | None) -> tuple[torch.Tensor, str]:
    """Row sums of a dropped ``A`` (p = 0.5, training mode), measured with the reader's module
    when it runs: with v_proj giving 1 in every feature (weight 0, bias 1) and out_proj the
    identity, each output feature of a query is the sum of its row of ``A``. Otherwise ``A`` is
    dropped as nn.Dropout does (each weight kept with probability 1 - p and divided by 1 - p)."""
    g = torch.Generator().manual_seed(7)
    if cls is not None:
        try:
            module = cls(8, bias=True, dropout=0.5)
            with torch.no_grad():
                for name in ("q_proj", "k_proj"):
                    getattr(module, name).weight.copy_(0.3 * torch.randn(8, 8, generator=g))
                    getattr(module, name).bias.zero_()
                module.v_proj.weight.zero_()
                module.v_proj.bias.fill_(1.0)
                module.out_proj.weight.copy_(torch.eye(8))
                module.out_proj.bias.zero_()
                module.train()
                torch.manual_seed(7)
                out = module(torch.randn(2000, 8, 8, generator=g))  # (2000, T, D)
            if isinstance(out, torch.Tensor) and out.shape == (2000, 8, 8):
                return out[..., 0].flatten(), "your SelfAttention, in training mode"
        except Exception:  # noqa: BLE001 - a module not written yet: measure without it
            pass
    weights = torch.softmax(torch.randn(4000, 8, generator=g), dim=-1)  # (rows, keys)
    kept = torch.rand(weights.shape, generator=g) >= 0.5  # (rows, keys)
    return (weights * kept / 0.5).sum(-1), "nn.Dropout's rule on random rows"


def check_dropout_row_sums(prediction: object, module: Callable | None = None) -> CheckResult:
    """Exercise 6's prediction: in training mode with ``dropout=0.5``, the mean row sum of ``A``
    after dropout, over many rows. The checker measures it, with the reader's ``SelfAttention``
    class when given one that runs (else with nn.Dropout's rule), and explains the prediction:
    a prediction off the measurement still passes, marked ✗ "prediction off" on its own line, as
    every predict-then-measure checker of the book does."""
    name = "row sums after dropout"

    def verdict(passed: bool, text: str, diagnosis: str = "") -> CheckResult:
        message = f"{'✓' if passed else '✗'} {name}: {text}"
        print(message)
        return CheckResult(name, passed, message, diagnosis)

    if prediction is None:
        return verdict(False, "not done yet: write your prediction into prediction_row_sums.")
    guess = prediction.item() if isinstance(prediction, torch.Tensor) and prediction.numel() == 1 \
        else prediction
    if isinstance(guess, bool) or not isinstance(guess, (int, float)) or math.isnan(guess):
        return verdict(False, f"the prediction must be a number, got {prediction!r}.",
                       "prediction not a number")
    sums, how = _row_sums_with(module)
    measured = (f"measured with {how}, {len(sums)} rows of 8 weights, p = 0.5: mean row sum "
                f"{sums.mean():.2f}, single rows from {sums.min():.2f} to {sums.max():.2f}")
    unscaled = _unscaled_dropout(module)
    if unscaled:  # the reader's module is wrong, whatever the prediction
        return verdict(False, f"{measured}.\n   ✗ {unscaled}", "dropout without the rescale")
    rows = _describe_rows(sums, how)
    failed = _module_failure(module)
    if failed:  # the reader's module fails its own check: no "right", whatever the prediction
        return verdict(False, f"{measured}. {rows}\n   ✗ your SelfAttention fails "
                              f"check_self_attention_module ({failed}), so these row sums are "
                              "not those of attention dropout: fix the module, then check the "
                              "prediction again.", "module fails its check")
    if abs(guess - 1.0) <= 0.05:
        return verdict(True, f"right; {measured}. {rows}")
    off = f"{measured}\n   ✗ {PREDICTION_OFF}: your prediction, {guess:g}, is not the measured mean. "
    if abs(guess - 0.5) <= 0.05:
        return verdict(True, off + "0.5 forgets that nn.Dropout divides the weights it keeps by "
                                   "1 - p = 0.5: half are zeroed, the rest doubled.", "no rescaling")
    return verdict(True, off + "Half the weights are zeroed and the rest doubled, so on average "
                               "nothing changes.", "wrong prediction")


def _module_failure(cls: Callable | None) -> str:
    """The reason the reader's module fails ``check_self_attention_module`` (its diagnosis, or
    "wrong output"), found silently and without touching the caller's random numbers; "" when
    no module is given or it passes."""
    if cls is None:
        return ""
    import contextlib
    import io
    with torch.random.fork_rng(devices=[]), contextlib.redirect_stdout(io.StringIO()):
        result = check_self_attention_module(cls)
    return "" if result else (result.diagnosis or "wrong output")


def _describe_rows(sums: torch.Tensor, how: str) -> str:
    """What the measured row sums say about the module that gave them."""
    if not torch.isfinite(sums).all():
        return ("Some of your rows are nan: 0 / 0 where a row lost every weight, which is what "
                "renormalising the rows after dropout gives. nn.Dropout on A needs no division: "
                "it already rescales the kept weights by 1 / (1 - p).")
    low, high = sums.min().item(), sums.max().item()
    if low >= 0.99 and high <= 1.01:
        return ("Every one of your rows sums to 1.00, so your module does not zero weights of A "
                "after the softmax (dropout on the scores, or rows renormalised after dropout, "
                "give this). nn.Dropout on A leaves single rows from about 0 to 2, summing to 1 "
                "only on average.")
    if high <= 1.01:
        return (f"None of your rows sums to more than 1 (from {low:.2f} to {high:.2f}): the kept "
                "weights were divided back to a row sum of 1 (rows renormalised after dropout?), "
                "not rescaled by 1 / (1 - p). nn.Dropout on A leaves rows from about 0 to 2.")
    who = "your rows" if how.startswith("your") else "the rows"
    return (f"nn.Dropout divides the kept weights by 1 - p, so a row sums to 1 on average but "
            f"not row by row: {who} range from {low:.2f} to {high:.2f}.")


def check_row_sums_file(_function: object = None, prediction: object = None) -> CheckResult:
    """``prediction_row_sums = ...``: Exercise 6's prediction from a ``.py`` file (the command
    line). There is no function to write; the prediction goes to ``check_dropout_row_sums``."""
    return check_dropout_row_sums(prediction)


check_row_sums_file.prediction_only = True  # no function to write, only the prediction


EXERCISES = {
    "batched_attention": check_scaled_dot_product_attention,
    "attention_pool": check_attention_pool,
    "window_causal_mask": check_window_causal_mask,
    "pe_similarity": check_pe_similarity,
    "position_accuracy": check_position_accuracy,
    "SelfAttention": check_self_attention_module,
    "row_sums": check_row_sums_file,  # prediction only: the file's prediction_row_sums
}
