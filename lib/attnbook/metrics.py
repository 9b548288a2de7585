"""Sequence metrics: edit distance, word error rate (WER) and phoneme error rate (PER)."""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence


def edit_distance(hyp: Sequence[Hashable], ref: Sequence[Hashable]) -> int:
    """Levenshtein distance: fewest insertions, deletions and substitutions turning hyp into ref."""
    previous = list(range(len(ref) + 1))
    for i, h in enumerate(hyp, start=1):
        current = [i]
        for j, r in enumerate(ref, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (h != r)))
        previous = current
    return previous[-1]


def error_positions(hyp: Sequence[Hashable], ref: Sequence[Hashable]) -> list[float]:
    """Where a minimal alignment of ``hyp`` to ``ref`` puts its edits, as fractions of the reference:
    0.0 at its first symbol, 1.0 at its last (0.5 for a one-symbol reference). An inserted symbol
    counts at the reference symbol it comes before (the last one at the end). Ties between equally
    short alignments prefer a match or substitution, then a deletion."""
    if len(ref) == 0:
        raise ValueError("the reference is empty: there is no position to report")
    rows, cols = len(hyp) + 1, len(ref) + 1
    cost = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        for j in range(cols):
            if i == 0 or j == 0:
                cost[i][j] = i + j
            else:
                cost[i][j] = min(cost[i - 1][j - 1] + (hyp[i - 1] != ref[j - 1]), cost[i - 1][j] + 1, cost[i][j - 1] + 1)
    where, i, j = [], len(hyp), len(ref)
    while i > 0 or j > 0:
        if i > 0 and j > 0 and cost[i][j] == cost[i - 1][j - 1] + (hyp[i - 1] != ref[j - 1]):
            if hyp[i - 1] != ref[j - 1]:
                where.append(j - 1)  # substitution
            i, j = i - 1, j - 1
        elif j > 0 and cost[i][j] == cost[i][j - 1] + 1:
            where.append(j - 1)  # a reference symbol the hypothesis dropped
            j -= 1
        else:
            where.append(min(j, len(ref) - 1))  # an extra hypothesis symbol
            i -= 1
    span = len(ref) - 1
    return sorted(j / span if span else 0.5 for j in where)


def _check_pairs(hyps: Sequence, refs: Sequence) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"need one hypothesis per reference: got {len(hyps)} hypotheses, {len(refs)} references")
    if len(refs) == 0:
        raise ValueError("cannot score an empty list of references")


def word_error_rate(hyps: Sequence[Sequence], refs: Sequence[Sequence]) -> float:
    """WER for G2P: the fraction of words whose predicted pronunciation is not exactly right."""
    _check_pairs(hyps, refs)
    return sum(list(h) != list(r) for h, r in zip(hyps, refs)) / len(refs)


def phoneme_error_rate(hyps: Sequence[Sequence], refs: Sequence[Sequence]) -> float:
    """PER: total edit distance divided by the total number of reference phonemes."""
    _check_pairs(hyps, refs)
    total = sum(len(r) for r in refs)
    if total == 0:
        raise ValueError("references contain no phonemes")
    return sum(edit_distance(h, r) for h, r in zip(hyps, refs)) / total


def length_bucket(n: int, edges: Sequence[int] = (4, 6, 8, 10, 12)) -> str:
    """Name the bucket of a length: with the default edges, '1-4', '5-6', ..., '13+'."""
    low = 1
    for edge in edges:
        if n <= edge:
            return f"{low}-{edge}"
        low = edge + 1
    return f"{low}+"


def decade_bucket(n: int, width: int = 10) -> str:
    """Name the ``width``-wide bucket of a length: '20-29', '30-39', ... with the default width."""
    if n < 1:
        raise ValueError(f"length must be >= 1, got {n}")
    low = (n // width) * width
    return f"{low}-{low + width - 1}"


def _group_by_bucket(
    words: Sequence[str], hyps: Sequence[Sequence], refs: Sequence[Sequence], bucket_of: Callable[[int], str]
) -> dict[str, tuple[list, list]]:
    """Bucket name -> (hypotheses, references) of its words, buckets in order of increasing length."""
    _check_pairs(hyps, refs)
    if len(words) != len(refs):
        raise ValueError(f"need one word per reference: got {len(words)} words, {len(refs)} references")
    groups: dict[str, tuple[list, list]] = {}
    shortest: dict[str, int] = {}
    for w, h, r in zip(words, hyps, refs):
        key = bucket_of(len(w))
        groups.setdefault(key, ([], []))
        groups[key][0].append(h)
        groups[key][1].append(r)
        shortest[key] = min(shortest.get(key, len(w)), len(w))
    return {k: groups[k] for k in sorted(groups, key=shortest.__getitem__)}


def wer_by_bucket(
    words: Sequence[str],
    hyps: Sequence[Sequence],
    refs: Sequence[Sequence],
    bucket_of: Callable[[int], str] = length_bucket,
) -> dict[str, float]:
    """WER per bucket of input length, in order of increasing length."""
    return {k: word_error_rate(h, r) for k, (h, r) in _group_by_bucket(words, hyps, refs, bucket_of).items()}


def per_by_bucket(
    words: Sequence[str],
    hyps: Sequence[Sequence],
    refs: Sequence[Sequence],
    bucket_of: Callable[[int], str] = decade_bucket,
) -> dict[str, float]:
    """PER per bucket of input length (each bucket's edit distance over its reference phonemes)."""
    return {k: phoneme_error_rate(h, r) for k, (h, r) in _group_by_bucket(words, hyps, refs, bucket_of).items()}
