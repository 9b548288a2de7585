"""Checkers for Chapter 4 (multi-head attention).

Expected answers come from the library (``MultiHeadAttention``, ``KVCache``,
``layers.blocks.causal_self_attention``); each checker lists the known mistakes it can name.
``EXERCISES`` maps the notebook's function names to their checkers.
Legend: B batch, T new positions, P cached positions, D model width, H heads, Dh head width.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from attnbook.exercises.core import Case, CheckResult, Mistake, no_grad, run_cases
from attnbook.layers.attention import KVCache, MultiHeadAttention
from attnbook.layers.blocks import causal_self_attention
from attnbook.layers.masks import causal_mask


def _x(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _reference_split(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, Dh)


def _reference_merge(x: torch.Tensor) -> torch.Tensor:
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, D)


# --- split heads ------------------------------------------------------------------------------------
SPLIT_MISTAKES = [
    Mistake("no transpose", "reshaping (B, T, D) straight to (B, H, T, Dh) mixes positions into heads: view it "
            "as (B, T, H, Dh), then swap dimensions 1 and 2.",
            gives=lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h)),
    Mistake("interleaved columns", "head h holds the block of columns h*Dh .. (h+1)*Dh - 1, not every H-th "
            "column: view as (B, T, H, Dh), not (B, T, Dh, H).",
            gives=lambda x, h: x.view(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2)),
    Mistake("heads not moved", "the heads axis goes before the positions: (B, H, T, Dh), so transpose(1, 2) "
            "after the view.", gives=lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h)),
    Mistake("ignores num_heads", "the number of heads is the num_heads argument: dimension 1 must be num_heads.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.dim() == 4 and got.shape[1] != args[1]),
]


def check_split_heads(fn: Callable) -> CheckResult:
    """``split_heads(x (B, T, D), num_heads) -> (B, H, T, Dh)``: head h holds columns h*Dh:(h+1)*Dh."""
    shapes = [((2, 5, 12), 3), ((1, 3, 4), 2), ((2, 4, 16), 8), ((3, 2, 6), 1), ((2, 1, 6), 6), ((1, 4, 10), 5)]
    cases = [
        Case(f"x of shape {shape}, num_heads={h}", (_x(n, *shape), h), _reference_split(_x(n, *shape), h),
             hint="view (B, T, D) as (B, T, H, Dh) and then swap dimensions 1 and 2.")
        for n, (shape, h) in enumerate(shapes)
    ]
    return run_cases("split heads", fn, cases, SPLIT_MISTAKES)


# --- merge heads -------------------------------------------------------------------------------------
MERGE_MISTAKES = [
    Mistake("transposed head merge", "a plain reshape of (B, H, T, Dh) to (B, T, H*Dh) mixes positions across "
            "heads: transpose(1, 2) to (B, T, H, Dh) first, then reshape.",
            gives=lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3])),
    Mistake("interleaved heads", "concatenate the heads (head h is columns h*Dh .. (h+1)*Dh - 1); you "
            "interleaved their features (Dh before H).",
            gives=lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3])),
    Mistake("averaged heads", "concatenate the heads into H*Dh columns; do not average or sum them.",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.dim() == 3
            and got.shape[-1] == args[0].shape[-1] and args[0].shape[1] > 1),
]


def check_merge_heads(fn: Callable) -> CheckResult:
    """``merge_heads(x (B, H, T, Dh)) -> (B, T, H * Dh)``, the inverse of splitting."""
    shapes = [(2, 3, 5, 4), (1, 2, 3, 2), (2, 8, 4, 2), (1, 1, 3, 5), (3, 4, 1, 3), (2, 3, 2, 3)]
    cases = [
        Case(f"x of shape {shape}", (_x(n, *shape),), _reference_merge(_x(n, *shape)),
             hint="swap dimensions 1 and 2 back to (B, T, H, Dh), then reshape to (B, T, H * Dh).")
        for n, shape in enumerate(shapes)
    ]
    return run_cases("merge heads", fn, cases, MERGE_MISTAKES)


# --- one cached step of causal self-attention ---------------------------------------------------------
def _cached_variant(attn, x, cache, mask="right", order="old-new", return_old=False):
    kv = attn.project_kv(x, x)  # (B, H, T, Dh) each
    if cache is None:
        full = kv
    elif order == "old-new":
        full = cache.extend(kv.key, kv.value)
    else:
        full = KVCache(torch.cat([kv.key, cache.key], -2), torch.cat([kv.value, cache.value], -2))
    T, S = x.shape[1], len(full)
    m = None
    if mask == "right" and T > 1:
        m = causal_mask(T, S)
    elif mask == "top-left":
        m = torch.ones(T, S, dtype=torch.bool).tril()
    out = attn.attend(x, full, m)
    return out, (cache if return_old and cache is not None else full)


CACHED_MISTAKES = [
    Mistake("cache not extended", "KVCache.extend returns a NEW cache and leaves the old one as it was: use "
            "what it returns, attend to it and return it (`cache = cache.extend(...)`).",
            gives=lambda attn, x, cache: (attn.attend(x, cache) if cache is not None else
                                          _cached_variant(attn, x, None)[0], cache)),
    Mistake("returns the old cache", "return the extended cache (P + T positions), not the one you were given: "
            "the next step needs the keys and values of these positions too.",
            gives=lambda attn, x, cache: _cached_variant(attn, x, cache, return_old=True)),
    Mistake("ignores the cache", "attend to the cached positions as well: extend the cache with the new keys "
            "and values first, then attend to all P + T of them.",
            gives=lambda attn, x, cache: _cached_variant(attn, x, None)),
    Mistake("new before old", "the new positions come after the cached ones: extend the cache (old keys first).",
            gives=lambda attn, x, cache: _cached_variant(attn, x, cache, order="new-old")),
    Mistake("no causal mask", "with several new positions, each must not see the ones after it: pass "
            "causal_mask(T, P + T) to attend.", gives=lambda attn, x, cache: _cached_variant(attn, x, cache, mask=None)),
    Mistake("mask aligned to the first keys", "the T new queries are the LAST T of the P + T positions: use "
            "causal_mask(T, P + T), not a square lower triangle.",
            gives=lambda attn, x, cache: _cached_variant(attn, x, cache, mask="top-left")),
]


def check_cached_self_attention(fn: Callable) -> CheckResult:
    """``cached_self_attention(attn: MultiHeadAttention, x (B, T, D), cache: KVCache | None) -> (out (B, T, D), new cache)``:
    causal self-attention of T new positions after the P cached ones; the new cache holds P + T."""
    cases = []
    for seed, (B, P, T, D, H) in enumerate([
        (2, 3, 1, 8, 2), (1, 0, 1, 8, 4), (3, 4, 2, 12, 3), (2, 0, 4, 6, 1), (1, 5, 3, 16, 4), (2, 1, 1, 4, 4),
    ]):
        torch.manual_seed(seed)
        attn = MultiHeadAttention(D, H).eval()
        with torch.no_grad():
            history = _x(50 + seed, B, P + T, D)  # positions seen so far, then the new ones
            cache = attn.project_kv(history[:, :P], history[:, :P]) if P else None
            x = history[:, P:]  # (B, T, D)
            out, present, _ = causal_self_attention(attn, x, cache, need_weights=False)
        cases.append(Case(
            f"B={B}, {P} cached positions" + (" (cache=None)" if cache is None else "") + f", T={T} new, D={D}, H={H}",
            (attn, x, cache), (out, present), atol=1e-5,
            hint="kv = attn.project_kv(x, x); full = cache.extend(kv.key, kv.value) (or kv when there is no "
                 "cache); out = attn.attend(x, full, causal_mask(T, len(full))); return out, full.",
        ))
    return run_cases("cached self-attention step", no_grad(fn), cases, CACHED_MISTAKES)


EXERCISES = {
    "split_heads": check_split_heads,
    "merge_heads": check_merge_heads,
    "cached_self_attention": check_cached_self_attention,
}
