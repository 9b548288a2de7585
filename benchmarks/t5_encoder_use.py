"""Chapter 10's follow-up: can a different pretraining recipe make the byte-level T5 read its input?

Usage (from the repository root): ``python benchmarks/t5_encoder_use.py --corpus bible`` and
``python benchmarks/t5_encoder_use.py --corpus spellings`` write
``lib/attnbook/results/t5_encoder_use_{bible,spellings}.json``; ``--smoke`` runs in seconds.

The study's pretraining (``benchmarks/t5_pretraining.py``: 1,500 steps of 64 windows of 64
bytes, Adam at a constant 3e-3) left a decoder that ignores its input: the next window's input
cost it 0.009 nats per token (``benchmarks/t5_diagnosis.py --part mismatch``). The ablation
changed the span length and the fine-tuning rate; this run changes the pretraining itself, as
T5 trains:

- **schedule**: inverse square root (linear warmup over ``--warmup`` steps to ``--peak-lr``, then
  ``peak * sqrt(warmup / step)``), a higher peak (1e-2) than the study's constant 3e-3;
- **more, shorter windows**: ``--steps`` (3,000) steps of 64 windows of ``--window`` (32) bytes:
  twice the steps, the same number of bytes seen;
- **the mismatch gap tracked during training**: every ``--probe-every`` steps, nats per hidden
  byte of 256 fixed held-out corrupted windows with their own input and with the next window's
  input (as many sentinels); the gap is what the wrong input costs.

``--corpus bible``: the World English Bible, as the study. ``--corpus spellings``: an unlabelled
in-domain control: the G2P *training* words' spellings alone (no phonemes), one after another
separated by spaces, in a fixed shuffled order (seed 0).

Then the study's final mismatch probe (1,500 held-out 64-byte windows of the pretraining text,
``t5_diagnosis.mismatch``) and fine-tuning exactly as the study's pretrained arm (all training
words, 600 steps, Adam 3e-3, batch 64, every 5th test word), seeds ``--seeds``; the study's own
scratch and pretrained runs at 600 steps are the references. One thread.
"""
from __future__ import annotations

import argparse
import json
import math
import time

import torch

import common
from attnbook.data.bible import load_bible
from attnbook.data.g2p import load_g2p
from attnbook.train import evaluating, fit
from attnbook.models.t5 import T5
from attnbook.tasks.span_corruption import seq2seq_batch, span_corruption_batches
from t5_diagnosis import mismatch
from t5_pretraining import VOCAB, finetune_t5, loss_fn, study_setup, t5_config


def corpus_text(name: str) -> str:
    if name == "bible":
        return " ".join(v.text for v in load_bible())
    words = [word for word, _ in load_g2p().train]
    order = torch.randperm(len(words), generator=torch.Generator().manual_seed(0)).tolist()
    return " ".join(words[i] for i in order)


@torch.no_grad()
def gap(model, probe) -> dict:
    """Nats per hidden byte (target bytes, not sentinels or ``</s>``) with the own and a wrong input."""
    own, wrong = probe
    out = {}
    with evaluating(model):
        for name, batch in (("own", own), ("wrong", wrong)):
            logp = model(batch.src, batch.src_lengths, batch.tgt_in).log_softmax(-1)
            nll = -logp.gather(-1, batch.tgt_out[..., None])[..., 0]
            byte = (batch.tgt_out >= 3) & (batch.tgt_out < 259)
            out[name] = float(nll[byte].mean())
    return {"own": round(out["own"], 4), "wrong": round(out["wrong"], 4),
            "gap": round(out["wrong"] - out["own"], 4)}


def probe_batches(probe_stream: list[int], window: int) -> tuple:
    """256 fixed corrupted windows of ``probe_stream``: (own inputs, the next window's inputs)."""
    pb = next(span_corruption_batches(probe_stream, window, 256, VOCAB.sentinel, VOCAB.eos_id,
                                      VOCAB.pad_id, torch.Generator().manual_seed(99)))
    pairs = [(pb.src[i, : pb.src_lengths[i]].tolist(), pb.tgt_out[i][pb.tgt_out[i] != VOCAB.pad_id].tolist())
             for i in range(len(pb.src))]
    own = seq2seq_batch(pairs, VOCAB.pad_id)
    wrong = seq2seq_batch([(pairs[(i + 1) % len(pairs)][0], pairs[i][1]) for i in range(len(pairs))],
                          VOCAB.pad_id)
    return own, wrong


