"""Scaled dot-product attention and multi-head attention (Vaswani et al., 2017), with the options
later models change: grouped-query attention (Ainslie et al., 2023; multi-query: Shazeer, 2019),
an additive float bias on the scores (T5's relative positions, ALiBi), another scale than 1/√Dh
(T5 uses 1), and a position transform of queries and keys (rotary embeddings, Su et al., 2021).

Legend: B batch, H heads (query heads), Hkv key/value heads, T query length, S key/value length,
D model width, Dh head width. Masks are boolean, ``True`` = may attend (see
``attnbook.layers.masks``); a float bias is its own argument. Tokens are rows: a sequence is a
``(T, D)`` matrix, so every formula here reads ``softmax(Q Kᵀ / √Dh) V`` with the softmax over
the last dimension (over the keys of one query).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers.masks import masked_softmax, validate_bias, validate_mask
from attnbook.layers.rotary import RotaryEmbedding
from attnbook.layers.validation import check_dropout, check_heads, check_positive


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V over the last two dimensions.

    query ``(..., T, Dk)``, key ``(..., S, Dk)``, value ``(..., S, Dv)``; mask broadcastable to
    ``(..., T, S)``. Returns the output ``(..., T, Dv)`` and the weights ``(..., T, S)``.
    Masked positions get exactly zero weight; a query with no allowed key gets a zero output.
    """
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"query and key need the same last dimension, got {query.shape[-1]} and {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value need the same length, got {key.shape[-2]} and {value.shape[-2]}")
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # (..., T, S)
    weights = masked_softmax(scores, mask, dim=-1)  # (..., T, S)
    return weights @ value, weights  # (..., T, Dv), (..., T, S)


@dataclass(frozen=True)
class KVCache:
    """The projected keys and values of the positions seen so far, for one attention layer.

    Immutable: ``extend`` returns a new cache and leaves this one as it was, so a decoding
    state that holds caches can be stepped from twice and give the same result both times.
    (Appending costs the same either way: ``torch.cat`` copies into a new tensor.)
    """

    key: torch.Tensor  # (B, Hkv, S, Dh): with grouped-query attention, only the key/value heads
    value: torch.Tensor  # (B, Hkv, S, Dh)

    def __post_init__(self) -> None:
        if self.key.dim() != 4 or self.key.shape != self.value.shape:
            raise ValueError(
                f"key and value must both be (B, Hkv, S, Dh) with the same shape, "
                f"got {tuple(self.key.shape)} and {tuple(self.value.shape)}"
            )

    def __len__(self) -> int:
        return self.key.shape[-2]

    def extend(self, key: torch.Tensor, value: torch.Tensor) -> KVCache:
        """A new cache holding these positions followed by the new ones ``(B, Hkv, S_new, Dh)``."""
        if key.shape[:2] != self.key.shape[:2] or key.shape[-1] != self.key.shape[-1]:
            raise ValueError(
                f"new keys {tuple(key.shape)} do not continue a cache of shape {tuple(self.key.shape)}"
            )
        return KVCache(torch.cat([self.key, key], dim=-2), torch.cat([self.value, value], dim=-2))

    def select(self, index: torch.Tensor) -> KVCache:
        """A new cache with batch rows ``index`` (in that order): beam search's reordering."""
        return KVCache(self.key.index_select(0, index), self.value.index_select(0, index))


