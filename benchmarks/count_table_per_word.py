"""The dev-picked letter-window count table's answer for every test word, for paired tests.

Usage: ``python benchmarks/count_table_per_word.py`` writes
``lib/attnbook/results/count_table_per_word.json``; ``--smoke --out FILE`` fits on 3,000 training
words and scores 200 test words (seconds, for the tests).

``benchmarks/count_table_width.py`` picks the table's window on the dev split (9 letters) and keeps
only its totals. This script fits the same table (``LetterWindowG2P`` with that width, the same
aligner and training words) and keeps, for each test word in ``data.test`` order, its edit distance
to the reference (0: the word is right). Chapter 1 pairs these with its own model's answers on the
same words (McNemar's exact test, a paired bootstrap). The totals it recomputes must equal
``count_table_width.json``'s; the tests check it. About half a CPU-minute, one thread.
"""
from __future__ import annotations

import torch

import common
from attnbook.data import load_g2p
from attnbook.metrics import edit_distance, phoneme_error_rate, word_error_rate
from attnbook.results import load_result
from attnbook.tasks.count_baselines import LetterAligner, LetterWindowG2P


def per_word(train, test, width: int) -> dict:
    """Fit the table of ``width`` letters on ``train``; its test WER, PER and per-word edits."""
    table = LetterWindowG2P(train, LetterAligner(train), width=width)
    hyps, refs = [tuple(table(w)) for w, _ in test], [tuple(p) for _, p in test]
    return {"test_wer": round(word_error_rate(hyps, refs), 4),
            "test_per": round(phoneme_error_rate(hyps, refs), 4),
            "test_edits": [edit_distance(list(h), list(r)) for h, r in zip(hyps, refs)]}


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    width = load_result("count_table_width.json")["chosen_width"]  # picked on dev there
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    test = list(data.test[:200]) if args.smoke else list(data.test)
    result = per_word(train, test, width)
    print({k: v for k, v in result.items() if k != "test_edits"}, flush=True)
    out = common.out_path(args, "count_table_per_word.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "The letter-window count table at the width count_table_width.py picks on "
                       "dev, fitted on the training words: its edit distance to the reference for "
                       "every test word (data.test order); written by "
                       "benchmarks/count_table_per_word.py",
        "machine": common.machine(),
        "words": {"train": len(train), "test": len(test)},
        "width": width,
        **result,
    }, indent=None)


if __name__ == "__main__":
    main()
