"""The book's one mask convention: a boolean tensor, ``True`` = this query may attend to this key.

Two kinds of boolean tensor, named the same way everywhere in the book:

- a **token mask** ``(B, S)``: ``True`` on real tokens, ``False`` on padding (``token_mask``).
  PyTorch's ``key_padding_mask`` means the opposite (``True`` = padding): pass ``~token_mask``.
- an **attention mask**, broadcastable to the scores ``(B, T, S)`` or ``(B, H, T, S)``:
  ``True`` where query i may attend to key j (``key_mask``, ``causal_mask``).

Legend: B batch, H heads, T query length, S key length.
"""
from __future__ import annotations

import torch


def token_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """``(B,)`` lengths -> ``(B, S)`` token mask, True on real tokens and False on padding."""
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


def causal_mask(
    num_queries: int, num_keys: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """``(T, S)`` mask, True where key j is not in the future of query i.

    The T queries are the *last* T of the S positions (S defaults to T), so with S - T
    positions already in a cache, query i sits at position S - T + i and sees keys
    ``j <= S - T + i``. With S = T this is the lower triangle, diagonal included.
    """
    num_keys = num_queries if num_keys is None else num_keys
    if num_queries < 1 or num_keys < num_queries:
        raise ValueError(f"need 1 <= num_queries <= num_keys, got num_queries={num_queries}, num_keys={num_keys}")
    ones = torch.ones(num_queries, num_keys, dtype=torch.bool, device=device)
    return ones.tril(diagonal=num_keys - num_queries)  # (T, S)


def key_mask(tokens: torch.Tensor) -> torch.Tensor:
    """``(B, S)`` token mask -> ``(B, 1, S)`` attention mask: every query may attend to the real keys."""
    if tokens.dtype != torch.bool or tokens.dim() != 2:
        raise ValueError(
            f"a token mask must be a bool tensor of shape (B, S), got {tokens.dtype} {tuple(tokens.shape)}"
        )
    return tokens[:, None, :]  # (B, 1, S)


def _fits(shape: torch.Size, scores_shape: tuple[int, ...]) -> bool:
    """Each trailing dimension equals the scores' or is 1; the last (the keys) equals S exactly."""
    return (
        2 <= len(shape) <= len(scores_shape)
        and shape[-1] == scores_shape[-1]
        and all(m in (1, s) for m, s in zip(reversed(shape), reversed(scores_shape)))
    )


def validate_mask(mask: torch.Tensor, scores_shape: torch.Size | tuple[int, ...]) -> None:
    """Raise a clear error unless ``mask`` is a boolean attention mask for ``scores_shape``.

    Each of the mask's trailing dimensions must equal the scores' or be 1, and its last
    dimension (the keys) must equal S exactly: a mask with one column, or with fewer
    dimensions that line up only by coincidence (a ``(B, S)`` token mask where ``(T, S)`` is
    expected), is a bug, not a broadcast.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
            "pass an additive float mask as `bias=` instead, or convert it with `mask == 0`"
        )
    scores_shape = tuple(scores_shape)
    if not _fits(mask.shape, scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not fit scores of shape {scores_shape}: expected "
            f"(T, S), (B, T, S) or (B, H, T, S) with S={scores_shape[-1]} and other sizes equal or 1; "
            "turn a (B, S) token mask into an attention mask with key_mask()"
        )


def validate_bias(bias: torch.Tensor, scores_shape: torch.Size | tuple[int, ...]) -> None:
    """Raise a clear error unless ``bias`` is a float tensor that can be added to ``scores_shape``.

    An attention bias (T5's relative positions, ALiBi) is added to the scores before the softmax;
    it is not a mask: what may not be attended to is said by the boolean mask.
    """
    if not isinstance(bias, torch.Tensor) or not bias.dtype.is_floating_point:
        got = bias.dtype if isinstance(bias, torch.Tensor) else type(bias).__name__
        raise TypeError(f"an attention bias must be a floating-point tensor, got {got}; "
                        "a boolean tensor says where attention is allowed: pass it as `mask=`")
    scores_shape = tuple(scores_shape)
    if not _fits(bias.shape, scores_shape):
        raise ValueError(
            f"bias of shape {tuple(bias.shape)} does not fit scores of shape {scores_shape}: expected "
            f"(T, S), (H, T, S), (B, T, S) or (B, H, T, S) with S={scores_shape[-1]} and other sizes equal or 1"
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
