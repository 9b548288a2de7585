"""Scaled dot-product attention and multi-head attention (Vaswani et al., 2017).

Legend: B batch, H heads, T query length, S key/value length, D model width, Dh head width.
Masks are boolean, ``True`` = may attend (see ``attnbook.masks``). Tokens are rows: a sequence
is a ``(T, D)`` matrix, so every formula here reads ``softmax(Q Kᵀ / √Dh) V`` with the softmax
over the last dimension (over the keys of one query).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.masks import masked_softmax, validate_mask


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


class KVCache:
    """Keys and values of the positions decoded so far, for one attention layer.

    Passed explicitly to ``MultiHeadAttention.forward``; holds ``(B, H, S, Dh)`` tensors.
    """

    def __init__(self) -> None:
        self.key: torch.Tensor | None = None
        self.value: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.key is None else self.key.shape[-2]

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new positions' keys and values; return all of them so far."""
        if self.key is None:
            self.key, self.value = key, value
        else:
            self.key = torch.cat([self.key, key], dim=-2)  # (B, H, S+1, Dh)
            self.value = torch.cat([self.value, value], dim=-2)
        return self.key, self.value


class MultiHeadAttention(nn.Module):
    """Multi-head attention: H heads of width Dh = D / H computed in one batched product.

    Head h uses columns ``h*Dh:(h+1)*Dh`` of each projection's output, the same layout as
    ``nn.MultiheadAttention``, so weights copy across (see ``to_torch_multihead``).
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if num_heads < 1 or d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
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

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """query ``(B, T, D)``, key/value ``(B, S, D)``; mask broadcastable to ``(B, T, S)`` or
        ``(B, H, T, S)``. Returns ``(B, T, D)``, plus weights ``(B, H, T, S)`` if ``need_weights``.

        With a ``cache``, key/value hold only the new positions; earlier ones come from the cache.
        Without ``need_weights`` the core runs in PyTorch's fused ``F.scaled_dot_product_attention``
        (same mathematics, no ``(T, S)`` weights kept for backward); with it, in the explicit
        ``softmax(Q Kᵀ / √Dh) V`` of ``scaled_dot_product_attention``.
        """
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.dim() != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} must have shape (B, len, {self.d_model}), got {tuple(t.shape)}")
        q = self.split_heads(self.q_proj(query))  # (B, H, T, Dh)
        k = self.split_heads(self.k_proj(key))  # (B, H, S, Dh)
        v = self.split_heads(self.v_proj(value))  # (B, H, S, Dh)
        if cache is not None:
            k, v = cache.append(k, v)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask[:, None]  # (B, 1, T, S): the same mask for every head
            validate_mask(mask, q.shape[:-1] + k.shape[-2:-1])  # (B, H, T, S)
        if need_weights:
            weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim), mask)  # (B, H, T, S)
            heads = self.dropout(weights) @ v  # (B, H, T, Dh)
        else:
            p = self.dropout.p if self.training else 0.0
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, H, T, Dh)
            if mask is not None:  # a query with no allowed key outputs zeros, as in masked_softmax
                heads = heads.masked_fill(~mask.any(-1, keepdim=True), 0.0)
        out = self.out_proj(self.merge_heads(heads))  # (B, T, D)
        return (out, weights) if need_weights else out


@torch.no_grad()
def to_torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention`` (``batch_first=True``) holding the same weights as ``mha``.

    PyTorch packs W^Q, W^K, W^V into one ``in_proj_weight`` of shape ``(3D, D)``. Its masks mean
    the opposite of the book's: pass ``attn_mask=~mask`` and ``key_padding_mask=~key_valid``.
    """
    bias = mha.q_proj.bias is not None
    torch_mha = nn.MultiheadAttention(mha.d_model, mha.num_heads, dropout=mha.dropout.p, bias=bias,
                                      batch_first=True)
    torch_mha = torch_mha.to(device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype)
    torch_mha.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
    torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
    if bias:
        torch_mha.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        torch_mha.out_proj.bias.copy_(mha.out_proj.bias)
    return torch_mha.train(mha.training)
