"""Chapter 10 checkers: each accepts the reference solution, rejects a table of plausible wrong
answers, and names the mistake where it knows it."""
import math
import statistics

import pytest
import torch

from attnbook.exercises.ch10 import (
    check_bucket_range, check_corrupt, check_fill_spans, check_no_position_t5, check_span_spread,
    check_trained_buckets,
)
from attnbook.models.t5 import T5, T5Config
from attnbook.tasks.span_corruption import noise_mask


# --- reference solutions ---

def bucket_range(bucket, bidirectional, num_buckets, max_distance):
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side, b = divmod(bucket, per_side) if bidirectional else (0, bucket)

    def index(d):  # the truncated log index of distance d >= exact
        return exact + int(math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact))

    def first_distance(k):  # smallest distance whose index reaches k: the log inverted, then nudged
        d = max(exact, math.ceil(exact * (max_distance / exact) ** ((k - exact) / (per_side - exact))))
        while d > exact and index(d - 1) >= k:
            d -= 1
        while index(d) < k:
            d += 1
        return d

    if b < exact:
        low, high = b, b
    else:
        low = first_distance(b)
        high = None if b == per_side - 1 else first_distance(b + 1) - 1
    if side == 1:  # keys after the query: positive offsets
        return None if b == 0 else (low, high)  # offset 0 sits in the lower half: bucket n/2 is empty
    if bidirectional:
        return (None if high is None else -high, -low)
    # causal: bucket 0 also holds every future offset
    return (None if high is None else -high, None if b == 0 else -low)


def bucket_range_scanning_distances(bucket, bidirectional, num_buckets, max_distance):
    """Right on every table, but it steps the distance one by one (the book's earlier solution)."""
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side, b = divmod(bucket, per_side) if bidirectional else (0, bucket)

    def first_distance(k):
        d = exact
        while exact + int(math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact)) < k:
            d += 1
        return d

    if b < exact:
        low, high = b, b
    else:
        low = first_distance(b)
        high = None if b == per_side - 1 else first_distance(b + 1) - 1
    if side == 1:
        return None if b == 0 else (low, high)
    if bidirectional:
        return (None if high is None else -high, -low)
    return (None if high is None else -high, None if b == 0 else -low)


def bucket_of(offset, bidirectional, num_buckets, max_distance):
    """Section 10.3's own bucket function, pasted by the reader (not the library's)."""
    first = 0
    if bidirectional:
        num_buckets //= 2
        first = num_buckets if offset > 0 else 0
        distance = abs(offset)
    else:
        distance = max(-offset, 0)
    exact = num_buckets // 2
    if distance < exact:
        return first + distance
    large = exact + int(math.log(distance / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return first + min(large, num_buckets - 1)


def bucket_range_brute_force(bucket, bidirectional, num_buckets, max_distance):
    """Every offset out to 8 * max_distance through the reader's own bucket function (review rev10g)."""
    far = 8 * max_distance
    inside = [o for o in range(-far, far + 1) if bucket_of(o, bidirectional, num_buckets, max_distance) == bucket]
    if not inside:
        return None
    low, high = min(inside), max(inside)
    return (None if low == -far else low, None if high == far else high)


def fill_spans(inputs, target, eos_id):
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token > 900:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if token > 900 else [token])
    return out


def corrupt(tokens, mask, sentinel, eos_id):
    inputs, target, spans = [], [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not mask[position - 1]):
            inputs.append(sentinel(spans))
            target.append(sentinel(spans))
            spans += 1
        (target if hidden else inputs).append(token)
    return inputs + [eos_id], target + [eos_id]


def trained_buckets(config, src_length, tgt_length):
    """Measured: one loss, backward, the rows of each table with a gradient."""
    model = T5(config)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, config.vocab_size, (2, src_length), generator=g)
    tgt = torch.randint(3, config.vocab_size, (2, tgt_length), generator=g)
    model(src, torch.tensor([src_length] * 2), tgt).sum().backward()
    return tuple(
        sorted(torch.nonzero(bias.relative_attention_bias.weight.grad.abs().sum(1)).flatten().tolist())
        for bias in (model.encoder_position_bias, model.decoder_position_bias))


def t5_without_position_bias(config):
    model = T5(config)
    model.encoder_position_bias = None
    model.decoder_position_bias = None
    return model


@pytest.mark.parametrize("check, solution", [
    (check_bucket_range, bucket_range), (check_fill_spans, fill_spans),
    (check_corrupt, corrupt), (lambda fn: check_trained_buckets(fn, 23), trained_buckets),
    (lambda fn: check_no_position_t5(fn, ("same", "different")), t5_without_position_bias),
])
def test_reference_passes(check, solution, capsys):
    assert check(solution)
    assert "✓" in capsys.readouterr().out


def not_done(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check", [check_bucket_range, check_fill_spans, check_corrupt, check_trained_buckets,
                                   check_no_position_t5])
def test_not_done_yet(check, capsys):
    assert not check(not_done)
    assert "not done yet" in capsys.readouterr().out


# --- wrong answers ---

def bucket_halves_swapped(bucket, bidirectional, n, d):
    low, high = bucket_range(bucket, bidirectional, n, d)
    if not bidirectional:
        return (low, high)
    return (None if high is None else -high, None if low is None else -low)


def bucket_rounded(bucket, bidirectional, num_buckets, max_distance):
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side, b = divmod(bucket, per_side) if bidirectional else (0, bucket)

    def first_distance(k):
        d = exact
        while round(exact + math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact)) < k:
            d += 1
        return d

    if b < exact:
        return bucket_range(bucket, bidirectional, num_buckets, max_distance)
    low, high = first_distance(b), (None if b == per_side - 1 else first_distance(b + 1) - 1)
    if side == 1:
        return (low, high)
    return (None if high is None else -high, -low)


def bucket_bounded(bucket, bidirectional, n, d):
    low, high = bucket_range(bucket, bidirectional, n, d)
    return (-d if low is None else low, d if high is None else high)


def bucket_causal_zero_closed(bucket, bidirectional, n, d):
    return (0, 0) if not bidirectional and bucket == 0 else bucket_range(bucket, bidirectional, n, d)


def bucket_causal_sign_flipped(bucket, bidirectional, n, d):
    if bidirectional:
        return bucket_range(bucket, bidirectional, n, d)
    low, high = bucket_range(bucket, bidirectional, n, d)
    return (None if high is None else -high, None if low is None else -low)


def bucket_zero_in_both_halves(bucket, bidirectional, n, d):
    """Offset 0 given to the empty bidirectional bucket n/2 as well (it passed before the empty bucket
    was checked)."""
    return (0, 0) if bidirectional and bucket == n // 2 else bucket_range(bucket, bidirectional, n, d)


