"""Checkers for Chapter 4 (multi-head attention)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from attnbook.exercises.core import Case, CheckResult, run_cases
from attnbook.layers.masks import causal_mask, token_mask


def _reference_split(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, Dh)


def _reference_merge(x: torch.Tensor) -> torch.Tensor:
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, D)


def _reference_decoder_mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    return token_mask(lengths, size)[:, None, :] & causal_mask(size)  # (B, T, T)


def _x(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check_split_heads(fn: Callable) -> CheckResult:
    """``fn(x (B, T, D), num_heads) -> (B, H, T, Dh)``: head h holds columns h*Dh:(h+1)*Dh."""
    shapes = [((1, 3, 4), 2), ((2, 5, 12), 3), ((2, 4, 16), 8), ((3, 2, 6), 1)]
    cases = [
        Case(f"x {shape}, {h} heads", (_x(n, *shape), h), _reference_split(_x(n, *shape), h),
             hint="view (B, T, D) as (B, T, H, Dh) and then swap dimensions 1 and 2; viewing "
                  "straight to (B, H, T, Dh) mixes positions into heads.")
        for n, (shape, h) in enumerate(shapes)
    ]
    return run_cases("split heads", fn, cases)


def check_merge_heads(fn: Callable) -> CheckResult:
    """``fn(x (B, H, T, Dh)) -> (B, T, H * Dh)``, the inverse of splitting."""
    shapes = [(1, 2, 3, 2), (2, 3, 5, 4), (2, 8, 4, 2), (1, 1, 3, 5)]
    cases = [
        Case(f"x {shape}", (_x(n, *shape),), _reference_merge(_x(n, *shape)),
             hint="swap dimensions 1 and 2 back to (B, T, H, Dh), make it contiguous (or use "
                  "reshape), then view as (B, T, H * Dh).")
        for n, shape in enumerate(shapes)
    ]
    return run_cases("merge heads", fn, cases)


def check_decoder_mask(fn: Callable) -> CheckResult:
    """``fn(lengths (B,), size) -> (B, T, T)`` bool: causal AND key is not padding."""
    cases = [
        Case(f"lengths {lengths}, size {size}", (torch.tensor(lengths), size),
             _reference_decoder_mask(torch.tensor(lengths), size),
             hint="True = may attend. Key j is allowed for query i when j <= i (diagonal kept) and "
                  "j < length; padding removes key columns, so broadcast it as (B, 1, S).")
        for lengths, size in (([3], 3), ([2, 4], 4), ([1, 3, 5], 5))
    ]
    return run_cases("decoder mask", fn, cases)
