"""Checkers for Chapter 10 (T5).

Each ``check_*`` runs the reader's function on fixed cases whose answers come from the book's
library (``attnbook.layers.relative_position``, ``attnbook.tasks.span_corruption``,
``attnbook.models.t5``) and prints a verdict; a wrong answer that a known mistake gives is named
in one line. ``check_trained_buckets``, ``check_span_spread``, ``check_target_length`` and
``check_no_position_t5`` are predict-then-measure exercises: they check the measurement and
explain the gap to the reader's
``prediction`` (the command line, ``python -m attnbook.exercises ch10 answers.py``, passes the
file's ``prediction_<function name>`` or ``prediction`` variable). ``check_corrupt``
refuses a function that calls the library's ``corrupt``, ``check_bucket_range`` one that
calls a bucket function to try offsets.
``EXERCISES`` maps the notebook's function names to their checkers.
"""
from __future__ import annotations

import contextlib
import functools
import io
import math
import signal
import threading
import time
from collections.abc import Callable
from unittest import mock

import torch
from torch import nn

from attnbook.exercises.core import Case, CheckResult, Mistake, _finish, run_cases
from attnbook.layers import blocks as _blocks
from attnbook.layers.relative_position import relative_position_bucket
from attnbook.models.t5 import T5, T5Config
from attnbook.tasks.span_corruption import corrupt, noise_mask

# --- 1. which offsets share a bucket? -----------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _bucket_range(bucket: int, bidirectional: bool, num_buckets: int, max_distance: int):
    """(lowest, highest) offset key - query in ``bucket`` by the library's bucket function, None
    where the bucket is unbounded on that side, None for an empty bucket. Per side the bucket never
    falls as the distance grows, so each end is a bisection over distances (fast at any
    max_distance)."""
    per_side = num_buckets // 2 if bidirectional else num_buckets
    after = bidirectional and bucket >= per_side  # keys after the query: offsets +1, +2, ...
    sign, nearest = (1, 1) if after else (-1, 0)

    def at(distance: int) -> int:
        return int(relative_position_bucket(torch.tensor([sign * distance]), bidirectional, num_buckets,
                                            max_distance))

    def first(k: int) -> int:  # the smallest distance whose bucket is at least k
        low, high = nearest, max_distance + 1  # every distance from max_distance on: the last bucket
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if at(middle) >= k else (middle + 1, high)
        return low

    start = first(bucket)
    if at(start) != bucket:
        return None
    last = bucket == (num_buckets - 1 if after or not bidirectional else per_side - 1)
    end = None if last else first(bucket + 1) - 1
    if after:
        return (start, end)
    future = not bidirectional and bucket == 0  # a causal table puts every key after the query in bucket 0
    return (None if end is None else -end, None if future else -start)


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


def _causal_sign_flipped(bucket, bidirectional, num_buckets, max_distance):
    r = _bucket_range(bucket, bidirectional, num_buckets, max_distance)
    if r is None or bidirectional:
        return r
    low, high = r
    return (None if high is None else -high, None if low is None else -low)


def _causal_zero_closed(bucket, bidirectional, num_buckets, max_distance):
    r = _bucket_range(bucket, bidirectional, num_buckets, max_distance)
    return (0, 0) if not bidirectional and bucket == 0 else r


def _one_past_the_end(bucket, bidirectional, num_buckets, max_distance):
    """The far end of each log bucket set to where the next one starts."""
    r = _bucket_range(bucket, bidirectional, num_buckets, max_distance)
    if r is None or None in r or r[0] == r[1]:
        return r
    low, high = r
    return (low, high + 1) if low > 0 else (low - 1, high)


def _no_halving(bucket, bidirectional, num_buckets, max_distance):
    """The bidirectional table read as if each side had all ``num_buckets`` buckets: bucket b
    then holds the distances of causal bucket b, keys before the query."""
    return _bucket_range(bucket, False, num_buckets, max_distance)


def _exact_inclusive(bucket, bidirectional, num_buckets, max_distance):
    """The exact region taken to include bucket max_exact (``b <= exact``): that bucket read as the
    single distance max_exact, where it is the first log bucket (max_exact up to where the next starts)."""
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side = bucket // per_side if bidirectional else 0
    if bucket - side * per_side != exact:
        return _bucket_range(bucket, bidirectional, num_buckets, max_distance)
    return (exact, exact) if side == 1 else (-exact, -exact)


def _floored_inverse(bucket, bidirectional, num_buckets, max_distance):
    """Each log bucket's start from the inverse of the log formula, floored and not corrected: the
    largest integer at or below the real start, one distance short whenever that is not an integer."""
    import math
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side = bucket // per_side if bidirectional else 0
    b = bucket - side * per_side
    if b < exact or (bidirectional and side == 1 and b == 0):
        return _bucket_range(bucket, bidirectional, num_buckets, max_distance)

    def start(k):
        return max(exact, math.floor(exact * (max_distance / exact) ** ((k - exact) / (per_side - exact))))
    low, high = start(b), (None if b == per_side - 1 else start(b + 1) - 1)
    if side == 1:
        return (low, high)
    return (None if high is None else -high, -low)


def _reversed_pair(args, got) -> bool:
    """The right two ends in the wrong order: (high, low)."""
    expected = _bucket_range(*args)
    return (isinstance(got, (tuple, list)) and len(got) == 2 and expected is not None
            and None not in expected and expected[0] != expected[1] and tuple(got) == expected[::-1])


def _zero_in_upper_half(args, got) -> bool:
    """Bidirectional bucket 0 read as empty, or shifted one offset left, or bucket num_buckets // 2
    (empty) given offset 0: as when offset 0 is counted with the keys after the query."""
    bucket, bidirectional, num_buckets = args[0], args[1], args[2]
    pair = tuple(got) if isinstance(got, (tuple, list)) and len(got) == 2 else None
    if bidirectional and bucket == num_buckets // 2:  # the empty bucket: offset 0 also put here
        return pair == (0, 0)
    if not bidirectional or bucket != 0:
        return False
    return got is None or pair == (-1, -1)


def check_bucket_range(fn: Callable) -> CheckResult:
    """``fn(bucket, bidirectional, num_buckets, max_distance) -> (low, high)``: the smallest and
    largest offset ``key - query`` that fall in ``bucket`` (None on an unbounded side)."""
    settings = [(True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 16, 40), (True, 12, 100),
                (False, 32, 20000)]  # the last: log buckets that end thousands of offsets away
    cases = _bucket_cases(settings)
    # log buckets that end hundreds of thousands of offsets away, under a time limit: a formula answers
    # in microseconds, trying offsets (or distances one by one) takes seconds. Chosen where float64
    # arithmetic and the library's float32 put every end on the same offset.
    far = _bucket_cases(FAR_SETTINGS)
    mistakes = _bucket_mistakes()
    if callable(fn) and _calls(fn, _is_bucket_function,
                                   frozenset({"relative_position_bucket", "_relative_position_bucket"})):
        return _finish("bucket range", False, "your function calls a bucket function (the library's "
                       "`relative_position_bucket` or `transformers`' `_relative_position_bucket`) to try "
                       "offsets: work the ends out from the formula instead (the library's bucket function is "
                       "what the checker compares with).", "scans the library")
    if callable(fn) and _too_slow(fn, far, _scan_seconds() / SCAN_FRACTION):
        with contextlib.redirect_stdout(io.StringIO()):
            near = run_cases("bucket range", fn, [c for c in cases if c.args[3] <= 128], mistakes)
        if not near and near.diagnosis:  # a named mistake on the small tables says more
            print(near.message)
            return near
        return _finish("bucket range", False, f"the {len(far)} cases with max_distance 10^6 and 10^7 took "
                       "more than a thirtieth of the time stepping the distance one by one takes: the function "
                       "tries offsets (or distances) one by one. "
                       "Invert the formula instead: log bucket k starts at the smallest distance d with "
                       "d >= max_exact * (max_distance / max_exact) ** ((k - max_exact) / (per_side - max_exact)); "
                       "compute that, then step d by one only to correct the rounding.", "offsets scanned")
    return run_cases("bucket range", fn, cases + far, _order_exact_region(fn, mistakes))


SCAN_FRACTION = 30  # a reader's function may take this fraction of a scan's time over the far cases
FAR_SETTINGS = ((False, 32, 10 ** 6), (True, 16, 10 ** 7), (False, 8, 10 ** 7))


@functools.lru_cache(maxsize=1)
def _scan_seconds() -> float:
    """Seconds that stepping the distance one by one takes over the far cases on this machine now,
    measured once per process: the time limit scales with the machine, so a slow or loaded machine
    does not fail a formula and a fast one does not pass a scan (a formula takes about 1/10,000 of
    a scan's time)."""
    start = time.perf_counter()
    for case in _bucket_cases(FAR_SETTINGS):
        _scan_range(*case.args)
    return time.perf_counter() - start


def _scan_range(bucket: int, bidirectional: bool, num_buckets: int, max_distance: int) -> tuple:
    """The ends of ``bucket`` found by stepping the distance one by one (the calibration above)."""
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side, b = divmod(bucket, per_side) if bidirectional else (0, bucket)

    def first_distance(k: int) -> int:
        d = exact
        while exact + int(math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact)) < k:
            d += 1
        return d

    if b < exact:
        return (side, b, b)
    return (side, first_distance(b), None if b == per_side - 1 else first_distance(b + 1) - 1)


class _Late(BaseException):
    """Raised by the timer inside a reader's function (BaseException: a bare ``except Exception``
    in the reader's code does not swallow it)."""


