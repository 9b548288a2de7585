"""Chapter 10: the pretraining's peak rate chosen on the dev split, not after a look at test.

The low-label study (``t5_low_label.py``) first pretrained at T5's Adafactor peak of 1e-2 and
scored the fine-tuned models on the test words; only then was the peak swept (1e-3 to 3e-3) and
3e-3 kept by held-out pretraining loss. This script redoes the one choice that used test, 1e-2
against the sweep's 3e-3, on **dev**: it fine-tunes the two committed pretrained checkpoints
(``t5_spellings_pretrained.safetensors``, peak 1e-2, and
``t5_spellings_pretrained_lr0.003.safetensors``) exactly as the study does (2,000 labelled words,
600 steps of 64, Adam at a constant 3e-3), and scores each on every 5th dev word and, to check
that it reproduces the study, on the study's test words. The 1e-3 and 2e-3 weights were not kept,
so they are not scored here (pretraining them again costs about 6 CPU-minutes each).

Budget (Chapter 10's helper: about 15 CPU-minutes, about 3 per run), so seed 0 alone ran, one
process per peak side by side; ``--part run`` without ``--seeds`` goes on to seeds 1 and 2, seed
by seed, and ``--part collect`` compares the seeds that have both peaks. Reproduce (from the
repository root, one thread per process):

    python benchmarks/t5_peak_dev.py --part run --peaks 0.003 --seeds 0 > logs/t5_pd_a.log
    python benchmarks/t5_peak_dev.py --part run --peaks 0.01 --seeds 0 > logs/t5_pd_b.log
    python benchmarks/t5_peak_dev.py --part collect --resume logs/t5_pd_a.log logs/t5_pd_b.log

Writes ``lib/attnbook/results/t5_peak_dev.json`` (the log is kept beside it as ``t5_peak_dev.log``):
every run's dev and test WER/PER, and the peak with the lower mean dev WER over the seeds run.
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

CHECKPOINTS = {1e-2: "t5_spellings_pretrained.safetensors",
               3e-3: "t5_spellings_pretrained_lr0.003.safetensors"}


def key(row: dict) -> tuple:
    return (row.get("peak"), row.get("size"), row.get("seed"))


def weights_for(peak: float, smoke: bool) -> dict | None:
    if smoke:  # a tiny model: the study's smoke setting, from a fresh start standing in
        from t5_pretraining import t5_config
        from attnbook.models.t5 import T5
        torch.manual_seed(100)
        return T5(t5_config(True, dropout=0.0)).state_dict()
    from safetensors.torch import load_file
    return load_file(str(common.RESULTS / CHECKPOINTS[peak]))


def run_one(peak: float, size: int, seed: int, args, data, dev, test) -> dict:
    train = train_subset(data.train[:500] if args.smoke else data.train, size, seed)
    settings = argparse.Namespace(smoke=args.smoke, steps=args.steps, batch_size=64, lr=3e-3, device="cpu")
    captured = {}

    import t5_pretraining  # finetune_t5 scores on the test words; the dev score needs the model

    original = t5_pretraining.evaluate_text_g2p

    def evaluate_both(model, pairs, vocab, direction="g2p", prefix=False):
        captured["dev"] = original(model, dev, vocab, direction, prefix)
        return original(model, pairs, vocab, direction, prefix)

    t5_pretraining.evaluate_text_g2p = evaluate_both
    try:
        row = finetune_t5("pretrained", train, test, seed, settings, weights_for(peak, args.smoke))
    finally:
        t5_pretraining.evaluate_text_g2p = original
    return {"peak": peak, **row, "size": len(train), "seed": seed,
            "dev_wer": round(captured["dev"]["wer"], 4), "dev_per": round(captured["dev"]["per"], 4)}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("run", "collect"), required=True)
    p.add_argument("--peaks", type=float, nargs="+", default=sorted(CHECKPOINTS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--size", type=int, default=2000)
    p.add_argument("--steps", type=int, default=600)
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.size, args.seeds = 10, 100, [0]
    torch.set_num_threads(1)
    start = time.perf_counter()
    done = {key(r): r for r in common.log_rows(args.resume)}
    data = load_g2p()
    test = data.test[:: 50 if args.smoke else 5]
    dev = data.dev[:: 50 if args.smoke else 5]
    if args.part == "run":
        for seed in args.seeds:  # seed by seed: a stopped run leaves whole seeds
            for peak in args.peaks:
                n = len(train_subset(data.train[:500] if args.smoke else data.train, args.size, seed))
                if (peak, n, seed) in done:
                    continue
                print(json.dumps(run_one(peak, args.size, seed, args, data, dev, test)), flush=True)
    else:
        runs = sorted(done.values(), key=lambda r: (r["seed"], r["peak"]))
        seeds = sorted(s for s in {r["seed"] for r in runs}
                       if {r["peak"] for r in runs if r["seed"] == s} == set(CHECKPOINTS))
        mean_dev = {str(peak): round(statistics.mean(r["dev_wer"] for r in runs
                                                     if r["peak"] == peak and r["seed"] in seeds), 4)
                    for peak in CHECKPOINTS} if seeds else {}
        out = common.out_path(args, "t5_peak_dev.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0],
                "command": "see the docstring: --part run, then --part collect",
                "machine": common.machine(), "threads": 1,
                "rule": "the peak with the lower mean dev WER over the seeds with both peaks run; never test",
                "dev_words": len(dev), "test_words": len(test), "steps": args.steps,
                "seeds_compared": seeds, "mean_dev_wer": mean_dev,
                "chosen": min(mean_dev, key=mean_dev.get) if mean_dev else None, "runs": runs})
    print(f"part {args.part}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
