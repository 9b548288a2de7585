"""Timing that is honest on every device: GPUs run queued work after the call returns, so a clock
read without waiting for them measures only the queueing.

``synchronize(device)`` waits for CUDA or MPS work (nothing to wait for on the CPU); ``timed`` times
one call, waiting before and after; ``seconds`` repeats a call after warm-up and summarises (the
fastest run, or the median). Used by the chapters' timing cells and by ``benchmarks/``.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, TypeVar

import torch

R = TypeVar("R")
SUMMARIES = ("min", "median")


def synchronize(device: torch.device | str) -> None:
    """Wait until every kernel queued on ``device`` has finished (CUDA, MPS; a no-op on the CPU)."""
    kind = torch.device(device).type
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


def timed(fn: Callable[[], R], device: torch.device | str) -> tuple[float, R]:
    """Seconds ``fn()`` takes, with the device's queued work waited for before and after, and
    its result."""
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - start, out


def seconds(fn: Callable[[], object], device: torch.device | str, repeats: int = 3,
            warmup: int = 1, summary: str = "min") -> float:
    """Seconds per call of ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed ones,
    summarised by their ``"min"`` (noise on a busy machine only adds time) or ``"median"``."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0; got repeats={repeats}, warmup={warmup}")
    if summary not in SUMMARIES:
        raise ValueError(f"summary must be one of {SUMMARIES}; got {summary!r}")
    for _ in range(warmup):
        fn()
    times = [timed(fn, device)[0] for _ in range(repeats)]
    return min(times) if summary == "min" else statistics.median(times)
