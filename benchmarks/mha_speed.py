"""Time the library's MultiHeadAttention against nn.MultiheadAttention, forward + backward.

Usage (from the repository root): ``python benchmarks/mha_speed.py [--device cpu] [--repeats 20]``

Both modules hold the same weights (checked before timing) and run self-attention on the same
input; neither returns attention weights (nn.MultiheadAttention with ``need_weights=False``).
Four cases: no mask; a causal mask; a float bias on the scores (T5's relative positions; PyTorch
takes it as a float ``attn_mask``); and rotary positions on queries and keys (PyTorch has none:
that row times ours with rotary against plain ``nn.MultiheadAttention``, so it shows what the
rotation costs, and no output comparison is possible).
Repetitions are interleaved (ours, theirs, ours, ...) so that a change in machine load hits both
alike, and the script reports the median time of each and the median of the per-pair ratios.
Timings on a shared machine are noisy: run it on a quiet one for numbers you quote.
"""
from __future__ import annotations

import sys

import torch

import common
from attnbook.layers import MultiHeadAttention, RotaryEmbedding, to_torch_multihead
from attnbook.layers.masks import causal_mask

CASES = ("no mask", "causal mask", "float bias", "rotary")


def _inputs(case: str, length: int, device: torch.device) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(our boolean mask, our float bias) for ``case``; PyTorch gets ``~mask`` or the bias as attn_mask."""
    if case == "causal mask":
        return causal_mask(length, device=device), None
    if case == "float bias":
        return None, torch.randn(length, length, device=device, generator=torch.Generator(device).manual_seed(1))
    return None, None


def _ours(module, x, mask, bias) -> torch.Tensor:
    return module(x, x, x, mask=mask, bias=bias)


def _theirs(module, x, mask, bias) -> torch.Tensor:
    attn_mask = bias if bias is not None else (None if mask is None else ~mask)
    return module(x, x, x, attn_mask=attn_mask, need_weights=False)[0]


def benchmark(batch: int, length: int, d_model: int, heads: int, repeats: int, warmup: int,
              device: torch.device, case: str) -> dict[str, float]:
    torch.manual_seed(0)
    plain = MultiHeadAttention(d_model, heads).to(device)
    theirs = to_torch_multihead(plain)
    ours = plain if case != "rotary" else MultiHeadAttention(
        d_model, heads, rotary=RotaryEmbedding(d_model // heads, length)).to(device)
    x = torch.randn(batch, length, d_model, device=device, requires_grad=True)
    mask, bias = _inputs(case, length, device)
    if case != "rotary":
        with torch.no_grad():
            torch.testing.assert_close(_ours(ours, x, mask, bias), _theirs(theirs, x, mask, bias), atol=1e-4, rtol=1e-4)

    def step_ours():
        _ours(ours, x, mask, bias).sum().backward()

    def step_theirs():
        _theirs(theirs, x, mask, bias).sum().backward()

    for _ in range(warmup):
        step_ours()
        step_theirs()
    ours_ms, torch_ms, ratio = common.interleaved(step_ours, step_theirs, repeats, device)
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
    parser.add_argument("--target", type=float, default=1.0, help="exit 1 if the median ratio is above this")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} CPU threads; "
          f"B={args.batch} T={args.length} D={args.d_model} H={args.heads}, {args.repeats} interleaved repetitions")
    worst = 0.0
    for case in CASES:
        r = benchmark(args.batch, args.length, args.d_model, args.heads, args.repeats, args.warmup, device, case)
        if case != "rotary":  # no PyTorch equivalent: shown, not held to the target
            worst = max(worst, r["ratio"])
        print(f"{case:11s}  attnbook {r['ours_ms']:8.2f} ms   "
              f"nn.MultiheadAttention {r['torch_ms']:8.2f} ms   median ratio {r['ratio']:.2f}x"
              + ("  (ours rotates q and k; theirs is plain)" if case == "rotary" else ""))
    print(f"worst median ratio with a PyTorch equivalent {worst:.2f}x: {common.verdict(worst, args.target)}")
    return 0 if worst <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
