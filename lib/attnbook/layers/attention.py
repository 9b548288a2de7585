"""Scaled dot-product attention and multi-head attention (Vaswani et al., 2017).

Legend: B batch, H heads, T query length, S key/value length, D model width, Dh head width.
Masks are boolean, ``True`` = may attend (see ``attnbook.layers.masks``). Tokens are rows: a sequence
is a ``(T, D)`` matrix, so every formula here reads ``softmax(Q Kᵀ / √Dh) V`` with the softmax
over the last dimension (over the keys of one query).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers.masks import masked_softmax, validate_mask
from attnbook.layers.validation import check_dropout, check_heads


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

    key: torch.Tensor  # (B, H, S, Dh)
    value: torch.Tensor  # (B, H, S, Dh)

    def __post_init__(self) -> None:
        if self.key.dim() != 4 or self.key.shape != self.value.shape:
            raise ValueError(
                f"key and value must both be (B, H, S, Dh) with the same shape, "
                f"got {tuple(self.key.shape)} and {tuple(self.value.shape)}"
            )

    def __len__(self) -> int:
        return self.key.shape[-2]

    def extend(self, key: torch.Tensor, value: torch.Tensor) -> KVCache:
        """A new cache holding these positions followed by the new ones ``(B, H, S_new, Dh)``."""
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
    ``nn.MultiheadAttention``, so weights copy across (see ``to_torch_multihead``).
    ``forward`` = ``project_kv`` (keys and values into heads) then ``attend`` (queries against
    them); a block that decodes with a cache calls the two halves itself.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        check_heads(d_model, num_heads)
        check_dropout(dropout)
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, D)`` -> ``(B, H, T, Dh)``."""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, Dh)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, H, T, Dh)`` -> ``(B, T, D)``; ``contiguous()`` because transpose only permutes strides."""
        B, H, T, Dh = x.shape
        return x.transpose(1, 2).contiguous().view(B, T, H * Dh)  # (B, T, D)

    def _check_input(self, name: str, x: torch.Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{name} must have shape (B, len, {self.d_model}), got {tuple(x.shape)}")

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> KVCache:
        """key/value ``(B, S, D)`` -> their projections split into heads, ``(B, H, S, Dh)`` each."""
        self._check_input("key", key)
        self._check_input("value", value)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"key and value need the same (B, S), got {tuple(key.shape)} and {tuple(value.shape)}")
        return KVCache(self.split_heads(self.k_proj(key)), self.split_heads(self.v_proj(value)))

    def attend(
        self, query: torch.Tensor, kv: KVCache, mask: torch.Tensor | None = None, need_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """query ``(B, T, D)`` against projected keys/values ``(B, H, S, Dh)``.

        mask broadcastable to ``(B, T, S)`` or ``(B, H, T, S)``. Returns ``(B, T, D)``, plus the
        weights ``(B, H, T, S)`` if ``need_weights``. Without ``need_weights`` the core runs in
        PyTorch's fused ``F.scaled_dot_product_attention`` (same mathematics, no ``(T, S)``
        weights kept for backward); with it, in the explicit ``softmax(Q Kᵀ / √Dh) V``.
        """
        self._check_input("query", query)
        if kv.key.shape[0] != query.shape[0] or kv.key.shape[1] != self.num_heads:
            raise ValueError(
                f"keys/values of shape {tuple(kv.key.shape)} do not match a batch of {query.shape[0]} "
                f"queries and {self.num_heads} heads"
            )
        q = self.split_heads(self.q_proj(query))  # (B, H, T, Dh)
        if mask is not None:
            if isinstance(mask, torch.Tensor) and mask.dim() == 3:
                mask = mask[:, None]  # (B, 1, T, S): the same mask for every head
            validate_mask(mask, q.shape[:-1] + kv.key.shape[-2:-1])  # (B, H, T, S)
        if need_weights:
            scores = q @ kv.key.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, S)
            weights = masked_softmax(scores, mask)  # (B, H, T, S)
            heads = self.dropout(weights) @ kv.value  # (B, H, T, Dh)
        else:
            p = self.dropout.p if self.training else 0.0
            heads = F.scaled_dot_product_attention(q, kv.key, kv.value, attn_mask=mask, dropout_p=p)  # (B, H, T, Dh)
            if mask is not None:  # a query with no allowed key outputs zeros, as in masked_softmax
                heads = heads.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        out = self.out_proj(self.merge_heads(heads))  # (B, T, D)
        return (out, weights) if need_weights else out

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """query ``(B, T, D)``, key/value ``(B, S, D)``; mask broadcastable to ``(B, T, S)`` or
        ``(B, H, T, S)``. Returns ``(B, T, D)``, plus weights ``(B, H, T, S)`` if ``need_weights``.
        """
        if key.shape[0] != query.shape[0]:
            raise ValueError(f"query and key need the same batch size, got {query.shape[0]} and {key.shape[0]}")
        return self.attend(query, self.project_kv(key, value), mask, need_weights)


@torch.no_grad()
def copy_to_torch_multihead(mha: MultiHeadAttention, torch_mha: nn.MultiheadAttention) -> None:
    """Copy ``mha``'s weights into ``torch_mha``, which keeps W^Q, W^K, W^V stacked in one
    ``(3D, D)`` ``in_proj_weight``."""
    if (torch_mha.embed_dim, torch_mha.num_heads) != (mha.d_model, mha.num_heads):
        raise ValueError(
            f"nn.MultiheadAttention has embed_dim={torch_mha.embed_dim}, num_heads={torch_mha.num_heads}; "
            f"expected {mha.d_model} and {mha.num_heads}"
        )
    torch_mha.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
    torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
    if mha.q_proj.bias is not None:
        torch_mha.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        torch_mha.out_proj.bias.copy_(mha.out_proj.bias)


def to_torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention`` (``batch_first=True``) holding the same weights as ``mha``.

    PyTorch's masks mean the opposite of the book's: pass ``attn_mask=~mask`` and
    ``key_padding_mask=~token_mask``.
    """
    bias = mha.q_proj.bias is not None
    torch_mha = nn.MultiheadAttention(mha.d_model, mha.num_heads, dropout=mha.dropout.p, bias=bias,
                                      batch_first=True)
    torch_mha = torch_mha.to(device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype)
    copy_to_torch_multihead(mha, torch_mha)
    return torch_mha.train(mha.training)
