"""Greedy decoding with a KV cache vs recomputing every position: same tokens, how much faster?

Usage: ``python benchmarks/kv_cache_speed.py [--device cpu] [--repeats 5]``

Decodes 64 new tokens (``<eos>`` is disabled so every run has the same length) for a batch
of sources with ``attnbook.decoding.greedy_decode`` (one position per step, keys and values
of earlier positions from the cache) and ``greedy_decode_uncached`` (the whole prefix through
the model at every step), asserts the tokens are identical, and prints the median times.
"""
from __future__ import annotations

import statistics

import torch

import common
from attnbook.decoding import greedy_decode, greedy_decode_uncached
from attnbook.env import get_device
from attnbook.models.transformer import Transformer, TransformerConfig

NEVER = -1  # an <eos> id no model can produce: decoding runs for exactly max_len tokens


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    device = get_device(args.device)
    torch.manual_seed(0)
    config = TransformerConfig(32, 48, d_model=128, num_heads=4, d_ff=512, num_encoder_layers=2,
                               num_decoder_layers=2, dropout=0.0, max_len=args.new_tokens + 1)
    model = Transformer(config).to(device).eval()
    src = torch.randint(4, 32, (args.batch, 12), device=device)  # (B, S)
    lengths = torch.full((args.batch,), 12, device=device)
    cached = lambda: greedy_decode(model, src, lengths, 1, NEVER, args.new_tokens)  # noqa: E731
    uncached = lambda: greedy_decode_uncached(model, src, lengths, 1, NEVER, args.new_tokens)  # noqa: E731
    cached(), uncached()  # warm-up
    times = {"cached": [], "recomputed": []}
    for _ in range(args.repeats):
        t_cached, out_cached = common.timed(cached, device)
        t_uncached, out_uncached = common.timed(uncached, device)
        if out_cached != out_uncached:
            raise AssertionError("the KV cache changed the decoded tokens")
        assert all(len(row) == args.new_tokens for row in out_cached)
        times["cached"].append(t_cached)
        times["recomputed"].append(t_uncached)
        ratios = [u / c for c, u in zip(times["cached"], times["recomputed"])]
    print(f"device {device.type}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"batch {args.batch}, source length 12, {args.new_tokens} new tokens, "
          f"d_model {config.d_model}, {config.num_decoder_layers} decoder layers, {args.repeats} repeats")
    print("identical tokens: True")
    for name, values in times.items():
        print(f"{name:>11}: median {1000 * statistics.median(values):8.1f} ms "
              f"({1000 * args.new_tokens * args.batch / statistics.median(values) / 1000:8.0f} tokens/s)")
    print(f"speed-up (median of per-repeat ratios): {statistics.median(ratios):.1f}x")


if __name__ == "__main__":
    main()
