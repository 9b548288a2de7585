"""Chapter 10 checkers: each accepts the reference solution, rejects a table of plausible wrong
answers, and names the mistake where it knows it."""
import math

import pytest
import torch

from attnbook.exercises.ch10 import (
    check_bucket_range, check_fill_spans, check_no_position_t5, check_target_length,
)
from attnbook.models.t5 import T5
from attnbook.tasks.span_corruption import corruption_statistics


# --- reference solutions ---

def bucket_range(bucket, bidirectional, num_buckets, max_distance):
    per_side = num_buckets // 2 if bidirectional else num_buckets
    exact = per_side // 2
    side, b = divmod(bucket, per_side) if bidirectional else (0, bucket)

    def first_distance(k):  # smallest distance whose truncated log index reaches k
        d = exact
        while exact + int(math.log(d / exact) / math.log(max_distance / exact) * (per_side - exact)) < k:
            d += 1
        return d

    if b < exact:
        low, high = b, b
    else:
        low = first_distance(b)
        high = None if b == per_side - 1 else first_distance(b + 1) - 1
    if side == 1:  # keys after the query: positive offsets
        return (low, high)
    if bidirectional:
        return (None if high is None else -high, -low)
    # causal: bucket 0 also holds every future offset
    return (None if high is None else -high, None if b == 0 else -low)


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


def measure_target_length():
    return corruption_statistics(200, sequences=50, noise_density=0.3, mean_span_length=5).mean_target_length


def t5_without_position_bias(config):
    model = T5(config)
    model.encoder_position_bias = None
    model.decoder_position_bias = None
    return model


@pytest.mark.parametrize("check, solution", [
    (check_bucket_range, bucket_range), (check_fill_spans, fill_spans),
    (check_target_length, measure_target_length), (check_no_position_t5, t5_without_position_bias),
])
def test_reference_passes(check, solution, capsys):
    assert check(solution)
    assert "✓" in capsys.readouterr().out


def not_done(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check", [check_bucket_range, check_fill_spans, check_target_length,
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


@pytest.mark.parametrize("wrong, diagnosis", [
    (bucket_halves_swapped, "halves swapped"),
    (bucket_rounded, "rounded log"),
    (bucket_bounded, "last bucket bounded"),
    (lambda bucket, bi, n, d: (bucket, bucket), "halves swapped"),  # every bucket exact, no sign
])
def test_bucket_range_rejects(wrong, diagnosis):
    result = check_bucket_range(wrong)
    assert not result and result.diagnosis == diagnosis


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


@pytest.mark.parametrize("wrong, diagnosis", [
    (fill_keep_sentinels, "sentinels kept"),
    (fill_by_position, "spans by position"),
    (fill_keeps_eos, "eos kept"),
    (fill_past_eos, "read past eos"),
    (fill_in_place, "mutated input"),
])
def test_fill_spans_rejects(wrong, diagnosis):
    result = check_fill_spans(wrong)
    assert not result and result.diagnosis == diagnosis


@pytest.mark.parametrize("wrong, diagnosis", [
    (lambda: corruption_statistics(200, 50, 0.3, 5).mean_input_length, "input length"),
    (lambda: 60.0, "hidden only"),
    (lambda: 72.0, "no eos"),
    (lambda: 201.0, "whole text"),
    (lambda: corruption_statistics(200, 50).mean_target_length, ""),  # default density and span
    (lambda: "73", ""),
])
def test_target_length_rejects(wrong, diagnosis):
    result = check_target_length(wrong, prediction=70)
    assert not result and result.diagnosis == diagnosis


@pytest.mark.parametrize("prediction, phrase", [
    (70, "within 10%"), (60, "hidden tokens alone"), (200, "the whole text"), (30, "one sentinel per span"),
    (None, "measured 73.0"),
])
def test_target_length_explains_the_prediction(prediction, phrase, capsys):
    assert check_target_length(measure_target_length, prediction=prediction)
    assert phrase in capsys.readouterr().out


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


@pytest.mark.parametrize("wrong, diagnosis", [
    (only_decoder, "encoder kept"),
    (only_encoder, "decoder kept"),
    (zeroed, "zeroed"),
    (lambda config: T5(config), "encoder kept"),
    (lambda config: torch.nn.Linear(2, 2), ""),
])
def test_no_position_t5_rejects(wrong, diagnosis):
    result = check_no_position_t5(wrong)
    assert not result and result.diagnosis == diagnosis
