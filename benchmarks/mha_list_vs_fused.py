"""Time Chapter 4's list of heads against the fused layer at H = 1, 8 and 64, forward + backward.

Usage (from the repository root): ``python benchmarks/mha_list_vs_fused.py [--repeats 200]``
(``--repeats 2 --out FILE``: a run of seconds, for the tests)

Section 4.2 calls the fused layer "efficient": three (D, D) projections and one batched product
instead of 3H small projections and H separate products, for the same FLOPs at every H. This
script times exactly that. ``list`` is section 4.1's ``MultiHeadAsList`` (H heads, each with its
own ``nn.Linear`` of width Dh for W^Q, W^K and W^V, attending with the library's explicit
``scaled_dot_product_attention``; outputs concatenated, then W^O). ``fused`` is the library's
``MultiHeadAttention`` on its explicit path (``need_weights=True``: the same explicit core, so the
two differ only in how the heads are batched). Both hold the same weights (the outputs are
checked equal before timing). ``fused kernel`` is the same library layer on its default path
(``F.scaled_dot_product_attention``, no weights kept), shown for reference.

Two shapes: the chapter's own scale (B = 64 sequences of T = 12, D = 64, as in section 4.6; at
H = 64 the heads have width 1) and a larger one (B = 8, T = 128, D = 256). One CPU thread.
Each repetition runs the three in turn, the order rotating, and is timed in CPU seconds of this
one-thread process (``time.process_time``), so the time spent waiting for a core on a shared
machine is not counted. The script reports median times and, for the ratios list / fused and
list / fused kernel, the median of the per-repetition ratios (each repetition's list time over
its fused time) with their interquartile range (first and third quartiles over the repetitions):
two ratios whose ranges overlap are not told apart by this run. The times depend on the CPU; the
ratios are what the chapter reads.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

import common
from attnbook.layers import MultiHeadAttention, scaled_dot_product_attention

HEADS = (1, 8, 64)
SHAPES = {"chapter (B=64, T=12, D=64)": (64, 12, 64), "larger (B=8, T=128, D=256)": (8, 128, 256)}


class MultiHeadAsList(nn.Module):
    """Section 4.1's layer: H separate heads, each with its own three projections, then W^O."""

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        head_dim = d_model // num_heads
        self.heads = nn.ModuleList(
            nn.ModuleDict({role: nn.Linear(d_model, head_dim) for role in ("q", "k", "v")})
            for _ in range(num_heads))
        self.out = nn.Linear(d_model, d_model)  # W^O

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, D)
        outputs = [scaled_dot_product_attention(head["q"](x), head["k"](x), head["v"](x))[0]
                   for head in self.heads]  # H x (B, T, Dh)
        return self.out(torch.cat(outputs, dim=-1))  # (B, T, D)


def fused_copy(listed: MultiHeadAsList) -> MultiHeadAttention:
    """The library layer holding ``listed``'s weights: head h is the h-th block of Dh columns."""
    d_model = listed.out.in_features
    fused = MultiHeadAttention(d_model, len(listed.heads))
    with torch.no_grad():
        for role in ("q", "k", "v"):
            proj = getattr(fused, f"{role}_proj")
            proj.weight.copy_(torch.cat([head[role].weight for head in listed.heads]))
            proj.bias.copy_(torch.cat([head[role].bias for head in listed.heads]))
        fused.out_proj.load_state_dict(listed.out.state_dict())
    return fused


def cpu_interleaved(steps: tuple, repeats: int) -> list[list[float]]:
    """CPU seconds of each step, ``repeats`` times, the order rotating every repetition.

    CPU time of this one-thread process (``time.process_time``), not wall time: on a CPU that
    other programs share, the time this process waits for a core is not counted."""
    times = [[] for _ in steps]
    for r in range(repeats):
        for k in range(len(steps)):
            i = (r + k) % len(steps)
            start = time.process_time()
            steps[i]()
            times[i].append(time.process_time() - start)
    return times


def benchmark(batch: int, length: int, d_model: int, heads: int, repeats: int,
              warmup: int) -> dict:
    torch.manual_seed(0)
    listed = MultiHeadAsList(d_model, heads)
    fused = fused_copy(listed)
    x = torch.randn(batch, length, d_model, requires_grad=True)  # (B, T, D)
    with torch.no_grad():
        torch.testing.assert_close(fused(x, x, x, need_weights=True)[0], listed(x),
                                   atol=1e-5, rtol=1e-4)

    def step_list():
        listed(x).sum().backward()

    def step_fused():
        fused(x, x, x, need_weights=True)[0].sum().backward()

    def step_kernel():
        fused(x, x, x).sum().backward()

    for _ in range(warmup):
        step_list()
        step_fused()
        step_kernel()
    times = cpu_interleaved((step_list, step_fused, step_kernel), repeats)
    list_ms, fused_ms, kernel_ms = (1e3 * statistics.median(t) for t in times)
    ratios = [a / b for a, b in zip(times[0], times[1])]
    kernel_ratios = [a / b for a, b in zip(times[0], times[2])]
    return {"heads": heads, "head_dim": d_model // heads, "list_ms": round(list_ms, 3),
            "fused_ms": round(fused_ms, 3), "fused_kernel_ms": round(kernel_ms, 3),
            "list_over_fused": round(statistics.median(ratios), 2),
            "list_over_fused_iqr": quartiles(ratios),
            "list_over_fused_kernel": round(statistics.median(kernel_ratios), 2),
            "list_over_fused_kernel_iqr": quartiles(kernel_ratios)}


def quartiles(values: list[float]) -> list[float]:
    """[first quartile, third quartile] of the per-repetition values, rounded to 0.01
    (with one value, that value twice)."""
    if len(values) < 2:
        return [round(values[0], 2)] * 2
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return [round(q1, 2), round(q3, 2)]


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=None, help="where to write the JSON "
                        "(default lib/attnbook/results/mha_list_vs_fused.json)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for shape, (batch, length, d_model) in SHAPES.items():
        for heads in HEADS:
            row = {"shape": shape, **benchmark(batch, length, d_model, heads, args.repeats,
                                               args.warmup)}
            rows.append(row)
            print(f"{shape}, H={heads:2d} (Dh={row['head_dim']:3d}): list {row['list_ms']:8.2f} ms, "
                  f"fused {row['fused_ms']:8.2f} ms, fused kernel {row['fused_kernel_ms']:8.2f} ms; "
                  f"median ratio list / fused {row['list_over_fused']:.2f}x "
                  f"(IQR {row['list_over_fused_iqr'][0]:.2f}-{row['list_over_fused_iqr'][1]:.2f}), "
                  f"list / fused kernel {row['list_over_fused_kernel']:.2f}x "
                  f"(IQR {row['list_over_fused_kernel_iqr'][0]:.2f}-"
                  f"{row['list_over_fused_kernel_iqr'][1]:.2f})", flush=True)
    out = common.RESULTS / "mha_list_vs_fused.json" if args.out is None else args.out
    common.write_result(Path(out), {
        "description": "forward + backward of section 4.1's list of heads against the fused "
                       "layer (explicit path) and the fused kernel, same weights, one thread, "
                       f"{args.repeats} interleaved repetitions; ratios: median of the per-repetition "
                       "ratios, with their interquartile range",
        "machine": common.machine(), "runs": rows})
    print("median list / fused ratio over all rows:",
          f"{statistics.median(r['list_over_fused'] for r in rows):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
