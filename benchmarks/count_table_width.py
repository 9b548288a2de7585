"""The letter-window count table at windows of 5, 7 and 9 letters, the width chosen on dev WER.

Usage: ``python benchmarks/count_table_width.py`` writes ``lib/attnbook/results/count_table_width.json``
(the file Chapters 1, 2 and 5 read); ``--widths 5 7 9 11 13`` tries other widths (Chapter 5's
``count_table_wider.json``: ``--widths 5 7 9 11 13 --out lib/attnbook/results/count_table_wider.json``);
``--smoke --out FILE`` fits on 3,000 training words and scores 200 dev and 200 test words (seconds,
for the tests).

The table (``attnbook.tasks.count_baselines.LetterWindowG2P(width=...)``, no neural network: letters
aligned to phonemes by hard EM, then each letter's phonemes looked up by the widest window seen in
training, backing off to narrower ones) is fitted on the book's training words, once per width, with
the same aligner. The width is chosen by the lowest dev WER (ties: the narrower window); the test
split is scored for every width but plays no part in the choice. For each width the file holds dev
and test WER and PER, and the test WER and PER per word-length bucket (the buckets of Chapter 5's
comparison, with their sizes). About one CPU-minute, one thread.
"""
from __future__ import annotations

import torch

import common
from attnbook.data import load_g2p
from attnbook.metrics import length_bucket, phoneme_error_rate, word_error_rate
from attnbook.tasks.count_baselines import LetterAligner, LetterWindowG2P

WIDTHS = (5, 7, 9)


def scores(hyps, refs) -> dict:
    return {"wer": round(word_error_rate(hyps, refs), 4), "per": round(phoneme_error_rate(hyps, refs), 4)}


def by_length(words, hyps, refs) -> dict[str, dict]:
    """Test WER and PER per word-length bucket, with the bucket's size, shortest bucket first."""
    groups: dict[str, list[int]] = {}
    for i, word in enumerate(words):
        groups.setdefault(length_bucket(len(word)), []).append(i)
    order = sorted(groups, key=lambda k: min(len(words[i]) for i in groups[k]))
    return {k: {"words": len(groups[k]), **scores([hyps[i] for i in groups[k]], [refs[i] for i in groups[k]])}
            for k in order}


def evaluate(train, dev, test, widths=WIDTHS) -> dict:
    aligner = LetterAligner(train)
    rows = {}
    for width in widths:
        table = LetterWindowG2P(train, aligner, width=width)
        row = {}
        for split, pairs in (("dev", dev), ("test", test)):
            hyps, refs = [tuple(table(w)) for w, _ in pairs], [tuple(p) for _, p in pairs]
            s = scores(hyps, refs)
            row[f"{split}_wer"], row[f"{split}_per"] = s["wer"], s["per"]
            if split == "test":
                row["test_by_length"] = by_length([w for w, _ in pairs], hyps, refs)
        rows[str(width)] = row
        print(width, {k: v for k, v in row.items() if k != "test_by_length"}, flush=True)
    chosen = min(widths, key=lambda w: (rows[str(w)]["dev_wer"], w))
    return {"widths": rows, "chosen_width": chosen, "chosen": rows[str(chosen)]}


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS),
                        help=f"window widths to try, in letters (default {' '.join(map(str, WIDTHS))})")
    args = parser.parse_args()
    widths = tuple(args.widths)
    torch.set_num_threads(1)
    data = load_g2p()
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    dev, test = (data.dev[:200], data.test[:200]) if args.smoke else (data.dev, data.test)
    result = evaluate(train, list(dev), list(test), widths=widths)
    out = common.out_path(args, "count_table_width.json")
    if out is None:
        return
    common.write_result(out, {
        "description": f"The letter-window count table (no network) at windows of "
                       f"{', '.join(map(str, widths[:-1]))} and {widths[-1]} letters, fitted on "
                       "the training words; the width chosen by the lowest dev WER; written by "
                       "benchmarks/count_table_width.py",
        "machine": common.machine(),
        "how": "width chosen on dev WER only (ties: the narrower); test scored for every width",
        "words": {"train": len(train), "dev": len(dev), "test": len(test)},
        **result,
    })


if __name__ == "__main__":
    main()
