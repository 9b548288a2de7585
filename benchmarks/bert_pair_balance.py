"""Label balance of Chapter 6's two pair tasks, in their training and test pairs.

Usage (from the repository root): ``python benchmarks/bert_pair_balance.py`` (writes
``lib/attnbook/results/bert_pair_balance.json``; seconds, no training).

Rebuilds the exact pairs ``benchmarks/bert_pair_segments.py`` trains and tests on (the same
builders, seed and sizes: 640 training and 400 test pairs per task) and counts each label on each
side, so the chapter can print the majority share of the training pairs next to the test pairs'.
"""
from __future__ import annotations

import sys

import common
from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from bert_pair_segments import chapter_pairs, order_pairs

N_TRAIN, N_TEST = 640, 400


def main(argv: list[str] | None = None) -> int:
    common.parser(__doc__).parse_args(argv)
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    counts = [len(tokenizer.tokenize(v.text)) for v in verses]
    result = {"description": __doc__.splitlines()[0],
              "command": "python benchmarks/bert_pair_balance.py",
              "labels": {"order": {"0": "A comes first", "1": "swapped"},
                         "chapter": {"0": "same chapter", "1": "different chapters"}},
              "tasks": {}}
    for task, make_pairs in (("chapter", chapter_pairs), ("order", order_pairs)):
        _, _, labels, train, test = make_pairs(verses, counts, N_TRAIN, N_TEST)
        result["tasks"][task] = {
            side: {"pairs": len(rows), "label_0": int((labels[rows] == 0).sum()),
                   "label_1": int((labels[rows] == 1).sum())}
            for side, rows in (("train", train), ("test", test))}
    print(result["tasks"])
    common.write_result(common.RESULTS / "bert_pair_balance.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
