"""Time of one training step against sequence length: GRU + attention (Chapter 2) vs the Transformer.

Usage: ``python benchmarks/step_time_length.py [--lengths 8 16 32 64 128 256] [--repeats 5]``
writes ``lib/attnbook/results/step_time_length.json`` (Chapter 5 reads it).
``--models gru gru_attention transformer`` adds Chapter 1's plain GRU encoder-decoder, whose
encoder and decoder are both one fused ``nn.GRU`` call (GRU + attention's encoder is fused too,
but its decoder is a Python loop of ``GRUCell`` steps, as attention needs the state of each
step): ``python benchmarks/step_time_length.py --models gru gru_attention transformer --lengths
8 64 256 --repeats 3 --out lib/attnbook/results/step_time_length_fused.json``. ``--device``
(default cpu) runs elsewhere (the timing waits for the device); the committed GPU run:
``python benchmarks/step_time_length.py --models gru gru_attention transformer --lengths 8 32 64
128 256 512 --repeats 5 --device cuda --out lib/attnbook/results/step_time_length_cuda.json``
(an H100; on CUDA the FLOP counter misses cuDNN's fused GRU kernels, see the file's note).

For each length T, both models (Chapter 2's ``RNNAttentionSeq2Seq`` at its chapter's size and
Chapter 5's pre-norm Transformer, D=64, 2+2 layers, 4 heads, d_ff=256; the vocabularies of the
G2P task, 31 letters and 43 phonemes) run a forward and backward pass on random source and
target ids of length T, batch 32, one thread. ``FlopCounterMode`` counts the floating-point
operations of one pass (the matrix products); the two models' passes are then timed interleaved
(``common.interleaved``: they alternate who goes first, so a change in the machine's load hits
both alike), after one untimed warm-up pass each. A row keeps the median times, the median of
the per-round time ratios (GRU + attention over Transformer), the range of those ratios over
the rounds, and the FLOP ratio. One thread on a shared CPU: the load average at the start is
recorded; read the trend, not the digits.
"""
from __future__ import annotations

import os
import statistics
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

import common
from attnbook.models.rnn import (RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq,
                                 RNNSeq2SeqConfig)
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.timing import timed

SRC_VOCAB, TGT_VOCAB, BATCH = 31, 43, 32


MODELS = ("gru", "gru_attention", "transformer")


def models(max_len: int, names: tuple[str, ...] = ("gru_attention", "transformer")
           ) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    built = {
        "gru": RNNSeq2Seq(RNNSeq2SeqConfig(SRC_VOCAB, TGT_VOCAB)),
        "gru_attention": RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(SRC_VOCAB, TGT_VOCAB)),
        "transformer": Transformer(TransformerConfig(SRC_VOCAB, TGT_VOCAB, d_model=64, num_heads=4,
                                                     d_ff=256, dropout=0.0, norm_first=True,
                                                     max_len=max_len)),
    }
    return {name: built[name] for name in names}


def measure(T: int, repeats: int, names: tuple[str, ...] = ("gru_attention", "transformer"),
            device: torch.device = torch.device("cpu")) -> dict:
    """Counted GFLOP and timed ms of one forward + backward pass of each model on (32, T) inputs;
    every other model's time over the Transformer's, per round (median, min, max)."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, SRC_VOCAB, (BATCH, T), generator=generator).to(device)
    tgt_in = torch.randint(4, TGT_VOCAB, (BATCH, T), generator=generator).to(device)
    lengths = torch.full((BATCH,), T)  # the encoders take lengths on the CPU
    steps, flops = {}, {}
    for name, model in models(T + 1, names).items():
        model.to(device)

        def step(model=model):
            model.zero_grad(set_to_none=True)
            model(src, lengths, tgt_in).logsumexp(-1).mean().backward()
        counter = FlopCounterMode(display=False)
        with counter:  # counted once; this pass is also the untimed warm-up
            step()
        steps[name], flops[name] = step, counter.get_total_flops()
    times = {name: [] for name in names}
    for r in range(repeats):  # rotate who goes first, as common.interleaved alternates
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            times[name].append(timed(steps[name], device)[0])
    row = {"T": T}
    for name in names:
        row[f"{name}_gflop"] = round(flops[name] / 1e9, 3)
    for name in names:
        row[f"{name}_ms"] = round(1e3 * statistics.median(times[name]), 1)
    for name in names:
        if name == "transformer" or "transformer" not in names:
            continue
        ratios = [a / b for a, b in zip(times[name], times["transformer"])]
        prefix = "" if name == "gru_attention" else f"{name}_"  # the chapter's original keys
        row[f"{prefix}flop_ratio"] = round(flops[name] / flops["transformer"], 2)
        row[f"{prefix}time_ratio"] = round(statistics.median(ratios), 2)
        row[f"{prefix}time_ratio_min"] = round(min(ratios), 2)
        row[f"{prefix}time_ratio_max"] = round(max(ratios), 2)
    return row


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--conditions", default="", help="how the machine was shared, for the results file")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "step_time_length.json")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=["gru_attention", "transformer"])
    parser.add_argument("--device", default="cpu", help="cpu (the committed results), cuda, mps")
    args = parser.parse_args()
    names, device = tuple(args.models), torch.device(args.device)
    torch.set_num_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for T in args.lengths:
        row = measure(T, args.repeats, names, device)
        print(row, flush=True)
        rows.append(row)
    common.write_result(args.out, {
        "description": "one training step (forward + backward, batch 32, one thread) against length: "
                       "GRU + attention vs the Transformer; median ms, per-round time ratios, counted FLOPs",
        "machine": common.machine(), "device": str(device), "conditions": args.conditions,
        "load_average_at_start": round(load, 2), "repeats": args.repeats,
        "models": "GRU + attention: RNNAttentionSeq2SeqConfig(31, 43) (Chapter 2's size); Transformer: D=64, "
                  "4 heads, d_ff=256, 2+2 layers, pre-norm, dropout 0 (Chapter 5's); plain GRU (if timed): "
                  "RNNSeq2SeqConfig(31, 43) (Chapter 1's size, fused nn.GRU encoder and decoder)",
        "runs": rows})


if __name__ == "__main__":
    main()
