"""T5's relative position bias (Raffel et al., 2020; after Shaw et al., 2018): one learned scalar
per head and per *bucket* of the key-query offset, added to the attention scores.

The offset ``k - q`` (key position minus query position) goes into one of ``num_buckets``
buckets: small offsets get a bucket each, larger ones share log-spaced buckets up to
``max_distance``, and every offset at or beyond it shares the last bucket. The encoder is
bidirectional (half the buckets for keys after the query, half for keys before); the decoder is
causal (only keys at or before the query matter, so every bucket serves the past).
``relative_position_bucket`` equals ``transformers``' ``T5Attention._relative_position_bucket``.

A ``RelativePositionBias`` is the position-bias module the encoder-decoder driver calls as
``bias(num_queries, num_keys, offset)``; it returns the float ``(1, H, T, S)`` tensor added to the
scores of every block of one stack (T5 computes it once per stack and shares it).

Legend: H heads, T queries, S keys.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from attnbook.layers.validation import check_positive


def check_buckets(num_buckets: int, max_distance: int, bidirectional: bool) -> None:
    """Bucket sizes the log spacing can use: an even count when bidirectional, and a
    ``max_distance`` beyond the exact buckets (else the log-spaced buckets are empty)."""
    check_positive(num_buckets=num_buckets, max_distance=max_distance)
    if bidirectional and num_buckets % 2:
        raise ValueError(f"bidirectional buckets split in two halves: num_buckets must be even, got {num_buckets}")
    per_side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_side // 2
    if max_exact < 1:
        raise ValueError(f"num_buckets={num_buckets} leaves no exact bucket per side; use at least "
                         f"{4 if bidirectional else 2}")
    if max_distance <= max_exact:
        raise ValueError(f"max_distance ({max_distance}) must exceed the {max_exact} exact buckets per side")


def relative_position_bucket(
    relative_position: torch.Tensor, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128,
) -> torch.Tensor:
    """Bucket index in ``[0, num_buckets)`` of each offset ``key - query`` (integer tensor, any shape).

    Bidirectional: the first half of the buckets holds keys at or before the query, the second
    half keys after it. Causal: keys after the query (positive offsets) fall in bucket 0 with the
    offset 0 (they are masked anyway). Per side, offsets ``0 .. max_exact - 1`` get their own
    bucket (``max_exact`` = half the side's buckets); larger ones are log-spaced up to
    ``max_distance``, and everything beyond shares the side's last bucket.
    """
    if relative_position.dtype.is_floating_point or relative_position.dtype == torch.bool:
        raise TypeError(f"relative_position must be an integer tensor, got {relative_position.dtype}")
    check_buckets(num_buckets, max_distance, bidirectional)
    buckets = torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets  # keys after the query: upper half
        distance = relative_position.abs()
    else:
        distance = -relative_position.clamp(max=0)  # how far back the key is; the future counts as 0
    max_exact = num_buckets // 2
    # log(distance / max_exact) spread over the remaining buckets, up to max_distance
    # (the clamp only avoids log(0) for the small offsets, which take the exact branch anyway)
    scaled = torch.log(distance.clamp(min=max_exact).float() / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + scaled * (num_buckets - max_exact)).long().clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < max_exact, distance, large)


class RelativePositionBias(nn.Module):
    """One learned scalar per (bucket, head): ``bias(T, S, offset) -> (1, H, T, S)``.

    Queries are at positions ``offset .. offset + T - 1`` (``offset`` > 0 when decoding step by
    step after a cache of ``offset`` positions), keys at ``0 .. S - 1``. The table is named as in
    ``transformers`` (``relative_attention_bias``: an ``nn.Embedding(num_buckets, H)``).
    """

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True) -> None:
        super().__init__()
        check_positive(num_heads=num_heads)
        check_buckets(num_buckets, max_distance, bidirectional)
        self.num_heads, self.num_buckets, self.max_distance = num_heads, num_buckets, max_distance
        self.bidirectional = bidirectional
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    def buckets(self, num_queries: int, num_keys: int, offset: int = 0) -> torch.Tensor:
        """The ``(T, S)`` bucket of each query-key pair."""
        check_positive(num_queries=num_queries, num_keys=num_keys)
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        device = self.relative_attention_bias.weight.device
        queries = torch.arange(num_queries, device=device)[:, None] + offset  # (T, 1)
        keys = torch.arange(num_keys, device=device)[None, :]  # (1, S)
        return relative_position_bucket(keys - queries, self.bidirectional, self.num_buckets, self.max_distance)

    def forward(self, num_queries: int, num_keys: int, offset: int = 0) -> torch.Tensor:
        values = self.relative_attention_bias(self.buckets(num_queries, num_keys, offset))  # (T, S, H)
        return values.permute(2, 0, 1)[None]  # (1, H, T, S)

    def extra_repr(self) -> str:
        kind = "bidirectional" if self.bidirectional else "causal"
        return f"heads={self.num_heads}, buckets={self.num_buckets}, max_distance={self.max_distance}, {kind}"
