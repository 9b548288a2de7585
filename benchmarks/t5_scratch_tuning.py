"""Chapter 10: tune the scratch T5's fine-tuning rate on a dev split (the low-label study's scratch arm).

The low-label study (``t5_low_label.py``) fine-tunes both arms with a constant Adam rate of 3e-3;
the pretraining's peak was swept, the scratch arm's rate was not. This script gives the scratch arm
a small sweep, at the study's 600 steps and batch 64, on the study's subsets (2,000 words and all
the words), chosen by **word error rate on the dev split** (every 5th dev word), never by test:

- ``3e-3``: the study's recipe (constant 3e-3), rerun to get its dev score;
- ``1e-2``: constant 1e-2;
- ``3e-3-wu``: 60 steps of linear warm-up to 3e-3, then linear decay to about 0 at step 600;
- ``1e-2-wu``: the same schedule to a peak of 1e-2.

Budget (Chapter 10's helper: about 8 CPU-minutes of training), so every recipe ran on seed 0
only, and the choice is per size: the lowest seed-0 dev WER. What ran: the four recipes with 2,000
words; the two 1e-2 recipes failed there (dev WER 100% and 98.5%) and were stopped before their
all-words runs; the two 3e-3 recipes with all the words. ``3e-3-wu`` with all the words on seeds
1 and 2 was started before the seed-0 choice was known (to save wall time) and stopped unfinished
once the study's recipe won on dev at both sizes: the study's three seeds are then the chosen
recipe's rows, and nothing more was needed. Every run prints one JSON line (dev and test
WER/PER), so ``--resume`` skips finished runs. Reproduce (from the repository root, one thread per
process; the processes may run side by side):

    python benchmarks/t5_scratch_tuning.py --part run --recipes 3e-3 > logs/t5_st_3e-3.log
    python benchmarks/t5_scratch_tuning.py --part run --recipes 3e-3-wu > logs/t5_st_3e-3-wu.log
    python benchmarks/t5_scratch_tuning.py --part run --recipes 1e-2 --sizes 2000 > logs/t5_st_1e-2.log
    python benchmarks/t5_scratch_tuning.py --part run --recipes 1e-2-wu --sizes 2000 > logs/t5_st_1e-2-wu.log
    python benchmarks/t5_scratch_tuning.py --part collect --resume logs/t5_st_*.log

Writes ``lib/attnbook/results/t5_scratch_tuning.json``; the logs, concatenated, are kept beside it as
``t5_scratch_tuning.log``. The seed-0 rows of the study's recipe (``3e-3``) must equal the study's
(``t5_pretraining.json``) on the test words.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import common
from attnbook.data.g2p import load_g2p
from t5_pretraining import finetune_t5, train_subset

RECIPES = {"3e-3": (3e-3, 0), "1e-2": (1e-2, 0), "3e-3-wu": (3e-3, 60), "1e-2-wu": (1e-2, 60)}


def key(row: dict) -> tuple:
    return (row.get("recipe"), row.get("size"), row.get("seed"))


def run_one(recipe: str, size: int, seed: int, args, data, dev, test) -> dict:
    lr, warmup = RECIPES[recipe]
    train = train_subset(data.train[:500] if args.smoke else data.train, size, seed)
    settings = argparse.Namespace(smoke=args.smoke, steps=args.steps, batch_size=64, lr=lr, device="cpu")
    captured = {}

    # finetune_t5 scores on the test words it is given; the dev score needs the model itself
    import t5_pretraining

    original = t5_pretraining.evaluate_text_g2p

    def evaluate_both(model, pairs, vocab, direction="g2p", prefix=False):
        captured["dev"] = original(model, dev, vocab, direction, prefix)
        return original(model, pairs, vocab, direction, prefix)

    t5_pretraining.evaluate_text_g2p = evaluate_both
    try:
        row = finetune_t5("scratch", train, test, seed, settings, None, warmup=warmup)
    finally:
        t5_pretraining.evaluate_text_g2p = original
    return {"recipe": recipe, "lr": lr, "warmup": warmup, **row, "size": len(train), "seed": seed,
            "dev_wer": round(captured["dev"]["wer"], 4), "dev_per": round(captured["dev"]["per"], 4)}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("run", "collect"), required=True)
    p.add_argument("--recipes", nargs="+", choices=tuple(RECIPES), default=list(RECIPES))
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 0], help="training words (0: all)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=600)
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.sizes = 100, [100]
    torch.set_num_threads(1)
    start = time.perf_counter()
    done = {key(r): r for r in common.log_rows(args.resume)}
    data = load_g2p()
    test = data.test[:: 50 if args.smoke else 5]
    dev = data.dev[:: 50 if args.smoke else 5]
    if args.part == "run":
        for size in args.sizes:
            for seed in args.seeds:
                for recipe in args.recipes:
                    n = len(train_subset(data.train, size, seed))
                    if (recipe, n, seed) in done:
                        continue
                    print(json.dumps(run_one(recipe, size, seed, args, data, dev, test)), flush=True)
    else:
        runs = sorted(done.values(), key=lambda r: (r["size"], r["recipe"], r["seed"]))
        chosen = {}
        for size in sorted({r["size"] for r in runs}):
            seed0 = {r["recipe"]: r["dev_wer"] for r in runs if r["size"] == size and r["seed"] == 0}
            chosen[str(size)] = min(seed0, key=seed0.get)
        summary = {}
        for size in sorted({r["size"] for r in runs}):
            for recipe in RECIPES:
                rows = [r for r in runs if r["size"] == size and r["recipe"] == recipe]
                if rows:
                    summary[f"{size} {recipe}"] = {
                        "seeds": [r["seed"] for r in rows],
                        "dev_wer_mean": round(statistics.mean(r["dev_wer"] for r in rows), 4),
                        "test_wer_mean": round(statistics.mean(r["g2p_wer"] for r in rows), 4)}
        out = common.out_path(args, "t5_scratch_tuning.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0],
                "command": "see the docstring: the --part run processes, then --part collect",
                "machine": common.machine(), "threads": 1,
                "rule": "per size, the recipe with the lowest seed-0 dev WER (every 5th dev word); never test",
                "dev_words": len(dev), "test_words": len(test), "steps": args.steps,
                "recipes": {k: {"lr": v[0], "warmup": v[1]} for k, v in RECIPES.items()},
                "chosen": chosen, "summary": summary, "runs": runs})
    print(f"part {args.part}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
