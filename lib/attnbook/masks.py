"""The book's one mask convention: a boolean tensor, ``True`` = this query may attend to this key.

Shapes follow the book's legend (B batch, H heads, T query length, S key length). A mask must
broadcast to the scores it is applied to, e.g. ``(B, 1, S)`` or ``(T, S)`` for ``(B, T, S)``
scores, or ``(B, 1, 1, S)`` for ``(B, H, T, S)`` scores.
"""
from __future__ import annotations

import torch


def padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """``(B,)`` lengths -> ``(B, S)`` mask, True on real tokens and False on padding."""
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {tuple(lengths.shape)}")
    if lengths.numel() == 0:
        raise ValueError("lengths is empty: a batch needs at least one sequence")
    if (lengths < 1).any():
        raise ValueError(f"every length must be >= 1, got {lengths.tolist()}")
    longest = int(lengths.max())
    max_len = longest if max_len is None else max_len
    if max_len < longest:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    return positions[None, :] < lengths[:, None]  # (B, S)


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(T, T)`` mask, True where key position j <= query position i (the diagonal is kept)."""
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()  # (T, T)


def key_padding_to_attention_mask(key_valid: torch.Tensor) -> torch.Tensor:
    """``(B, S)`` key mask -> ``(B, 1, S)``, broadcastable to ``(B, T, S)`` scores."""
    if key_valid.dtype != torch.bool or key_valid.dim() != 2:
        raise ValueError(
            f"key mask must be a bool tensor of shape (B, S), got {key_valid.dtype} {tuple(key_valid.shape)}"
        )
    return key_valid[:, None, :]  # (B, 1, S)


def validate_mask(mask: torch.Tensor, scores_shape: torch.Size | tuple[int, ...]) -> None:
    """Raise a clear error unless ``mask`` is boolean and broadcasts to ``scores_shape``."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "if you have an additive float mask, convert it with `mask == 0`"
        )
    try:
        shape = torch.broadcast_shapes(mask.shape, tuple(scores_shape))
    except RuntimeError:
        shape = None
    if shape != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to scores of shape {tuple(scores_shape)}"
        )


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` that gives exactly zero weight where ``mask`` is False.

    A row with no allowed position at all gets all-zero weights (not NaN).
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    validate_mask(mask, scores.shape)
    filled = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(filled, dim=dim)
    return weights.masked_fill(~mask, 0.0)  # also turns the NaNs of empty rows into zeros
