"""Chapter 10's low-label test: does pretraining on unlabelled spellings help with few labelled words?

Usage (from the repository root), in up to three processes that share a checkpoint:

    python benchmarks/t5_low_label.py --part pretrain > /tmp/t5_ll_pre.log
    python benchmarks/t5_low_label.py --part finetune --arms scratch > /tmp/t5_ll_a.log
    python benchmarks/t5_low_label.py --part finetune --arms pretrained --seeds 0 1 > /tmp/t5_ll_b.log
    python benchmarks/t5_low_label.py --part finetune --arms pretrained --seeds 2 > /tmp/t5_ll_c.log
    python benchmarks/t5_low_label.py --part collect --resume /tmp/t5_ll_*.log

writes ``lib/attnbook/results/t5_low_label.json``; ``--smoke`` runs in seconds and writes nothing
unless ``--out`` is given. A ``finetune`` part with the pretrained arm waits for the checkpoint.

1. **Pretraining** (once, seed 0): exactly the in-domain run of ``benchmarks/t5_encoder_use.py
   --corpus spellings`` (span corruption of the G2P *training* words' spellings alone, no
   phonemes; 3,000 steps of 64 windows of 32 bytes; T5's inverse-square-root schedule to a peak
   of 1e-2; the wrong-input gap tracked every 250 steps), its weights kept in ``--checkpoint``.
2. **Fine-tuning** with few labels: 500 and 2,000 labelled training words (the study's subsets:
   ``t5_pretraining.train_subset``, drawn by the seed), from those weights and from a fresh
   initialisation, the study's recipe for both arms (600 steps, batch 64, Adam 3e-3, no dropout),
   seeds 0, 1, 2; word and phoneme error rates on every 5th test word. The study's Transformer
   and count rows at the same sizes are in ``t5_pretraining.json`` and ``t5_baselines.json``.

One thread per process; every run prints one JSON line, so ``--resume`` skips finished runs.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import common
from attnbook.data.g2p import load_g2p
from t5_encoder_use import corpus_text, pretrain_inverse_sqrt
from t5_pretraining import finetune_t5, train_subset


def key(row: dict) -> tuple:
    return (row.get("kind"), row.get("arm"), row.get("size"), row.get("seed"))


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("pretrain", "finetune", "collect"), required=True)
    p.add_argument("--arms", nargs="+", choices=("pretrained", "scratch"), default=["pretrained", "scratch"])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 2000])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=600, help="fine-tuning steps (both arms)")
    p.add_argument("--pretrain-steps", type=int, default=3000)
    p.add_argument("--checkpoint", type=Path, default=Path("/tmp/t5_spellings_pretrained.pt"))
    args = p.parse_args(argv)
    if args.smoke:
        args.pretrain_steps, args.steps, args.seeds, args.sizes = 20, 10, [0], [100]
    torch.set_num_threads(1)
    start = time.perf_counter()
    done = {key(r): r for r in common.log_rows(args.resume)}
    if args.part == "pretrain":
        pre_args = argparse.Namespace(smoke=args.smoke, corpus="spellings", steps=args.pretrain_steps,
                                      window=32, peak_lr=1e-2, warmup=300,
                                      probe_every=10 if args.smoke else 250)
        pre, weights = pretrain_inverse_sqrt(pre_args, corpus_text("spellings"))
        partial = args.checkpoint.with_suffix(".partial")
        torch.save(weights, partial)
        partial.replace(args.checkpoint)  # whole or absent: the fine-tuning parts wait for it
        print(json.dumps(pre), flush=True)
    elif args.part == "finetune":
        data = load_g2p()
        test = data.test[:: 50 if args.smoke else 5]
        settings = argparse.Namespace(smoke=args.smoke, steps=args.steps, batch_size=64, lr=3e-3, device="cpu")
        weights = None
        for size in sorted(args.sizes, reverse=True):  # the larger size first: it is the informative one
            for seed in args.seeds:
                train = train_subset(data.train[:500] if args.smoke else data.train, size, seed)
                for arm in args.arms:
                    if (None, arm, len(train), seed) in done:
                        continue
                    if arm == "pretrained" and weights is None:
                        while not args.checkpoint.is_file():
                            time.sleep(20)
                        weights = torch.load(args.checkpoint)
                    row = finetune_t5(arm, train, test, seed, settings, weights if arm == "pretrained" else None)
                    print(json.dumps({**row, "size": len(train), "seed": seed}), flush=True)
    else:
        rows = list(done.values())
        pre = [r for r in rows if r.get("kind") == "pretrain"]
        runs = sorted((r for r in rows if "arm" in r),
                      key=lambda r: (r["size"], r["seed"], r["arm"]))
        out = common.out_path(args, "t5_low_label.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0], "machine": common.machine(),
                "threads": 1, "test_words": len(load_g2p().test[:: 50 if args.smoke else 5]),
                "settings": {"steps": args.steps, "batch_size": 64, "lr": 3e-3,
                             "pretrain_steps": args.pretrain_steps},
                "pretrain": pre[0] if pre else None, "runs": runs})
    print(f"part {args.part}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
