"""Where in a word a G2P model's errors fall (Chapters 1 and 2): shares of the errors by third of
the reference pronunciation, beside two controls, the share of phoneme positions and the share
expected if a phoneme's error rate depended only on whether it is a vowel."""
from __future__ import annotations

from dataclasses import dataclass

from attnbook.metrics import error_positions
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
