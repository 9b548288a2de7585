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

``--width 13`` fits the table at the width Chapter 5's wider grid picks on dev
(``count_table_width.py --widths 5 7 9 11 13``, ``count_table_wider.json``) and writes
``count_table_per_word_13.json`` (never the 9-letter file); its totals must equal
``count_table_wider.json``'s.
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
    parser.add_argument("--width", type=int, default=None,
                        help="window width (default: the width count_table_width.json picks; "
                             "another width writes count_table_per_word_WIDTH.json)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    picked = load_result("count_table_width.json")["chosen_width"]  # picked on dev there
    width = picked if args.width is None else args.width
    name = ("count_table_per_word.json" if width == picked
            else f"count_table_per_word_{width}.json")
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    test = list(data.test[:200]) if args.smoke else list(data.test)
    result = per_word(train, test, width)
    print({k: v for k, v in result.items() if k != "test_edits"}, flush=True)
    out = common.out_path(args, name)
    if out is None:
        return
    common.write_result(out, {
        "description": f"The letter-window count table of {width} letters, fitted on the "
                       "training words: its edit distance to the reference for every test word "
                       "(data.test order); written by benchmarks/count_table_per_word.py"
                       + ("" if width == picked else f" --width {width}"),
        "machine": common.machine(),
        "words": {"train": len(train), "test": len(test)},
        "width": width,
        **result,
    }, indent=None)


if __name__ == "__main__":
    main()
