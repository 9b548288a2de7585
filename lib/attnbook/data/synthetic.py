"""Small synthetic sequence tasks whose answer depends on *where* tokens are.

Each task returns ``(tokens, targets)``: tokens ``(B, T)`` of ids in ``[0, V)``, targets
``(B, T, R)`` with R answers (read-outs) per position (``IGNORE`` where a position has no answer).
Generation is deterministic given a ``torch.Generator``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

IGNORE = -100  # the default ignore_index of F.cross_entropy
TaskFn = Callable[[int, int, int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


def _check(batch_size: int, length: int, vocab_size: int) -> None:
    if batch_size < 1 or length < 2 or vocab_size < 2:
        raise ValueError(f"need batch_size >= 1, length >= 2, vocab_size >= 2; got {batch_size}, {length}, {vocab_size}")


def reversal_task(
    batch_size: int, length: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every position must output the token at the mirrored position ``T - 1 - i``.

    Tokens in a sequence are distinct (``length <= vocab_size``) and ``length`` is even, so no
    position answers with its own token. A model blind to order sees only its own token and
    the set of tokens; the answer is then equally likely to be any of the other ``T - 1``
    tokens, so no such model beats ``1 / (T - 1)`` accuracy.
    Returns tokens ``(B, T)`` and targets ``(B, T, 1)``.
    """
    _check(batch_size, length, vocab_size)
    if length > vocab_size or length % 2:
        raise ValueError(f"length must be even and <= vocab_size, got length={length}, vocab_size={vocab_size}")
    keys = torch.rand(batch_size, vocab_size, generator=generator)  # (B, V)
    tokens = keys.argsort(dim=1)[:, :length]  # (B, T): a random arrangement of distinct tokens
    return tokens, tokens.flip(1)[..., None]  # (B, T), (B, T, 1)


def neighbours_task(
    batch_size: int, length: int, vocab_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every position must output two things: the token before it and the token after it.

    Two relations at once (offset -1 and offset +1). The first position has no token before
    it and the last none after it: those answers are ``IGNORE``.
    Returns tokens ``(B, T)`` and targets ``(B, T, 2)``.
    """
    _check(batch_size, length, vocab_size)
    tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, T)
    targets = torch.full((batch_size, length, 2), IGNORE, dtype=torch.long)  # (B, T, 2)
    targets[:, 1:, 0] = tokens[:, :-1]  # previous token
    targets[:, :-1, 1] = tokens[:, 1:]  # next token
    return tokens, targets


def task_batches(
    task: TaskFn, batch_size: int, length: int, vocab_size: int, generator: torch.Generator,
    device: torch.device | str = "cpu",
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless fresh batches of ``task`` moved to ``device`` (an iterator for ``fit``)."""
    while True:
        tokens, targets = task(batch_size, length, vocab_size, generator)
        yield tokens.to(device), targets.to(device)
