"""Nearest training word: copy the pronunciation of the training spelling closest in edit distance.

Usage: ``python benchmarks/nearest_word_g2p.py`` writes ``lib/attnbook/results/nearest_word_g2p.json``
(Chapter 5 prints it beside the count table); ``--smoke --out FILE`` uses 3,000 training words and
200 test words (seconds, for the tests).

A baseline with no network, no table and nothing to tune: for each test word, the training
spellings at the smallest Levenshtein distance over letters (insert, delete, substitute: 1 each)
are found exactly, and the pronunciation of the first of them in training order is returned
unchanged (the tie-break was fixed before any run; no dev choice). Test WER and PER, by word length
as in ``count_table_width.py``, the distances found, and each test word's right/wrong in
``data.test`` order (for paired tests). Pure Python and NumPy, one thread, a few CPU-minutes.
"""
from __future__ import annotations

import numpy as np
import torch

import common
from attnbook.data import load_g2p
from attnbook.metrics import edit_distance, length_bucket, phoneme_error_rate, wer_by_bucket, word_error_rate

CHUNK = 128  # query words per block of the distance computation


def _encode(words: list[str]) -> np.ndarray:
    """Words of one length as an (n_words, length) array of character codes."""
    return np.array([[ord(c) for c in w] for w in words], dtype=np.int32).reshape(len(words), -1)


def _distances(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Levenshtein distances (a, b) between a words of length m and b words of length n."""
    a, m = queries.shape
    b, n = keys.shape
    prev = [np.full((a, b), j, dtype=np.int16) for j in range(n + 1)]
    for i in range(1, m + 1):
        cur = [np.full((a, b), i, dtype=np.int16)]
        q = queries[:, i - 1][:, None]
        for j in range(1, n + 1):
            sub = prev[j - 1] + (q != keys[:, j - 1][None, :])
            cur.append(np.minimum(np.minimum(prev[j], cur[j - 1]) + 1, sub))
        prev = cur
    return prev[n]


def _variants(word: str) -> set[str]:
    """The word and every string one deletion away from it."""
    return {word} | {word[:i] + word[i + 1:] for i in range(len(word))}


def nearest(words: list[str], train: list[str]) -> dict[str, list[int]]:
    """For each word: its smallest edit distance to a training word, and the first training word
    (in training order) at that distance.

    Stage 1, words with a training word at most one edit away: two strings one edit apart share the
    string itself or a one-deletion variant, so an index of every training word's variants finds
    all of them (candidates are checked exactly). Stage 2, the others (distance 2 or more): an
    exhaustive NumPy scan, training words grouped by length in order of length difference."""
    index_of: dict[str, list[int]] = {}
    for j, t in enumerate(train):
        for v in _variants(t):
            index_of.setdefault(v, []).append(j)
    out = {"distance": [0] * len(words), "first": [0] * len(words)}
    rest = []
    for i, w in enumerate(words):
        candidates = sorted({j for v in _variants(w) for j in index_of.get(v, ())})
        close = [(edit_distance(list(w), list(train[j])), j) for j in candidates]
        close = [(d, j) for d, j in close if d <= 1]
        if close:
            out["distance"][i], out["first"][i] = min(close)
        else:
            rest.append(i)
    del index_of
    by_length: dict[int, list[int]] = {}
    for j, t in enumerate(train):
        by_length.setdefault(len(t), []).append(j)
    keys = {n: (np.array(ix), _encode([train[j] for j in ix])) for n, ix in by_length.items()}
    groups: dict[int, list[int]] = {}
    for i in rest:
        groups.setdefault(len(words[i]), []).append(i)
    for m, members in sorted(groups.items()):
        for start in range(0, len(members), CHUNK):
            rows = members[start:start + CHUNK]
            q = _encode([words[i] for i in rows])
            best = np.full(len(rows), 10_000)
            first = np.full(len(rows), len(train))
            diff = 0
            while diff <= best.max():
                for n in {m - diff, m + diff}:
                    live = np.nonzero(best >= diff)[0]  # only these can still tie or improve
                    if n not in keys or len(live) == 0:
                        continue
                    index, k = keys[n]
                    d = _distances(q[live], k)  # (live, training words of length n)
                    low = d.min(1)
                    at_low = np.where(d == low[:, None], index[None, :], len(train)).min(1)
                    better, tied = low < best[live], low == best[live]
                    first[live] = np.where(better, at_low,
                                           np.where(tied, np.minimum(first[live], at_low), first[live]))
                    best[live] = np.minimum(best[live], low)
                diff += 1
                if diff > max(keys) + m:
                    break
            for r, i in enumerate(rows):
                out["distance"][i], out["first"][i] = int(best[r]), int(first[r])
    return out


def score(pairs, train_pairs, chosen: list[int]) -> dict:
    words = [w for w, _ in pairs]
    hyps = [tuple(train_pairs[j][1]) for j in chosen]
    refs = [tuple(p) for _, p in pairs]
    return {"wer": round(word_error_rate(hyps, refs), 4), "per": round(phoneme_error_rate(hyps, refs), 4),
            "wer_by_length": {k: round(v, 4) for k, v in wer_by_bucket(words, hyps, refs).items()},
            "right": [int(h == r) for h, r in zip(hyps, refs)]}


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    test = list(data.test[:200]) if args.smoke else list(data.test)
    found = nearest([w for w, _ in test], [w for w, _ in train])
    result = score(test, train, found["first"])
    sizes: dict[str, int] = {}
    for w, _ in test:
        sizes[length_bucket(len(w))] = sizes.get(length_bucket(len(w)), 0) + 1
    distances = found["distance"]
    print({k: v for k, v in result.items() if k != "right"}, flush=True)
    out = common.out_path(args, "nearest_word_g2p.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Nearest training word (no network): the pronunciation of the training spelling at "
                       "the smallest letter edit distance (ties: the first in training order), copied "
                       "unchanged; written by benchmarks/nearest_word_g2p.py",
        "machine": common.machine(),
        "how": "exact Levenshtein search over all training words; nothing tuned, so no dev split",
        "words": {"train": len(train), "test": len(test)},
        "test_wer": result["wer"], "test_per": result["per"],
        "test_wer_by_length": result["wer_by_length"], "test_words_by_length": sizes,
        "test_distance_counts": {str(d): distances.count(d) for d in sorted(set(distances))},
        "test_right": result["right"],
    })


if __name__ == "__main__":
    main()
