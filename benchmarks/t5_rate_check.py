"""Chapter 10: does a lower fine-tuning rate rescue the Spellings-96 start? (review rev10f, defect 2)

The low-label study (``t5_low_label.py --window 96``) fine-tuned both starts at one constant rate, 3e-3,
the rate tuned for Chapter 5's Transformer. A pretrained start is where a lower rate could matter, so this
script fine-tunes the Spellings-96 checkpoint AND the scratch start again at ``--lr`` (default 1e-3), the
same 2,000 training words, 600 steps, batch 64 and seeds 0-2 as the study, and writes both arms' test WER
and PER beside the study's 3e-3 rows (read from ``t5_low_label_w96.json``). One thread per process.

    python benchmarks/t5_low_label.py --window 96 --pretrain-batch 32 --part pretrain   # the checkpoint
    python benchmarks/t5_rate_check.py --arms scratch > /tmp/t5_rate_a.log &
    python benchmarks/t5_rate_check.py --arms pretrained > /tmp/t5_rate_b.log
    python benchmarks/t5_rate_check.py --collect --resume /tmp/t5_rate_a.log /tmp/t5_rate_b.log
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import common
from attnbook.data.g2p import load_g2p
from t5_pretraining import finetune_t5, train_subset


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--arms", nargs="+", choices=("pretrained", "scratch"), default=["pretrained", "scratch"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--size", type=int, default=2000)
    p.add_argument("--checkpoint", type=Path, default=Path("/tmp/t5_spellings_pretrained_w96.pt"))
    p.add_argument("--collect", action="store_true", help="write the results file from --resume logs")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.collect:
        rows = [r for r in common.log_rows(args.resume) if "arm" in r]
        study = json.loads((common.RESULTS / "t5_low_label_w96.json").read_text())
        base = [r for r in study["runs"] if r.get("size") == args.size and r.get("tasks", "g2p") == "g2p"]
        out = common.out_path(args, "t5_rate_check.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0], "machine": common.machine(),
                "command": "see the docstring: two --arms processes, then --collect",
                "settings": {"lr": args.lr, "size": args.size, "steps": 600, "batch_size": 64,
                             "checkpoint": "Spellings-96 (t5_low_label.py --window 96)"},
                "runs": sorted(rows, key=lambda r: (r["arm"], r["seed"])),
                "study_runs_at_3e-3": sorted(({k: r[k] for k in ("arm", "seed", "g2p_wer", "g2p_per")} for r in base),
                                             key=lambda r: (r["arm"], r["seed"]))})
        return 0
    data = load_g2p()
    smoke = args.smoke
    test = data.test[:: 50 if smoke else 5]
    settings = argparse.Namespace(smoke=smoke, steps=10 if smoke else 600, batch_size=64, lr=args.lr, device="cpu")
    weights = torch.load(args.checkpoint) if "pretrained" in args.arms else None
    for seed in args.seeds[:1] if smoke else args.seeds:
        train = train_subset(data.train[:500] if smoke else data.train, 100 if smoke else args.size, seed)
        for arm in args.arms:
            row = finetune_t5(arm, train, test, seed, settings, weights if arm == "pretrained" else None)
            print(json.dumps({**row, "lr": args.lr, "size": len(train), "seed": seed}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