def pretrain_inverse_sqrt(args, text: str) -> tuple[dict, dict]:
    """Span-corruption pretraining on ``text`` on T5's schedule, the gap tracked; (row, weights).

    ``args`` needs ``smoke``, ``corpus``, ``steps``, ``window``, ``peak_lr``, ``warmup`` and
    ``probe_every`` (this script's options), and may give ``batch`` (windows per step, default
    64) and ``seed`` (initialisation and window order, default 0); ``benchmarks/t5_low_label.py``
    reuses it."""
    stream = VOCAB.encode(text[:20000] if args.smoke else text)
    # held-out probe: the last 5% of the stream, never drawn for training
    cut = int(len(stream) * 0.95)
    train_stream, probe_stream = stream[:cut], stream[cut:]
    own, wrong = probe_batches(probe_stream, args.window)
    seed = getattr(args, "seed", 0)  # t5_low_label.py --pretrain-seed
    torch.manual_seed(seed)
    model = T5(t5_config(args.smoke, dropout=0.0))
    windows_per_step = getattr(args, "batch", 64)  # t5_low_label.py --pretrain-batch
    batches = span_corruption_batches(train_stream, args.window, windows_per_step, VOCAB.sentinel,
                                      VOCAB.eos_id, VOCAB.pad_id, torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.peak_lr)
    warm = args.warmup
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warm if s + 1 < warm else math.sqrt(warm / (s + 1)))
    track = [[0, *gap(model, (own, wrong)).values()]]
    print(json.dumps({"step": 0, **gap(model, (own, wrong))}), flush=True)

    def probe_fn(m):
        g = gap(m, (own, wrong))
        return {"own": g["own"], "wrong": g["wrong"], "loss_gap": g["gap"]}

    t0 = time.perf_counter()
    history = fit(model, batches, loss_fn, optimizer, args.steps, scheduler=scheduler,
                  eval_fn=probe_fn, eval_every=args.probe_every, progress=False)
    seconds = time.perf_counter() - t0
    for (step, o), (_, w), (_, g) in zip(history.metrics["own"], history.metrics["wrong"],
                                         history.metrics["loss_gap"]):
        track.append([step, round(o, 4), round(w, 4), round(g, 4)])
    losses = history.smoothed_losses(50)
    pre = {"kind": "pretrain", "corpus": args.corpus, "seed": seed, "steps": args.steps, "window": args.window,
           "windows_per_step": windows_per_step,
           "peak_lr": args.peak_lr, "warmup": args.warmup, "seconds": round(seconds, 1),
           "corpus_bytes": len(stream),
           "loss_curve": [[s, round(losses[s - 1], 4)] for s in range(250, args.steps + 1, 250)],
           "gap_track": track, "gap_track_columns": ["step", "own", "wrong", "gap"]}
    return pre, {k: v.clone() for k, v in model.state_dict().items()}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--corpus", choices=("bible", "spellings"), default="bible")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--peak-lr", type=float, default=1e-2)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--probe-every", type=int, default=250)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.probe_every, args.seeds = 20, 10, [0]
    torch.set_num_threads(1)
    start = time.perf_counter()
    text = corpus_text(args.corpus)
    pre, weights = pretrain_inverse_sqrt(args, text)
    print(json.dumps(pre), flush=True)
    final = mismatch(weights, args.smoke, 200 if args.smoke else 3000,
                     None if args.corpus == "bible" else text)
    print(json.dumps(final), flush=True)
    settings, train, test = study_setup(args)
    runs = []
    for seed in args.seeds:
        row = finetune_t5("pretrained", train, test, seed, settings, weights)
        row = {**row, "corpus": args.corpus, "size": len(train), "seed": seed}
        print(json.dumps(row), flush=True)
        runs.append(row)
    out = common.out_path(args, f"t5_encoder_use_{args.corpus}.json")
    if out is not None:
        common.write_result(out, {
            "description": __doc__.splitlines()[0], "machine": common.machine(),
            "threads": torch.get_num_threads(), "wall_seconds": round(time.perf_counter() - start, 1),
            "test_words": len(test), "pretrain": pre, "final_mismatch": final, "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
