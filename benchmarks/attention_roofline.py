"""Chapter 9's roofline: how close attention comes to this CPU's matrix-multiply peak, and why not.

Usage: ``python benchmarks/attention_roofline.py [--repeats 3]`` (writes
``lib/attnbook/results/attention_roofline.json``, which the chapter plots), or ``--smoke``;
``--allocation-only [--repeats 7]`` runs the allocation control alone and writes
``attention_roofline_allocation.json`` (a few seconds).

One thread. First the machine's two ceilings: the peak rate of a large float32 matrix product
(FLOP/s) and the rate of a large copy (bytes/s, read + write). Then three implementations of
``softmax(Q Kᵀ/√Dh) V`` (no mask) on ``(B, H, T, Dh) = (1, 8, T, Dh)`` inputs, across T and Dh:

- ``explicit``: the library's written-out attention (``attnbook.layers.scaled_dot_product_attention``),
  which writes the ``(T, T)`` scores and weights to memory and reads them back;
- ``sdpa``: PyTorch's fused ``F.scaled_dot_product_attention`` (on a CPU and 4-D inputs, a tiled
  kernel in C++);
- ``tiled``: the chapter's Python loop over tiles (``attnbook.layers.tiled.tiled_attention``,
  query blocks and key tiles of ``BLOCK`` = 128, as in the chapter).

For each: the achieved FLOP/s, with FLOPs = 4·B·H·T²·Dh (the two matrix products), as a fraction
of the matmul peak; and the arithmetic intensity of its algorithm, FLOPs per byte of the minimal
traffic to main memory (per head, float32):

- explicit: the scores go through memory: 16·T² bytes (write and read the scores and the
  weights) plus 16·T·Dh (read Q, K, V, write the output);
- tiled, with query blocks of Bq rows: Q read and the output written once (8·T·Dh), and K and V
  read once per query block (8·T·Dh · ⌈T/Bq⌉), so the intensity is T / (2 (1 + ⌈T/Bq⌉)), which
  tends to Bq/2 as T grows, whatever Dh;
- sdpa: the same formula with PyTorch's CPU query block (32 rows for T < 192, 64 up to 767, 256
  from 768: ``q_split_size`` in ``aten/src/ATen/native/cpu/FlashAttentionKernel.cpp``).

Below the ridge point (peak FLOP/s ÷ bandwidth) a computation is bound by memory, above it by
arithmetic. Then explicit attention's steps (Q Kᵀ, causal mask, softmax, P V) timed apart at Dh = 64 and
T = 512, 1024 (``steps``), to see which one slows when the scores outgrow the last-level cache.
(The rows above time attention *without* a mask; the mask pass is timed only in ``steps``.)

Last, ``allocation``: a control for a second explanation of that slowdown. glibc's ``malloc``
serves a request above its mmap threshold (which grows to at most 32 MiB) with fresh pages from
the kernel, and every fresh page faults on first touch. The scores of 8 heads reach 32 MiB at
T = 1024, the size of this CPU's last-level cache too, so the two explanations predict the same
cliff. The control times, at T just below and just above 32 MiB of scores (T = 1016: 31.5 MiB,
T = 1032: 32.5 MiB; and further out T = 1200, 44 MiB, and T = 1448, 64 MiB), each step once into a
**fresh** tensor (``s.clone()``, ``q @ kᵀ``,
``s.softmax(-1)``) and once into a **preallocated** buffer (``buf.copy_(s)``,
``torch.matmul(q, kᵀ, out=buf)``, ``torch._softmax(s, -1, False, out=buf)``). Both move the same
bytes; if the preallocated versions keep their speed above 32 MiB while the fresh ones fall, the
cliff is allocation (page faults), not the cache. Each row also records the fewest minor page
faults one call caused (``getrusage``), the mechanism itself.
"""
from __future__ import annotations

import resource
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
BLOCK = 128  # the tiled loop's query block and key tile, as in the chapter


def sdpa_query_block(T: int) -> int:
    """PyTorch's CPU flash-attention query block for a query length T (q_split_size)."""
    return min(T, 256 if T >= 768 else 64 if T >= 192 else 32)