def _too_slow(fn: Callable, cases: list, seconds: float) -> bool:
    """Whether ``fn`` takes more than ``seconds`` over ``cases``; interrupted by a timer where the
    platform has one (Unix, main thread), else timed to the end. An error counts as not slow: the
    case run that follows reports it."""
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    previous = None
    if alarm:
        def late(signum, frame):
            raise _Late
        previous = signal.signal(signal.SIGALRM, late)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.perf_counter()
    try:
        for case in cases:
            fn(*case.args)
    except _Late:
        return True
    except Exception:  # noqa: BLE001 - reported by run_cases
        return False
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    return time.perf_counter() - start > seconds


def _bucket_cases(settings) -> list:
    cases = []
    for bidirectional, n, d in settings:
        for bucket in sorted({0, 1, n // 4 - 1, n // 4, n // 2 - 1, n // 2, n // 2 + 2, n - 2, n - 1}):
            expected = _bucket_range(bucket, bidirectional, n, d)  # None: no offset falls in the bucket
            cases.append(Case(f"bucket {bucket} of {n}, max_distance {d}, "
                              f"{'bidirectional' if bidirectional else 'causal'}",
                              (bucket, bidirectional, n, d), expected,
                              hint="exact buckets hold one offset; log buckets start where "
                                   "floor(max_exact + log(d / max_exact) / log(max_distance / max_exact) "
                                   "* (per_side - max_exact)) first reaches the bucket; a bucket no offset "
                                   "falls in is None"))
    return cases


def _bucket_mistakes() -> list:
    return [
        Mistake("reversed (high, low)", "return (low, high) with low <= high: on the negative side the "
                "farthest key is the *lowest* offset, so bucket -5..-8 is (-8, -5), not (-5, -8).",
                when=_reversed_pair),
        Mistake("offset 0 in the upper half", "bidirectional: offset 0 (the key is the query) belongs to the "
                "*lower* half, bucket 0; only keys strictly after the query (offset > 0) go to the upper "
                "half, so bucket num_buckets // 2 holds nothing.", when=_zero_in_upper_half),
        Mistake("halves swapped", "bidirectional: the lower half of the buckets holds keys at or *before* the "
                "query (offset <= 0), the upper half keys after it.", gives=_halves_swapped),
        Mistake("no per-side halving", "bidirectional: the buckets are split in two, num_buckets // 2 per "
                "side, and the exact ones are half of *those*; a bucket number beyond the first half is a key "
                "after the query.", gives=_no_halving),
        Mistake("exact region one bucket too long", "the exact buckets are 0 to max_exact - 1 (b < max_exact, "
                "max_exact = per_side // 2); bucket max_exact is the first log-spaced one, from distance max_exact "
                "up to where the next bucket starts, not the single distance max_exact (b <= max_exact).",
                gives=_exact_inclusive),
        Mistake("causal sign flipped", "offsets are key - query, and a causal decoder's keys come at or before "
                "its query: its buckets hold offsets <= 0 (bucket 5 is offset -5, not +5).",
                gives=_causal_sign_flipped),
        Mistake("causal bucket 0 closed", "a causal table sends every *future* offset (key after the query) to "
                "bucket 0 too, so bucket 0 runs from offset 0 to +infinity: its high end is None.",
                gives=_causal_zero_closed),
        Mistake("rounded log", "the log-spaced index is truncated (.long()), not rounded: a bucket starts "
                "where the floor first reaches it.", gives=_round_instead_of_floor),
        Mistake("floored inverse", "inverting the log formula gives a real distance; the bucket starts at the "
                "smallest *integer* distance whose truncated index reaches it: take the ceiling, not the floor, "
                "then check index(d - 1) < k <= index(d) and step d by one where float rounding put it off.",
                gives=_floored_inverse),
        Mistake("one past the end", "a log bucket ends one offset *before* the next bucket starts: its far end "
                "is (start of the next bucket) - 1.", gives=_one_past_the_end),
        Mistake("last bucket bounded", "every offset at or beyond max_distance shares the last bucket of its "
                "side: that end is unbounded (None).",
                when=lambda a, got: isinstance(got, tuple) and len(got) == 2 and None not in got
                and None in (_bucket_range(*a) or (0, 0))),
        Mistake("offsets scanned", "with a large max_distance the log buckets end thousands of offsets away: "
                "trying offsets in a fixed window misses their ends. Work the ends out from the formula: "
                "bucket k starts at the smallest d with max_exact + floor(...) >= k.",
                when=lambda a, got: a[3] > 1000),
    ]


def _order_exact_region(fn: Callable, mistakes: list) -> list:
    """Bidirectional bucket 8 of 32 reads (-8, -8) under both an inclusive exact region and no
    per-side halving; bucket 24 (keys after the query) tells them apart: (8, 8) only when the exact
    region is inclusive. Name that mistake first when the reader's function gives it."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            probe = fn(24, True, 32, 128)
    except Exception:  # noqa: BLE001 - run_cases reports the reader's errors
        return mistakes
    if not (isinstance(probe, (tuple, list)) and tuple(probe) == (8, 8)):
        return mistakes
    first = [m for m in mistakes if m.name == "exact region one bucket too long"]
    return first + [m for m in mistakes if m.name != "exact region one bucket too long"]


def _is_bucket_function(value: object) -> bool:
    """The library's bucket function, or its module or class (which reach it as an attribute)."""
    from attnbook.layers import relative_position
    return (value is relative_position_bucket or value is relative_position
            or value is relative_position.RelativePositionBias
            or isinstance(value, relative_position.RelativePositionBias))


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


def _all_spans_in_first_hole(inputs, target, eos_id):
    """Every span's tokens poured into the first sentinel's place; later sentinels dropped."""
    spans = [t for span in _spans_in_order(target, eos_id) for t in span]
    out, first = [], True
    for token in inputs:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100:
            out.extend(spans if first else [])
            first = False
        else:
            out.append(token)
    return out


def _drops_kept_token(args, got) -> bool:
    """The output is the right text with some of the input's kept tokens left out, in order."""
    inputs, target, eos_id = args
    expected = _fill_spans(inputs, target, eos_id)
    if not isinstance(got, list) or len(got) >= len(expected):
        return False
    missing, at = [], 0
    for token in expected:
        if at < len(got) and got[at] == token:
            at += 1
        else:
            missing.append(token)
    spans = {t for span in _spans_in_order(target, eos_id) for t in span}
    kept = {t for t in inputs if t <= SENTINEL_BASE - 100 and t != eos_id}
    return at == len(got) and all(t in kept and t not in spans for t in missing)


def _only_first_sentinel(inputs, target, eos_id, in_input=True, in_target=True):
    """Only sentinel 0 (id 1000) is recognised (in the input, the target or both); the other
    sentinels are read as text there."""
    def sentinel_in_target(token):
        return token == SENTINEL_BASE if in_target else token > SENTINEL_BASE - 100

    def sentinel_in_input(token):
        return token == SENTINEL_BASE if in_input else token > SENTINEL_BASE - 100

    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if sentinel_in_target(token):
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if sentinel_in_input(token) else [token])
    return out


def _only_first_sentinel_somewhere(args, got) -> bool:
    """Sentinel 0 alone is recognised in the input, in the target, or in both."""
    return any(got == _only_first_sentinel(*args, in_input=a, in_target=b)
               for a, b in ((True, True), (True, False), (False, True)))


def _unfilled_sentinel_kept(inputs, target, eos_id):
    """A sentinel the target never wrote is left in the text instead of an empty hole."""
    written = set(_sentinels_in_order(target, eos_id))
    out = []
    for token in inputs:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100 and token not in written:
            out.append(token)
        else:
            out.extend(_fill_spans([token, eos_id], target, eos_id))
    return out


def _keeps_eos(inputs, target, eos_id):
    return _fill_spans(inputs, target, eos_id) + [eos_id]


def _past_eos(inputs, target, eos_id):
    return _fill_spans(inputs, [t for t in target if t != eos_id], eos_id)


def _eos_ignored(args, got) -> bool:
    """``</s>`` read as an ordinary token, in the target (it joins the last span, and what follows
    it is read too), in the input (it is kept as text), or in both."""
    inputs, target, eos_id = args

    def fill(read_target_eos: bool, read_input_eos: bool) -> list:
        spans, current = {}, None
        for token in target:
            if token == eos_id and not read_target_eos:
                break
            if token > SENTINEL_BASE - 100:
                current = spans.setdefault(token, [])
            elif current is not None:
                current.append(token)
        out = []
        for token in inputs:
            if token == eos_id and not read_input_eos:
                break
            out.extend(spans.get(token, []) if token > SENTINEL_BASE - 100 else [token])
        return out

    return any(got == fill(t, i) for t, i in ((True, True), (True, False), (False, True)))


def _fill_spans_from(inputs, target, eos_id, lowest: int):
    """``_fill_spans`` with only the ids >= ``lowest`` read as sentinels (the others as text)."""
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token >= lowest:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if token >= lowest else [token])
    return out


def _stray_text_kept(args, got) -> bool:
    """The target's tokens before its first sentinel put into the text somewhere."""
    inputs, target, eos_id = args
    stray = []
    for token in target:
        if token == eos_id or token > SENTINEL_BASE - 100:
            break
        stray.append(token)
    if not stray or not isinstance(got, list):
        return False
    want, k = _fill_spans(*args), len(stray)
    return any(got[i:i + k] == stray and got[:i] + got[i + k:] == want for i in range(len(got) - k + 1))


def _narrow_sentinel_range(args, got) -> bool:
    """Only the first few sentinels recognised (ids >= 1000 - k for some k from 1 to 14)."""
    return any(got == _fill_spans_from(*args, SENTINEL_BASE - k) for k in range(1, 15))


def _repeat_resets(inputs, target, eos_id):
    """A repeated sentinel starts its span again: the last occurrence's tokens win."""
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100:
            spans[token] = current = []
        elif current is not None:
            current.append(token)
    return _fill_spans(inputs, [t for k, v in spans.items() for t in (k, *v)] + [eos_id], eos_id)


