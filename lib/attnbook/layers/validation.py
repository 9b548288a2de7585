"""The one place where sizes, options and inputs are checked: every layer, block, config and model
entry point calls these, so each mistake gets one message that says what was expected and what
was given.

Legend: B batch, T length.
"""
from __future__ import annotations

import torch

ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
NORMS = ("layernorm", "rmsnorm")


def check_positive(**sizes: int) -> None:
    """Every size must be >= 1: ``check_positive(d_model=64, num_heads=0)`` raises naming ``num_heads``."""
    bad = {name: value for name, value in sizes.items() if value < 1}
    if bad:
        raise ValueError(f"sizes must be >= 1, got {bad}")


def check_heads(d_model: int, num_heads: int, num_kv_heads: int | None = None) -> None:
    """``d_model`` splits into ``num_heads`` heads; ``num_kv_heads`` (GQA) divides ``num_heads``."""
    check_positive(d_model=d_model, num_heads=num_heads)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
    if num_kv_heads is not None:
        check_positive(num_kv_heads=num_kv_heads)
        if num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads}): "
                "each key/value head serves an equal group of query heads"
            )


def check_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


def check_eps(eps: float) -> None:
    if not eps > 0:
        raise ValueError(f"a norm's eps must be > 0, got {eps}")


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; expected one of {allowed}")


def check_activation(activation: str) -> None:
    check_choice("activation", activation, ACTIVATIONS)


def check_transformer_sizes(
    d_model: int, num_heads: int, d_ff: int, dropout: float, activation: str, layer_norm_eps: float = 1e-5,
    **other_sizes: int,
) -> None:
    """The checks every Transformer config shares; ``other_sizes`` are vocabularies, depths, lengths."""
    check_positive(d_ff=d_ff, **other_sizes)
    check_heads(d_model, num_heads)
    check_dropout(dropout)
    check_activation(activation)
    check_eps(layer_norm_eps)


def check_token_ids(name: str, ids: torch.Tensor, vocab_size: int, max_len: int | None = None) -> None:
    """``ids`` must be a non-empty ``(B, T)`` integer tensor with every id in ``[0, vocab_size)``
    (and ``T <= max_len`` when given)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must be (B, T) token ids, got shape {tuple(ids.shape)}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    if ids.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(ids.shape)}): at least one sequence of one token is needed")
    if max_len is not None and ids.shape[1] > max_len:
        raise ValueError(f"{name} has length {ids.shape[1]}, longer than max_len={max_len}")
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"{name} must lie in [0, {vocab_size}) (the vocabulary), got ids from {low} to {high}"
        )
