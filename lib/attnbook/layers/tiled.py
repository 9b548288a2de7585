"""Attention computed in tiles with an online softmax: FlashAttention's idea (Dao et al., 2022),
written in plain PyTorch so that it can be read and measured on a CPU.

``softmax(Q Kᵀ / √Dh) V`` never needs the whole ``(T, S)`` score matrix at once. Walk over the
keys in blocks of ``block_size``; for each block of queries keep three running quantities:
the largest score seen so far ``m`` (per query), the sum of ``exp(score - m)`` so far ``l``, and
the unnormalised output ``acc = Σ exp(score - m) v``. When a new block raises the maximum from
``m`` to ``m'``, everything accumulated so far is rescaled by ``exp(m - m')`` (the online softmax
of Milakov & Gimelshein, 2018). At the end ``acc / l`` is exactly the softmax-weighted sum. The
largest intermediate is a ``(block, block)`` tile, not ``(T, S)``: memory grows with T, not T².

This loop shows the arithmetic, not the speed: FlashAttention is fast because a GPU kernel keeps
each tile in on-chip SRAM and never writes the scores to slow memory; a Python loop over tiles
launches many small operations and is slower than PyTorch's fused attention on a CPU.

``peak_intermediate_bytes`` measures the memory side: the largest total size of the tensors a
computation creates and holds at the same time (the inputs it is given are not counted).

Legend: B batch, H heads, T query length, S key length, Dh head width.
"""
from __future__ import annotations

import math
import weakref
from collections.abc import Callable

import torch
import torch.utils._pytree
from torch.utils._python_dispatch import TorchDispatchMode

from attnbook.layers.validation import check_positive


def online_softmax_merge(
    m1: torch.Tensor, l1: torch.Tensor, acc1: torch.Tensor,
    m2: torch.Tensor, l2: torch.Tensor, acc2: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Merge two partial softmax sums over disjoint sets of keys into one.

    Each part holds, per query, its largest score ``m (..., 1)``, ``l = Σ exp(e - m)`` ``(..., 1)``
    and ``acc = Σ exp(e - m) v`` ``(..., Dv)`` (``e``: the query's scores on the part's keys). Returns the same three for the union of the keys;
    ``acc / l`` is then the softmax-weighted mean of the values. A part with no keys has
    ``m = -inf`` and ``l = acc = 0``.
    """
    m = torch.maximum(m1, m2)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # all -inf: nothing seen yet
    a1, a2 = torch.exp(m1 - safe), torch.exp(m2 - safe)  # how much each part's sums shrink
    return m, a1 * l1 + a2 * l2, a1 * acc1 + a2 * acc2


def tiled_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, causal: bool = False,
    block_size: int = 64, scale: float | None = None, return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q Kᵀ · scale) V`` tile by tile, never holding more than ``(block, block)`` scores.

    query ``(..., T, Dh)``, key ``(..., S, Dh)``, value ``(..., S, Dv)``; ``scale`` defaults to
    1/√Dh. ``causal``: query i sees keys ``0 .. i + S - T`` (the last query sees every key, as in
    decoding with a cache of S - T positions). Returns ``(..., T, Dv)``; equals
    ``F.scaled_dot_product_attention(query, key, value, is_causal=...)`` up to rounding.
    ``return_lse``: also return the log-sum-exp of each query's scaled scores, ``m + log l``, of shape
    ``(..., T)``: all a FlashAttention-style backward pass keeps of the weights.
    """
    check_positive(block_size=block_size)
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key need the same last dimension, got {query.shape[-1]} and {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value need the same length, got {key.shape[-2]} and {value.shape[-2]}")
    T, S = query.shape[-2], key.shape[-2]
    if causal and T > S:
        raise ValueError(f"causal attention needs at least as many keys as queries, got T={T}, S={S}")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    shift = S - T  # query i sits at position i + shift among the keys
    outputs, lses = [], []
    for q0 in range(0, T, block_size):
        q = query[..., q0 : q0 + block_size, :] * scale  # (..., Tq, Dh)
        Tq = q.shape[-2]
        m = q.new_full(q.shape[:-1] + (1,), float("-inf"))  # (..., Tq, 1): running max
        l = q.new_zeros(q.shape[:-1] + (1,))  # (..., Tq, 1): running sum of exp
        acc = q.new_zeros(q.shape[:-1] + value.shape[-1:])  # (..., Tq, Dv): running Σ exp · v
        last_key = q0 + Tq - 1 + shift if causal else S - 1  # no tile past it holds a visible key
        for k0 in range(0, last_key + 1, block_size):
            k = key[..., k0 : k0 + block_size, :]  # (..., Sk, Dh)
            v = value[..., k0 : k0 + block_size, :]
            e = q @ k.transpose(-2, -1)  # (..., Tq, Sk): one tile of scores
            if causal and k0 + k.shape[-2] - 1 > q0 + shift:  # the tile crosses the diagonal
                rows = torch.arange(q0, q0 + Tq, device=q.device)[:, None] + shift
                cols = torch.arange(k0, k0 + k.shape[-2], device=q.device)[None, :]
                e = e.masked_fill(cols > rows, float("-inf"))
            m_tile = e.amax(-1, keepdim=True)  # (..., Tq, 1)
            safe = torch.where(torch.isfinite(m_tile), m_tile, torch.zeros_like(m_tile))
            w = torch.exp(e - safe)  # (..., Tq, Sk); a fully masked row gives zeros
            m, l, acc = online_softmax_merge(m, l, acc, m_tile, w.sum(-1, keepdim=True), w @ v)
        outputs.append(acc / l)  # (..., Tq, Dv)
        lses.append((m + l.log()).squeeze(-1))  # (..., Tq)
    out = torch.cat(outputs, dim=-2)  # (..., T, Dv)
    return (out, torch.cat(lses, dim=-1)) if return_lse else out


class _LiveTensors(TorchDispatchMode):
    """Tracks the bytes of every tensor created inside it while that tensor is alive."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, list[int]] = {}  # storage address -> [bytes, tensors using it]
        self.current = 0
        self.peak = 0

    def _release(self, address: int) -> None:
        entry = self.live.get(address)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[address]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(a, torch.Tensor)}
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                address = storage.data_ptr()
                if address in inputs and address not in self.live:
                    continue  # a view of a tensor made before: no new memory
                if address not in self.live:
                    self.live[address] = [storage.nbytes(), 0]
                    self.current += storage.nbytes()
                    self.peak = max(self.peak, self.current)
                self.live[address][1] += 1
                weakref.finalize(t, self._release, address)
        return out


def peak_intermediate_bytes(fn: Callable[[], object]) -> int:
    """Run ``fn()`` and return the peak total size, in bytes, of the tensors it created and held
    at the same time (its inputs made before the call do not count; its result does).

    Measured by watching every tensor operation (``TorchDispatchMode``) and releasing a tensor's
    bytes when Python frees it; views share their storage and are counted once.
    """
    with torch.no_grad(), _LiveTensors() as tracker:
        result = fn()
        peak = tracker.peak
    del result
    return peak
