"""Sequence metrics: edit distance, word error rate (WER) and phoneme error rate (PER); and two
small paired statistics the chapters use to compare systems on the same items (an exact sign test
and a percentile bootstrap interval)."""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import torch


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


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test: ``wins`` items favour one side, ``losses`` the other (ties left
    out). Under "no difference" each is a fair coin flip; returns the binomial p-value, capped at 1.
    On paired right/wrong outcomes (the items exactly one system gets right) it is McNemar's exact
    test."""
    if isinstance(wins, bool) or isinstance(losses, bool) or int(wins) != wins or int(losses) != losses:
        raise ValueError(f"wins and losses must be whole counts, got {wins!r} and {losses!r}")
    if wins < 0 or losses < 0:
        raise ValueError(f"wins and losses must be >= 0, got {wins} and {losses}")
    n, fewer = int(wins + losses), int(min(wins, losses))
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(fewer + 1)) / 2**n)


def bootstrap_interval(
    rows: torch.Tensor,
    statistic: Callable[[torch.Tensor], torch.Tensor],
    draws: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the items (rows) of ``rows`` ``(N, ...)``.

    The ``N`` rows are resampled with replacement ``draws`` times (a generator seeded with
    ``seed``, so the interval is reproducible); ``statistic`` maps the resampled ``(draws, N, ...)``
    tensor to ``(draws,)`` (e.g. ``lambda d: d.mean(1)``). Returns the middle ``level`` of the
    ``draws`` values as ``(low, high)``. Paired comparisons resample items, each row holding both
    systems' numbers for one item; the systems themselves are treated as fixed.
    """
    if rows.ndim < 1 or rows.shape[0] < 1:
        raise ValueError(f"rows must have shape (N, ...) with N >= 1, got {tuple(rows.shape)}")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1, got {level}")
    n = rows.shape[0]
    pick = torch.randint(n, (draws, n), generator=torch.Generator().manual_seed(seed))
    values = statistic(rows[pick])
    if values.shape != (draws,):
        raise ValueError(f"statistic must return shape ({draws},), got {tuple(values.shape)}")
    tail = (1 - level) / 2
    low, high = values.float().quantile(torch.tensor([tail, 1 - tail])).tolist()
    return low, high
