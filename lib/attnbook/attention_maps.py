"""Reading a stack of attention maps: attention rollout and mean attention distance.

Attention rollout (Abnar & Zuidema, 2020) estimates how much each input token contributes to
each output token through *all* layers. One layer's map, averaged over heads, is mixed with
the identity for the residual connection, ``A_hat = (1 - r) * mean_h(A) + r * I`` (``r = 0.5`` in
the paper), and the layers are chained by matrix products, last layer on the left:
``R = A_hat_L @ ... @ A_hat_2 @ A_hat_1``. Each row of ``R`` sums to 1.

Mean attention distance (Dosovitskiy et al., 2020, Figure 7) is, per head, the distance in
pixels between a query patch and the patches it attends to, weighted by the attention and
averaged over query patches and images: small for local heads, large for global ones.

Shapes: B batch, H heads, T tokens (prefix tokens such as a class token, then the patches).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch


def _check_maps(weights: Sequence[torch.Tensor]) -> None:
    if len(weights) == 0:
        raise ValueError("expected one attention map (B, H, T, T) per layer, got an empty list")
    first = weights[0].shape
    for i, w in enumerate(weights):
        if w.dim() != 4 or w.shape[-1] != w.shape[-2]:
            raise ValueError(f"layer {i}: expected self-attention weights (B, H, T, T), got {tuple(w.shape)}")
        if w.shape != first:
            raise ValueError(f"layer {i}: shape {tuple(w.shape)} differs from layer 0's {tuple(first)}")


def attention_rollout(weights: Sequence[torch.Tensor], residual: float = 0.5) -> torch.Tensor:
    """Roll attention out through the layers: ``weights[l]`` is layer ``l``'s ``(B, H, T, T)``.

    Returns ``(B, T, T)``: row ``i`` says how much each input token flows into output token ``i``.
    ``residual`` is the identity's share of each layer (0: plain products of the attention maps).
    """
    _check_maps(weights)
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual must be in [0, 1], got {residual}")
    B, H, T, _ = weights[0].shape
    eye = torch.eye(T, dtype=weights[0].dtype, device=weights[0].device)  # (T, T)
    rollout = eye.expand(B, T, T)
    for layer in weights:  # first layer first: each new layer multiplies from the left
        mixed = (1.0 - residual) * layer.mean(dim=1) + residual * eye  # (B, T, T)
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)  # rows sum to 1 (they already do for softmax maps)
        rollout = mixed @ rollout  # (B, T, T)
    return rollout


def patch_centres(grid_size: int, patch_size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Centres ``(N, 2)`` (row, column, in pixels) of a ``grid_size x grid_size`` patch grid, row by
    row, on ``device``."""
    if grid_size < 1 or patch_size < 1:
        raise ValueError(f"grid_size and patch_size must be >= 1, got {grid_size} and {patch_size}")
    index = torch.arange(grid_size, dtype=torch.float32, device=device) * patch_size + (patch_size - 1) / 2
    rows, cols = torch.meshgrid(index, index, indexing="ij")
    return torch.stack([rows.flatten(), cols.flatten()], dim=-1)  # (N, 2)


def mean_attention_distance(
    weights: torch.Tensor, grid_size: int, patch_size: int, num_prefix_tokens: int = 1
) -> torch.Tensor:
    """Per head, the attention-weighted distance in pixels between query and key patches: ``(H,)``.

    ``weights`` ``(B, H, T, T)`` with ``T = num_prefix_tokens + grid_size**2``. Prefix tokens (the
    class token) are left out as queries and keys; each query's weights over the patches are
    renormalised to sum to 1 before averaging distances.
    """
    N = grid_size * grid_size
    if weights.dim() != 4 or weights.shape[-2:] != (num_prefix_tokens + N,) * 2:
        raise ValueError(f"expected weights (B, H, {num_prefix_tokens + N}, {num_prefix_tokens + N}) for "
                         f"{num_prefix_tokens} prefix token(s) and a {grid_size}x{grid_size} grid, got "
                         f"{tuple(weights.shape)}")
    centres = patch_centres(grid_size, patch_size, weights.device).to(weights.dtype)  # (N, 2)
    distance = torch.cdist(centres, centres)  # (N, N)
    patches = weights[..., num_prefix_tokens:, num_prefix_tokens:]  # (B, H, N, N)
    patches = patches / patches.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)
    return (patches * distance).sum(dim=-1).mean(dim=(0, 2))  # (H,)
