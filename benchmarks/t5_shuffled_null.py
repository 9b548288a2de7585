"""Chapter 10's null for span-corruption pretraining: the same pretraining on shuffled bytes.

Usage (from the repository root): ``python benchmarks/t5_shuffled_null.py`` writes
``lib/attnbook/results/t5_shuffled_null.json`` (rewritten after every finished part, so a stopped
run still leaves what it measured); ``--smoke`` runs in seconds and writes nothing unless ``--out``
is given.

Chapter 10's chosen pretraining (``benchmarks/t5_low_label.py --peak-lr 3e-3``: span corruption of
the G2P training words' spellings, 3,000 steps of 64 windows of 32 bytes, inverse-square-root
schedule to a peak of 3e-3 after 300 warm-up steps, seed 0) is run again on the **same bytes in a
random order** (one permutation of the whole text, seed 0): the same byte frequencies, the same
windows, batches, model and steps, but no spelling left to learn. Then:

1. the encoder's relative-bias table after pretraining, summarised as ``t5_bias_control.py`` does
   (per head, the largest bias over offsets -25..+25 and the mean bias 8-25 bytes back and ahead);
2. fine-tuning exactly as the study's pretrained arm (Adam 3e-3, batch 64, no dropout, every 5th
   test word), seed 0: all the training words for 600 steps, then 2,000 words for 600 steps,
   then all the words for 1,200 steps (``--runs`` picks which).

If fine-tuning from the shuffled-byte weights matches fine-tuning from the real pretraining, the
gain came from the recipe (any warm start at these scales), not from what the text holds. One
thread; one seed (about 6 CPU-minutes of pretraining and 0.5-1.5 per fine-tuning run, idle core).
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import common
from attnbook.data.g2p import load_g2p
from attnbook.models.t5 import T5
from t5_bias_control import TABLE, bias_summary
from t5_encoder_use import corpus_text, pretrain_inverse_sqrt
from t5_pretraining import finetune_t5, t5_config, train_subset

RUNS = {"all-600": (0, 600), "2000-600": (2000, 600), "all-1200": (0, 1200)}


def shuffled(text: str, seed: int = 0) -> str:
    """The characters of ``text`` in one random order (the same multiset of bytes)."""
    order = torch.randperm(len(text), generator=torch.Generator().manual_seed(seed)).tolist()
    return "".join(text[i] for i in order)


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--runs", nargs="+", choices=tuple(RUNS), default=list(RUNS))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.process_time()
    out = common.out_path(args, "t5_shuffled_null.json")
    text = corpus_text("spellings")
    pre_args = argparse.Namespace(smoke=args.smoke, corpus="shuffled spellings",
                                  steps=20 if args.smoke else 3000, window=32, batch=64,
                                  peak_lr=3e-3, warmup=300, seed=0,
                                  probe_every=10 if args.smoke else 250)
    torch.manual_seed(0)
    initial = T5(t5_config(args.smoke, dropout=0.0)).state_dict()[TABLE].clone()
    pre, weights = pretrain_inverse_sqrt(pre_args, shuffled(text))
    pre["encoder_bias_summary"] = bias_summary(weights[TABLE], initial)
    pre["encoder_bias"] = weights[TABLE].tolist()
    print(json.dumps({k: v for k, v in pre.items() if k != "encoder_bias"}), flush=True)
    result = {"description": __doc__.splitlines()[0], "machine": common.machine(),
              "pretrain": pre, "runs": []}
    data = load_g2p()
    test = data.test[:: 50 if args.smoke else 5]
    settings = argparse.Namespace(smoke=args.smoke, steps=10 if args.smoke else 600, batch_size=64,
                                  lr=3e-3, device="cpu")
    train_words = data.train[:500] if args.smoke else data.train
    for name in args.runs:
        size, steps = RUNS[name]
        train = train_subset(train_words, 100 if args.smoke and size else size, 0)
        row = finetune_t5("pretrained", train, test, 0, settings, weights,
                          steps=10 if args.smoke else steps)
        row = {**row, "arm": "pretrained on shuffled bytes", "size": len(train), "seed": 0}
        print(json.dumps(row), flush=True)
        result["runs"].append(row)
        result["cpu_seconds"] = round(time.process_time() - start, 1)
        result["test_words"] = len(test)
        if out is not None:
            common.write_result(out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
