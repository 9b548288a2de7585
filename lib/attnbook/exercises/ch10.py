"""Checkers for Chapter 10 (T5).

Each ``check_*`` runs the reader's function on fixed cases whose answers come from the book's
library (``attnbook.layers.relative_position``, ``attnbook.tasks.span_corruption``,
``attnbook.models.t5``) and prints a verdict; a wrong answer that a known mistake gives is named
in one line. ``check_target_length`` is a predict-then-measure exercise: it checks the
measurement against the exact count and explains the gap to the reader's prediction.
``EXERCISES`` maps the notebook's function names to their checkers.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from attnbook.exercises.core import Case, CheckResult, Mistake, _finish, run_cases
from attnbook.layers.relative_position import relative_position_bucket
from attnbook.models.t5 import T5, T5Config

# --- 1. which offsets share a bucket? -----------------------------------------------------------


def _bucket_range(bucket: int, bidirectional: bool, num_buckets: int, max_distance: int):
    """Brute force over offsets far beyond max_distance: (lowest, highest) offset key - query in
    the bucket, None where the bucket is unbounded on that side."""
    far = 8 * max_distance
    offsets = torch.arange(-far, far + 1)
    inside = offsets[relative_position_bucket(offsets, bidirectional, num_buckets, max_distance) == bucket]
    if len(inside) == 0:
        return None
    low, high = int(inside.min()), int(inside.max())
    return (None if low == -far else low, None if high == far else high)


def _round_instead_of_floor(bucket, bidirectional, num_buckets, max_distance):
    import math
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side = bucket // per_side if bidirectional else 0
    b = bucket - side * per_side
    if b < exact:
        return _bucket_range(bucket, bidirectional, num_buckets, max_distance)

    def start(k):  # smallest distance with rounded log bucket k
        d = exact
        while round(exact + math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact)) < k:
            d += 1
        return d
    lo, hi = start(b), (None if b == per_side - 1 else start(b + 1) - 1)
    if side == 1:
        return (lo, hi)
    return (None if hi is None else -hi, -lo)


def _halves_swapped(bucket, bidirectional, num_buckets, max_distance):
    r = _bucket_range(bucket, bidirectional, num_buckets, max_distance)
    if r is None or not bidirectional:
        return r
    low, high = r
    return (None if high is None else -high, None if low is None else -low)


def check_bucket_range(fn: Callable) -> CheckResult:
    """``fn(bucket, bidirectional, num_buckets, max_distance) -> (low, high)``: the smallest and
    largest offset ``key - query`` that fall in ``bucket`` (None on an unbounded side)."""
    settings = [(True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 16, 40), (True, 12, 100)]
    cases = []
    for bidirectional, n, d in settings:
        for bucket in sorted({0, 1, n // 4 - 1, n // 4, n // 2 - 1, n // 2, n // 2 + 2, n - 2, n - 1}):
            expected = _bucket_range(bucket, bidirectional, n, d)
            if expected is not None:
                cases.append(Case(f"bucket {bucket} of {n}, max_distance {d}, "
                                  f"{'bidirectional' if bidirectional else 'causal'}",
                                  (bucket, bidirectional, n, d), expected,
                                  hint="exact buckets hold one offset; log buckets start where "
                                       "floor(max_exact + log(d / max_exact) / log(max_distance / max_exact) "
                                       "* (per_side - max_exact)) first reaches the bucket"))
    mistakes = [
        Mistake("halves swapped", "bidirectional: the lower half of the buckets holds keys at or *before* the "
                "query (offset <= 0), the upper half keys after it.", gives=_halves_swapped),
        Mistake("rounded log", "the log-spaced index is truncated (.long()), not rounded: a bucket starts "
                "where the floor first reaches it.", gives=_round_instead_of_floor),
        Mistake("last bucket bounded", "every offset at or beyond max_distance shares the last bucket of its "
                "side: that end is unbounded (None).",
                when=lambda a, got: isinstance(got, tuple) and len(got) == 2 and None not in got
                and None in (_bucket_range(*a) or (0, 0))),
    ]
    return run_cases("bucket range", fn, cases, mistakes)


# --- 2. put the spans back (sentinel-aware) ----------------------------------------------------

SENTINEL_BASE = 1000  # the cases' sentinels: sentinel i is 1000 - i (counting down, as in T5)


def _fill_spans(inputs: list[int], target: list[int], eos_id: int) -> list[int]:
    spans: dict[int, list[int]] = {}
    current = None
    for token in target:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if token > SENTINEL_BASE - 100 else [token])
    return out


def _keep_sentinels(inputs, target, eos_id):
    spans = dict(zip(_sentinels_in_order(target, eos_id), _spans_in_order(target, eos_id)))
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend([token, *spans.get(token, [])] if token > SENTINEL_BASE - 100 else [token])
    return out


def _sentinels_in_order(target, eos_id):
    out = []
    for token in target:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100:
            out.append(token)
    return out


def _spans_in_order(target, eos_id):
    spans, current = [], None
    for token in target:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100:
            current = []
            spans.append(current)
        elif current is not None:
            current.append(token)
    return spans


def _by_position(inputs, target, eos_id):
    """Spans given out in target order, ignoring which sentinel names them."""
    spans = iter(_spans_in_order(target, eos_id))
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(next(spans, []) if token > SENTINEL_BASE - 100 else [token])
    return out


def _keeps_eos(inputs, target, eos_id):
    return _fill_spans(inputs, target, eos_id) + [eos_id]


def _past_eos(inputs, target, eos_id):
    return _fill_spans(inputs, [t for t in target if t != eos_id], eos_id)


def check_fill_spans(fn: Callable) -> CheckResult:
    """``fn(inputs, target, eos_id) -> list``: the text put back together from a span-corrupted
    input and a (model-written) target, without sentinels or ``</s>``. Sentinel ``i`` is
    ``1000 - i``; a sentinel missing from the target hides nothing; the target ends at ``</s>``."""
    s = [SENTINEL_BASE - i for i in range(4)]
    raw = [
        ("the chapter's layout", [5, 6, s[0], 9, 10, s[1], 1], [s[0], 7, 8, s[1], 11, 1], 1),
        ("one span", [5, s[0], 1], [s[0], 6, 7, 8, 1], 1),
        ("spans written out of order", [5, s[0], 6, s[1], 7, 1], [s[1], 40, 41, s[0], 30, 1], 1),
        ("a sentinel the model never wrote", [5, s[0], 6, s[1], 7, 1], [s[0], 30, 1], 1),
        ("tokens after </s> are not text", [5, s[0], 6, s[1], 7, 2], [s[0], 30, 2, s[1], 50], 2),
        ("three spans, eos 3", [s[0], 5, s[1], 6, s[2], 3], [s[0], 20, s[1], 21, 22, s[2], 23, 3], 3),
    ]
    cases = [Case(name, (inp, tgt, eos), _fill_spans(inp, tgt, eos),
                  hint="collect each sentinel's span from the target (up to </s>), then replace each "
                       "sentinel of the input by its span") for name, inp, tgt, eos in raw]
    mistakes = [
        Mistake("sentinels kept", "replace each sentinel by its span: the sentinels themselves are not text.",
                gives=_keep_sentinels),
        Mistake("spans by position", "a span belongs to the sentinel written before it in the target, "
                "not to the n-th sentinel of the input: the model may write them in another order or skip one.",
                gives=_by_position),
        Mistake("eos kept", "</s> ends the sequence; it is not part of the text.", gives=_keeps_eos),
        Mistake("read past eos", "stop reading the target at </s>: whatever follows is not the model's answer.",
                gives=_past_eos),
    ]
    return run_cases("fill spans", fn, cases, mistakes)


# --- 3. predict, then measure: the target length -------------------------------------------------

LENGTH, DENSITY, MEAN_SPAN = 200, 0.3, 5.0
# per sequence: 60 hidden tokens in 12 spans: target 60 + 12 sentinels + </s>; input 140 + 12 + 1
TARGET, INPUT, HIDDEN = 73.0, 153.0, 60.0


def check_target_length(fn: Callable, prediction: float | None = None) -> CheckResult:
    """``fn() -> float``: the mean target length (tokens, sentinels and ``</s>`` included) that
    span corruption gives for 200-token sequences with 30% noise and mean span 5, measured; and
    ``prediction``, the reader's guess written before measuring."""
    name = "target length"
    if not callable(fn):
        return _finish(name, False, f"expected a function, got {type(fn).__name__}")
    if prediction is None:
        print("(no prediction given: write yours into `prediction` before you measure)")
    try:
        measured = fn()
    except NotImplementedError:
        return _finish(name, False, "not done yet: the function still raises NotImplementedError.")
    except Exception as err:  # noqa: BLE001 - the reader's code may raise anything
        return _finish(name, False, f"your measurement raised {type(err).__name__}: {err}")
    if isinstance(measured, torch.Tensor):
        measured = float(measured)
    if not isinstance(measured, (int, float)):
        return _finish(name, False, f"return the mean length as a number, got {type(measured).__name__}")
    known = {INPUT: ("input length", "that is the *input*'s length (kept tokens + sentinels + </s>); "
                     "measure the target."),
             HIDDEN: ("hidden only", "that counts only the hidden tokens: the target also holds one sentinel "
                      "per span and </s>."),
             HIDDEN + 12: ("no eos", "add the </s> that closes the target."),
             LENGTH + 1.0: ("whole text", "that is the length of a target that rebuilds the whole text (plus "
                            "</s>); span corruption's target holds only the hidden spans.")}
    for value, (diagnosis, message) in known.items():
        if abs(measured - value) < 0.5:
            return _finish(name, False, f"{message}\n   measured {measured:.1f}", diagnosis)
    if abs(measured - TARGET) > 0.5:
        return _finish(name, False, f"measured {measured:.2f}, expected {TARGET:.0f} (every draw hides "
                       f"round(0.3 · 200) = 60 tokens in round(60 / 5) = 12 spans). Did you pass "
                       f"noise_density=0.3 and mean_span_length=5?")
    verdict = f"measured {measured:.1f} tokens (the input: {INPUT:.0f}; rebuilding the text: {LENGTH + 1})"
    if prediction is not None:
        gap = prediction - measured
        if abs(gap) <= 0.1 * measured:
            verdict += f"; your prediction {prediction:g} was within 10%."
        elif abs(prediction - HIDDEN) < 3:
            verdict += (f"; you predicted {prediction:g}: the hidden tokens alone. Each of the 12 spans "
                        "also costs one sentinel, and </s> one more.")
        elif abs(prediction - (LENGTH + 1)) < 10 or abs(prediction - LENGTH) < 10:
            verdict += (f"; you predicted {prediction:g}: the whole text. The target holds only what "
                        "was hidden, which is why span corruption trains faster than rebuilding the text.")
        else:
            verdict += (f"; you predicted {prediction:g} ({gap:+.0f}): hidden tokens (30% of 200) + one "
                        "sentinel per span (60 / 5) + </s>.")
    return _finish(name, True, verdict)


