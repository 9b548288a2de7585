"""Time of one training step against sequence length: GRU + attention (Chapter 2) vs the Transformer.

Usage: ``python benchmarks/step_time_length.py [--lengths 8 16 32 64 128 256] [--repeats 5]``
writes ``lib/attnbook/results/step_time_length.json`` (Chapter 5 reads it).

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
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.timing import timed

SRC_VOCAB, TGT_VOCAB, BATCH = 31, 43, 32


def models(max_len: int) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {
        "gru_attention": RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(SRC_VOCAB, TGT_VOCAB)),
        "transformer": Transformer(TransformerConfig(SRC_VOCAB, TGT_VOCAB, d_model=64, num_heads=4,
                                                     d_ff=256, dropout=0.0, norm_first=True,
                                                     max_len=max_len)),
    }


def measure(T: int, repeats: int) -> dict:
    """Counted GFLOP and timed ms of one forward + backward pass of each model on (32, T) inputs."""
    device = torch.device("cpu")
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, SRC_VOCAB, (BATCH, T), generator=generator)
    tgt_in = torch.randint(4, TGT_VOCAB, (BATCH, T), generator=generator)
    lengths = torch.full((BATCH,), T)
    steps, flops = {}, {}
    for name, model in models(T + 1).items():
        def step(model=model):
            model.zero_grad(set_to_none=True)
            model(src, lengths, tgt_in).logsumexp(-1).mean().backward()
        counter = FlopCounterMode(display=False)
        with counter:  # counted once; this pass is also the untimed warm-up
            step()
        steps[name], flops[name] = step, counter.get_total_flops()
    rnn_times, tfm_times, ratios = [], [], []
    for r in range(repeats):  # alternate who goes first, as common.interleaved does
        order = ("gru_attention", "transformer") if r % 2 == 0 else ("transformer", "gru_attention")
        t = {name: timed(steps[name], device)[0] for name in order}
        rnn_times.append(t["gru_attention"])
        tfm_times.append(t["transformer"])
        ratios.append(t["gru_attention"] / t["transformer"])
    return {"T": T, "gru_attention_gflop": round(flops["gru_attention"] / 1e9, 3),
            "transformer_gflop": round(flops["transformer"] / 1e9, 3),
            "flop_ratio": round(flops["gru_attention"] / flops["transformer"], 2),
            "gru_attention_ms": round(1e3 * statistics.median(rnn_times), 1),
            "transformer_ms": round(1e3 * statistics.median(tfm_times), 1),
            "time_ratio": round(statistics.median(ratios), 2),
            "time_ratio_min": round(min(ratios), 2), "time_ratio_max": round(max(ratios), 2)}


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--conditions", default="", help="how the machine was shared, for the results file")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "step_time_length.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for T in args.lengths:
        row = measure(T, args.repeats)
        print(row, flush=True)
        rows.append(row)
    common.write_result(args.out, {
        "description": "one training step (forward + backward, batch 32, one thread) against length: "
                       "GRU + attention vs the Transformer; median ms, per-round time ratios, counted FLOPs",
        "machine": common.machine(), "conditions": args.conditions,
        "load_average_at_start": round(load, 2), "repeats": args.repeats,
        "models": "GRU + attention: RNNAttentionSeq2SeqConfig(31, 43) (Chapter 2's size); Transformer: D=64, "
                  "4 heads, d_ff=256, 2+2 layers, pre-norm, dropout 0 (Chapter 5's)",
        "runs": rows})


if __name__ == "__main__":
    main()
