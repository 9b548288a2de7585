"""Chapter 1's letter-window count table on Chapter 2's joined-word inputs (section 2.10's strong floor).

Usage: ``python benchmarks/bahdanau_count_table.py`` writes ``lib/attnbook/results/bahdanau_count_table.json``;
``--smoke --out FILE`` fits on 2,000 training words and scores 20 inputs per bucket (seconds, for the tests).
``--width 9 --out lib/attnbook/results/bahdanau_count_table_w9.json`` scores the window chosen on dev
(``count_table_width.py``) instead of Chapter 1's 5 letters.

The table (``attnbook.tasks.count_baselines.LetterWindowG2P``, no network) is fitted on the single training
words and scored on ``benchmarks/bahdanau_length.py``'s own joined test inputs (joins of 1-6 test words, 150 per
length bucket, the same seeds), and on the single test words, where it also records the table's
``error_thirds`` on the test words of 9+ letters (section 2.6 sets them beside the networks'). About half a
CPU-minute.
"""
from __future__ import annotations

import common
from attnbook.data import load_g2p
from attnbook.data.joined_words import join_words
from attnbook.metrics import phoneme_error_rate, word_error_rate
from attnbook.tasks.count_baselines import LetterAligner, LetterWindowG2P
from attnbook.tasks.g2p import G2PResult
from attnbook.tasks.g2p_errors import error_thirds
from bahdanau_length import BUCKETS, TEST_PER_BUCKET


def scores(table, pairs) -> dict:
    hyps = [tuple(table(word)) for word, _ in pairs]
    refs = [tuple(phones) for _, phones in pairs]
    return {"inputs": len(pairs), "per": round(phoneme_error_rate(hyps, refs), 4),
            "wer": round(word_error_rate(hyps, refs), 4)}


def thirds(table, pairs) -> dict:
    """``error_thirds`` of the table on the words of 9+ letters: counts, and shares per third."""
    words = [word for word, _ in pairs]
    refs = [tuple(phones) for _, phones in pairs]
    t = error_thirds(G2PResult(words, refs, [tuple(table(w)) for w in words], 0.0, 0.0, {}))
    return {"words": t.words, "errors": t.errors,
            "shares": {k: [round(x, 4) for x in t.shares[k]]
                       for k in ("positions", "expected from vowels", "errors")}}


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--width", type=int, default=5, help="letters in the window (default 5)")
    args = parser.parse_args()
    data = load_g2p()
    train = list(data.train)[:2000] if args.smoke else list(data.train)
    per_bucket = 20 if args.smoke else TEST_PER_BUCKET
    table = LetterWindowG2P(train, LetterAligner(train), width=args.width)
    by_length = {}
    for k, (low, high) in enumerate(BUCKETS):  # the seeds of bahdanau_length.datasets: 200, 201, ...
        pairs = join_words(data.test, per_bucket, min_words=1, max_words=6, min_letters=low,
                           max_letters=high, seed=200 + k)
        by_length[f"{low}-{high}"] = scores(table, pairs)
    out = common.out_path(args, "bahdanau_count_table.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.10: the letter-window count table (Chapter 1's, no network) fitted "
                       "on single training words, scored on bahdanau_length.py's joined test inputs and on the "
                       "single test words; written by benchmarks/bahdanau_count_table.py",
        "machine": common.machine(), "training_words": len(train), "width": args.width,
        "single_words": scores(table, data.test[:200] if args.smoke else data.test),
        "by_length": by_length,
        "error_thirds": thirds(table, data.test[:2000] if args.smoke else data.test),
    })


if __name__ == "__main__":
    main()
