"""T5's pretraining objective, span corruption (Raffel et al., 2020, Section 3.1.4).

Pick about ``noise_density`` (15%) of a sequence's tokens in spans of mean length
``mean_span_length`` (3); the input keeps the rest, each span replaced by one sentinel; the target
lists each sentinel followed by the span it hides, then ``</s>``::

    text     Thank you for inviting me to your party last week .
    input    Thank you <X> me to your party <Y> week . </s>
    target   <X> for inviting <Y> last </s>

The spans are drawn as in T5's ``random_spans_noise_mask``: ``round(n · density)`` noise tokens
cut into ``round(noise / mean)`` spans, the other tokens into as many gaps, both cut at random
points, and interleaved gap first. So every sequence starts with a kept token and ends inside a
span (the T5 code's layout; the paper's figure draws a trailing gap and one more sentinel).

Legend: B batch, S input length, T target length.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from attnbook.data.batching import Seq2SeqBatch, pad_sequences


def random_segmentation(num_items: int, num_segments: int, generator: torch.Generator | None = None) -> list[int]:
    """Cut ``num_items`` into ``num_segments`` non-empty runs at random points; their lengths."""
    if not 1 <= num_segments <= num_items:
        raise ValueError(f"need 1 <= num_segments <= num_items, got {num_segments} segments of {num_items} items")
    cuts = (torch.randperm(num_items - 1, generator=generator)[: num_segments - 1] + 1).sort().values.tolist()
    bounds = [0, *cuts, num_items]
    return [b - a for a, b in zip(bounds, bounds[1:])]


def noise_mask(length: int, noise_density: float = 0.15, mean_span_length: float = 3.0,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """``(length,)`` bool: True on the tokens to hide, in spans, as T5's ``random_spans_noise_mask``."""
    if length < 2:
        raise ValueError(f"span corruption needs at least 2 tokens, got {length}")
    if not 0.0 < noise_density < 1.0:
        raise ValueError(f"noise_density must be in (0, 1), got {noise_density}")
    if mean_span_length < 1.0:
        raise ValueError(f"mean_span_length must be >= 1, got {mean_span_length}")
    num_noise = min(max(round(length * noise_density), 1), length - 1)
    num_spans = max(round(num_noise / mean_span_length), 1)
    num_spans = min(num_spans, num_noise, length - num_noise)
    noise = random_segmentation(num_noise, num_spans, generator)
    kept = random_segmentation(length - num_noise, num_spans, generator)
    mask = []
    for gap, span in zip(kept, noise):  # a kept gap first, then a span
        mask += [False] * gap + [True] * span
    return torch.tensor(mask)


def corrupt(ids: Sequence[int], mask: torch.Tensor, sentinel: Callable[[int], int],
            eos_id: int) -> tuple[list[int], list[int]]:
    """``(input, target)`` ids: each masked span replaced in the input by ``sentinel(i)`` (i = 0, 1,
    ... in order); the target is ``sentinel(i)`` + span i for each span, then ``eos_id``."""
    if len(ids) != len(mask):
        raise ValueError(f"ids ({len(ids)}) and mask ({len(mask)}) must have the same length")
    inputs, targets, spans = [], [], 0
    for position, (token, hidden) in enumerate(zip(ids, mask.tolist())):
        starts = hidden and (position == 0 or not bool(mask[position - 1]))
        if starts:
            inputs.append(sentinel(spans))
            targets.append(sentinel(spans))
            spans += 1
        (targets if hidden else inputs).append(token)
    return inputs + [eos_id], targets + [eos_id]


@dataclass(frozen=True)
class CorruptionStatistics:
    """Measured over many corrupted sequences of one length ``n``."""

    sequences: int
    length: int
    noise_fraction: float  # hidden tokens / all tokens
    mean_span_length: float  # hidden tokens / spans
    span_length_counts: dict[int, int]  # span length -> how many spans
    mean_input_length: float  # with the sentinels and </s>
    mean_target_length: float  # with the sentinels and </s>


def corruption_statistics(length: int, sequences: int = 2000, noise_density: float = 0.15,
                          mean_span_length: float = 3.0, seed: int = 0) -> CorruptionStatistics:
    """Draw ``sequences`` masks of ``length`` tokens and measure what span corruption does to them."""
    generator = torch.Generator().manual_seed(seed)
    hidden = spans = inputs = targets = 0
    counts: dict[int, int] = {}
    tokens = list(range(length))
    for _ in range(sequences):
        mask = noise_mask(length, noise_density, mean_span_length, generator)
        src, tgt = corrupt(tokens, mask, lambda i: -1 - i, eos_id=-100)
        for run in _span_lengths(mask):
            counts[run] = counts.get(run, 0) + 1
            spans += 1
        hidden += int(mask.sum())
        inputs += len(src)
        targets += len(tgt)
    return CorruptionStatistics(sequences, length, hidden / (sequences * length), hidden / spans,
                                dict(sorted(counts.items())), inputs / sequences, targets / sequences)


def _span_lengths(mask: torch.Tensor) -> list[int]:
    runs, current = [], 0
    for hidden in mask.tolist():
        if hidden:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs + ([current] if current else [])


def span_corruption_batches(
    stream: Sequence[int], length: int, batch_size: int, sentinel: Callable[[int], int], eos_id: int,
    pad_id: int, generator: torch.Generator, noise_density: float = 0.15, mean_span_length: float = 3.0,
) -> Iterator[Seq2SeqBatch]:
    """Endless batches of random ``length``-token windows of ``stream``, span-corrupted.

    ``tgt_in`` starts with ``pad_id`` (T5's decoder start token); ``tgt_out`` ends with ``</s>``.
    """
    if len(stream) <= length:
        raise ValueError(f"the stream ({len(stream)} tokens) must be longer than one window ({length})")
    data = torch.as_tensor(stream)
    while True:
        starts = torch.randint(0, len(stream) - length, (batch_size,), generator=generator).tolist()
        pairs = [corrupt(data[s : s + length].tolist(),
                         noise_mask(length, noise_density, mean_span_length, generator), sentinel, eos_id)
                 for s in starts]
        yield seq2seq_batch(pairs, pad_id)


def seq2seq_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], pad_id: int) -> Seq2SeqBatch:
    """Pad ``(input ids, target ids)`` pairs (targets ending in ``</s>``) into a batch whose
    decoder input is the target shifted right behind ``pad_id``, as T5's ``_shift_right``."""
    src, src_lengths = pad_sequences([s for s, _ in pairs], pad_id)  # (B, S)
    tgt_out, tgt_lengths = pad_sequences([t for _, t in pairs], pad_id)  # (B, T)
    tgt_in, _ = pad_sequences([[pad_id, *t[:-1]] for _, t in pairs], pad_id)  # (B, T)
    return Seq2SeqBatch(src, src_lengths, tgt_in, tgt_out, tgt_lengths)