def tiled_intensity(T: int, Dh: int, query_block: int) -> float:
    """FLOPs / bytes of a tiled kernel: Q in and output out once, K and V once per query block."""
    blocks = -(-T // query_block)
    return 4 * T * T * Dh / (4 * (2 * T * Dh + 2 * T * Dh * blocks))


def explicit_steps(repeats: int) -> list[dict]:
    """Q Kᵀ, the causal mask, softmax and P V of explicit attention timed apart (8 heads, Dh = 64).

    The mask and the softmax are element-wise passes over the (T, T) scores: each reads and writes
    4 + 4 bytes per score (the mask also reads one byte of the boolean mask) for about 1 FLOP (the
    mask) or about 5 (the softmax: maximum, subtraction, exponential, sum, division), far left of
    the ridge: ``mask_flop_per_byte`` and ``softmax_flop_per_byte`` are those counts.
    """
    rows = []
    for T in (512, 1024):
        q, k, v = (torch.randn(1, HEADS, T, 64) for _ in range(3))
        s = q @ k.transpose(-2, -1) / 8
        w = s.softmax(-1)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        ms = [1e3 * best_seconds(fn, repeats) for fn in
              (lambda: q @ k.transpose(-2, -1), lambda: s.masked_fill(future, float("-inf")),
               lambda: s.softmax(-1), lambda: w @ v)]
        gflop = 2 * HEADS * T * T * 64 / 1e9  # one of the two products
        scores = HEADS * T * T
        rows.append({"T": T, "Dh": 64, "qk_ms": round(ms[0], 3), "mask_ms": round(ms[1], 3),
                     "softmax_ms": round(ms[2], 3), "pv_ms": round(ms[3], 3),
                     "qk_gflops": round(gflop / ms[0] * 1e3, 1),
                     "pv_gflops": round(gflop / ms[3] * 1e3, 1),
                     "mask_ns_per_score": round(ms[1] * 1e6 / scores, 3),
                     "softmax_ns_per_score": round(ms[2] * 1e6 / scores, 3),
                     "mask_gbs": round(9 * scores / ms[1] / 1e6, 1),
                     "softmax_gbs": round(8 * scores / ms[2] / 1e6, 1),
                     "mask_flop_per_byte": round(1 / 9, 3), "softmax_flop_per_byte": 5 / 8,
                     "scores_bytes": 4 * scores})
        print(rows[-1], flush=True)
    return rows


def allocation_control(repeats: int, lengths=(1016, 1032, 1200, 1448)) -> list[dict]:
    """Fresh tensor versus preallocated buffer, at scores below and above 32 MiB (Dh = 64)."""
    rows = []
    for T in lengths:
        q, k = (torch.randn(1, HEADS, T, 64) for _ in range(2))
        kt = k.transpose(-2, -1)
        s = q @ kt / 8
        buf = torch.empty_like(s)
        scores = HEADS * T * T
        measured = {name: best_seconds_faults(fn, repeats) for name, fn in (
            ("copy_fresh", lambda: s.clone()),
            ("copy_into", lambda: buf.copy_(s)),
            ("qk_fresh", lambda: q @ kt),
            ("qk_into", lambda: torch.matmul(q, kt, out=buf)),
            ("softmax_fresh", lambda: s.softmax(-1)),
            ("softmax_into", lambda: torch._softmax(s, -1, False, out=buf)))}
        gflop = 2 * HEADS * T * T * 64 / 1e9
        row = {"T": T, "Dh": 64, "scores_mib": round(4 * scores / 2**20, 2)}
        for name, (seconds, faults) in measured.items():
            value = 1e3 * seconds
            row[f"{name}_ms"] = round(value, 3)
            row[f"{name}_page_faults"] = faults
            if name.startswith("qk"):
                row[f"{name}_gflops"] = round(gflop / value * 1e3, 1)
            else:  # read + write, 4 + 4 bytes per score
                row[f"{name}_gbs"] = round(8 * scores / value / 1e6, 1)
        rows.append(row)
        print(row, flush=True)
    return rows


def best_seconds_faults(fn, repeats: int) -> tuple[float, int]:
    """The fastest of ``repeats`` calls, and the fewest minor page faults one call caused."""
    fn()  # warm-up
    times, faults = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return min(times), min(faults)


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
    p.add_argument("--allocation-only", action="store_true",
                   help="only the fresh-versus-preallocated control (a few seconds)")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.allocation_only:
        start = time.perf_counter()
        result = {
            "description": "Chapter 9's allocation control: the same step written into a fresh "
                           "tensor or into a preallocated buffer, below and above 32 MiB of scores.",
            "machine": common.machine(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "caches": caches(),
            "repeats": args.repeats,
            "allocation": allocation_control(args.repeats, (64,) if args.smoke
                                             else (1016, 1032, 1200, 1448)),
        }
        result["wall_seconds"] = round(time.perf_counter() - start)
        out = common.out_path(args, "attention_roofline_allocation.json")
        if out is not None:
            common.write_result(out, result)
        return
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
                "tiled": lambda: tiled_attention(q, k, v, block_size=BLOCK),
            }
            blocks = {"explicit": None, "sdpa": sdpa_query_block(T), "tiled": BLOCK}
            for name, fn in impls.items():
                seconds = best_seconds(fn, args.repeats)
                row = {"impl": name, "T": T, "Dh": Dh, "ms": round(1e3 * seconds, 3),
                       "gflops": round(flops / seconds / 1e9, 2),
                       "fraction_of_peak": round(flops / seconds / peak, 4),
                       "intensity_explicit": round(flops / traffic, 2), "query_block": blocks[name],
                       "intensity": round(flops / traffic if blocks[name] is None
                                          else tiled_intensity(T, Dh, blocks[name]), 2),
                       "scores_bytes": 4 * HEADS * T * T}
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
        "tiled_block": BLOCK,
        "steps": explicit_steps(args.repeats) if not args.smoke else [],
        "allocation": allocation_control(args.repeats, (1016, 1032, 1200, 1448) if not args.smoke
                                         else (64,)),
        "wall_seconds": round(time.perf_counter() - start),
        "rows": rows,
    }
    out = common.out_path(args, "attention_roofline.json")
    if out is not None:
        common.write_result(out, result)


if __name__ == "__main__":
    main()