# --- 4. a T5 without position bias (touches the model) ----------------------------------------------


def _permutation_equivariant(model: nn.Module, seed: int) -> bool:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, model.src_vocab_size, (2, 7), generator=g)
    lengths = torch.tensor([7, 7])
    perm = torch.randperm(7, generator=g)
    with torch.no_grad():
        memory, _ = model.encode(src, lengths)
        shuffled, _ = model.encode(src[:, perm], lengths)
    return torch.allclose(memory[:, perm], shuffled, atol=1e-5)


def _causal_still_works(model: nn.Module) -> bool:
    src = torch.randint(3, model.src_vocab_size, (1, 5), generator=torch.Generator().manual_seed(3))
    tgt = torch.tensor([[0, 5, 6, 7]])
    changed = torch.tensor([[0, 5, 9, 9]])
    with torch.no_grad():
        a = model(src, torch.tensor([5]), tgt)[:, :2]
        b = model(src, torch.tensor([5]), changed)[:, :2]
    return torch.allclose(a, b)


def check_no_position_t5(fn: Callable) -> CheckResult:
    """``fn(config) -> T5``: a T5 of ``config`` with no relative position bias in either stack
    (so nothing in it knows where a token is), every other part unchanged."""
    name = "T5 without position bias"
    if not callable(fn):
        return _finish(name, False, f"expected a function, got {type(fn).__name__}")
    configs = [T5Config(40, d_model=16, num_heads=2, d_ff=24, num_encoder_layers=1, num_decoder_layers=1),
               T5Config(50, d_model=24, num_heads=4, d_ff=16, num_buckets=8, max_distance=20),
               T5Config(30, d_model=8, num_heads=1, d_ff=8, gated=False, num_encoder_layers=3)]
    for n, config in enumerate(configs, start=1):
        torch.manual_seed(n)
        try:
            model = fn(config)
        except NotImplementedError:
            return _finish(name, False, "not done yet: the function still raises NotImplementedError.")
        except Exception as err:  # noqa: BLE001
            return _finish(name, False, f"config {n} raised {type(err).__name__}: {err}")
        if not isinstance(model, T5):
            return _finish(name, False, f"return a T5 (built from the config), got {type(model).__name__}")
        if model.config != config:
            return _finish(name, False, f"config {n}: build the model from the config given, not another one")
        tables = [m for m in model.modules() if type(m).__name__ == "RelativePositionBias"]
        zeroed = tables and all(not t.relative_attention_bias.weight.detach().any() for t in tables)
        if zeroed:
            return _finish(name, False, "the bias tables are zero but still there: training would learn them "
                           "again. Remove them (set the stack's position-bias module to None).", "zeroed")
        if model.encoder_position_bias is not None:
            return _finish(name, False, "the encoder still has its bias: a shuffled source gives a shuffled "
                           "memory only once encoder_position_bias is None.", "encoder kept")
        if model.decoder_position_bias is not None:
            return _finish(name, False, "the decoder still has its causal bias: remove decoder_position_bias "
                           "too.", "decoder kept")
        if not _permutation_equivariant(model.eval(), n):
            return _finish(name, False, "shuffling the source should only shuffle the memory; something else "
                           "in your model depends on positions.")
        if not _causal_still_works(model):
            return _finish(name, False, "the decoder now sees the future: keep the causal mask (only the "
                           "bias goes).")
    return _finish(name, True, f"all {len(configs)} configurations: no bias in either stack, and a shuffled "
                   "source gives the same memory, shuffled.")


EXERCISES = {
    "bucket_range": check_bucket_range,
    "fill_spans": check_fill_spans,
    "measure_target_length": check_target_length,
    "t5_without_position_bias": check_no_position_t5,
}
