"""Checkers for Chapter 3 (self-attention and positional encoding)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from attnbook.layers.attention import scaled_dot_product_attention
from attnbook.exercises.core import Case, CheckResult, run_cases
from attnbook.layers.masks import causal_mask
from attnbook.layers.positional import sinusoidal_encoding


def _qkv(seed: int, batch: tuple[int, ...], t: int, s: int, dk: int, dv: int, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(*batch, t, dk, generator=g)
    k = scale * torch.randn(*batch, s, dk, generator=g)
    v = torch.randn(*batch, s, dv, generator=g)
    return q, k, v


def check_scaled_dot_product_attention(fn: Callable) -> CheckResult:
    """``fn(query (..., T, Dk), key (..., S, Dk), value (..., S, Dv)) -> (..., T, Dv)``."""
    cases = []
    for n, (batch, t, s, dk, dv, scale) in enumerate(
        [((), 3, 3, 4, 4, 1.0), ((2,), 3, 5, 16, 2, 1.0), ((2, 3), 4, 6, 64, 8, 1.0), ((1,), 2, 4, 8, 3, 3.0)]
    ):
        q, k, v = _qkv(n, batch, t, s, dk, dv, scale)
        expected = scaled_dot_product_attention(q, k, v)[0]
        cases.append(Case(
            f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}", (q, k, v), expected,
            hint="scores = Q Kᵀ / √d_k with d_k = query.shape[-1]; softmax over the keys (the last "
                 "dimension of the scores); then weights @ V.",
        ))
    return run_cases("scaled dot-product attention", fn, cases)


def check_causal_mask(fn: Callable) -> CheckResult:
    """``fn(size) -> (T, T)`` boolean mask, True where query i may attend to key j (j <= i)."""
    cases = [
        Case(f"size {n}", (n,), causal_mask(n),
             hint="bool tensor, True = may attend; position i sees positions 0..i, itself included "
                  "(torch.tril keeps the diagonal).")
        for n in (1, 2, 5)
    ]
    return run_cases("causal mask", fn, cases)


def check_sinusoidal_encoding(fn: Callable) -> CheckResult:
    """``fn(max_len, d_model) -> (T, D)`` table with sin in even columns and cos in odd columns."""
    cases = [
        Case(f"max_len={t}, d_model={d}", (t, d), sinusoidal_encoding(t, d), atol=1e-4,
             hint="PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same angle); "
                  "the exponent uses the even column index 2i, not i.")
        for t, d in ((1, 2), (4, 4), (50, 16), (30, 512))
    ]
    return run_cases("sinusoidal positional encoding", fn, cases)