def bucket_one_past_the_end(bucket, bidirectional, n, d):
    """The far end of a log bucket written as the start of the next one."""
    low, high = bucket_range(bucket, bidirectional, n, d)
    if low is None or high is None or low == high:
        return (low, high)
    return (low, high + 1) if low > 0 else (low - 1, high)


@pytest.mark.parametrize("wrong, diagnosis", [
    (bucket_halves_swapped, "halves swapped"),
    (bucket_causal_zero_closed, "causal bucket 0 closed"),
    (bucket_zero_in_both_halves, "offset 0 in the upper half"),
    (bucket_causal_sign_flipped, "causal sign flipped"),
    (bucket_one_past_the_end, "one past the end"),
    (bucket_rounded, "rounded log"),
    (bucket_bounded, "last bucket bounded"),
    (lambda bucket, bi, n, d: (bucket, bucket), "halves swapped"),  # every bucket exact, no sign
    (bucket_range_brute_force, "offsets scanned"),  # right answers, found by trying offsets
    (bucket_range_scanning_distances, "offsets scanned"),  # right answers, one distance at a time
])
def test_bucket_range_rejects(wrong, diagnosis):
    result = check_bucket_range(wrong)
    assert not result and result.diagnosis == diagnosis


def test_bucket_range_expected_by_bisection_equals_brute_force():
    """The checker's expected ends (bisection over distances) are those of every offset tried."""
    import torch

    from attnbook.exercises.ch10 import _bucket_range
    from attnbook.layers.relative_position import relative_position_bucket
    for bidirectional, n, d in ((True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 4, 8), (True, 12, 100)):
        far = 8 * d
        offsets = torch.arange(-far, far + 1)
        buckets = relative_position_bucket(offsets, bidirectional, n, d)
        for bucket in range(n):
            inside = offsets[buckets == bucket]
            brute = None if len(inside) == 0 else (
                None if int(inside.min()) == -far else int(inside.min()),
                None if int(inside.max()) == far else int(inside.max()))
            assert _bucket_range(bucket, bidirectional, n, d) == brute, (bidirectional, n, d, bucket)


def test_bucket_range_timer_restores_the_signal_handler():
    import signal
    before = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    assert check_bucket_range(bucket_range_scanning_distances).diagnosis == "offsets scanned"
    if before is not None:
        assert signal.getsignal(signal.SIGALRM) is before
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def fill_keep_sentinels(inputs, target, eos_id):
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token > 900:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend([token, *spans.get(token, [])] if token > 900 else [token])
    return out


def fill_by_position(inputs, target, eos_id):
    spans, current = [], None
    for token in target[: target.index(eos_id)]:
        if token > 900:
            current = []
            spans.append(current)
        else:
            current.append(token)
    spans = iter(spans)
    return [x for token in inputs[: inputs.index(eos_id)] for x in (next(spans, []) if token > 900 else [token])]


def fill_keeps_eos(inputs, target, eos_id):
    return fill_spans(inputs, target, eos_id) + [eos_id]


def fill_past_eos(inputs, target, eos_id):
    return fill_spans(inputs, [t for t in target if t != eos_id], eos_id)


def fill_in_place(inputs, target, eos_id):
    out = fill_spans(inputs, target, eos_id)
    inputs.clear()
    return out


def fill_first_hole_takes_all(inputs, target, eos_id):
    spans = [t for t in target[: target.index(eos_id)] if t <= 900]
    out, first = [], True
    for token in inputs[: inputs.index(eos_id)]:
        if token > 900:
            out += spans if first else []
            first = False
        else:
            out.append(token)
    return out


def fill_skips_token_after_span(inputs, target, eos_id):
    """Moves two steps past each sentinel: the kept token after it is lost."""
    spans, current = {}, None
    for token in target[: target.index(eos_id)]:
        if token > 900:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    out, i = [], 0
    inputs = inputs[: inputs.index(eos_id)]
    while i < len(inputs):
        if inputs[i] > 900:
            out += spans.get(inputs[i], [])
            i += 2
        else:
            out.append(inputs[i])
            i += 1
    return out


def fill_ignoring_eos(inputs, target, eos_id):
    """</s> never tested: it joins the last span in the target and stays at the end of the text."""
    spans, current = {}, None
    for token in target:
        if token > 900:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    return [x for token in inputs for x in (spans.get(token, []) if token > 900 else [token])]


@pytest.mark.parametrize("wrong, diagnosis", [
    (fill_ignoring_eos, "eos ignored"),
    (fill_first_hole_takes_all, "all spans into the first hole"),
    (fill_skips_token_after_span, "drops a kept token"),
    (fill_keep_sentinels, "sentinels kept"),
    (fill_by_position, "spans by position"),
    (fill_keeps_eos, "eos kept"),
    (fill_past_eos, "read past eos"),
    (fill_in_place, "mutated input"),
])
def test_fill_spans_rejects(wrong, diagnosis):
    result = check_fill_spans(wrong)
    assert not result and result.diagnosis == diagnosis


def corrupt_per_token(tokens, mask, sentinel, eos_id):
    inputs, target, n = [], [], 0
    for token, hidden in zip(tokens, mask.tolist()):
        if hidden:
            inputs.append(sentinel(n))
            target += [sentinel(n), token]
            n += 1
        else:
            inputs.append(token)
    return inputs + [eos_id], target + [eos_id]


def corrupt_same_sentinel(tokens, mask, sentinel, eos_id):
    return corrupt(tokens, mask, lambda i: sentinel(0), eos_id)


def corrupt_bare_target(tokens, mask, sentinel, eos_id):
    inputs, _ = corrupt(tokens, mask, sentinel, eos_id)
    return inputs, [t for t, h in zip(tokens, mask.tolist()) if h] + [eos_id]


def corrupt_keeps_hidden(tokens, mask, sentinel, eos_id):
    inputs, spans = [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not mask[position - 1]):
            inputs.append(sentinel(spans))
            spans += 1
        inputs.append(token)
    return inputs + [eos_id], corrupt(tokens, mask, sentinel, eos_id)[1]