def _repeat_ignored(inputs, target, eos_id):
    """A repeated sentinel's tokens dropped: only the first occurrence's span is kept."""
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token > SENTINEL_BASE - 100:
            current = spans.setdefault(token, []) if token not in spans else None
        elif current is not None:
            current.append(token)
    return _fill_spans(inputs, [t for k, v in spans.items() for t in (k, *v)] + [eos_id], eos_id)


def check_fill_spans(fn: Callable) -> CheckResult:
    """``fn(inputs, target, eos_id) -> list``: the text put back together from a span-corrupted
    input and a (model-written) target, without sentinels or ``</s>``. Sentinel ``i`` is
    ``1000 - i`` (up to 16 sentinels: 1000 down to 985; every id above 900 is a sentinel); a
    sentinel missing from the target hides nothing; a sentinel written twice in the target keeps
    both spans, joined in the order written; the target ends at ``</s>``."""
    s = [SENTINEL_BASE - i for i in range(4)]
    raw = [
        ("the chapter's layout", [5, 6, s[0], 9, 10, s[1], 1], [s[0], 7, 8, s[1], 11, 1], 1),
        ("one span", [5, s[0], 1], [s[0], 6, 7, 8, 1], 1),
        ("spans written out of order", [5, s[0], 6, s[1], 7, 1], [s[1], 40, 41, s[0], 30, 1], 1),
        ("a sentinel the model never wrote", [5, s[0], 6, s[1], 7, 1], [s[0], 30, 1], 1),
        ("tokens after </s> are not text", [5, s[0], 6, s[1], 7, 2], [s[0], 30, 2, s[1], 50], 2),
        ("three spans, eos 3", [s[0], 5, s[1], 6, s[2], 3], [s[0], 20, s[1], 21, 22, s[2], 23, 3], 3),
        ("the model skipped sentinel 0", [5, s[0], 6, s[1], 7, 1], [s[1], 40, 41, 1], 1),
        ("four spans, only the last written", [s[0], 5, s[1], 6, s[2], 7, s[3], 4],
         [s[3], 60, 61, 4], 4),
        ("sentinels 13 to 15 (ids 987 to 985)", [5, 987, 6, 986, 7, 985, 1],
         [987, 30, 986, 31, 32, 985, 33, 1], 1),
        ("sentinel 9 written twice: both spans, in order", [5, 991, 6, 990, 7, 1],
         [991, 40, 990, 50, 991, 41, 42, 1], 1),
        ("sentinel 0 written twice, the second time last", [s[0], 5, s[1], 6, 2],
         [s[0], 20, s[1], 21, s[0], 22, 2], 2),
        ("target text before the first sentinel belongs to no span", [5, s[0], 6, s[1], 7, 1],
         [90, 91, s[0], 30, s[1], 31, 1], 1),
    ]
    cases = [Case(name, (inp, tgt, eos), _fill_spans(inp, tgt, eos),
                  hint="collect each sentinel's span from the target (up to </s>), then replace each "
                       "sentinel of the input by its span") for name, inp, tgt, eos in raw]
    mistakes = [
        Mistake("sentinel range too narrow", "sentinel i is 1000 - i for every i the vocabulary has (here down "
                "to 1000 - 15 = 985, and further in a real vocabulary): test for the whole range of sentinel "
                "ids (here every id above 900), not only the first few.", when=_narrow_sentinel_range),
        Mistake("repeated sentinel resets", "a sentinel the target writes twice keeps *both* spans, joined in "
                "the order written: the second occurrence appends to the first, it does not start the span "
                "again.", gives=_repeat_resets),
        Mistake("repeated sentinel ignored", "a sentinel the target writes twice keeps both spans, joined in "
                "the order written: the tokens after the second occurrence belong to it too.",
                gives=_repeat_ignored),
        Mistake("sentinels kept", "replace each sentinel by its span: the sentinels themselves are not text.",
                gives=_keep_sentinels),
        Mistake("unfilled sentinel kept", "a sentinel that the model never wrote in its target hides nothing: "
                "its hole stays empty, and the sentinel goes too.", gives=_unfilled_sentinel_kept),
        Mistake("only sentinel 0", "every sentinel id marks a hole, not only the first (1000): sentinel i "
                "is 1000 - i, in the input and in the target alike, so test for the range of sentinel ids.",
                when=_only_first_sentinel_somewhere),
        Mistake("spans by position", "a span belongs to the sentinel written before it in the target, "
                "not to the n-th sentinel of the input: the model may write them in another order or skip one.",
                gives=_by_position),
        Mistake("all spans into the first hole", "each sentinel of the input gets only the span that follows "
                "the same sentinel in the target; the first hole does not take them all.",
                gives=_all_spans_in_first_hole),
        Mistake("drops a kept token", "every token of the input that is not a sentinel is text and stays, in "
                "its place: check the step that moves past a sentinel (or stops at the end).",
                when=_drops_kept_token),
        Mistake("stray text kept", "tokens the target writes before its first sentinel belong to no "
                "span (no hole asked for them): drop them, do not add them to the text.",
                when=_stray_text_kept),
        Mistake("eos kept", "</s> ends the sequence; it is not part of the text.", gives=_keeps_eos),
        Mistake("read past eos", "stop reading the target at </s>: whatever follows is not the model's answer.",
                gives=_past_eos),
        Mistake("eos ignored", "</s> is not text: it ends the input and the target alike. Read as an "
                "ordinary token it joins the last span (and the tokens after it are read too), or stays "
                "at the end of the text: stop at eos_id in both loops.", when=_eos_ignored),
    ]
    return run_cases("fill spans", fn, cases, mistakes)


# --- 3. write span corruption: input and target with sentinels ----------------------------------


def _corrupt(tokens, mask, sentinel, eos_id):
    return corrupt(tokens, mask, sentinel, eos_id)


def _one_sentinel_for_all(tokens, mask, sentinel, eos_id):
    return corrupt(tokens, mask, lambda i: sentinel(0), eos_id)


