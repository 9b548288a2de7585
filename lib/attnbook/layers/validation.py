"""Checks that every block and model config runs on its sizes, with messages that say what was
expected and what was given."""
from __future__ import annotations

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def check_positive(**sizes: int) -> None:
    """Every size must be >= 1: ``check_positive(d_model=64, num_heads=0)`` raises naming ``num_heads``."""
    bad = {name: value for name, value in sizes.items() if value < 1}
    if bad:
        raise ValueError(f"sizes must be >= 1, got {bad}")


def check_heads(d_model: int, num_heads: int) -> None:
    check_positive(d_model=d_model, num_heads=num_heads)
    if d_model % num_heads != 0:
        raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")


def check_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


def check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS}")


def check_transformer_sizes(
    d_model: int, num_heads: int, d_ff: int, dropout: float, activation: str, **other_sizes: int
) -> None:
    """The checks every Transformer config shares; ``other_sizes`` are vocabularies, depths, lengths."""
    check_positive(d_ff=d_ff, **other_sizes)
    check_heads(d_model, num_heads)
    check_dropout(dropout)
    check_activation(activation)
