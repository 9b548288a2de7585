"""Where a G2P model's errors fall (Chapters 1 and 2).

``error_thirds``: shares of the errors by third of the reference pronunciation, beside two
controls, the share of phoneme positions and the share expected if a phoneme's error rate
depended only on whether it is a vowel. ``length_curve``: WER and PER by word length, beside the
WER a model would get if every output token (each phoneme and ``<eos>``) were wrong with one
constant chance, the null for "longer words are harder only because they have more tokens".
``nearest_spelling``: the cheap baseline that copies the pronunciation of a training word spelled
almost alike."""
from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from attnbook.metrics import edit_distance, error_positions, length_bucket, per_by_bucket, wer_by_bucket
from attnbook.tasks.g2p import G2PResult

VOWELS = frozenset({"AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH", "UW"})


@dataclass(frozen=True)
class ErrorThirds:
    """Shares per third (first, middle, last) of the reference pronunciations of ``words`` words."""

    words: int
    errors: int
    error_rate: dict[str, float]  # "vowel", "consonant": errors per reference phoneme of that kind
    shares: dict[str, tuple[float, float, float]]  # "positions", "vowels among them", "errors",
    # "expected from vowels"


def third(j: int, n: int) -> int:
    """0, 1 or 2: the third of an ``n``-phoneme reference that position ``j`` falls in."""
    return min(int(3 * j / (n - 1)), 2) if n > 1 else 1


def error_thirds(result: G2PResult, min_letters: int = 9) -> ErrorThirds:
    """Errors of ``result`` on its words of at least ``min_letters`` letters, by third.

    An edit's position comes from ``attnbook.metrics.error_positions`` (the alignment behind the
    edit distance). "expected from vowels" spreads the errors as the vowel and consonant error
    rates (over all the positions counted) would, given where the vowels are.
    """
    slots, vowel_slots, errors = [0, 0, 0], [0, 0, 0], [0, 0, 0]
    wrong, seen, words = {True: 0, False: 0}, {True: 0, False: 0}, 0
    for word, ref, hyp in zip(result.words, result.references, result.predictions):
        if len(word) < min_letters:
            continue
        words += 1
        for j, phoneme in enumerate(ref):
            slots[third(j, len(ref))] += 1
            vowel_slots[third(j, len(ref))] += phoneme in VOWELS
            seen[phoneme in VOWELS] += 1
        for p in error_positions(hyp, ref):
            j = round(p * (len(ref) - 1))
            errors[third(j, len(ref))] += 1
            wrong[ref[j] in VOWELS] += 1
    if not words or not all(seen.values()):
        raise ValueError(f"no words of {min_letters}+ letters with both vowels and consonants to count")
    rate = {kind: wrong[kind] / seen[kind] for kind in (True, False)}
    expected = [rate[True] * v + rate[False] * (n - v) for n, v in zip(slots, vowel_slots)]

    def share(xs: list[float]) -> tuple[float, float, float]:
        total = sum(xs)
        return tuple(x / total if total else 0.0 for x in xs)  # type: ignore[return-value]

    return ErrorThirds(
        words, sum(errors), {"vowel": rate[True], "consonant": rate[False]},
        {"positions": share(slots), "vowels among them": tuple(v / n for v, n in zip(vowel_slots, slots)),
         "errors": share(errors), "expected from vowels": share(expected)})


@dataclass(frozen=True)
class LengthCurve:
    """Per bucket of word length (letters): its word count, WER, PER and the constant-rate null's WER."""

    token_error: float  # the null's chance that any one output token is wrong
    words: dict[str, int]
    wer: dict[str, float]
    per: dict[str, float]
    null_wer: dict[str, float]


def _null_wer(p: float, lengths: list[int]) -> float:
    """Mean chance that a word of ``n`` phonemes (n + 1 tokens with <eos>) has a wrong token."""
    return sum(1 - (1 - p) ** (n + 1) for n in lengths) / len(lengths)


