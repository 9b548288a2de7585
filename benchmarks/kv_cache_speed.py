"""Greedy decoding with a KV cache vs recomputing every position: same tokens, how much faster?

Usage: ``python benchmarks/kv_cache_speed.py [--device cpu] [--repeats 5] [--batches 32 128]
[--new-tokens 8 16 32 64]`` writes ``lib/attnbook/results/kv_cache_speed.json`` (Chapter 5 reads it).

Decodes 8, 16, 32 and 64 new tokens (``<eos>`` is disabled so every run has exactly that
length) for a batch
of sources with ``attnbook.decoding.greedy_decode`` (one position per step, keys and values
of earlier positions from the cache) and ``greedy_decode_uncached`` (the whole prefix through
the model at every step), asserts the tokens are identical, and times the two interleaved
(one thread by default; the median of the per-pair ratios is the speed-up). Each row also
carries a first count: recomputation runs 1 + 2 + ... + T positions through the decoder for T
new tokens, the cache T, a ratio of (T + 1) / 2. That count covers the decoder only: the
recomputing loop calls the whole model at every step, so it also re-runs the encoder each time.
Chapter 5 counts the FLOPs of both loops on this model with ``FlopCounterMode`` and sets those
ratios beside the measured speed-ups.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

import common
from attnbook.decoding import greedy_decode, greedy_decode_uncached
from attnbook.env import get_device
from attnbook.models.transformer import Transformer, TransformerConfig

NEVER = -1  # an <eos> id no model can produce: decoding runs for exactly max_len tokens


def measure(device: torch.device, batch: int, new_tokens: int, repeats: int) -> dict:
    """Median ms of cached and recomputed greedy decoding of ``new_tokens`` for ``batch`` sources."""
    torch.manual_seed(0)
    config = TransformerConfig(32, 48, d_model=128, num_heads=4, d_ff=512, num_encoder_layers=2,
                               num_decoder_layers=2, dropout=0.0, max_len=max(new_tokens + 1, 12))
    model = Transformer(config).to(device).eval()
    src = torch.randint(4, 32, (batch, 12)).to(device)  # (B, S)
    lengths = torch.full((batch,), 12, device=device)
    cached = lambda: greedy_decode(model, src, lengths, 1, NEVER, new_tokens)  # noqa: E731
    uncached = lambda: greedy_decode_uncached(model, src, lengths, 1, NEVER, new_tokens)  # noqa: E731
    out_cached, out_uncached = cached(), uncached()  # warm-up
    if out_cached != out_uncached:
        raise AssertionError("the KV cache changed the decoded tokens")
    assert all(len(row) == new_tokens for row in out_cached)
    ms_uncached, ms_cached, ratio = common.interleaved(uncached, cached, repeats, device)
    return {"batch": batch, "new_tokens": new_tokens, "identical_tokens": True,
            "cached_ms": round(ms_cached, 1), "recomputed_ms": round(ms_uncached, 1),
            "speedup": round(ratio, 1), "position_ratio": (new_tokens + 1) / 2}


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--conditions", default="", help="how the machine was shared, for the results file")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "kv_cache_speed.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = get_device(args.device)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for batch in args.batches:
        for new_tokens in args.new_tokens:
            row = measure(device, batch, new_tokens, args.repeats)
            print(row, flush=True)
            rows.append(row)
    common.write_result(args.out, {
        "description": "greedy decoding with a KV cache vs recomputing the prefix: same tokens, median times",
        "machine": f"{device.type}, torch {torch.__version__}, {torch.get_num_threads()} threads",
        "conditions": args.conditions, "load_average_at_start": round(load, 2),
        "model": "Transformer, d_model 128, 4 heads, d_ff 512, 2+2 layers, untrained; source length 12",
        "repeats": args.repeats, "runs": rows})


if __name__ == "__main__":
    main()
