"""Chapter 10: the count table's window width, chosen on the dev split as Chapter 5 chooses it.

Usage (from the repository root): ``python benchmarks/t5_count_width.py`` writes
``lib/attnbook/results/t5_count_width.json`` (the chapter's Section 10.6 prints the chosen rows
beside the networks); ``--smoke`` runs in seconds and writes nothing unless ``--out`` is given.

For each number of labelled words of the T5 study (500 and 2,000, the subsets that
``benchmarks/t5_baselines.py`` draws for seeds 0, 1, 2; and all the training words), the
letter-window count table of ``attnbook.tasks.count_baselines`` (hard-EM alignment fitted on
those words alone) is built at each width of 5, 7, 9, 11 and 13 letters and scored on every 5th
dev word (the split ``benchmarks/t5_scratch_tuning.py`` tunes on) and on the study's test words
(every 5th test word). Per size and seed the width with the lowest dev WER is chosen (the
narrower on a tie); the test set chooses nothing.
"""
from __future__ import annotations

import time

import torch

import common
from attnbook.data.g2p import load_g2p
from attnbook.tasks.count_baselines import G2P_SHAPES_BY_WIDTH, LetterAligner, LetterWindowG2P
from t5_baselines import scores, subset

WIDTHS = tuple(sorted(G2P_SHAPES_BY_WIDTH))


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 0], help="0: all the words")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    data = load_g2p()
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    dev, test = data.dev[::5], data.test[::5]
    rows, chosen = [], []
    for size in args.sizes:
        for seed in (args.seeds if size else [None]):
            part = subset(train, size, seed or 0)
            aligner = LetterAligner(part)
            here = []
            for width in WIDTHS:
                table = LetterWindowG2P(part, aligner, width)
                dev_score = scores(table, [w for w, _ in dev], [p for _, p in dev])
                test_score = scores(table, [w for w, _ in test], [p for _, p in test])
                here.append({"size": size or len(data.train), "seed": seed, "width": width,
                             "dev_wer": dev_score["wer"], "wer": test_score["wer"],
                             "per": test_score["per"]})
                print(here[-1], flush=True)
            rows += here
            chosen.append(min(here, key=lambda r: (r["dev_wer"], r["width"])))
            print("chosen", chosen[-1], flush=True)
    out = common.out_path(args, "t5_count_width.json")
    if out is not None:
        common.write_result(out, {
            "description": __doc__.splitlines()[0], "machine": common.machine(),
            "wall_seconds": round(time.perf_counter() - start, 1), "dev_words": len(dev),
            "test_words": len(test), "widths": list(WIDTHS), "rows": rows, "chosen": chosen})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
