"""Chapter 10's positive control: does Spellings-32 help where its decoder's skill is the task's, p2g?

Spellings-32 (``t5_low_label.py --part pretrain``, committed as
``lib/attnbook/results/t5_spellings_pretrained.safetensors``) learned, by span corruption of the training
words' spellings, to *write spellings*. G2P asks its decoder for phoneme names, which it never wrote; the
reverse task, p2g (phonemes -> spelling), asks for exactly what it did write. If the pretraining transfers
anywhere, it is there. This script fine-tunes the committed checkpoint and a fresh initialisation on p2g
with the low-label study's recipe for both arms (2,000 training words drawn by the seed, 600 steps,
batch 64, Adam 3e-3 constant, no dropout, seeds 0, 1, 2, every 5th test word), so the only difference
between the arms is the start. One thread per process; every run prints one JSON line. The run for
Chapter 10, one process per seed (both arms in each), side by side:

    python benchmarks/t5_p2g_transfer.py --seeds 0 > /tmp/t5_p2g_s0.log &
    python benchmarks/t5_p2g_transfer.py --seeds 1 > /tmp/t5_p2g_s1.log &
    python benchmarks/t5_p2g_transfer.py --seeds 2 > /tmp/t5_p2g_s2.log
    python benchmarks/t5_p2g_transfer.py --collect --resume /tmp/t5_p2g_s0.log /tmp/t5_p2g_s1.log /tmp/t5_p2g_s2.log

writes ``lib/attnbook/results/t5_p2g_transfer.json``.

**Warm-up** (``--task g2p --warmup 60``): both starts fine-tuned on g2p with the same words, steps and
seeds, the rate rising linearly to 3e-3 over 60 steps and then falling linearly to about 0 at step 600
(``attnbook.schedules.warmup_linear_scheduler``), the fine-tuning schedule a pretrained start usually
gets; its rows (``"warmup": 60``) go into the same file:

    python benchmarks/t5_p2g_transfer.py --task g2p --warmup 60 --seeds 0 > /tmp/t5_wu_s0.log &  # 1, 2 alike
    python benchmarks/t5_p2g_transfer.py --collect --resume /tmp/t5_p2g_s*.log /tmp/t5_wu_s*.log
 The g2p runs of the same starts, sizes and seeds are
in ``t5_low_label.json`` (Spellings-32) and ``t5_pretraining.json`` (scratch); Chapter 10 prints them side
by side. The run for Chapter 10 took about 9 minutes per fine-tuning on a heavily loaded machine (the log:
``lib/attnbook/results/t5_p2g_transfer.log``).
"""
from __future__ import annotations

import argparse
import json
from importlib import resources

import torch

import common
from attnbook.checkpoints import read_safetensors
from attnbook.data.g2p import load_g2p
from t5_pretraining import finetune_t5, train_subset

CHECKPOINT_SHA256 = "793d505be1118d81b42193b02c2d5a9b58a8231cae72a030394e3f9fcdc0ca02"


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--arms", nargs="+", choices=("pretrained", "scratch"), default=["pretrained", "scratch"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--size", type=int, default=2000)
    p.add_argument("--task", choices=("p2g", "g2p"), default="p2g")
    p.add_argument("--warmup", type=int, default=0,
                   help="warm-up steps to 3e-3, then a linear decay to ~0 (0: the study's constant rate)")
    p.add_argument("--collect", action="store_true", help="write the results file from --resume logs")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.collect:
        rows = [r for r in common.log_rows(args.resume) if "arm" in r]
        out = common.out_path(args, "t5_p2g_transfer.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0], "machine": common.machine(),
                "command": "see the docstring: one process per seed, then --collect",
                "settings": {"size": args.size, "steps": 600, "batch_size": 64, "lr": 3e-3,
                             "checkpoint": "Spellings-32 (t5_spellings_pretrained.safetensors)"},
                "runs": sorted(rows, key=lambda r: (r["arm"], r["seed"]))})
        return 0
    data = load_g2p()
    smoke = args.smoke
    test = data.test[:: 50 if smoke else 5]
    settings = argparse.Namespace(smoke=smoke, steps=10 if smoke else 600, batch_size=64, lr=3e-3, device="cpu")
    weights = None
    if "pretrained" in args.arms:
        if smoke:
            raise SystemExit("--smoke builds the tiny model; the checkpoint is the full one: use --arms scratch")
        checkpoint = resources.files("attnbook.results") / "t5_spellings_pretrained.safetensors"
        weights = read_safetensors(checkpoint, CHECKPOINT_SHA256)
    for seed in args.seeds[:1] if smoke else args.seeds:
        train = train_subset(data.train[:500] if smoke else data.train, 100 if smoke else args.size, seed)
        for arm in args.arms:
            row = finetune_t5(arm, train, test, seed, settings, weights if arm == "pretrained" else None,
                              directions=(args.task,), warmup=args.warmup)
            print(json.dumps({**row, "size": len(train), "seed": seed}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