class MultiHeadAttention(nn.Module):
    """Multi-head attention: H heads of width Dh = D / H computed in one batched product.

    Head h uses columns ``h*Dh:(h+1)*Dh`` of each projection's output, the same layout as
    ``nn.MultiheadAttention``, so weights copy across (see ``attnbook.layers.torch_bridge``).
    ``forward`` = ``project_kv`` (keys and values into heads) then ``attend`` (queries against
    them); a block that decodes with a cache calls the two halves itself.

    Options (the defaults are the 2017 paper's attention):
    ``num_kv_heads`` Hkv < H shares each key/value head among H / Hkv query heads (GQA; 1 = MQA),
    and the cache holds only the Hkv heads; ``scale`` multiplies ``Q Kᵀ`` instead of 1/√Dh;
    ``rotary`` (e.g. ``RotaryEmbedding(Dh, max_len)``) turns queries and keys by their positions;
    ``q_norm`` and ``k_norm`` (e.g. ``RMSNorm(Dh)``: QK-norm) normalise each head's queries and
    keys after their projections, before ``rotary``.
    """

    def __init__(
        self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True, *,
        num_kv_heads: int | None = None, scale: float | None = None, rotary: nn.Module | None = None,
        q_norm: nn.Module | None = None, k_norm: nn.Module | None = None,
    ) -> None:
        super().__init__()
        check_heads(d_model, num_heads, num_kv_heads)
        check_dropout(dropout)
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.scale = scale
        kv_width = self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.rotary = rotary
        if q_norm is not None or k_norm is not None:  # registered only when used: the
            self.q_norm, self.k_norm = q_norm, k_norm  # state_dict of other models is unchanged

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, heads * Dh)`` -> ``(B, heads, T, Dh)`` (heads = H for queries, Hkv for keys/values)."""
        B, T, width = x.shape
        return x.view(B, T, width // self.head_dim, self.head_dim).transpose(1, 2)  # (B, heads, T, Dh)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``; ``contiguous()`` because transpose only permutes strides."""
        B, H, T, Dh = x.shape
        return x.transpose(1, 2).contiguous().view(B, T, H * Dh)  # (B, T, D)

    def _check_input(self, name: str, x: torch.Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{name} must have shape (B, len, {self.d_model}), got {tuple(x.shape)}")

    def _turn(self, x: torch.Tensor, offset: int) -> torch.Tensor:
        """Queries or keys ``(B, heads, T, Dh)`` at positions ``offset ..``, through ``rotary`` if any."""
        return x if self.rotary is None else self.rotary(x, offset)

    def project_kv(self, key: torch.Tensor, value: torch.Tensor, offset: int = 0) -> KVCache:
        """key/value ``(B, S, D)`` -> their projections split into heads, ``(B, Hkv, S, Dh)`` each.

        ``offset`` is the position of the first key (it matters only with ``rotary``).
        """
        self._check_input("key", key)
        self._check_input("value", value)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"key and value need the same (B, S), got {tuple(key.shape)} and {tuple(value.shape)}")
        keys = self.split_heads(self.k_proj(key))  # (B, Hkv, S, Dh)
        if getattr(self, "k_norm", None) is not None:
            keys = self.k_norm(keys)
        keys = self._turn(keys, offset)
        return KVCache(keys, self.split_heads(self.v_proj(value)))

    def _check_kv(self, query: torch.Tensor, kv: KVCache) -> None:
        if kv.key.shape[0] != query.shape[0] or kv.key.shape[1] != self.num_kv_heads:
            raise ValueError(
                f"keys/values of shape {tuple(kv.key.shape)} do not match a batch of {query.shape[0]} "
                f"queries and {self.num_kv_heads} key/value heads"
            )

    def _scores(self, q: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """``Q Kᵀ`` scaled: ``/ √Dh`` by default, ``* scale`` when one was given."""
        raw = q @ key.transpose(-2, -1)  # (B, H, T, S)
        return raw / math.sqrt(self.head_dim) if self.scale is None else raw * self.scale

    def attend(
        self, query: torch.Tensor, kv: KVCache, mask: torch.Tensor | None = None, need_weights: bool = False,
        *, bias: torch.Tensor | None = None, offset: int = 0,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """query ``(B, T, D)`` against projected keys/values ``(B, Hkv, S, Dh)``.

        mask (bool) broadcastable to ``(B, T, S)`` or ``(B, H, T, S)``; bias (float) added to the
        scores, broadcastable to ``(B, H, T, S)``; ``offset`` the position of the first query
        (for ``rotary``). Returns ``(B, T, D)``, plus the weights ``(B, H, T, S)`` if
        ``need_weights``. Without ``need_weights`` the core runs in PyTorch's fused
        ``F.scaled_dot_product_attention`` (same mathematics, no ``(T, S)`` weights kept for
        backward); with it, in the explicit ``softmax(Q Kᵀ / √Dh + bias) V``.
        """
        self._check_input("query", query)
        self._check_kv(query, kv)
        q = self.split_heads(self.q_proj(query))  # (B, H, T, Dh)
        if getattr(self, "q_norm", None) is not None:
            q = self.q_norm(q)
        q = self._turn(q, offset)
        scores_shape = q.shape[:-1] + kv.key.shape[-2:-1]  # (B, H, T, S)
        if mask is not None:
            if isinstance(mask, torch.Tensor) and mask.dim() == 3:
                mask = mask[:, None]  # (B, 1, T, S): the same mask for every head
            validate_mask(mask, scores_shape)
        if bias is not None:
            validate_bias(bias, scores_shape)
        if need_weights:
            heads, weights = self._explicit(q, kv, mask, bias)
        else:
            heads = self._fused(q, kv, mask, bias)  # (B, H, T, Dh)
        out = self.out_proj(self.merge_heads(heads))  # (B, T, D)
        return (out, weights) if need_weights else out

    def _explicit(
        self, q: torch.Tensor, kv: KVCache, mask: torch.Tensor | None, bias: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``softmax(scores + bias) V`` written out, keeping the weights ``(B, H, T, S)``."""
        group = self.num_heads // self.num_kv_heads
        key, value = kv.key, kv.value
        if group > 1:  # query head h reads key/value head h // group
            key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)  # (B, H, S, Dh)
        scores = self._scores(q, key)  # (B, H, T, S)
        if bias is not None:
            scores = scores + bias
        weights = masked_softmax(scores, mask)  # (B, H, T, S)
        return self.dropout(weights) @ value, weights  # (B, H, T, Dh)

    def _fused(
        self, q: torch.Tensor, kv: KVCache, mask: torch.Tensor | None, bias: torch.Tensor | None
    ) -> torch.Tensor:
        """The same in ``F.scaled_dot_product_attention``; a bias and a mask become one float mask."""
        attn_mask = mask
        if bias is not None:
            bias = bias.to(q.dtype)
            attn_mask = bias if mask is None else torch.where(mask, bias, float("-inf"))
        p = self.dropout.p if self.training else 0.0
        heads = F.scaled_dot_product_attention(
            q, kv.key, kv.value, attn_mask=attn_mask, dropout_p=p, scale=self.scale,
            enable_gqa=self.num_kv_heads != self.num_heads,
        )  # (B, H, T, Dh)
        if mask is not None:  # a query with no allowed key outputs zeros, as in masked_softmax
            empty = ~mask.any(-1, keepdim=True)  # (B, 1 or H, T, 1): tiny, unlike heads
            if empty.any():  # rare (a sequence of padding only): pay for a pass over heads only then
                heads = heads.masked_fill(empty, 0.0)
        return heads

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """query ``(B, T, D)``, key/value ``(B, S, D)``; mask broadcastable to ``(B, T, S)`` or
        ``(B, H, T, S)``; bias (float) added to the scores. Returns ``(B, T, D)``, plus weights
        ``(B, H, T, S)`` if ``need_weights``. Positions start at 0 for queries and keys alike.
        """
        if key.shape[0] != query.shape[0]:
            raise ValueError(f"query and key need the same batch size, got {query.shape[0]} and {key.shape[0]}")
        return self.attend(query, self.project_kv(key, value), mask, need_weights, bias=bias)


@dataclass(frozen=True)
class AttentionSpec:
    """The options a block builds its attention with (defaults: the 2017 paper's).

    ``num_kv_heads``: key/value heads (None: one per query head; fewer: grouped-query attention);
    ``scale``: multiplies ``Q Kᵀ`` (None: 1/√Dh); ``bias``: biases in the four projections;
    ``rotary_max_len``: rotary position embeddings over that many positions (None: none),
    with ``rotary_base`` the θ of their slowest pair; ``qk_norm``: an RMSNorm (eps
    ``qk_norm_eps``) on each head's queries and on its keys, before the rotary turn.
    """

    num_kv_heads: int | None = None
    scale: float | None = None
    bias: bool = True
    rotary_max_len: int | None = None
    rotary_base: float = 10000.0
    qk_norm: bool = False
    qk_norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.num_kv_heads is not None:
            check_positive(num_kv_heads=self.num_kv_heads)
        if self.rotary_max_len is not None:
            check_positive(rotary_max_len=self.rotary_max_len)

    def __call__(self, d_model: int, num_heads: int, dropout: float = 0.0) -> MultiHeadAttention:
        """A new ``MultiHeadAttention`` with these options."""
        check_heads(d_model, num_heads, self.num_kv_heads)
        rotary = None
        if self.rotary_max_len is not None:
            rotary = RotaryEmbedding(d_model // num_heads, self.rotary_max_len, self.rotary_base)
        norms = {}
        if self.qk_norm:
            from attnbook.layers.norms import RMSNorm
            norms = {"q_norm": RMSNorm(d_model // num_heads, eps=self.qk_norm_eps),
                     "k_norm": RMSNorm(d_model // num_heads, eps=self.qk_norm_eps)}
        return MultiHeadAttention(d_model, num_heads, dropout, self.bias, num_kv_heads=self.num_kv_heads,
                                  scale=self.scale, rotary=rotary, **norms)