def _target_without_sentinels(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs, [t for t, h in zip(tokens, mask.tolist()) if h] + [eos_id]


def _hidden_kept_in_input(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    out, n = [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not bool(mask[position - 1])):
            out.append(sentinel(n))
            n += 1
        out.append(token)
    return out + [eos_id], target


def _final_sentinel(tokens, mask, sentinel, eos_id):
    """The paper's figure: one more sentinel closes the target."""
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    spans = sum(1 for p, h in enumerate(mask.tolist()) if h and (p == 0 or not bool(mask[p - 1])))
    return inputs, target[:-1] + [sentinel(spans), eos_id]


def _closing_token(args, got) -> bool:
    """The paper's figure, however its closing sentinel is numbered: the right target with one
    more token (a sentinel) before </s>; the input is not looked at."""
    tokens, mask, sentinel, eos_id = args
    _, target = _final_sentinel(tokens, mask, sentinel, eos_id)
    try:
        got_target = list(got[1])
    except (TypeError, IndexError):
        return False
    return (len(got_target) == len(target) and got_target[:-2] == target[:-2]
            and got_target[-1] == eos_id and got_target[-2] != eos_id)


def _whole_text_target(args, got) -> bool:
    """The target rebuilds the whole text (every token, kept and hidden, in order; with or without
    sentinels before the spans, with or without </s>), whatever the input is: the layout span
    corruption exists to avoid."""
    tokens, mask, sentinel, eos_id = args
    if not (isinstance(got, tuple) and len(got) == 2) or not bool(mask.any()):
        return False
    try:
        target = list(got[1])
    except TypeError:
        return False
    with_sentinels, n = [], 0
    for token, start in zip(tokens, _starts(mask)):
        if start:
            with_sentinels.append(sentinel(n))
            n += 1
        with_sentinels.append(token)
    return any(target == whole or target == whole + [eos_id] for whole in (list(tokens), with_sentinels))


def _no_eos(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs[:-1], target[:-1]


def _no_target_eos(args, got) -> bool:
    """The input is right (it ends with eos_id) and the target is right but for its final eos_id."""
    inputs, target = corrupt(*args)
    return isinstance(got, tuple) and len(got) == 2 and list(got[0]) == inputs \
        and list(got[1]) == target[:-1]


def _no_input_eos(args, got) -> bool:
    inputs, target = corrupt(*args)
    return isinstance(got, tuple) and len(got) == 2 and list(got[0]) == inputs[:-1] \
        and list(got[1]) == target


def _sentinels_per_token(args, got) -> bool:
    """The input holds one sentinel for each hidden token (whatever the target does), and some
    span is longer than one token, so that differs from one per span."""
    tokens, mask, sentinel, eos_id = args
    hidden = int(mask.sum())
    sentinels = set()
    for i in range(len(tokens) + 1):
        try:
            sentinels.add(sentinel(i))
        except IndexError:  # a case whose sentinel names run out
            break
    if not (isinstance(got, tuple) and len(got) == 2) or hidden == sum(_starts(mask)):
        return False
    return sum(1 for t in got[0] if t in sentinels) == hidden


def _sentinels_by_position(tokens, mask, sentinel, eos_id):
    inputs, target = [], []
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not bool(mask[position - 1])):
            inputs.append(sentinel(position))
            target.append(sentinel(position))
        (target if hidden else inputs).append(token)
    return inputs + [eos_id], target + [eos_id]


def _sentinels_from_one(tokens, mask, sentinel, eos_id):
    return corrupt(tokens, mask, lambda i: sentinel(i + 1), eos_id)


def _starts(mask) -> list[bool]:
    bits = [bool(b) for b in mask.tolist()]
    return [h and (p == 0 or not bits[p - 1]) for p, h in enumerate(bits)]


def _no_span_at_start(tokens, mask, sentinel, eos_id):
    """A span starts only where a kept token comes before it: a span at position 0 gets no
    sentinel, its tokens go to the target bare."""
    inputs, target, n = [], [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and position > 0 and not bool(mask[position - 1]):
            inputs.append(sentinel(n))
            target.append(sentinel(n))
            n += 1
        (target if hidden else inputs).append(token)
    return inputs + [eos_id], target + [eos_id]


def _last_span_dropped(tokens, mask, sentinel, eos_id):
    """Spans written to the target only when a kept token closes them: one running to the end is lost."""
    inputs, target, n, span = [], [], 0, None
    for token, start, hidden in zip(tokens, _starts(mask), mask.tolist()):
        if start:
            inputs.append(sentinel(n))
            span = [sentinel(n)]
            n += 1
        if hidden:
            span.append(token)
        else:
            if span:
                target += span
                span = None
            inputs.append(token)
    return inputs + [eos_id], target + [eos_id]


def _calls(fn: Callable, found: Callable[[object], bool], names: frozenset[str] = frozenset(),
           depth: int = 3) -> bool:
    """Whether ``fn`` is, or uses by name, something that ``found`` recognises (a global, a closure
    cell or an attribute of one), or names an attribute in ``names`` anywhere in its code; the
    reader's own helper functions are followed ``depth`` calls deep."""
    if found(fn):
        return True
    code, used = getattr(fn, "__code__", None), set()
    stack = [code] if code is not None else []
    while stack:
        c = stack.pop()
        used |= set(c.co_names)
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    if used & names:
        return True
    space = getattr(fn, "__globals__", {})
    seen = [space.get(n) for n in used]
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            seen.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    seen = [v for v in seen if v is not None]
    if any(found(v) or any(found(getattr(v, n, None)) for n in used) for v in seen):
        return True
    helpers = [v for v in seen if hasattr(v, "__code__") and v is not fn
               and not (getattr(v, "__module__", None) or "").startswith(("attnbook", "torch"))]
    return depth > 0 and any(_calls(h, found, names, depth - 1) for h in helpers)


def _calls_library(fn: Callable) -> bool:
    """Whether ``fn`` is, or calls by name, the library's ``corrupt``."""
    return _calls(fn, lambda v: v is corrupt)


def check_corrupt(fn: Callable) -> CheckResult:
    """``fn(tokens, mask, sentinel, eos_id) -> (inputs, target)``: each run of hidden tokens
    (``mask`` True) replaced in the input by ``sentinel(i)`` for the i-th run; the target is
    ``sentinel(i)`` followed by run i, for every run, then ``eos_id``; the input ends in ``eos_id``."""
    def mask(bits: str) -> torch.Tensor:
        return torch.tensor([b == "1" for b in bits])

    def t5(i):
        return 100 - i

    def named(i):  # <X>, <Y>, <Z>, <W>, then <S4>, <S5>, ... (never an IndexError)
        return f"<{'XYZW'[i]}>" if 0 <= i < 4 else f"<S{i}>"

    words = "Thank you for inviting me to your party last week .".split()
    raw = [
        ("T5's example", words, mask("00110000100"), named, "</s>"),
        ("one span at the end", [5, 6, 7, 8], mask("0011"), t5, 1),
        ("two spans one token apart", [5, 6, 7, 8, 9], mask("01101"), t5, 1),
        ("a span at the very start", [5, 6, 7, 8], mask("1001"), t5, 2),
        ("single-token spans", [10, 11, 12, 13, 14, 15], mask("010101"), t5, 1),
        ("nothing hidden", [5, 6, 7], mask("000"), t5, 1),
    ]
    cases = [Case(name, (tokens, m, sentinel, eos), _corrupt(tokens, m, sentinel, eos),
                  hint="walk the tokens once; a hidden token whose left neighbour is kept (or that comes "
                       "first) starts a span: give it the next sentinel, in the input and in the target")
             for name, tokens, m, sentinel, eos in raw]
    mistakes = [
        Mistake("one sentinel per token", "that is BERT-style masking: span corruption replaces a whole *run* "
                "of hidden tokens by one sentinel, which is what makes its input and target short.",
                when=_sentinels_per_token),
        Mistake("one sentinel for every span", "each span gets its own sentinel, sentinel(0), sentinel(1), ...: "
                "the sentinel tells the decoder which hole a span fills.", gives=_one_sentinel_for_all),
        Mistake("target without sentinels", "the target writes each span *after its sentinel*: without them "
                "nobody can tell where one span ends and which hole it fills.", gives=_target_without_sentinels),
        Mistake("hidden tokens kept in the input", "the input loses the hidden tokens: the sentinel stands "
                "in for the whole span.", gives=_hidden_kept_in_input),
        Mistake("sentinels numbered by token position", "sentinel(i) counts *spans*, not positions: the "
                "first span gets sentinel(0) wherever it starts, the next sentinel(1).",
                gives=_sentinels_by_position),
        Mistake("sentinels from 1", "the first span gets sentinel(0), the next sentinel(1): count spans "
                "from 0.", gives=_sentinels_from_one),
        Mistake("no span at the start", "a hidden token at position 0 starts a span too: it has no left "
                "neighbour, and it gets sentinel(0).", gives=_no_span_at_start),
        Mistake("last span dropped", "a span that runs to the end of the tokens is still a span: write it to "
                "the target (no kept token comes to close it).", gives=_last_span_dropped),
        Mistake("whole text as target", "the target rebuilds the whole text: the layout span corruption "
                "replaces. Its target holds only the hidden spans, each after its sentinel, then </s>: "
                "about a fifth as long, so the decoder's work is smaller.", when=_whole_text_target),
        Mistake("final sentinel", "that is the layout of the paper's figure; T5's code (and the library) writes "
                "no closing sentinel, the target ends with the last span and </s>.", when=_closing_token),
        Mistake("no eos", "both sequences end with eos_id.", gives=_no_eos),
        Mistake("target without eos", "the input is right, but the target must end with eos_id too: it is "
                "how the decoder learns to stop after the last span.", when=_no_target_eos),
        Mistake("input without eos", "the target is right, but the input must end with eos_id too, as "
                "every T5 input does.", when=_no_input_eos),
    ]
    if callable(fn) and _calls_library(fn):
        return _finish("corrupt", False, "your function calls the library's `corrupt`: write the loop "
                       "yourself (the library's answer is what the checker compares with).", "calls the library")
    return run_cases("corrupt", fn, cases, mistakes)


# --- 4. predict, then measure: which position buckets does pretraining train? -------------------

# the chapter's chosen pretraining (benchmarks/t5_low_label.py, the committed checkpoint): 32-byte windows,
# 5 bytes hidden in 2 spans: every input is 30 tokens (27 kept + 2 sentinels + </s>), every target 8
# (5 + 2 sentinels + </s>)
PRETRAIN_SRC, PRETRAIN_TGT = 30, 8


def _reachable(num_buckets: int, max_distance: int, src_length: int, tgt_length: int,
               reach: int = 0) -> tuple[list[int], list[int]]:
    """Buckets of every offset that a source (target) of that length produces."""
    enc = torch.arange(-(src_length - 1) - reach, src_length + reach)
    dec = torch.arange(-(tgt_length - 1) - reach, 1)
    return (sorted(set(relative_position_bucket(enc, True, num_buckets, max_distance).tolist())),
            sorted(set(relative_position_bucket(dec, False, num_buckets, max_distance).tolist())))


def _trained_buckets(config, src_length, tgt_length):
    """Measured: every reachable bucket gets a gradient, except in a stack with one key per
    query, whose softmax weight is 1 whatever the bias (so the bias gets none)."""
    enc, dec = _reachable(config.num_buckets, config.max_distance, src_length, tgt_length)
    return (enc if src_length > 1 else []), (dec if tgt_length > 1 else [])


def _by_formula(config, src_length, tgt_length):
    return _reachable(config.num_buckets, config.max_distance, src_length, tgt_length)


def _lengths_swapped(config, src_length, tgt_length):
    return _trained_buckets(config, tgt_length, src_length)


def _one_offset_too_far(config, src_length, tgt_length):
    return _reachable(config.num_buckets, config.max_distance, src_length, tgt_length, reach=1)


def _decoder_one_too_far(config, src_length, tgt_length):
    """The encoder right, the decoder's offsets taken to -T instead of -(T-1)."""
    return (_trained_buckets(config, src_length, tgt_length)[0],
            _one_offset_too_far(config, src_length, tgt_length)[1] if tgt_length > 1 else [])


def _encoder_one_too_far(config, src_length, tgt_length):
    """The decoder right, the encoder's offsets taken to -S..S instead of -(S-1)..S-1."""
    return (_one_offset_too_far(config, src_length, tgt_length)[0] if src_length > 1 else [],
            _trained_buckets(config, src_length, tgt_length)[1])


def _both_one_too_far(args, got) -> bool:
    """Both stacks one offset too far, in a case where that differs from one stack alone."""
    both = _one_offset_too_far(*args)
    return (got == both and both != _decoder_one_too_far(*args)
            and both != _encoder_one_too_far(*args))


def _stacks_swapped(config, src_length, tgt_length):
    return _trained_buckets(config, src_length, tgt_length)[::-1]


def _one_side_only(config, src_length, tgt_length):
    """The encoder counted like the decoder: keys before the query only."""
    enc = torch.arange(-(src_length - 1), 1)
    return (sorted(set(relative_position_bucket(enc, True, config.num_buckets, config.max_distance).tolist())),
            _trained_buckets(config, src_length, tgt_length)[1])


def _decoder_source_length(config, src_length, tgt_length):
    """The encoder right, the decoder fed a target of the source's length."""
    return (_trained_buckets(config, src_length, tgt_length)[0],
            _trained_buckets(config, src_length, src_length)[1])


def _first_position_only(config, src_length, tgt_length):
    """The loss taken at the first decoder position only: that query has one key, so the decoder's
    table gets no gradient; the encoder's still does, through the cross-attention."""
    return _trained_buckets(config, src_length, tgt_length)[0], []


def _decoder_bidirectional(config, src_length, tgt_length):
    """The decoder counted like the encoder: its table read as bidirectional."""
    dec = torch.arange(-(tgt_length - 1), 1)
    return (_trained_buckets(config, src_length, tgt_length)[0],
            sorted(set(relative_position_bucket(dec, True, config.num_buckets, config.max_distance).tolist())))


def _zero_in_both_halves(config, src_length, tgt_length):
    """The encoder's upper half counted from offset 0, not +1: bucket num_buckets // 2 added."""
    enc, dec = _trained_buckets(config, src_length, tgt_length)
    return (sorted(set(enc) | {config.num_buckets // 2}) if enc else enc), dec


def _every_row(config, src_length, tgt_length):
    """Every row of each table, whether or not it got a gradient (``grad is not None`` is true for
    the whole table at once)."""
    return list(range(config.num_buckets)), list(range(config.num_buckets))


def _heads_not_buckets(args, got) -> bool:
    """Columns read instead of rows: the heads with a gradient (0..H-1), not the buckets."""
    config = args[0]
    expected = _trained_buckets(*args)
    heads = list(range(config.num_heads))
    return (isinstance(got, tuple) and got != expected and len(got) == 2
            and all(g in (heads, []) for g in got) and any(g == heads for g in got))


def _one_bucket_each(args, got) -> bool:
    """A single bucket per stack (the first row with a gradient, an argmax, or offset 0's bucket)."""
    expected = _trained_buckets(*args)
    return (isinstance(got, tuple) and len(got) == 2 and got != expected
            and all(isinstance(g, list) and len(g) <= 1 for g in got)
            and any(len(e) > 1 for e in expected))


def check_trained_buckets(fn: Callable, prediction: int | None = None) -> CheckResult:
    """``fn(config, src_length, tgt_length) -> (encoder_buckets, decoder_buckets)``: the sorted
    bucket ids of each stack's bias table that get a non-zero gradient from one loss on a batch
    of sources of ``src_length`` and targets of ``tgt_length`` tokens; ``prediction``, written
    before measuring: how many of the 32 encoder buckets the chapter's chosen pretraining (30-token inputs)
    ever trains."""
    configs = [T5Config(40, d_model=16, num_heads=2, d_ff=24, num_encoder_layers=1, num_decoder_layers=1),
               T5Config(40, d_model=16, num_heads=2, d_ff=24, num_buckets=8, max_distance=20),
               T5Config(300, d_model=16, num_heads=2, d_ff=24, num_encoder_layers=1, num_decoder_layers=1)]
    cases = []
    for config, src_length, tgt_length in ((configs[0], PRETRAIN_SRC, PRETRAIN_TGT), (configs[0], 58, 14), (configs[0], 9, 3), (configs[1], 30, 12),
                                           (configs[2], 200, 60), (configs[1], 5, 2), (configs[0], 1, 6),
                                           (configs[1], 7, 1)):
        cases.append(Case(f"{config.num_buckets} buckets, max_distance {config.max_distance}, source "
                          f"{src_length}, target {tgt_length}", (config, src_length, tgt_length),
                          _trained_buckets(config, src_length, tgt_length),
                          hint="build T5(config), run one batch of random ids through it, backward, and read "
                               "which rows of each relative_attention_bias.weight.grad are not all zero",
                          # the pretraining's own lengths: their answer is the prediction's
                          reveal=(config, src_length) != (configs[0], PRETRAIN_SRC)))
    mistakes = [
        Mistake("a set, not a sorted list", "return two sorted lists of bucket ids (or 1-d tensors), not "
                "sets: a set has no order, and the exercise asks for the ids in increasing order, "
                "e.g. torch.nonzero(...).flatten().tolist().", when=_returns_a_set),
        Mistake("not sorted", "the right ids, but not in increasing order: sort them (torch.nonzero already "
                "returns them sorted).", when=_not_sorted),
        Mistake("computed, not measured", "these are the buckets the offsets *reach*, computed from the lengths; "
                "the exercise measures which get a gradient. A stack with one position has one key per query: "
                "softmax gives it weight 1 whatever the bias, so its table gets no gradient at all (run the "
                "model, backward, and read the .grad rows).", gives=_by_formula),
        Mistake("offset 0 in both halves", "your encoder list holds bucket num_buckets // 2 (16 of 32), the "
                "upper half's first bucket. Offset 0 belongs to the lower half (bucket 0); the upper half "
                "starts at offset +1, so that bucket is never used. Did you compute the buckets from the "
                "offsets, counting 0 on both sides, instead of reading the gradient?",
                gives=_zero_in_both_halves),
        Mistake("stacks swapped", "return the encoder's buckets first, then the decoder's.", gives=_stacks_swapped),
        Mistake("every row counted", "that is every row of each table: `grad is not None` (or the table's "
                "size) is true for the whole table at once. Keep only the rows whose gradient is not all zero: "
                "torch.nonzero(grad.abs().sum(1)).", gives=_every_row),
        Mistake("heads, not buckets", "those are the heads with a gradient: a table is (num_buckets, "
                "num_heads), one row per bucket, so sum each row over the heads, grad.abs().sum(1), not "
                "each column, .sum(0).", when=_heads_not_buckets),
        Mistake("one bucket per stack", "one bucket per stack: every offset the lengths produce has its "
                "bucket, and each of those rows gets a gradient. Return all rows whose gradient is not all "
                "zero (torch.nonzero(grad.abs().sum(1)).flatten()), not the first one or an argmax.",
                when=_one_bucket_each),
        Mistake("lengths swapped", "the source (src_length tokens) goes into the encoder and the target "
                "(tgt_length tokens) into the decoder: the two lengths are swapped.", gives=_lengths_swapped),
        Mistake("decoder fed source-length targets", "the encoder's buckets are right, but the decoder's "
                "are those of a target as long as the source: the target has tgt_length tokens (build the "
                "decoder's input with tgt_length, not src_length).", gives=_decoder_source_length),
        Mistake("loss from the first decoder position only", "the decoder's table got no gradient: was the "
                "loss taken at the first target position only (logits[:, 0])? That query sees one key, whose "
                "softmax weight is 1 whatever the bias. Take the loss over every target position.",
                gives=_first_position_only),
        Mistake("one offset too far", "both stacks: a source of S tokens has offsets -(S-1) to S-1, not -S "
                "to S, and a target of T tokens -(T-1) to 0, not -T.", when=_both_one_too_far),
        Mistake("decoder one offset too far", "in this case the encoder's buckets are right and the decoder's "
                "are not: a "
                "target of T tokens has offsets -(T-1) to 0 (each query sees itself and the keys before it), "
                "not -T.", gives=_decoder_one_too_far),
        Mistake("encoder one offset too far", "in this case the decoder's buckets are right and the encoder's "
                "are not: a "
                "source of S tokens has offsets -(S-1) to S-1, not -S to S.", gives=_encoder_one_too_far),
        Mistake("decoder as bidirectional", "the decoder's table is causal: all its buckets serve offsets <= 0, "
                "so a past offset -d lands in bucket b(d) of the whole table, not of its lower half.",
                gives=_decoder_bidirectional),
        Mistake("one side only", "the encoder is bidirectional: keys after the query (offsets > 0) use the "
                "upper half of its buckets.", gives=_one_side_only),
    ]
    wrapped = _as_lists(fn)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # one verdict: the prediction may still refuse
        result = run_cases("trained buckets", wrapped, cases, mistakes)
    if not result.passed:
        print(printed.getvalue(), end="")
        return result
    name = "trained buckets"
    reached = len(_trained_buckets(configs[0], PRETRAIN_SRC, PRETRAIN_TGT)[0])
    half = configs[0].num_buckets // 2
    measured = f"your function measures right (all {len(cases)} cases pass)"
    if prediction is None:
        return _finish(name, False, f"{measured}, but no prediction was given: write yours into "
                       "`prediction` (how many of the 32 encoder buckets) before you measure.",
                       "no prediction")
    if isinstance(prediction, bool) or not isinstance(prediction, (int, float)):
        return _finish(name, False, f"{measured}, but the prediction {prediction!r} is not a number: "
                       "write how many of the 32 encoder buckets get a gradient (one int from 0 to 32), "
                       "not the bucket ids.", "prediction not a number")
    if prediction != int(prediction) or not 0 <= prediction <= configs[0].num_buckets:
        return _finish(name, False, f"{measured}, but the prediction {prediction!r} is not a count of the "
                       f"{configs[0].num_buckets} buckets: write a whole number from 0 to "
                       f"{configs[0].num_buckets}.", "prediction out of range")
    if prediction != reached:
        return _finish(name, False, f"{measured}, but you predicted {int(prediction)} of 32 encoder "
                       f"buckets; the pretraining trains {reached}: its inputs are always {PRETRAIN_SRC} "
                       f"tokens, so no offset beyond ±{PRETRAIN_SRC - 1} occurs, and the buckets beyond it "
                       f"keep their initial values; bucket {half} (offset +0) is never used at all, since "
                       "offset 0 belongs to the lower half.", "wrong prediction")
    print(printed.getvalue(), end="")
    print(f"   your prediction, {reached} of 32 encoder buckets, was right.")
    return result


def _as_lists(fn: Callable) -> Callable:
    """The reader's answer with tensors and tuples turned into lists of ints, order kept. A set
    stays a set (the exercise asks for sorted ids, and the checker names a set as such)."""
    if not callable(fn):
        return fn

    def listed(values):
        if isinstance(values, torch.Tensor):
            values = values.tolist()
        if isinstance(values, (list, tuple)):
            return [int(v) for v in values]
        return values

    def wrapped(config, src_length, tgt_length):
        got = fn(config, src_length, tgt_length)
        return tuple(listed(v) for v in got) if isinstance(got, (tuple, list)) and len(got) == 2 else got

    return functools.wraps(fn)(wrapped)


def _returns_a_set(args, got) -> bool:
    return isinstance(got, tuple) and any(isinstance(v, (set, frozenset)) for v in got)


def _not_sorted(args, got) -> bool:
    return (isinstance(got, tuple) and all(isinstance(v, list) for v in got)
            and any(v != sorted(v) for v in got) and tuple(sorted(v) for v in got) == _trained_buckets(*args))


# --- 5. a T5 without position bias (touches the model) ----------------------------------------------


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


DECODER_STEPS_TGT = [0] + [7] * 7  # <pad>, then the same token at positions 1 to 7


def _decoder_position_steps(model: nn.Module, causal: bool = True) -> list[float]:
    """Largest change of the logits from position t to t + 1, for t = 1 to 6, when every decoder
    input from position 1 on is the same token (the <pad> -> token step, where the inputs differ,
    is left out). With ``causal=False`` the same decoder runs without its causal mask: the null,
    in which a position-blind decoder has nothing left to tell positions 1 to 7 apart by."""
    src = torch.randint(3, model.src_vocab_size, (1, 5), generator=torch.Generator().manual_seed(4))
    tgt = torch.tensor([DECODER_STEPS_TGT])
    with contextlib.ExitStack() as stack:
        if not causal:  # every query sees every key: the causal mask replaced by all True
            stack.enter_context(mock.patch.object(
                _blocks, "causal_mask",
                lambda q, k=None, device=None: torch.ones(q, q if k is None else k, dtype=torch.bool,
                                                          device=device)))
        with torch.no_grad():
            logits = model.eval()(src, torch.tensor([5]), tgt)[0]  # (T, V)
    return (logits[2:] - logits[1:-1]).abs().amax(-1).tolist()


NO_POSITION_ANSWER = ("same", "different")  # one, two decoder layers


def _other_changes(model: nn.Module, config) -> str | None:
    """What else differs from T5(config) with its two bias modules removed: the modules (names
    and types), the parameters (names and shapes), then the logits with the reader's weights
    loaded into the reference. None if nothing else differs."""
    reference = T5(config)
    reference.encoder_position_bias = None
    reference.decoder_position_bias = None
    want = {n: type(m) for n, m in reference.named_modules()}
    have = {n: type(m) for n, m in model.named_modules()}
    changed = [f"{n} is {have[n].__name__}, not {want[n].__name__}"
               for n in want if n in have and have[n] is not want[n]]
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    found = (changed + [f"{n} is missing" for n in missing] + [f"{n} was added" for n in extra])
    if found:
        return "; ".join(found[:3])
    want_p = {n: tuple(p.shape) for n, p in reference.named_parameters()}
    have_p = {n: tuple(p.shape) for n, p in model.named_parameters()}
    if want_p != have_p:
        diff = sorted(set(want_p.items()) ^ set(have_p.items()))[:3]
        return "its parameters differ: " + ", ".join(f"{n} {list(s)}" for n, s in diff)
    try:
        reference.load_state_dict(model.state_dict())
    except RuntimeError as err:
        return f"its state differs ({str(err).splitlines()[0]})"
    g = torch.Generator().manual_seed(5)
    src = torch.randint(3, config.vocab_size, (2, 6), generator=g)
    tgt = torch.randint(3, config.vocab_size, (2, 4), generator=g)
    with torch.no_grad():
        mine = model.eval()(src, torch.tensor([6, 6]), tgt)
        theirs = reference.eval()(src, torch.tensor([6, 6]), tgt)
    if not torch.allclose(mine, theirs, atol=1e-5):
        return "with the same weights its logits differ from T5's, so its forward pass was changed"
    return None


def check_no_position_t5(fn: Callable, prediction: str | None = None) -> CheckResult:
    """``fn(config) -> T5``: a T5 of ``config`` with no relative position bias in either stack,
    every other part unchanged. The encoder then knows nothing of order (a shuffled source gives
    the same memory, shuffled); the decoder still does, through its causal mask (Haviv et al.,
    2022): the checker measures both."""
    name = "T5 without position bias"
    if not callable(fn):
        return _finish(name, False, f"expected a function, got {type(fn).__name__}")
    configs = [T5Config(40, d_model=16, num_heads=2, d_ff=24, num_encoder_layers=1, num_decoder_layers=1),
               T5Config(50, d_model=24, num_heads=4, d_ff=16, num_buckets=8, max_distance=20),
               T5Config(30, d_model=8, num_heads=1, d_ff=8, gated=False, num_encoder_layers=3)]
    steps, null = [], []
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
            return _finish(name, False, "the bias tables are zero but still there: the model still has the "
                           "modules (and, unless frozen, training would learn them again). Remove them (set the "
                           "stack's position-bias module to None).", "zeroed")
        shuffles = _permutation_equivariant(model.eval(), n)
        if model.encoder_position_bias is not None:
            if shuffles:
                return _finish(name, False, "your encoder's bias module adds nothing that depends on position "
                               "now (a shuffled source does give the same memory, shuffled), but the module is "
                               "still there for the driver to call and, if it has weights, to train: set "
                               "encoder_position_bias (and decoder_position_bias) to None.", "bias module kept")
            return _finish(name, False, "the encoder still has its bias, so a shuffled source does not give the "
                           "same memory shuffled: set encoder_position_bias to None.", "encoder kept")
        if model.decoder_position_bias is not None:
            return _finish(name, False, "the decoder still has its causal bias: remove decoder_position_bias "
                           "too.", "decoder kept")
        other = _other_changes(model, config)
        if other is not None:
            return _finish(name, False, f"config {n}: the bias modules are gone, but something else changed too "
                           f"({other}). The exercise removes the two bias modules and nothing else, so that "
                           "the measurement shows what position bias alone does: start from T5(config) and "
                           "only set encoder_position_bias and decoder_position_bias to None.",
                           "other parts changed")
        if not shuffles:
            return _finish(name, False, "shuffling the source should only shuffle the memory; something else "
                           "in your model depends on positions.")
        if not _causal_still_works(model):
            return _finish(name, False, "the decoder now sees the future: keep the causal mask (only the "
                           "bias goes).")
        steps.append(_decoder_position_steps(model))
        null.append(_decoder_position_steps(model, causal=False))
    mean_steps = [sum(col) / len(col) for col in zip(*steps)]
    null_max = max(max(row) for row in null)
    guess = _swap_guess(prediction)
    if prediction is None:  # no measurement shown before a prediction is written
        return _finish(name, False, "not done yet: write your prediction into "
                       "`prediction_t5_without_position_bias` before you measure.", "no prediction")
    if guess is None:
        return _finish(name, False, f"prediction {prediction!r} not understood: write a pair, "
                       "(one decoder layer, two decoder layers), each 'same' or 'different'.",
                       "prediction not understood")
    swaps = {layers: _swap_change(fn, layers) for layers in (1, 2)}
    measured_pair = tuple("same" if swaps[layers] < 1e-5 else "different" for layers in (1, 2))
    if measured_pair != NO_POSITION_ANSWER:  # the reader's model is checked above: cannot happen
        return _finish(name, False, f"measured {measured_pair}, not {NO_POSITION_ANSWER}: "
                       "something in your model depends on order.", "other parts changed")
    shown = ", ".join(f"{v:.2f}" for v in mean_steps)
    measured = (f"swapping the targets at positions 1 and 2 changes the last position's logits by "
                f"{swaps[1]:.0e} with one decoder layer (float rounding: position 3 sees the set "
                f"{{<pad>, a, b, c}} either way) and by {swaps[2]:.2f} with two (the second layer reads "
                "the first layer's states at positions 1 and 2, which saw different prefixes, {<pad>, a} "
                "or {<pad>, b}). The causal mask is the only source of order: fed <pad> then one token "
                "repeated at positions 1 to 7, the decoder's logits still change from each position to "
                f"the next, by {shown} (positions 1->2 to 6->7, mean of {len(configs)} untrained models); "
                f"without the causal mask they change by at most {null_max:.0e}.")
    if guess != NO_POSITION_ANSWER:
        why = {("same", "same"): "one layer sees a set, but a second layer reads states that saw "
                                 "different prefixes",
               ("different", "different"): "with one layer the last position attends to all its inputs "
                                           "at once, with no position, so their order cannot matter",
               ("different", "same"): "it is the other way round"}
        return _finish(name, False, f"you predicted {guess}; measured {NO_POSITION_ANSWER}: "
                       f"{why[guess]}. {measured}", "wrong prediction")
    return _finish(name, True, f"your prediction {guess} was right: nested prefixes are the "
                   f"decoder's only position signal, and one layer cannot use them. {measured}")


def _swap_guess(prediction) -> tuple[str, str] | None:
    """The reader's (one layer, two layers) pair, lower-cased, or None if it is not one."""
    if not isinstance(prediction, (tuple, list)) or len(prediction) != 2:
        return None
    pair = tuple(p.strip().lower() if isinstance(p, str) else None for p in prediction)
    return pair if all(p in ("same", "different") for p in pair) else None


def _swap_change(fn: Callable, layers: int) -> float:
    """Largest change of the last position's logits when the decoder inputs at positions 1 and 2
    are swapped (<pad>, a, b, c against <pad>, b, a, c; the same source), in the reader's
    position-blind T5 with ``layers`` decoder layers."""
    torch.manual_seed(11)
    model = fn(T5Config(40, d_model=16, num_heads=2, d_ff=24, num_encoder_layers=1,
                        num_decoder_layers=layers)).eval()
    src = torch.randint(3, 40, (2, 5), generator=torch.Generator().manual_seed(6))
    src[1] = src[0]
    tgt = torch.tensor([[0, 5, 6, 7], [0, 6, 5, 7]])
    with torch.no_grad():
        logits = model(src, torch.tensor([5, 5]), tgt)[:, -1]  # (2, V): the last position
    return float((logits[0] - logits[1]).abs().max())


# --- 6. predict, then measure: how much do span lengths vary? ----------------------------------

# the setting the reader predicts for: ByT5's input length and mean span (the chapter prints the
# span-length shares only for mean span 3, at 64 tokens)
SPREAD_ASKED = (1024, 0.15, 20.0)
SPREAD_TOLERANCE = 0.25  # a prediction within 25% of the sd is right


def _counts(length: int, noise_density: float = 0.15, mean_span_length: float = 3.0) -> tuple[int, int]:
    """Hidden tokens and spans of one sequence, as ``noise_mask`` fixes them (the same for every draw)."""
    hidden = min(max(round(length * noise_density), 1), length - 1)
    spans = min(max(round(hidden / mean_span_length), 1), hidden, length - hidden)
    return hidden, spans


def _cut_moments(items: int, parts: int) -> tuple[float, float]:
    """Mean and variance of one part's length when ``items`` are cut into ``parts`` non-empty runs
    at uniformly random points (``random_segmentation``): P(L = l) = C(items-l-1, parts-2) /
    C(items-1, parts-1)."""
    if parts == 1:
        return float(items), 0.0
    total = math.comb(items - 1, parts - 1)
    pmf = {n: math.comb(items - n - 1, parts - 2) / total for n in range(1, items - parts + 2)}
    mean = sum(n * q for n, q in pmf.items())
    return mean, sum((n - mean) ** 2 * q for n, q in pmf.items())


def _spread(length, sequences, noise_density, mean_span_length):
    """The expected (mean, sd) of the span lengths, pooled over every span drawn."""
    hidden, spans = _counts(length, noise_density, mean_span_length)
    mean, variance = _cut_moments(hidden, spans)
    return mean, math.sqrt(variance)


def _spread_with_kept_runs(length, sequences, noise_density, mean_span_length):
    """The kept runs between spans pooled with the spans (the mask's runs of False too)."""
    hidden, spans = _counts(length, noise_density, mean_span_length)
    (m1, v1), (m2, v2) = _cut_moments(hidden, spans), _cut_moments(length - hidden, spans)
    mean = (m1 + m2) / 2
    return mean, math.sqrt((v1 + v2) / 2 + ((m1 - mean) ** 2 + (m2 - mean) ** 2) / 2)


def _poisson_spread(length, sequences, noise_density, mean_span_length):
    mean = _spread(length, sequences, noise_density, mean_span_length)[0]
    return mean, math.sqrt(mean)


def _spread_of_sequence_sds(length, sequences, noise_density, mean_span_length):
    """The mean span and the *mean of each sequence's own sd*, simulated: the per-sequence
    spreads miss the spread between sequences, so this is below the pooled sd."""
    from attnbook.tasks.span_corruption import noise_mask
    g = torch.Generator().manual_seed(0)
    sds = []
    for _ in range(sequences):
        mask = noise_mask(length, noise_density, mean_span_length, generator=g).int()
        edges = torch.diff(torch.cat([torch.zeros(1, dtype=torch.int), mask, torch.zeros(1, dtype=torch.int)]))
        runs = ((edges == -1).nonzero().flatten() - (edges == 1).nonzero().flatten()).double()
        sds.append(float(runs.std(unbiased=False)) if len(runs) > 1 else 0.0)
    return _spread(length, sequences, noise_density, mean_span_length)[0], sum(sds) / len(sds)


def _pair(values) -> torch.Tensor:
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


def _mean_close_not_exact(args, got) -> bool:
    """A mean within 5% of the exact hidden / spans, but not equal to it (a mean-only case)."""
    hidden, spans = _counts(args[0], args[2], args[3])
    return isinstance(got, float) and abs(got - hidden / spans) <= 0.05 * hidden / spans


def _as_pair(fn: Callable) -> Callable:
    """The reader's ``(mean, sd)`` as a float64 tensor of two, so that it compares within a
    tolerance; with ``part="mean"``, the mean alone, as a float."""
    if not callable(fn):
        return fn

    def wrapped(*args, part: str | None = None):
        got = fn(*args)
        if isinstance(got, torch.Tensor):
            got = got.tolist()
        if isinstance(got, (tuple, list)) and len(got) == 2:
            try:
                pair = _pair(got)
            except (TypeError, ValueError):
                return got
            return float(pair[0]) if part == "mean" else pair
        return got

    return functools.wraps(fn)(wrapped)


def check_span_spread(fn: Callable, prediction: float | None = None) -> CheckResult:
    """``fn(length, sequences, noise_density, mean_span_length) -> (mean, sd)``: the mean and the
    standard deviation of the lengths of *every span* in ``sequences`` masks drawn by
    ``noise_mask`` (one generator, seeded once); ``prediction``, written before measuring: the sd
    at 1,024 tokens, 15% hidden, mean span 20."""
    # rtol per case: about four times the sampling error of the sd over the spans drawn (the
    # sd of sd/expected over 8 generator seeds: 1.3%, 1.3%, 2.0%, 1.9%, 1.1%, 2.6%)
    settings = ((64, 1000, 0.15, 3.0, 0.05), (512, 150, 0.15, 3.0, 0.055), (1024, 400, 0.15, 20.0, 0.08),
                (300, 150, 0.3, 5.0, 0.075), (200, 400, 0.5, 8.0, 0.045), (100, 120, 0.1, 1.5, 0.10))
    hint = ("draw each mask with noise_mask(length, noise_density, mean_span_length, generator=g) from "
            "one generator g seeded once, collect the length of every run of True in every mask (the "
            "last run too), and return their mean and standard deviation")
    cases = []
    for n, k, d, m, rtol in settings:
        where = f"n = {n}, {k} sequences, {d:.0%} hidden, mean span {m:g}"
        cases.append(Case(where, (n, k, d, m), _pair(_spread(n, k, d, m)), atol=0.0, rtol=rtol, hint=hint))
        # noise_mask fixes the hidden tokens and the spans of every mask, so the pooled mean is
        # exactly hidden / spans whatever the draws: it is checked to rounding error
        hidden, spans = _counts(n, d, m)
        cases.append(Case(where + ": the mean exactly", (n, k, d, m), hidden / spans, atol=0.0, rtol=1e-6,
                          hint=hint, kwargs={"part": "mean"}))
    mistakes = [
        Mistake("final span not counted", "noise_mask fixes each mask's hidden tokens and spans, so the pooled "
                "mean is exactly hidden / spans for any draws; yours is close but not exact, so some spans "
                "were lost: most often the last run of True, which reaches the end of the mask, is never "
                "closed. Close the run after the loop too.", when=_mean_close_not_exact),
        Mistake("defaults used", "pass noise_density and mean_span_length on to noise_mask: its defaults "
                "(15%, 3) are T5's, not the ones asked for.",
                gives=lambda n, k, d, m: _pair(_spread(n, k, 0.15, 3.0))),
        Mistake("spread of the sequences' means", "that is the spread of each sequence's *mean* span, which "
                "noise_mask fixes (its counts of hidden tokens and spans are the same for every draw): pool "
                "the individual spans of every sequence and take their standard deviation.",
                when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (2,)
                and abs(float(got[1])) < 0.2 * _spread(*args)[1]),
        Mistake("kept runs counted too", "count only the runs of hidden tokens (True); the runs of kept "
                "tokens between them are not spans.", gives=lambda *a: _pair(_spread_with_kept_runs(*a))),
        Mistake("Poisson assumed", "that is sqrt(mean), the spread of a Poisson count; measure it: "
                "noise_mask cuts the hidden tokens at uniformly random points, which spreads the lengths "
                "much more.", when=lambda args, got: isinstance(got, torch.Tensor) and got.shape == (2,)
                and float(got[0]) > 0 and abs(float(got[1]) / float(got[0]) ** 0.5 - 1) < 0.005),
        Mistake("mean of per-sequence sds", "that is the mean of each sequence's own sd of span lengths; "
                "it leaves out how the spans of different sequences differ (about 9% low at 64 tokens): "
                "pool the spans of every sequence into one list and take the sd of that list.",
                gives=lambda *a: _pair(_spread_of_sequence_sds(*a))),
    ]
    name = "span spread"
    if callable(fn):  # the same mask every sequence: one sequence measures as much as many
        try:
            one, many = fn(64, 1, 0.15, 3.0), fn(64, 300, 0.15, 3.0)
            one, many = _as_pair(lambda *a: one)(), _as_pair(lambda *a: many)()
            if isinstance(one, torch.Tensor) and float(one[1]) > 0 and torch.equal(one, many):
                return _finish(name, False, "one sequence gives exactly what 300 give: your measurement does not "
                               "depend on the draws. Either every sequence draws the same mask (seed the "
                               "generator once, before the loop, not inside it) or it is a formula, not a "
                               "measurement.", "same mask every sequence")
        except Exception:  # noqa: BLE001 - run_cases reports what the reader's function raises
            pass
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # one verdict: the prediction may still refuse
        result = run_cases(name, _as_pair(fn), cases, mistakes)
    if not result.passed:
        print(printed.getvalue(), end="")
        return result
    n, d, m = SPREAD_ASKED
    hidden, spans = _counts(n, d, m)
    mean, sd = _spread(n, 1, d, m)
    where = f"n = {n:,}, {d:.0%} hidden, mean span {m:g}"
    measured = f"your function measures right (all {len(cases)} cases pass)"
    if prediction is None:
        return _finish(name, False, f"{measured}, but no prediction was given: write yours (the sd at "
                       f"{where}) into `prediction` before you measure.", "no prediction")
    if isinstance(prediction, bool) or not isinstance(prediction, (int, float)):
        return _finish(name, False, f"{measured}, but the prediction {prediction!r} is not a number: write "
                       "one number, the standard deviation of the span lengths.", "prediction not a number")
    explained = (f"it is {sd:.1f}, with mean {mean:.2f} ({hidden} hidden tokens in {spans} spans). Spans vary "
                 f"almost as much as their mean, far more than sqrt(mean) = {math.sqrt(mean):.1f}: cutting "
                 "the hidden tokens at random points makes short spans the most common and a few very long.")
    if abs(prediction - sd) > SPREAD_TOLERANCE * sd:  # the stated tolerance: within 25% of the sd
        if abs(prediction - math.sqrt(mean)) <= 0.15 * math.sqrt(mean):
            error = "Poisson guess"
        elif prediction < 0.25 * sd:
            error = "every span the same length"
        else:
            error = "prediction too high" if prediction > sd else "prediction too low"
        return _finish(name, False, f"{measured}, but you predicted an sd of {prediction:g} ({error}; "
                       f"off by {prediction - sd:+.1f}, more than {SPREAD_TOLERANCE:.0%}): {explained}",
                       "wrong prediction")
    print(printed.getvalue(), end="")
    print(f"   {where}: you predicted an sd of {prediction:g}, within {SPREAD_TOLERANCE:.0%} (right): "
          + explained)
    return result


# --- 7. predict, then measure: how long is the span-corruption target? --------------------------

# the setting the reader predicts for: T5's own input length, 15% hidden, mean span 3 (Section 10.5
# prints the lengths at 64 tokens only)
TARGET_ASKED = (512, 0.15, 3.0)
TARGET_TOLERANCE = 0.5  # right when it rounds to the count: the unrounded formula (103.4) is not


def _target_parts(length: int, noise_density: float, mean_span_length: float) -> tuple[int, int]:
    """Hidden tokens and spans of every mask ``noise_mask`` draws at these settings."""
    return _counts(length, noise_density, mean_span_length)


def _target_length(length, sequences, noise_density, mean_span_length):
    hidden, spans = _target_parts(length, noise_density, mean_span_length)
    return float(hidden + spans + 1)  # the hidden tokens, one sentinel per span, </s>


def _target_parts_gives(extra: Callable[[int, int, int], float]) -> Callable:
    def gives(length, sequences, noise_density, mean_span_length):
        hidden, spans = _target_parts(length, noise_density, mean_span_length)
        return float(extra(length, hidden, spans))
    return gives


def _bernoulli_length(args, got) -> bool:
    """Within 10% of the mean target length of token-by-token (Bernoulli) masks, n x d hidden
    tokens and d + (n - 1) d (1 - d) runs, where that mean is over 10% from the right length."""
    n, _, d, m = args
    expected = n * d + d + (n - 1) * d * (1 - d) + 1
    right = _target_length(n, 1, d, m)
    return (isinstance(got, float) and abs(expected - right) > 0.1 * right
            and abs(got - expected) < 0.1 * expected)


def _as_float(fn: Callable) -> Callable:
    """The reader's mean length as a float (a tensor or an int is accepted)."""
    if not callable(fn):
        return fn

    def wrapped(*args):
        got = fn(*args)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        return float(got) if isinstance(got, (int, float)) and not isinstance(got, bool) else got

    return functools.wraps(fn)(wrapped)


def check_target_length(fn: Callable, prediction: float | None = None) -> CheckResult:
    """``fn(length, sequences, noise_density, mean_span_length) -> float``: the mean length, in
    tokens, of the *targets* that span corruption writes for ``sequences`` sequences of ``length``
    tokens (masks from ``noise_mask``, one generator seeded once; sentinels and ``</s>`` counted);
    ``prediction``, written before measuring: the target length at 512 tokens, 15% hidden, mean
    span 3."""
    settings = ((512, 20, 0.15, 3.0), (64, 200, 0.15, 3.0), (1024, 10, 0.15, 20.0),
                (300, 40, 0.3, 5.0), (100, 60, 0.5, 2.0), (40, 100, 0.1, 1.5), (2048, 5, 0.15, 3.0))
    hint = ("draw each mask with noise_mask(length, noise_density, mean_span_length, generator=g), "
            "corrupt a sequence of length tokens with it (corrupt(tokens, mask, sentinel, eos_id)), "
            "and average len(target) over the sequences")
    cases = [Case(f"n = {n}, {k} sequences, {d:.0%} hidden, mean span {m:g}", (n, k, d, m),
                  _target_length(n, k, d, m), atol=1e-9, rtol=1e-9, hint=hint)
             for n, k, d, m in settings]
    mistakes = [
        Mistake("defaults used", "pass noise_density and mean_span_length on to noise_mask: its defaults "
                "(15%, 3) are T5's, not the ones asked for.",
                gives=lambda n, k, d, m: _target_length(n, k, 0.15, 3.0)),
        Mistake("no </s>", "one token short: the target ends with </s> (corrupt appends eos_id to both "
                "sides); count it.", gives=_target_parts_gives(lambda n, h, s: h + s)),
        Mistake("sentinels not counted", "the target writes one sentinel before each span, so it is the "
                "hidden tokens plus one sentinel per span plus </s>; you left the sentinels out.",
                gives=_target_parts_gives(lambda n, h, s: h + 1)),
        Mistake("hidden tokens only", "that is the number of hidden tokens; the target also holds one "
                "sentinel per span and the closing </s>.", gives=_target_parts_gives(lambda n, h, s: h)),
        Mistake("one token too many", "one token long: a final sentinel after the last span (the paper's "
                "figure shows one; T5's code does not write it) or </s> counted twice.",
                gives=_target_parts_gives(lambda n, h, s: h + s + 2)),
        Mistake("the input measured", "that is the length of the corrupted *input* (the kept tokens, one "
                "sentinel per span, </s>); the question is the target's.",
                gives=_target_parts_gives(lambda n, h, s: n - h + s + 1)),
        Mistake("the whole text", "that is a target that rebuilds the text (every token and </s>); span "
                "corruption's target holds only the hidden spans, each after its sentinel.",
                gives=_target_parts_gives(lambda n, h, s: n + 1)),
        Mistake("Bernoulli mask", "that is about what a mask drawn token by token gives (torch.rand(n) < "
                "noise_density): about n x density hidden tokens in many short runs, so far more sentinels. "
                "noise_mask draws a fixed number of hidden tokens in a fixed number of spans: use it.",
                when=_bernoulli_length),
        Mistake("density times length", "that is length x noise_density, unrounded, with nothing added; "
                "noise_mask rounds the hidden count, and the target adds a sentinel per span and </s>: "
                "measure it.", gives=lambda n, k, d, m: n * d),
    ]
    name = "target length"
    measures = not callable(fn) or _calls(fn, lambda v: v is noise_mask, frozenset({"noise_mask"}))
    # one verdict only: a formula, or a wrong prediction, is refused, not passed then refused
    with contextlib.redirect_stdout(io.StringIO()) as quiet:
        result = run_cases(name, _as_float(fn), cases, mistakes)
    if result.passed and not measures:
        return _finish(name, False, "your function gives the right lengths without drawing a single mask: "
                       "it computes them from a formula. The exercise tests that formula: draw the masks "
                       "with noise_mask, build each target with corrupt and average the lengths, then see "
                       "whether the draws differ.", "computed, not measured")
    if not result.passed:
        print(quiet.getvalue(), end="")
        return result
    n, d, m = TARGET_ASKED
    hidden, spans = _target_parts(n, d, m)
    length = hidden + spans + 1
    where = f"n = {n}, {d:.0%} hidden, mean span {m:g}"
    measured = f"your function measures right (all {len(cases)} cases pass)"
    explained = (f"it is {length}: {hidden} hidden tokens + {spans} sentinels + </s>, every draw the same, "
                 f"since noise_mask fixes both counts. That is {length / (n + 1):.0%} of the {n + 1} tokens "
                 f"of a target that rebuilds the text; the hidden tokens alone would be "
                 f"{hidden / (n + 1):.0%}, the sentinels add {spans / (n + 1):.0%}.")
    if prediction is None:
        return _finish(name, False, f"{measured}, but no prediction was given: write yours (the target's "
                       f"length at {where}) into `prediction` before you measure.", "no prediction")
    if isinstance(prediction, bool) or not isinstance(prediction, (int, float)):
        return _finish(name, False, f"{measured}, but the prediction {prediction!r} is not a number: write "
                       "one number of tokens.", "prediction not a number")
    if abs(prediction - length) >= TARGET_TOLERANCE:  # the stated tolerance: rounds to the count
        likely = {n * d * (1 + 1 / m) + 1: "the formula unrounded: noise_mask rounds the hidden "
                  "count and the span count to whole tokens",
                  hidden: "hidden tokens only", hidden + 1: "sentinels not counted",
                  hidden + spans: "no </s>", hidden + spans + 2: "one token too many",
                  n + 1: "the whole text", n - hidden + spans + 1: "the input measured",
                  n * d: "density times length"}
        closest = min(likely, key=lambda v: abs(prediction - v))  # the likeliest slip, if near
        error = likely[closest] if abs(prediction - closest) < 0.3 else "wrong count"
        return _finish(name, False, f"{measured}, but you predicted a target of {prediction:g} tokens "
                       f"({error}; off by {prediction - length:+.3g}; right means it rounds to the count): "
                       f"{explained}",
                       "wrong prediction")
    print(quiet.getvalue(), end="")
    print(f"   {where}: you predicted a target of {prediction:g} tokens, which rounds to it (right): "
          + explained)
    return result


EXERCISES = {
    "bucket_range": check_bucket_range,
    "fill_spans": check_fill_spans,
    "corrupt_spans": check_corrupt,
    "trained_buckets": check_trained_buckets,
    "t5_without_position_bias": check_no_position_t5,
    "span_length_spread": check_span_spread,
    "target_length": check_target_length,
}
