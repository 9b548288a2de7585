"""Chapter 10: does early stopping on a dev split change the low-label comparison? (review, 10.6)

The low-label study (``t5_low_label.py``) fine-tuned the scratch and the Spellings-32 starts for a
fixed 600 steps with no validation split; with 500 labelled words that is 77 passes over them, so
both arms may be past their best. This script repeats those runs (the same subset, batches, rate
3e-3, seeds 0-2; the Spellings-32 weights are the committed
``lib/attnbook/results/t5_spellings_pretrained.safetensors``) and scores every ``--every`` steps on
a sample of the G2P **dev** split (every ``--dev-stride``-th dev word, never a test word). One rule
for both arms: keep the checkpoint with the lowest dev phoneme error rate (the word error rate is
near 100% at 500 words and cannot rank checkpoints), the earliest on a tie; then score it on the
study's test sample (every 5th test word). The step-600 test scores are written too, as a check
that the run repeats the study's.

    python benchmarks/t5_early_stop.py --arms scratch > /tmp/t5_es_a.log &
    python benchmarks/t5_early_stop.py --arms pretrained > /tmp/t5_es_b.log
    python benchmarks/t5_early_stop.py --collect --resume /tmp/t5_es_a.log /tmp/t5_es_b.log
"""
from __future__ import annotations

import argparse
import copy
import json
from importlib import resources

import torch

import common
from attnbook.checkpoints import read_safetensors
from attnbook.data.g2p import load_g2p
from attnbook.models.t5 import T5
from attnbook.tasks.text_to_text import byte_batches, evaluate_text_g2p, text_pairs
from attnbook.train import fit
from t5_pretraining import VOCAB, loss_fn, t5_config, train_subset

CHECKPOINT_SHA256 = "793d505be1118d81b42193b02c2d5a9b58a8231cae72a030394e3f9fcdc0ca02"


def run(arm: str, train, dev, test, seed: int, args, weights: dict | None) -> dict:
    """One fine-tuning run scored on dev every ``args.every`` steps; the chosen and the last
    checkpoints scored on test."""
    torch.manual_seed(seed)  # as t5_pretraining.finetune_t5
    model = T5(t5_config(args.smoke, dropout=0.0))
    if weights is not None:
        model.load_state_dict(weights)
    batches = byte_batches(text_pairs(train, "g2p"), VOCAB, 64, torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    curve, snapshots = [], {}
    for done in range(args.every, args.steps + 1, args.every):
        fit(model, batches, loss_fn, optimizer, args.every, progress=False)
        scores = evaluate_text_g2p(model, dev, VOCAB, "g2p")
        curve.append([done, round(scores["wer"], 4), round(scores["per"], 4)])
        snapshots[done] = copy.deepcopy(model.state_dict())
    last = evaluate_text_g2p(model, test, VOCAB, "g2p")
    best = min(curve, key=lambda row: (row[2], row[0]))[0]
    model.load_state_dict(snapshots[best])
    chosen = evaluate_text_g2p(model, test, VOCAB, "g2p")
    return {"arm": arm, "seed": seed, "size": len(train), "steps": args.steps,
            "dev_curve": curve, "chosen_step": best,
            "test_wer_chosen": round(chosen["wer"], 4), "test_per_chosen": round(chosen["per"], 4),
            "test_wer_last": round(last["wer"], 4), "test_per_last": round(last["per"], 4)}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--arms", nargs="+", choices=("pretrained", "scratch"), default=["pretrained", "scratch"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--dev-stride", type=int, default=20)
    p.add_argument("--collect", action="store_true", help="write the results file from --resume logs")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.collect:
        lines = common.log_rows(args.resume)
        rows = [r for r in lines if "arm" in r]
        sizes = next(r for r in lines if "dev_words" in r)
        out = common.out_path(args, "t5_early_stop.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0], "machine": common.machine(),
                "command": "see the docstring: two --arms processes, then --collect",
                "settings": {"size": args.size, "steps": 600, "batch_size": 64, "lr": args.lr,
                             "every": args.every, "dev_stride": args.dev_stride, **sizes,
                             "rule": "lowest dev PER, earliest on a tie",
                             "checkpoint": "Spellings-32 (t5_spellings_pretrained.safetensors)"},
                "runs": sorted(rows, key=lambda r: (r["arm"], r["seed"]))})
        return 0
    args.steps = 20 if args.smoke else 600
    args.every = 10 if args.smoke else args.every
    data = load_g2p()
    dev = data.dev[:: 200 if args.smoke else args.dev_stride]
    test = data.test[:: 50 if args.smoke else 5]
    weights = None
    if "pretrained" in args.arms and not args.smoke:
        path = resources.files("attnbook.results") / "t5_spellings_pretrained.safetensors"
        weights = read_safetensors(path, CHECKPOINT_SHA256)
    if args.smoke and "pretrained" in args.arms:
        torch.manual_seed(123)
        weights = T5(t5_config(True, dropout=0.0)).state_dict()
    print(json.dumps({"dev_words": len(dev), "test_words": len(test)}), flush=True)
    for seed in args.seeds[:1] if args.smoke else args.seeds:
        train = train_subset(data.train[:500] if args.smoke else data.train, 100 if args.smoke else args.size, seed)
        for arm in args.arms:
            row = run(arm, train, dev, test, seed, args, weights if arm == "pretrained" else None)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