def corrupt_paper_figure(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs, target[:-1] + [sentinel(sum(1 for t in target if t not in tokens and t != eos_id)), eos_id]


def corrupt_closing_first_sentinel(tokens, mask, sentinel, eos_id):
    """The paper's closing sentinel, numbered as if it were the first (a plausible slip)."""
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs, target[:-1] + [sentinel(0), eos_id]


def corrupt_whole_text_target(tokens, mask, sentinel, eos_id):
    """The input is right; the target rebuilds the whole text (cell 10.5's 'rebuild the text')."""
    inputs, _ = corrupt(tokens, mask, sentinel, eos_id)
    return inputs, list(tokens) + [eos_id]


def corrupt_whole_text_with_sentinels(tokens, mask, sentinel, eos_id):
    """The whole text as target, with each span's sentinel before it."""
    inputs, target, n = [], [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not mask[position - 1]):
            inputs.append(sentinel(n))
            target.append(sentinel(n))
            n += 1
        if not hidden:
            inputs.append(token)
        target.append(token)
    return inputs + [eos_id], target + [eos_id]


def corrupt_no_eos(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs[:-1], target[:-1]


def corrupt_no_target_eos(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs, target[:-1]


def corrupt_no_input_eos(tokens, mask, sentinel, eos_id):
    inputs, target = corrupt(tokens, mask, sentinel, eos_id)
    return inputs[:-1], target


def corrupt_sentinel_per_hidden_token(tokens, mask, sentinel, eos_id):
    """Each hidden token its own sentinel, in the input and in the target."""
    inputs, target, n = [], [], 0
    for token, hidden in zip(tokens, mask.tolist()):
        if hidden:
            inputs.append(sentinel(n))
            target += [sentinel(n), token]
            n += 1
        else:
            inputs.append(token)
    return inputs + [eos_id], target + [eos_id]


def corrupt_sentinel_per_token_in_input(tokens, mask, sentinel, eos_id):
    """The target is built per span, but the input gets a sentinel for each hidden token."""
    inputs, target, n, spans = [], [], 0, 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden:
            inputs.append(sentinel(n))
            n += 1
            if position == 0 or not mask[position - 1]:
                target.append(sentinel(spans))
                spans += 1
            target.append(token)
        else:
            inputs.append(token)
    return inputs + [eos_id], target + [eos_id]


def corrupt_in_place(tokens, mask, sentinel, eos_id):
    out = corrupt(tokens, mask, sentinel, eos_id)
    mask[:] = False
    return out


@pytest.mark.parametrize("wrong, diagnosis", [
    (corrupt_per_token, "one sentinel per token"),
    (corrupt_same_sentinel, "one sentinel for every span"),
    (corrupt_bare_target, "target without sentinels"),
    (corrupt_keeps_hidden, "hidden tokens kept in the input"),
    (corrupt_paper_figure, "final sentinel"),
    (corrupt_closing_first_sentinel, "final sentinel"),
    (corrupt_whole_text_target, "whole text as target"),
    (corrupt_whole_text_with_sentinels, "whole text as target"),
    (corrupt_no_eos, "no eos"),
    (corrupt_no_target_eos, "target without eos"),
    (corrupt_no_input_eos, "input without eos"),
    (corrupt_sentinel_per_hidden_token, "one sentinel per token"),
    (corrupt_sentinel_per_token_in_input, "one sentinel per token"),
    (corrupt_in_place, "mutated input"),
    (lambda tokens, mask, sentinel, eos_id: (list(tokens), [eos_id]), ""),
])
def test_corrupt_rejects(wrong, diagnosis):
    result = check_corrupt(wrong)
    assert not result and result.diagnosis == diagnosis


def buckets_by_formula(config, src_length, tgt_length, reach=0):
    from attnbook.layers.relative_position import relative_position_bucket
    enc = torch.arange(-(src_length - 1) - reach, src_length + reach)
    dec = torch.arange(-(tgt_length - 1) - reach, 1)
    return (sorted(set(relative_position_bucket(enc, True, config.num_buckets, config.max_distance).tolist())),
            sorted(set(relative_position_bucket(dec, False, config.num_buckets, config.max_distance).tolist())))


def buckets_left_only(config, src_length, tgt_length):
    enc, dec = buckets_by_formula(config, src_length, tgt_length)
    return [b for b in enc if b < config.num_buckets // 2], dec


@pytest.mark.parametrize("wrong, diagnosis", [
    (lambda c, s, t: trained_buckets(c, s, t)[::-1], "stacks swapped"),
    # both stacks one too far: in the first case the encoder's extra offset (±58) falls in a bucket
    # that ±57 already reaches, so only the decoder's error shows, and the message names it
    (lambda c, s, t: buckets_by_formula(c, s, t, reach=1), "decoder one offset too far"),
    (buckets_left_only, "one side only"),
    (lambda c, s, t: (trained_buckets(c, s, t)[0], []), "loss from the first decoder position only"),
    (lambda c, s, t: (trained_buckets(c, s, t)[0], trained_buckets(c, s, s)[1]),
     "decoder fed source-length targets"),
    (lambda c, s, t: (list(range(c.num_buckets)), list(range(c.num_buckets))), "every row counted"),
])
def test_trained_buckets_rejects(wrong, diagnosis):
    result = check_trained_buckets(wrong, prediction=23)
    assert not result and result.diagnosis == diagnosis


def test_trained_buckets_by_formula_is_rejected():
    """Reachable buckets computed from the lengths are not a measurement: a stack with one key per
    query gets no gradient, which only running the model shows."""
    result = check_trained_buckets(buckets_by_formula, prediction=23)
    assert not result and result.diagnosis == "computed, not measured"


def test_trained_buckets_names_swapped_lengths():
    result = check_trained_buckets(lambda c, s, t: trained_buckets(c, t, s), prediction=23)
    assert not result and result.diagnosis == "lengths swapped"


def test_trained_buckets_right_prediction_passes(capsys):
    assert check_trained_buckets(trained_buckets, prediction=23)
    assert "was right" in capsys.readouterr().out


@pytest.mark.parametrize("prediction, diagnosis, phrase", [
    (27, "wrong prediction", "the pretraining trains 23"),
    (32, "wrong prediction", "the pretraining trains 23"),
    (None, "no prediction", "no prediction was given"),
    (59, "prediction out of range", "not a count"),
    (-1, "prediction out of range", "not a count"),
    (22.5, "prediction out of range", "not a count"),
    ({0, 1, 2}, "prediction not a number", "not a number"),
    ([0, 1, 2], "prediction not a number", "not a number"),
    ("23", "prediction not a number", "not a number"),
    (True, "prediction not a number", "not a number"),
])
def test_trained_buckets_rejects_bad_predictions(prediction, diagnosis, phrase, capsys):
    result = check_trained_buckets(trained_buckets, prediction=prediction)
    out = capsys.readouterr().out
    assert not result and result.diagnosis == diagnosis
    assert phrase in out and "✓" not in out, "one verdict, and it refuses"


def test_trained_buckets_accepts_tensors_and_tuples():
    assert check_trained_buckets(lambda c, s, t: tuple(torch.tensor(v, dtype=torch.long)
                                                       for v in trained_buckets(c, s, t)), 23)
    assert check_trained_buckets(lambda c, s, t: tuple(tuple(v) for v in trained_buckets(c, s, t)), 23)


def test_trained_buckets_rejects_a_set():
    result = check_trained_buckets(lambda c, s, t: tuple(set(v) for v in trained_buckets(c, s, t)), 23)
    assert not result and result.diagnosis == "a set, not a sorted list"


def test_trained_buckets_rejects_unsorted_ids():
    result = check_trained_buckets(lambda c, s, t: tuple(v[::-1] for v in trained_buckets(c, s, t)), 23)
    assert not result and result.diagnosis == "not sorted"


def only_encoder(config):
    model = T5(config)
    model.encoder_position_bias = None
    return model


def only_decoder(config):
    model = T5(config)
    model.decoder_position_bias = None
    return model


def zeroed(config):
    model = T5(config)
    for bias in (model.encoder_position_bias, model.decoder_position_bias):
        torch.nn.init.zeros_(bias.relative_attention_bias.weight)
    return model


class ZeroBias(torch.nn.Module):
    """A bias module that adds nothing: no position, but still a module."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, num_queries, num_keys, offset=0):
        return torch.zeros(1, self.heads, num_queries, num_keys)


def zero_modules(config):
    model = T5(config)
    model.encoder_position_bias = ZeroBias(config.num_heads)
    model.decoder_position_bias = ZeroBias(config.num_heads)
    return model


def test_no_position_t5_measures_the_decoder(capsys):
    assert check_no_position_t5(t5_without_position_bias, ("Same", "different"))
    out = capsys.readouterr().out
    assert out.startswith("✓") and "with one decoder layer" in out and "with two" in out
    assert "without the causal mask" in out and "positions 1->2" in out


def test_no_position_t5_swap_is_set_like_in_one_layer_only():
    """One decoder layer: the last position sees its inputs as a set; two: it does not."""
    from attnbook.exercises.ch10 import _swap_change
    assert _swap_change(t5_without_position_bias, 1) < 1e-5
    assert _swap_change(t5_without_position_bias, 2) > 1e-3


def test_no_position_t5_decoder_steps_fall_and_the_null_is_flat():
    """From position 1 on the inputs are equal: the causal decoder still changes, less at every
    step; without the causal mask it does not change at all."""
    from attnbook.exercises.ch10 import _decoder_position_steps
    torch.manual_seed(0)
    model = t5_without_position_bias(T5Config(40, d_model=16, num_heads=2, d_ff=24))
    steps = _decoder_position_steps(model)
    assert steps[0] > 1e-3 and steps[-1] < steps[0]
    assert max(_decoder_position_steps(model, causal=False)) < 1e-5


@pytest.mark.parametrize("prediction, phrase, diagnosis", [
    (("same", "same"), "a second layer reads states", "wrong prediction"),
    (("different", "different"), "their order cannot matter", "wrong prediction"),
    (["different", "same"], "the other way round", "wrong prediction"),
    (None, "not done yet", "no prediction"), (3, "not understood", "prediction not understood"),
    ("decoder", "not understood", "prediction not understood"),
    (("same", "maybe"), "not understood", "prediction not understood"),
])
def test_no_position_t5_rejects_wrong_or_missing_predictions(prediction, phrase, diagnosis, capsys):
    result = check_no_position_t5(t5_without_position_bias, prediction)
    out = capsys.readouterr().out
    assert not result and result.diagnosis == diagnosis
    assert out.startswith("✗") and phrase in out


def test_no_position_t5_hides_the_answer_before_a_prediction(capsys):
    check_no_position_t5(t5_without_position_bias, None)
    out = capsys.readouterr().out.lower()
    assert "decoder is another matter" not in out and "causal mask" not in out


@pytest.mark.parametrize("wrong, diagnosis", [
    (zero_modules, "bias module kept"),
    (only_decoder, "encoder kept"),
    (only_encoder, "decoder kept"),
    (zeroed, "zeroed"),
    (lambda config: T5(config), "encoder kept"),
    (lambda config: torch.nn.Linear(2, 2), ""),
])
def test_no_position_t5_rejects(wrong, diagnosis):
    result = check_no_position_t5(wrong)
    assert not result and result.diagnosis == diagnosis


# --- named mistakes added after the second review ---

def bucket_no_halving(bucket, bidirectional, num_buckets, max_distance):
    """The reference with the per-side halving forgotten: every bucket read as keys before."""
    exact = num_buckets // 2

    def first_distance(k):
        d = exact
        while exact + int(math.log(d / exact) / math.log(max_distance / exact) * (num_buckets - exact)) < k:
            d += 1
        return d

    if bucket < exact:
        low, high = bucket, bucket
    else:
        low = first_distance(bucket)
        high = None if bucket == num_buckets - 1 else first_distance(bucket + 1) - 1
    if bidirectional:
        return (None if high is None else -high, -low)
    return (None if high is None else -high, None if bucket == 0 else -low)


def test_bucket_range_names_no_halving():
    result = check_bucket_range(bucket_no_halving)
    assert not result and result.diagnosis == "no per-side halving"


def _reader_bucket_range(bucket, bidirectional, num_buckets, max_distance, inclusive=False,
                         floored=False):
    """A reader's formula solution, with the review's two slips as switches."""
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side, b = divmod(bucket, per_side) if bidirectional else (0, bucket)

    def index(d):
        return exact + int(math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact))

    def first_distance(k):
        real = exact * (max_distance / exact) ** ((k - exact) / (per_side - exact))
        if floored:  # the inverse floored, no correction
            return max(exact, math.floor(real))
        d = max(exact, math.ceil(real))
        while d > exact and index(d - 1) >= k:
            d -= 1
        while index(d) < k:
            d += 1
        return d

    if b < exact or (inclusive and b == exact):
        low, high = b, b
    else:
        low = first_distance(b)
        high = None if b == per_side - 1 else first_distance(b + 1) - 1
    if side == 1:
        return None if b == 0 else (low, high)
    if bidirectional:
        return (None if high is None else -high, -low)
    return (None if high is None else -high, None if b == 0 else -low)


def test_reader_bucket_range_without_slips_passes():
    assert check_bucket_range(_reader_bucket_range)


@pytest.mark.parametrize("slip, diagnosis", [
    (dict(inclusive=True), "exact region one bucket too long"),
    (dict(floored=True), "floored inverse"),
])
def test_bucket_range_names_the_exact_region_and_the_floored_inverse(slip, diagnosis, capsys):
    result = check_bucket_range(lambda *args: _reader_bucket_range(*args, **slip))
    assert not result and result.diagnosis == diagnosis


def fill_only_sentinel_zero(inputs, target, eos_id):
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token == 1000:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if token == 1000 else [token])
    return out


def fill_only_sentinel_zero_in_input(inputs, target, eos_id):
    """Spans collected under every sentinel, but only sentinel 0 replaced in the input."""
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token > 900:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if token == 1000 else [token])
    return out


def fill_only_sentinel_zero_in_target(inputs, target, eos_id):
    """Only sentinel 0 starts a span in the target; every sentinel is a hole in the input."""
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token == 1000:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if token > 900 else [token])
    return out


def fill_keeps_unfilled(inputs, target, eos_id):
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if token > 900:
            current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, [token]) if token > 900 else [token])
    return out


@pytest.mark.parametrize("wrong, diagnosis", [
    (fill_only_sentinel_zero, "only sentinel 0"),
    (fill_only_sentinel_zero_in_input, "only sentinel 0"),
    (fill_only_sentinel_zero_in_target, "only sentinel 0"),
    (fill_keeps_unfilled, "unfilled sentinel kept"),
])
def test_fill_spans_names_more(wrong, diagnosis):
    result = check_fill_spans(wrong)
    assert not result and result.diagnosis == diagnosis


def corrupt_from_one(tokens, mask, sentinel, eos_id):
    return corrupt(tokens, mask, lambda i: sentinel(i + 1), eos_id)


def corrupt_misses_start(tokens, mask, sentinel, eos_id):
    inputs, target, spans = [], [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and position > 0 and not mask[position - 1]:
            inputs.append(sentinel(spans))
            target.append(sentinel(spans))
            spans += 1
        (target if hidden else inputs).append(token)
    return inputs + [eos_id], target + [eos_id]


def corrupt_flush_on_kept(tokens, mask, sentinel, eos_id):
    """Writes a span to the target when a kept token closes it, and forgets the last one."""
    inputs, target, span, spans = [], [], [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden:
            if position == 0 or not mask[position - 1]:
                inputs.append(sentinel(spans))
                span = [sentinel(spans)]
                spans += 1
            span.append(token)
        else:
            target += span
            span = []
            inputs.append(token)
    return inputs + [eos_id], target + [eos_id]


def corrupt_by_position(tokens, mask, sentinel, eos_id):
    """Sentinel numbered by the position where its span starts (in the named case: <S8>, no
    IndexError inside the checker)."""
    inputs, target = [], []
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not mask[position - 1]):
            inputs.append(sentinel(position))
            target.append(sentinel(position))
        (target if hidden else inputs).append(token)
    return inputs + [eos_id], target + [eos_id]


@pytest.mark.parametrize("wrong, diagnosis", [
    (corrupt_by_position, "sentinels numbered by token position"),
    (corrupt_from_one, "sentinels from 1"),
    (corrupt_misses_start, "no span at the start"),
    (corrupt_flush_on_kept, "last span dropped"),
])
def test_corrupt_names_more(wrong, diagnosis):
    result = check_corrupt(wrong)
    assert not result and result.diagnosis == diagnosis


def test_corrupt_refuses_the_library(capsys):
    from attnbook.tasks import span_corruption
    from attnbook.tasks.span_corruption import corrupt as library_corrupt

    for wrong in (library_corrupt, lambda t, m, s, e: library_corrupt(t, m, s, e),
                  lambda t, m, s, e: span_corruption.corrupt(t, m, s, e)):
        result = check_corrupt(wrong)
        assert not result and result.diagnosis == "calls the library"
    assert "calls the library's `corrupt`" in capsys.readouterr().out


def trained_decoder_bidirectional(config, src_length, tgt_length):
    from attnbook.layers.relative_position import relative_position_bucket
    enc, _ = buckets_by_formula(config, src_length, tgt_length)
    dec = torch.arange(-(tgt_length - 1), 1)
    return enc, sorted(set(relative_position_bucket(dec, True, config.num_buckets, config.max_distance).tolist()))


def test_trained_buckets_names_decoder_bidirectional():
    result = check_trained_buckets(trained_decoder_bidirectional, prediction=23)
    assert not result and result.diagnosis == "decoder as bidirectional"


# --- predict, then measure: span-length spread ---

def span_length_spread(length, sequences, noise_density, mean_span_length, reseed=False,
                       kept=False, means=False, per_sequence_sd=False):
    from attnbook.tasks.span_corruption import noise_mask
    g = torch.Generator().manual_seed(1)
    spans, per_sequence, sds = [], [], []
    for _ in range(sequences):
        if reseed:
            g = torch.Generator().manual_seed(1)
        mask = noise_mask(length, noise_density, mean_span_length, generator=g).tolist()
        runs, run, previous = [], 0, None
        for hidden in mask + [not mask[-1]]:
            if kept:  # every run, hidden or kept
                if previous is not None and hidden != previous:
                    runs.append(run)
                    run = 0
                run, previous = run + 1, hidden
            elif hidden:
                run += 1
            elif run:
                runs.append(run)
                run = 0
        spans += runs
        per_sequence.append(statistics.mean(runs))
        sds.append(statistics.pstdev(runs))
    if per_sequence_sd:
        return statistics.mean(spans), statistics.mean(sds)
    values = per_sequence if means else spans
    return statistics.mean(values), statistics.pstdev(values)


def poisson_spread(length, sequences, noise_density, mean_span_length):
    """The measured mean span with sqrt(mean) for its sd: a Poisson guess."""
    mean = span_length_spread(length, sequences, noise_density, mean_span_length)[0]
    return mean, mean ** 0.5


def test_span_spread_reference_passes(capsys):
    assert check_span_spread(span_length_spread, 16)
    out = capsys.readouterr().out
    assert "✓" in out and "(right)" in out and "16.5" in out


@pytest.mark.parametrize("prediction, diagnosis, phrase", [
    (4.4, "wrong prediction", "Poisson guess"),  # sqrt(mean)
    (0.5, "wrong prediction", "every span the same length"),
    (10, "wrong prediction", "prediction too low"),  # outside 25% of 16.5
    (30, "wrong prediction", "prediction too high"),
    (None, "no prediction", "no prediction was given"),
    ("wide", "prediction not a number", "not a number"),
    (True, "prediction not a number", "not a number"),
])
def test_span_spread_rejects_a_wrong_prediction(prediction, diagnosis, phrase, capsys):
    """A right measurement with a wrong (or missing) prediction gets one verdict: ✗, with the error named."""
    result = check_span_spread(span_length_spread, prediction)
    out = capsys.readouterr().out
    assert not result and result.diagnosis == diagnosis
    assert phrase in out and "✓" not in out


@pytest.mark.parametrize("prediction", [13, 16.5, 19.25, 20])  # within 25% of 16.5, the mean included
def test_span_spread_accepts_a_prediction_within_the_tolerance(prediction, capsys):
    assert check_span_spread(span_length_spread, prediction)
    assert "(right)" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, diagnosis", [
    (lambda n, k, d, m: span_length_spread(n, k, 0.15, 3.0), "defaults used"),
    (lambda n, k, d, m: span_length_spread(n, k, d, m, reseed=True), "same mask every sequence"),
    (lambda n, k, d, m: span_length_spread(n, k, d, m, kept=True), "kept runs counted too"),
    (lambda n, k, d, m: span_length_spread(n, k, d, m, means=True), "spread of the sequences' means"),
    (lambda n, k, d, m: span_length_spread(n, k, d, m, per_sequence_sd=True), "mean of per-sequence sds"),
    (lambda n, k, d, m: poisson_spread(n, k, d, m) if k > 1 else (m, 0.0), "Poisson assumed"),
    (lambda n, k, d, m: (d * n, 1.0), "same mask every sequence"),  # a formula: no draws at all
    (lambda n, k, d, m: span_length_spread(n, k, d, m)[::-1], ""),
    (not_done, None),
])
def test_span_spread_rejects(wrong, diagnosis):
    result = check_span_spread(wrong, 16)
    assert not result
    if diagnosis is not None:
        assert result.diagnosis == diagnosis


def test_cli_passes_the_prediction(tmp_path, capsys):
    from attnbook.exercises.__main__ import _prediction
    namespace = {"prediction": 3, "prediction_span_length_spread": 16.5}
    assert _prediction(check_span_spread, "span_length_spread", namespace) == {"prediction": 16.5}
    assert _prediction(check_trained_buckets, "trained_buckets", namespace) == {"prediction": 3}
    assert _prediction(check_bucket_range, "bucket_range", namespace) == {}


# --- rows added after the 2026-11-26 review: each wrong answer passed the checkers before ---

def bucket_zero_in_upper_half(bucket, bidirectional, n, d):
    """Offset 0 counted with the keys after the query: bucket 0 empty, bucket n // 2 holds 0."""
    if bidirectional and bucket == 0:
        return None
    if bidirectional and bucket == n // 2:
        return (0, 0)
    return bucket_range(bucket, bidirectional, n, d)


def bucket_reversed(bucket, bidirectional, n, d):
    """The negative side written (high, low)."""
    low, high = bucket_range(bucket, bidirectional, n, d)
    return (high, low) if low is not None and high is not None and low < 0 else (low, high)


@pytest.mark.parametrize("wrong, diagnosis", [
    (bucket_zero_in_upper_half, "offset 0 in the upper half"),
    (bucket_reversed, "reversed (high, low)"),
])
def test_bucket_range_names_review_mistakes(wrong, diagnosis):
    result = check_bucket_range(wrong)
    assert not result and result.diagnosis == diagnosis


def fill_spans_with(inputs, target, eos_id, is_sentinel, on_repeat="append"):
    spans, current = {}, None
    for token in target:
        if token == eos_id:
            break
        if is_sentinel(token):
            if token in spans and on_repeat == "reset":
                spans[token] = current = []
            elif token in spans and on_repeat == "ignore":
                current = None
            else:
                current = spans.setdefault(token, [])
        elif current is not None:
            current.append(token)
    out = []
    for token in inputs:
        if token == eos_id:
            break
        out.extend(spans.get(token, []) if is_sentinel(token) else [token])
    return out


@pytest.mark.parametrize("wrong, diagnosis", [
    (lambda i, t, e: fill_spans_with(i, t, e, lambda x: x >= 995), "sentinel range too narrow"),
    (lambda i, t, e: fill_spans_with(i, t, e, lambda x: x >= 990), "sentinel range too narrow"),
    (lambda i, t, e: fill_spans_with(i, t, e, lambda x: x > 900, "reset"), "repeated sentinel resets"),
    (lambda i, t, e: fill_spans_with(i, t, e, lambda x: x > 900, "ignore"), "repeated sentinel ignored"),
])
def test_fill_spans_names_review_mistakes(wrong, diagnosis):
    result = check_fill_spans(wrong)
    assert not result and result.diagnosis == diagnosis


def fill_spans_keeping_stray_text(inputs, target, eos_id):
    """Text written before the first sentinel is put in front of the result (review d)."""
    stray = []
    for token in target:
        if token == eos_id or token > 900:
            break
        stray.append(token)
    return stray + fill_spans(inputs, target, eos_id)


def fill_spans_stray_text_into_first_span(inputs, target, eos_id):
    """Text before the first sentinel joins the first sentinel's span."""
    first = next((i for i, t in enumerate(target) if t > 900), None)
    if first is None:
        return fill_spans(inputs, target, eos_id)
    moved = [target[first]] + target[:first] + target[first + 1:]  # only its first occurrence
    return fill_spans(inputs, moved, eos_id)


@pytest.mark.parametrize("wrong", [fill_spans_keeping_stray_text, fill_spans_stray_text_into_first_span])
def test_fill_spans_rejects_stray_text_before_the_first_sentinel(wrong):
    result = check_fill_spans(wrong)
    assert not result and result.diagnosis == "stray text kept"


def test_fill_spans_reference_with_the_wide_range_passes():
    assert check_fill_spans(lambda i, t, e: fill_spans_with(i, t, e, lambda x: x > 900))


def span_spread_final_run_open(length, sequences, noise_density, mean_span_length):
    """The run of True that reaches the end of a mask is never closed (so never counted)."""
    g = torch.Generator().manual_seed(0)
    spans = []
    for _ in range(sequences):
        run = 0
        for hidden in noise_mask(length, noise_density, mean_span_length, generator=g).tolist():
            if hidden:
                run += 1
            elif run:
                spans.append(run)
                run = 0
    return statistics.mean(spans), statistics.pstdev(spans)


def test_span_spread_names_the_unclosed_final_run():
    result = check_span_spread(span_spread_final_run_open, 16)
    assert not result and result.diagnosis == "final span not counted"


def test_span_spread_accepts_a_float32_mean():
    def float32(n, k, d, m):
        mean, sd = span_length_spread(n, k, d, m)
        return torch.tensor([mean, sd], dtype=torch.float32)
    assert check_span_spread(float32, 16)


# --- review of 2026-11-27: a scanning bucket_range, and which stack is one offset too far ---

def _scan_library(bucket, bidirectional, n, d, far=5000):
    from attnbook.layers.relative_position import relative_position_bucket
    offsets = torch.arange(-far, far + 1)
    inside = offsets[relative_position_bucket(offsets, bidirectional, n, d) == bucket]
    low, high = int(inside.min()), int(inside.max())
    return (None if low == -far else low, None if high == far else high)


def _scan_transformers(bucket, bidirectional, n, d, far=5000):
    from transformers.models.t5.modeling_t5 import T5Attention
    offsets = torch.arange(-far, far + 1)
    inside = offsets[T5Attention._relative_position_bucket(offsets, bidirectional, n, d) == bucket]
    low, high = int(inside.min()), int(inside.max())
    return (None if low == -far else low, None if high == far else high)


def _own_bucket(offset, bidirectional, n, d):
    per_side = n // 2 if bidirectional else n
    exact = per_side // 2
    side = per_side if bidirectional and offset > 0 else 0
    distance = abs(offset) if bidirectional else max(-offset, 0)
    if distance < exact:
        return side + distance
    return side + min(exact + int(math.log(distance / exact) / math.log(d / exact) * (per_side - exact)),
                      per_side - 1)


def _scan_own_formula(bucket, bidirectional, n, d, far=5000):
    """The reader's own bucket function, tried on a fixed window of offsets."""
    inside = [o for o in range(-far, far + 1) if _own_bucket(o, bidirectional, n, d) == bucket]
    if not inside:
        return None
    return (None if min(inside) == -far else min(inside), None if max(inside) == far else max(inside))


@pytest.mark.parametrize("wrong", [
    _scan_library, lambda b, bi, n, d: _scan_library(b, bi, n, d), _scan_transformers,
])
def test_bucket_range_refuses_a_scan_of_the_library(wrong, capsys):
    result = check_bucket_range(wrong)
    assert not result and result.diagnosis == "scans the library"
    assert "work the ends out from the formula" in capsys.readouterr().out


def test_bucket_range_rejects_a_fixed_window_scan():
    """The review's brute force (offsets -5,000 to 5,000, ends mapped to None) passed all 40 old
    cases; max_distance 20,000 puts bucket ends outside any such window."""
    result = check_bucket_range(_scan_own_formula)
    assert not result and result.diagnosis == "offsets scanned"


def _decoder_too_far(c, s, t):
    enc, _ = trained_buckets(c, s, t)
    _, dec = buckets_by_formula(c, s, t, reach=1)
    return enc, (dec if t > 1 else [])


def _encoder_too_far(c, s, t):
    enc, _ = buckets_by_formula(c, s, t, reach=1)
    return (enc if s > 1 else []), trained_buckets(c, s, t)[1]


@pytest.mark.parametrize("wrong, diagnosis, phrase", [
    (_decoder_too_far, "decoder one offset too far", "a target of T tokens"),
    (_encoder_too_far, "encoder one offset too far", "a source of S tokens"),
])
def test_trained_buckets_names_the_stack_one_offset_too_far(wrong, diagnosis, phrase, capsys):
    result = check_trained_buckets(wrong, prediction=23)
    assert not result and result.diagnosis == diagnosis
    assert phrase in capsys.readouterr().out


# --- named mistakes added after the fourth review (rev10b) ---

def _grad_rows(config, src_length, tgt_length, dim):
    model = T5(config)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, config.vocab_size, (2, src_length), generator=g)
    tgt = torch.randint(3, config.vocab_size, (2, tgt_length), generator=g)
    model(src, torch.tensor([src_length] * 2), tgt).sum().backward()
    return tuple(torch.nonzero(b.relative_attention_bias.weight.grad.abs().sum(dim)).flatten().tolist()
                 for b in (model.encoder_position_bias, model.decoder_position_bias))


def buckets_first_row_only(config, src_length, tgt_length):
    return tuple(rows[:1] for rows in trained_buckets(config, src_length, tgt_length))


@pytest.mark.parametrize("wrong, diagnosis", [
    (lambda c, s, t: _grad_rows(c, s, t, dim=0), "heads, not buckets"),  # columns summed
    (buckets_first_row_only, "one bucket per stack"),
    (lambda c, s, t: ([0], [0]), "one bucket per stack"),
    (lambda c, s, t: (list(range(c.num_buckets)), list(range(c.num_buckets))), "every row counted"),
])
def test_trained_buckets_names_rev10b_mistakes(wrong, diagnosis):
    result = check_trained_buckets(wrong, prediction=23)
    assert not result and result.diagnosis == diagnosis


def no_bias_no_final_norm(config):
    model = t5_without_position_bias(config)
    model.encoder_final_norm = torch.nn.Identity()
    return model


def no_bias_extra_layer(config):
    model = t5_without_position_bias(config)
    model.encoder_blocks.append(T5(config).encoder_blocks[0])
    return model


def no_bias_readout_rescaled(config):
    model = t5_without_position_bias(config)
    model.readout.scale = 1.0  # not a parameter: only the logits show it
    return model


def no_bias_wider_embedding(config):
    import dataclasses
    model = t5_without_position_bias(dataclasses.replace(config, vocab_size=config.vocab_size + 1))
    model.config = config
    return model


@pytest.mark.parametrize("wrong", [no_bias_no_final_norm, no_bias_extra_layer, no_bias_readout_rescaled,
                                   no_bias_wider_embedding])
def test_no_position_t5_rejects_other_changes(wrong, capsys):
    """'Nothing else changed': a model without the bias modules that differs from T5 elsewhere
    (a module replaced or added, a parameter's shape, the forward pass) is rejected by name."""
    result = check_no_position_t5(wrong, ("same", "different"))
    assert not result and result.diagnosis == "other parts changed"
    assert "something else changed" in capsys.readouterr().out


_EXEC_SOURCE = '''
def helper(tokens, mask, sentinel, eos_id):
    inputs, target, spans = [], [], 0
    for position, (token, hidden) in enumerate(zip(tokens, mask.tolist())):
        if hidden and (position == 0 or not mask[position - 1]):
            inputs.append(sentinel(spans))
            target.append(sentinel(spans))
            spans += 1
        (target if hidden else inputs).append(token)
    return inputs + [eos_id], target + [eos_id]

def wrong_helper(tokens, mask, sentinel, eos_id):
    inputs, target = helper(tokens, mask, sentinel, eos_id)
    return inputs, target[:-1]

def right(tokens, mask, sentinel, eos_id):
    return helper(tokens, mask, sentinel, eos_id)

def wrong(tokens, mask, sentinel, eos_id):
    return wrong_helper(tokens, mask, sentinel, eos_id)
'''


def test_corrupt_gives_a_verdict_for_helpers_defined_through_exec(capsys):
    """A helper defined through ``exec`` in a namespace without ``__name__`` has ``__module__``
    None; the library-call search must skip the module test, not raise (review rev10f defect 8)."""
    space = {}
    exec(_EXEC_SOURCE, space)
    assert space["helper"].__module__ is None
    assert check_corrupt(space["right"])
    result = check_corrupt(space["wrong"])
    assert not result and result.diagnosis


# --- predict, then measure: the span-corruption target's length ---

from attnbook.exercises.ch10 import check_target_length  # noqa: E402
from attnbook.tasks.span_corruption import corrupt as library_corrupt  # noqa: E402


def target_length(length, sequences, noise_density, mean_span_length, *, part="target", eos=1,
                  final_sentinel=False):
    """The reference measurement, with switches that make the plausible wrong answers."""
    g = torch.Generator().manual_seed(0)
    sizes = []
    for _ in range(sequences):
        mask = noise_mask(length, noise_density, mean_span_length, generator=g)
        inputs, target = library_corrupt(list(range(length)), mask, lambda i: -1 - i, eos_id=-100)
        if part == "input":
            sizes.append(len(inputs))
            continue
        size = len(target) - 1 + eos + (1 if final_sentinel else 0)
        if part == "no sentinels":
            size -= sum(1 for t in target if -100 < t < 0)
        if part == "hidden":
            size = int(mask.sum())
        sizes.append(size)
    return statistics.mean(sizes)


def test_target_length_reference_passes(capsys):
    assert check_target_length(target_length, 104)
    out = capsys.readouterr().out
    assert "✓" in out and "(right)" in out and "77 hidden tokens + 26 sentinels" in out


@pytest.mark.parametrize("prediction, diagnosis, phrase", [
    (77, "wrong prediction", "hidden tokens only"),  # 15% of 512: the hidden tokens alone
    (76.8, "wrong prediction", "density times length"),
    (78, "wrong prediction", "sentinels not counted"),
    (103, "wrong prediction", "no </s>"),
    (105, "wrong prediction", "one token too many"),
    (462, "wrong prediction", "the input measured"),
    (513, "wrong prediction", "the whole text"),
    (90, "wrong prediction", "off by -14"),
    (103.4, "wrong prediction", "the formula unrounded"),  # 76.8 + 25.6 + 1, not rounded
    (104.6, "wrong prediction", "wrong count"),
    (None, "no prediction", "no prediction was given"),
    ("short", "prediction not a number", "not a number"),
])
def test_target_length_rejects_a_wrong_prediction(prediction, diagnosis, phrase, capsys):
    """A right measurement with a wrong (or missing) prediction gets one verdict: ✗, with the error named."""
    result = check_target_length(target_length, prediction)
    out = capsys.readouterr().out
    assert not result and result.diagnosis == diagnosis
    assert phrase in out and "✓" not in out


@pytest.mark.parametrize("prediction", [104, 104.0, 103.6])  # rounds to the count
def test_target_length_accepts_a_prediction_within_the_tolerance(prediction, capsys):
    assert check_target_length(target_length, prediction)
    assert "(right)" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, diagnosis", [
    (lambda n, k, d, m: target_length(n, k, 0.15, 3.0), "defaults used"),
    (lambda n, k, d, m: target_length(n, k, d, m, eos=0), "no </s>"),
    (lambda n, k, d, m: target_length(n, k, d, m, part="no sentinels"), "sentinels not counted"),
    (lambda n, k, d, m: target_length(n, k, d, m, part="hidden"), "hidden tokens only"),
    (lambda n, k, d, m: target_length(n, k, d, m, final_sentinel=True), "one token too many"),
    (lambda n, k, d, m: target_length(n, k, d, m, eos=2), "one token too many"),
    (lambda n, k, d, m: target_length(n, k, d, m, part="input"), "the input measured"),
    (lambda n, k, d, m: n + 1, "the whole text"),
    (lambda n, k, d, m: n * d, "density times length"),
    (lambda n, k, d, m: n * d * (1 + 1 / m) + 1, ""),  # an unrounded formula: close, not exact
    (lambda n, k, d, m: (target_length(n, k, d, m),), ""),
    (not_done, None),
])
def test_target_length_rejects(wrong, diagnosis):
    result = check_target_length(wrong, 104)
    assert not result
    if diagnosis is not None:
        assert result.diagnosis == diagnosis


def test_target_length_rejects_a_right_formula():
    """The right lengths from the counts alone (no mask drawn): the exercise asks for a measurement."""
    def by_formula(n, k, d, m):
        hidden = max(1, min(n - 1, round(n * d)))
        spans = max(1, min(hidden, n - hidden, round(hidden / m)))
        return hidden + spans + 1

    result = check_target_length(by_formula, 104)
    assert not result and result.diagnosis == "computed, not measured"


def test_target_length_accepts_an_int_and_a_tensor():
    assert check_target_length(lambda *a: int(target_length(*a)), 104)
    assert check_target_length(lambda *a: torch.tensor(target_length(*a)), 104)


def test_trained_buckets_failure_does_not_give_away_the_prediction(capsys):
    """The first case has the pretraining's lengths (30 and 8 tokens), whose encoder buckets are
    the prediction's answer: a failure there shows what the reader returned, not the answer."""
    result = check_trained_buckets(lambda c, s, t: (list(range(c.num_buckets)),) * 2, prediction=23)
    printed = capsys.readouterr().out
    assert not result and "failing case 1" in printed
    assert "expected:" not in printed and "not shown" in printed
    shown = check_trained_buckets(lambda c, s, t: ([0], [0]) if s != 30 else trained_buckets(c, s, t),
                                  prediction=23)
    assert not shown and "expected:" in capsys.readouterr().out, "other cases still show the answer"


def test_target_length_formula_gets_one_verdict(capsys):
    """A formula that passes every case is refused once, not passed and then refused."""
    def by_formula(n, k, d, m):
        hidden = max(1, min(n - 1, round(n * d)))
        return hidden + max(1, min(hidden, n - hidden, round(hidden / m))) + 1

    result = check_target_length(by_formula, 104)
    out = capsys.readouterr().out
    assert not result and result.diagnosis == "computed, not measured"
    assert "✓" not in out and "all 7 cases pass" not in out


def bernoulli_target_length(length, sequences, noise_density, mean_span_length):
    """Masks drawn token by token: about the right number hidden, in many short runs."""
    g = torch.Generator().manual_seed(0)
    sizes = []
    for _ in range(sequences):
        mask = torch.rand(length, generator=g) < noise_density
        sizes.append(len(library_corrupt(list(range(length)), mask, lambda i: -1 - i, -100)[1]))
    return statistics.mean(sizes)


def test_target_length_names_a_bernoulli_mask():
    result = check_target_length(bernoulli_target_length, 104)
    assert not result and result.diagnosis == "Bernoulli mask"


def test_trained_buckets_names_offset_zero_in_both_halves():
    """Bucket num_buckets // 2 added to the encoder's: offset 0 counted in the upper half too."""
    def wrong(c, s, t):
        enc, dec = trained_buckets(c, s, t)
        return (sorted(set(enc) | {c.num_buckets // 2}) if enc else enc), dec

    result = check_trained_buckets(wrong, prediction=23)
    assert not result and result.diagnosis == "offset 0 in both halves"
