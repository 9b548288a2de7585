"""Chapter 8, Section 8.7: the fine-tune of ``gpt_finetune.py`` started from the 2400-step GPT.

Usage: ``python benchmarks/gpt_finetune_2400.py`` (writes
``lib/attnbook/results/gpt_finetune_2400.json``, which the chapter reads), or ``--smoke``.

Everything as in ``benchmarks/gpt_finetune.py`` (same BPE, training, validation and test
verses, seeds 0-2, mean-state linear head, AdamW at 1e-3 with weight decay 0.01, batches of 32,
gradients clipped to 1, 300 steps, scored every 50), except the start: the stored 2400-step
Bible GPT (``gpt_bible_2400.safetensors``, checked by its SHA-256) instead of the 600-step
one. Only the rate 1e-3 is run; the 600-step and from-scratch curves at that rate are in
``gpt_finetune.json``, so the three starts are compared at fixed steps.
"""
from __future__ import annotations

import copy
import json
from importlib import resources

import torch
from torch import nn

import common
from attnbook.checkpoints import read_safetensors
from attnbook.data.bpe import train_bpe
from attnbook.models.gpt import GPT, GPTConfig
from gpt_finetune import (EVERY, VOCAB, bible_split, fine_tune, labelled, seed_verses,
                          test_verses)


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    torch.set_num_threads(1)
    lr = 1e-3
    verses, held_out, train_text = bible_split()
    bpe = train_bpe(train_text, VOCAB)
    steps = 2 * EVERY if args.smoke else args.steps
    run = json.loads(resources.files("attnbook.results").joinpath("gpt_bible_2400.json")
                     .read_text())
    config = GPTConfig(**run["config"])
    pretrained = GPT(config)
    pretrained.load_state_dict(read_safetensors(
        resources.files("attnbook.results").joinpath(run["weights"]), run["sha256"]))
    test_rows = test_verses(verses, held_out)
    test = labelled(bpe, test_rows)
    runs = []
    for seed in args.seeds:
        train_rows, valid_rows = seed_verses(verses, held_out, seed, args.smoke)
        sets = {"train": labelled(bpe, train_rows), "valid": labelled(bpe, valid_rows)}
        gpt = copy.deepcopy(pretrained)
        torch.manual_seed(seed)
        head = nn.Linear(config.d_model, 2)
        curve = fine_tune(gpt, head, sets["train"], {"valid": sets["valid"], "test": test},
                          lr, steps, seed)
        runs.append({"side": "pre-trained 2400", "seed": seed, "lr": lr, "curve": curve})
        print(json.dumps({**runs[-1], "curve": [
            {k: v for k, v in p.items() if k != "test_predictions"} for p in curve]}),
            flush=True)
    out = common.out_path(args, "gpt_finetune_2400.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8, Section 8.7: gpt_finetune.py's fine-tune at rate 1e-3, "
                           "started from the stored 2400-step Bible GPT; written by "
                           "benchmarks/gpt_finetune_2400.py",
            "train_verses": len(train_rows), "valid_verses": len(valid_rows),
            "test_verses": len(test_rows), "steps": steps, "lr": lr, "eval_every": EVERY,
            "batch": 32, "pretraining_steps": run["steps"],
            "test_labels": "".join(map(str, test[2].tolist())),
            "runs": runs, "machine": common.machine()})


if __name__ == "__main__":
    main()
