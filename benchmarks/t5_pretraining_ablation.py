"""Chapter 10's follow-up: does the pretrained T5's verdict depend on the learning rate or the span length?

Usage (from the repository root): ``python benchmarks/t5_pretraining_ablation.py --device cuda``
writes ``lib/attnbook/results/t5_pretraining_ablation.json``; ``--smoke`` runs in seconds.

``benchmarks/t5_pretraining.py`` fine-tuned every arm with one learning rate (3e-3, the rate
tuned for Chapter 5's Transformer) after one pretraining with mean span 3. Here, on all the
training words, 600 steps, three seeds, with the same model and recipe on the same kind of CPU
(one thread), so the study's own runs at 3e-3 are the reference:

1. ``--part lr``: the T5 pretrained by the study (its weights, ``--checkpoint``), fine-tuned at
   1e-3 and 1e-2;
2. ``--part span``: a second pretraining with ByT5's mean span of 20 bytes (the same 15% of the
   bytes hidden; in a 64-byte window that is one span of 10 bytes), fine-tuned at 3e-3.

3. ``--part samples``: what a fine-tuned model writes: the study's pretrained T5 (600 steps) and
   the T5 from scratch (1,200 steps), seed 0, on the first test words.

The parts run as separate processes; ``--resume LOG LOG`` with ``--part none`` then writes the
results file from their logs.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import common
from t5_pretraining import add_study_arguments, finetune_t5, pretrain, study_setup


def key(row: dict) -> tuple:
    return (row.get("kind"), row.get("arm"), row.get("mean_span"), row.get("lr"), row.get("seed"))


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("lr", "span", "samples", "both", "none"), default="both")
    add_study_arguments(p, "the study's pretrained weights (mean span 3)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    settings, train, test = study_setup(args)
    rows = common.log_rows(args.resume)
    done = {key(r) for r in rows}

    def record(row: dict) -> None:
        print(json.dumps(row), flush=True)
        rows.append(row)

    def finetune(weights, lr: float, mean_span: float) -> None:
        for seed in args.seeds:
            if (None, "pretrained", mean_span, lr, seed) not in done:
                run = finetune_t5("pretrained", train, test, seed,
                                  argparse.Namespace(**{**vars(settings), "lr": lr}), weights)
                record({**run, "mean_span": mean_span, "lr": lr, "seed": seed})

    if args.part in ("lr", "both"):
        weights = pretrain(settings)[1] if args.smoke else torch.load(args.checkpoint)
        for lr in args.lrs:
            finetune(weights, lr, 3.0)
    if args.part in ("span", "both"):
        long_spans = argparse.Namespace(**{**vars(settings), "mean_span": 20.0})
        row, weights = pretrain(long_spans)
        record({k: v for k, v in row.items() if not k.endswith("_bias")} | {"mean_span": 20.0})
        finetune(weights, 3e-3, 20.0)
    if args.part in ("samples", "both"):
        weights = pretrain(settings)[1] if args.smoke else torch.load(args.checkpoint)
        for arm, steps in (("pretrained", settings.steps), ("scratch", 2 * settings.steps)):
            if ("samples", arm, None, settings.lr, 0) not in done:
                run = finetune_t5(arm, train, test, 0, settings, weights, steps=steps, samples=12)
                record({**run, "kind": "samples", "lr": settings.lr, "seed": 0})
    out = common.out_path(args, "t5_pretraining_ablation.json")
    if out is not None and args.part in ("both", "none"):
        common.write_result(out, {"description": __doc__.splitlines()[0], "machine": common.machine(),
                                  "wall_seconds": round(time.perf_counter() - start, 1),
                                  "test_words": len(test), "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
