"""Does the letter-window count table keep improving past 13 letters? Windows of 15 and 17 letters.

Usage: ``python benchmarks/count_table_widest.py`` writes
``lib/attnbook/results/count_table_widest.json`` (read by Chapter 1, which extends the dev grid of
``count_table_wider.json``, 5 to 13 letters, with these two widths). ``--smoke --out FILE`` fits on
3,000 training words and scores 200 dev and 200 test words (seconds, for the tests).

The same table and aligner as ``benchmarks/count_table_width.py``; the library's back-off shapes stop
at 13 letters, so this script adds a 15-letter window (7 letters either side) before the 13-letter
one, and a 17-letter window (8 either side) before that, for this run only. About one CPU-minute,
one thread.
"""
from __future__ import annotations

import torch

import common
from attnbook.data import load_g2p
from attnbook.tasks import count_baselines
from count_table_width import evaluate

WIDTHS = (15, 17)


def add_wider_shapes() -> None:
    """Windows of 15 and 17 letters, backing off to the library's 13-letter table."""
    shapes = count_baselines.G2P_SHAPES_BY_WIDTH
    shapes.setdefault(15, ((7, 7), *shapes[13]))
    shapes.setdefault(17, ((8, 8), *shapes[15]))


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    add_wider_shapes()
    data = load_g2p()
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    dev, test = (data.dev[:200], data.test[:200]) if args.smoke else (data.dev, data.test)
    result = evaluate(train, list(dev), list(test), widths=WIDTHS)
    out = common.out_path(args, "count_table_widest.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "The letter-window count table (no network) at windows of 15 and 17 letters, "
                       "fitted on the training words (the 13-letter back-off of "
                       "count_table_width.py with wider windows tried first); written by "
                       "benchmarks/count_table_widest.py",
        "machine": common.machine(),
        "how": "dev and test scored for each width; compare dev WER with count_table_wider.json",
        "words": {"train": len(train), "dev": len(dev), "test": len(test)},
        **result,
    })


if __name__ == "__main__":
    main()
