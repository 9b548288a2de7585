"""Chapter 9's roofline: how close attention comes to this CPU's matrix-multiply peak, and why not.

Usage: ``python benchmarks/attention_roofline.py [--repeats 3]`` (writes
``lib/attnbook/results/attention_roofline.json``, which the chapter plots), or ``--smoke``.

One thread. First the machine's two ceilings: the peak rate of a large float32 matrix product
(FLOP/s) and the rate of a large copy (bytes/s, read + write). Then three implementations of
``softmax(Q Kᵀ/√Dh) V`` (no mask) on ``(B, H, T, Dh) = (1, 8, T, Dh)`` inputs, across T and Dh:

- ``explicit``: the library's written-out attention (``attnbook.layers.scaled_dot_product_attention``),
  which writes the ``(T, T)`` scores and weights to memory and reads them back;
- ``sdpa``: PyTorch's fused ``F.scaled_dot_product_attention`` (on a CPU and 4-D inputs, a tiled
  kernel in C++);
- ``tiled``: the chapter's Python loop over tiles (``attnbook.layers.tiled.tiled_attention``).

For each: the achieved FLOP/s, with FLOPs = 4·B·H·T²·Dh (the two matrix products), as a fraction
of the matmul peak; and the arithmetic intensity of the explicit algorithm (FLOPs per byte of the
minimal memory traffic when the scores go through memory: 16·T² bytes for writing and reading the
scores and the weights, plus 16·T·Dh for Q, K, V and the output, per head, float32). Below the
ridge point (peak FLOP/s ÷ bandwidth) a computation is bound by memory, above it by arithmetic.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import common
from attnbook.layers import scaled_dot_product_attention
from attnbook.layers.tiled import tiled_attention

LENGTHS = (128, 256, 512, 1024, 2048)
HEAD_DIMS = (16, 64, 128)
HEADS = 8  # H, with B = 1


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_peak(n: int, repeats: int) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / best_seconds(lambda: a @ b, repeats)


def copy_bandwidth(n: int, repeats: int) -> float:
    src, dst = torch.randn(n), torch.empty(n)
    return 2 * 4 * n / best_seconds(lambda: dst.copy_(src), repeats)  # read + write


def caches() -> dict[str, str]:
    """This CPU's cache sizes by level (Linux), e.g. {"L1d": "48K", "L2": "1024K", "L3": "32768K"}."""
    found = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction":
            found[f"L{level}" + ("d" if kind == "Data" else "")] = size
    return found


def main() -> None:
    p = common.experiment_parser(__doc__)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    lengths, dims = ((64, 128), (16,)) if args.smoke else (LENGTHS, HEAD_DIMS)
    start = time.perf_counter()
    peak = max(matmul_peak(n, args.repeats) for n in ((256,) if args.smoke else (1024, 2048)))
    bandwidth = copy_bandwidth(2**20 if args.smoke else 2**26, args.repeats)
    print(f"matmul peak {peak / 1e9:.1f} GFLOP/s, copy bandwidth {bandwidth / 1e9:.1f} GB/s, "
          f"ridge {peak / bandwidth:.1f} FLOP/byte", flush=True)
    rows = []
    for Dh in dims:
        for T in lengths:
            q, k, v = (torch.randn(1, HEADS, T, Dh) for _ in range(3))
            flops = 4 * HEADS * T * T * Dh
            traffic = HEADS * (16 * T * T + 16 * T * Dh)
            impls = {
                "explicit": lambda: scaled_dot_product_attention(q, k, v),
                "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
                "tiled": lambda: tiled_attention(q, k, v, block_size=128),
            }
            for name, fn in impls.items():
                seconds = best_seconds(fn, args.repeats)
                row = {"impl": name, "T": T, "Dh": Dh, "ms": round(1e3 * seconds, 3),
                       "gflops": round(flops / seconds / 1e9, 2),
                       "fraction_of_peak": round(flops / seconds / peak, 4),
                       "intensity_explicit": round(flops / traffic, 2), "scores_bytes": 4 * HEADS * T * T}
                rows.append(row)
                print(row, flush=True)
    result = {
        "description": __doc__.split("\n\n")[0],
        "machine": common.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "caches": caches(),
        "matmul_peak_gflops": round(peak / 1e9, 2),
        "copy_bandwidth_gbs": round(bandwidth / 1e9, 2),
        "ridge_flop_per_byte": round(peak / bandwidth, 2),
        "heads": HEADS,
        "wall_seconds": round(time.perf_counter() - start),
        "rows": rows,
    }
    out = common.out_path(args, "attention_roofline.json")
    if out is not None:
        common.write_result(out, result)


if __name__ == "__main__":
    main()
