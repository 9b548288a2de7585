"""Chapter 10's shuffled-byte null on more fine-tuning seeds, with a diagnosis of its start.

Usage (from the repository root): ``python benchmarks/t5_null_seeds.py`` writes
``lib/attnbook/results/t5_null_seeds.json`` (rewritten after every part); ``--smoke`` runs in
seconds and writes nothing unless ``--out`` is given.

``benchmarks/t5_shuffled_null.py`` pretrained on the spellings' bytes in one random order and
fine-tuned on seed 0 only (its checkpoint was not kept). This script pretrains it again (the same
seed, so the same run: its encoder-bias summary is printed beside the stored one), then

1. diagnoses the three starts of the study, seed 0's fresh weights, the committed spellings
   checkpoint and the null, before any fine-tuning step: the RMS of the shared token table's byte
   rows, the RMS of the read-out logits and the loss (nats per output byte) on seed 0's first
   four fine-tuning batches of all the words, and the same loss with each batch's sources
   swapped for another batch's (how much the start reads its input);
2. fine-tunes the null exactly as the study's pretrained arm, all the words, 600 steps, on the
   seeds given (default 1 and 2; seed 0 is stored in ``t5_shuffled_null.json``).

One thread; about 4 CPU-minutes of pretraining and 1 per fine-tuning seed.
"""
from __future__ import annotations

import argparse
import json
import time
from importlib import resources

import torch

import common
from attnbook.checkpoints import read_safetensors
from attnbook.data.batching import Seq2SeqBatch
from attnbook.data.g2p import load_g2p
from attnbook.models.t5 import T5
from attnbook.tasks.text_to_text import byte_batches, text_pairs
from t5_bias_control import TABLE, bias_summary
from t5_encoder_use import corpus_text, pretrain_inverse_sqrt
from t5_pretraining import VOCAB, finetune_t5, loss_fn, t5_config, train_subset
from t5_shuffled_null import shuffled

CHECKPOINT = "t5_spellings_pretrained_lr0.003.safetensors"
CHECKPOINT_SHA256 = "ec511ee132373b5a46fe1185c46c9daacd485256fb91a5abb3083d0ae7f7d76d"


def diagnose(weights: dict | None, train, smoke: bool) -> dict:
    """Table and logit sizes, and the first-batch losses (own and swapped sources)."""
    torch.manual_seed(0)
    model = T5(t5_config(smoke, dropout=0.0))
    if weights is not None:
        model.load_state_dict(weights)
    model.eval()
    table = model.state_dict()["shared.weight"][3:259]  # the 256 byte rows
    batches = byte_batches(text_pairs(train, "g2p"), VOCAB, 64, torch.Generator().manual_seed(0))
    first = [next(batches) for _ in range(4)]
    own, swapped, logit_rms = [], [], []
    with torch.no_grad():
        for i, batch in enumerate(first):
            own.append(float(loss_fn(model, batch)))
            other = first[(i + 1) % len(first)]  # another batch's sources, full batches
            swapped.append(float(loss_fn(model, Seq2SeqBatch(
                other.src, other.src_lengths, batch.tgt_in, batch.tgt_out, batch.tgt_lengths))))
            logits = model(batch.src, batch.src_lengths, batch.tgt_in)
            logit_rms.append(float(logits.pow(2).mean().sqrt()))
    mean = lambda v: round(sum(v) / len(v), 4) if v else None  # noqa: E731
    return {"table_rms": round(float(table.pow(2).mean().sqrt()), 4),
            "logit_rms": mean(logit_rms), "first_loss": mean(own),
            "first_loss_swapped_sources": mean(swapped)}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="*", default=[1, 2])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.process_time()
    out = common.out_path(args, "t5_null_seeds.json")
    pre_args = argparse.Namespace(smoke=args.smoke, corpus="shuffled spellings",
                                  steps=20 if args.smoke else 3000, window=32, batch=64,
                                  peak_lr=3e-3, warmup=300, seed=0,
                                  probe_every=10 if args.smoke else 250)
    torch.manual_seed(0)
    initial = T5(t5_config(args.smoke, dropout=0.0)).state_dict()[TABLE].clone()
    pre, null = pretrain_inverse_sqrt(pre_args, shuffled(corpus_text("spellings")))
    summary = bias_summary(null[TABLE], initial)
    print(json.dumps({"pretrain_seconds": pre["seconds"], "encoder_bias_summary": summary}),
          flush=True)
    data = load_g2p()
    train = data.train[:500] if args.smoke else data.train
    spellings = None if args.smoke else read_safetensors(
        resources.files("attnbook.results") / CHECKPOINT, CHECKPOINT_SHA256)
    result = {"description": __doc__.splitlines()[0], "command": common.command_line(),
              "machine": common.machine(),
              "null_pretraining": {"loss_curve": pre["loss_curve"],
                                   "gap_track": pre["gap_track"],
                                   "encoder_bias_summary": summary},
              "diagnosis": {}, "runs": []}
    for name, weights in (("scratch", None), ("spellings", spellings), ("shuffled", null)):
        if name == "spellings" and weights is None:
            continue
        result["diagnosis"][name] = diagnose(weights, train, args.smoke)
        print(json.dumps({name: result["diagnosis"][name]}), flush=True)
    if out is not None:
        common.write_result(out, result)
    test = data.test[:: 50 if args.smoke else 5]
    settings = argparse.Namespace(smoke=args.smoke, steps=10 if args.smoke else 600,
                                  batch_size=64, lr=3e-3, device="cpu")
    for seed in args.seeds:
        row = finetune_t5("pretrained", train_subset(train, 0, seed), test, seed, settings,
                          null, steps=10 if args.smoke else 600)
        row = {**row, "arm": "pretrained on shuffled bytes", "size": len(train), "seed": seed}
        print(json.dumps(row), flush=True)
        result["runs"].append(row)
        result["cpu_seconds"] = round(time.process_time() - start, 1)
        result["test_words"] = len(test)
        if out is not None:
            common.write_result(out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