def length_curve(result: G2PResult) -> LengthCurve:
    """WER and PER of ``result`` by word length, and the WER of the constant-rate null.

    The null makes every output token wrong with the same chance ``p``, chosen (by bisection) so
    that its overall WER equals the model's; a word of ``n`` reference phonemes is then wrong with
    chance ``1 - (1 - p) ** (n + 1)``. A curve that climbs faster than the null's means long words
    are harder per token, not only longer.
    """
    if not result.words:
        raise ValueError("no words to bucket")
    lengths = [len(ref) for ref in result.references]
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if _null_wer(mid, lengths) < result.wer else (low, mid)
    p = (low + high) / 2
    groups: dict[str, list[int]] = {}
    for word, n in zip(result.words, lengths):
        groups.setdefault(length_bucket(len(word)), []).append(n)
    wer = wer_by_bucket(result.words, result.predictions, result.references)
    per = per_by_bucket(result.words, result.predictions, result.references, bucket_of=length_bucket)
    return LengthCurve(p, {b: len(groups[b]) for b in wer}, wer, {b: per[b] for b in wer},
                       {b: _null_wer(p, groups[b]) for b in wer})


def _letter_edits(a: str, b: str) -> int:
    """Edit distance between two spellings; the shared beginning and ending are skipped first."""
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    a, b = a[i:], b[i:]
    j = 0
    while j < min(len(a), len(b)) and a[-1 - j] == b[-1 - j]:
        j += 1
    a, b = a[: len(a) - j], b[: len(b) - j]
    return edit_distance(a, b) if a and b else len(a) + len(b)


def nearest_spelling(train: Sequence[tuple[str, Sequence[str]]], words: Sequence[str],
                     window: int = 8) -> list[tuple[str, ...]]:
    """For each word, the pronunciation of the training word with the fewest letter edits from it,
    searched among the ``window`` training words on each side of it in alphabetical order and in
    the alphabetical order of reversed spellings (the words that share its beginning or its
    ending); ties go to the earlier training word. A cheap stand-in for a search of the whole
    training list, which would cost about 100,000 edit distances per word."""
    if not train:
        raise ValueError("no training words to look up")
    by_start = sorted(range(len(train)), key=lambda i: train[i][0])
    starts = [train[i][0] for i in by_start]
    by_end = sorted(range(len(train)), key=lambda i: train[i][0][::-1])
    ends = [train[i][0][::-1] for i in by_end]
    out = []
    for word in words:
        candidates: set[int] = set()
        for order, keys, key in ((by_start, starts, word), (by_end, ends, word[::-1])):
            k = bisect.bisect_left(keys, key)
            candidates.update(order[max(0, k - window):k + window])
        best, best_edits = -1, len(word) + 1000
        for i in sorted(candidates, key=lambda i: (abs(len(train[i][0]) - len(word)), i)):
            if abs(len(train[i][0]) - len(word)) > best_edits:
                break  # every later candidate needs at least this many edits
            edits = _letter_edits(word, train[i][0])
            if (edits, i) < (best_edits, best):
                best, best_edits = i, edits
        out.append(tuple(train[best][1]))
    return out


def edits_after_first_mistake(out: Sequence, ref: Sequence) -> tuple[int, int] | None:
    """The first reference position that ``out`` gets wrong, and the edits ``out`` makes after it.

    Returns ``None`` when every reference position is right (an extra token after the end is not
    counted). The first mistake is charged once: the edits are ``edit_distance(out[first:],
    ref[first:]) - 1``, so a dropped or extra phoneme at ``first`` is not charged again by shifting
    everything after it (as scoring ``out[first + 1:]`` against ``ref[first + 1:]`` would)."""
    wrong = [t >= len(out) or out[t] != r for t, r in enumerate(ref)]
    if not any(wrong):
        return None
    first = wrong.index(True)
    return first, edit_distance(out[first:], ref[first:]) - 1
