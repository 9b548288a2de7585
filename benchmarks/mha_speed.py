"""Time the library's MultiHeadAttention against nn.MultiheadAttention, forward + backward.

Usage (from the repository root): ``python benchmarks/mha_speed.py [--device cpu] [--repeats 20]``

Both modules hold the same weights (checked before timing) and run self-attention on the same
input; neither returns attention weights (nn.MultiheadAttention with ``need_weights=False``).
Repetitions are interleaved (ours, theirs, ours, ...) so that a change in machine load hits both
alike, and the script reports the median time of each and the median of the per-pair ratios.
Timings on a shared machine are noisy: run it on a quiet one for numbers you quote.
"""
from __future__ import annotations

import sys

import torch

import common
from attnbook.layers import MultiHeadAttention, to_torch_multihead
from attnbook.layers.masks import causal_mask


def _step(module, x, mask, ours: bool) -> None:
    if ours:
        out = module(x, x, x, mask=mask)
    else:
        out = module(x, x, x, attn_mask=None if mask is None else ~mask, need_weights=False)[0]
    out.sum().backward()


def benchmark(batch: int, length: int, d_model: int, heads: int, repeats: int, warmup: int,
              device: torch.device, causal: bool) -> dict[str, float]:
    torch.manual_seed(0)
    ours = MultiHeadAttention(d_model, heads).to(device)
    theirs = to_torch_multihead(ours)
    x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
    mask = causal_mask(length, device=device) if causal else None
    with torch.no_grad():
        torch.testing.assert_close(ours(x, x, x, mask=mask),
                                   theirs(x, x, x, attn_mask=None if mask is None else ~mask, need_weights=False)[0],
                                   atol=1e-4, rtol=1e-4)
    for _ in range(warmup):
        _step(ours, x, mask, True)
        _step(theirs, x, mask, False)
    ours_ms, torch_ms, ratio = common.interleaved(lambda: _step(ours, x, mask, True),
                                                   lambda: _step(theirs, x, mask, False), repeats, device)
    return {"ours_ms": ours_ms, "torch_ms": torch_ms, "ratio": ratio}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--target", type=float, default=1.2, help="exit 1 if the median ratio is above this")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} CPU threads; "
          f"B={args.batch} T={args.length} D={args.d_model} H={args.heads}, {args.repeats} interleaved repetitions")
    worst = 0.0
    for causal in (False, True):
        r = benchmark(args.batch, args.length, args.d_model, args.heads, args.repeats, args.warmup, device, causal)
        worst = max(worst, r["ratio"])
        print(f"{'causal mask' if causal else 'no mask':11s}  attnbook {r['ours_ms']:8.2f} ms   "
              f"nn.MultiheadAttention {r['torch_ms']:8.2f} ms   median ratio {r['ratio']:.2f}x")
    print(f"worst median ratio {worst:.2f}x: {common.verdict(worst, args.target)}")
    return 0 if worst <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
