"""Induction heads in miniature (Olsson et al., 2022): sequences made of a random segment
repeated, a per-head *induction score*, and the loss on the first and the repeated half.

On ``[a b c d ... | a b c d ...]`` nothing predicts the first half, but in the second half the
next token is the one that followed the current token last time. A head that, at position i,
attends to the position just after the previous occurrence of token i (and copies what it
finds there) predicts it: that is an induction head. Legend: B batch, T length, H heads, V vocabulary.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from attnbook.tasks.language_modeling import next_token_cross_entropy
from attnbook.train import evaluating


def repeated_segments(batch_size: int, length: int, vocab_size: int, min_segment: int, max_segment: int,
                      generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens ``(B, length)`` and segment lengths ``(B,)``: each row is a random segment of
    r tokens (r drawn from ``[min_segment, max_segment]``), the same segment again, then random
    tokens up to ``length``. r varies, so the copy cannot be found by position alone."""
    if not 2 <= min_segment <= max_segment or 2 * max_segment > length:
        raise ValueError(f"need 2 <= min_segment <= max_segment <= length / 2, got {min_segment}, "
                         f"{max_segment}, length {length}")
    tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, T)
    lengths = torch.randint(min_segment, max_segment + 1, (batch_size,), generator=generator)  # (B,)
    positions = torch.arange(length)
    copy = (positions >= lengths[:, None]) & (positions < 2 * lengths[:, None])  # (B, T): the second copy
    source = (positions - lengths[:, None]).clamp(min=0)  # (B, T): where each copied token comes from
    return torch.where(copy, tokens.gather(1, source), tokens), lengths


def repeated_batches(batch_size: int, length: int, vocab_size: int, min_segment: int, max_segment: int,
                     generator: torch.Generator | None = None) -> Iterator[torch.Tensor]:
    """Endless batches of ``repeated_segments`` tokens ``(B, length)``."""
    while True:
        yield repeated_segments(batch_size, length, vocab_size, min_segment, max_segment, generator)[0]


def induction_targets(tokens: torch.Tensor) -> torch.Tensor:
    """``(B, T)``: for each position i, the position after the previous occurrence of token i
    (the key an induction head attends to), or -1 where token i has not occurred before."""
    B, T = tokens.shape
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)  # (T, T): k < i
    same = (tokens[:, :, None] == tokens[:, None, :]) & earlier  # (B, T, T)
    positions = torch.arange(T, device=tokens.device)
    previous = torch.where(same, positions, -1).max(dim=-1).values  # (B, T): last k < i with the same token
    return torch.where(previous >= 0, previous + 1, -1)


def induction_scores(weights: torch.Tensor, tokens: torch.Tensor,
                     lengths: torch.Tensor | None = None) -> torch.Tensor:
    """``(H,)``: each head's mean attention weight on the induction target. weights
    ``(B, H, T, T)``, tokens ``(B, T)``.

    Without ``lengths``: over every position whose token occurred before, the target being
    the position after its last earlier occurrence (chance repeats in random filler count too).
    With ``lengths (B,)`` (sequences of ``repeated_segments``): Olsson et al.'s *prefix-matching
    score*, over the second copy only (positions n .. 2n-1, n the segment length), the target
    of position i being i - n + 1, the token after i's first copy."""
    if lengths is None:
        targets = induction_targets(tokens)  # (B, T)
        valid = targets >= 0
    else:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        valid = (positions >= lengths[:, None]) & (positions < 2 * lengths[:, None])  # (B, T)
        targets = torch.where(valid, positions - lengths[:, None] + 1, 0)
    picked = weights.gather(-1, targets.clamp(min=0)[:, None, :, None].expand(-1, weights.shape[1], -1, 1))
    picked = picked[..., 0]  # (B, H, T)
    return (picked * valid[:, None]).sum(dim=(0, 2)) / valid.sum()


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """``(H, T - 1)``: each head's mean attention weight (over the batch) from position i to
    position i - 1, for i = 1 .. T-1. weights ``(B, H, T, T)``."""
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=0)


@torch.no_grad()
def half_losses(model: nn.Module, tokens: torch.Tensor, lengths: torch.Tensor) -> tuple[float, float]:
    """Mean next-token loss on the first copy of each segment (targets 1 .. r-1, r its length
    from ``lengths``) and on the repeated copy (targets r+1 .. 2r-1; its first token r follows
    nothing it could copy).
    The model runs in eval mode; each submodule's mode is restored after."""
    with evaluating(model):
        losses = next_token_cross_entropy(model, tokens, reduction="none")  # (B, T-1)
    target = torch.arange(1, tokens.shape[1], device=tokens.device)  # (T-1,): the position each loss predicts
    first = target < lengths[:, None]  # (B, T-1)
    second = (target > lengths[:, None]) & (target < 2 * lengths[:, None])
    return losses[first].mean().item(), losses[second].mean().item()


def copy_predictions(tokens: torch.Tensor) -> torch.Tensor:
    """``(B, T)``: what a copying rule predicts *after* each position i: the token that
    followed the last earlier occurrence of token i, or -1 where token i is new."""
    targets = induction_targets(tokens)  # (B, T): position after the last earlier occurrence
    return torch.where(targets >= 0, tokens.gather(1, targets.clamp(min=0)), -1)


def _second_copy_targets(tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``(B, T-1)`` bool: the targets ``half_losses`` scores as the repeated copy."""
    target = torch.arange(1, tokens.shape[1], device=tokens.device)  # (T-1,)
    return (target > lengths[:, None]) & (target < 2 * lengths[:, None])


def copying_baseline(tokens: torch.Tensor, lengths: torch.Tensor, vocab_size: int,
                     epsilon: float) -> tuple[float, float, int]:
    """The copying rule as a model, on the repeated copy (the targets of ``half_losses``):
    probability ``1 - epsilon + epsilon / V`` on the token that followed the last earlier
    occurrence of the current token, ``epsilon / V`` on every other (uniform where the current
    token is new). Returns (share of targets it gets right, mean loss in nats, targets)."""
    predicted = copy_predictions(tokens)[:, :-1]  # (B, T-1): the guess for target t + 1
    scored = _second_copy_targets(tokens, lengths)
    right = (predicted == tokens[:, 1:])[scored]
    new = (predicted < 0)[scored]
    p_right = 1 - epsilon + epsilon / vocab_size
    probs = torch.full(right.shape, epsilon / vocab_size, dtype=torch.float64, device=right.device)
    probs[new] = 1 / vocab_size
    probs[right] = p_right
    return right.double().mean().item(), (-probs.log()).mean().item(), int(scored.sum())


def fit_copying_epsilon(tokens: torch.Tensor, lengths: torch.Tensor, vocab_size: int,
                        grid: tuple[float, ...] = tuple(i / 100 for i in range(1, 60))) -> float:
    """The ``epsilon`` of ``copying_baseline`` with the lowest loss on these sequences
    (give it sequences other than the ones it is measured on)."""
    return min(grid, key=lambda e: copying_baseline(tokens, lengths, vocab_size, e)[1])


def occurrence_rule_loss(tokens: torch.Tensor, lengths: torch.Tensor, vocab_size: int,
                         epsilon: float, rule: str = "all") -> float:
    """Mean loss in nats, on the repeated copy (the targets of ``half_losses``), of a copying
    rule that looks at *every* earlier occurrence of the current token, not only the last.
    ``rule="all"``: probability ``1 - epsilon`` spread evenly over the tokens that followed all
    earlier occurrences (a token that followed two of them gets twice the share);
    ``rule="first"``: ``1 - epsilon`` on the token that followed the first occurrence.
    ``epsilon / V`` on every token in both; uniform where the current token is new."""
    if rule not in ("all", "first"):
        raise ValueError(f"rule must be 'all' or 'first', not {rule!r}")
    T = tokens.shape[1]
    current = tokens[:, :-1]  # (B, T-1): the token at t, whose successor t + 1 is predicted
    earlier = torch.ones(T - 1, T - 1, dtype=torch.bool, device=tokens.device).tril(-1)
    same = (current[:, :, None] == current[:, None, :]) & earlier  # (B, t, k): k < t, same token
    hit = tokens[:, 1:, None] == tokens[:, None, 1:]  # (B, t, k): token k + 1 is the target
    count = same.sum(-1)  # (B, T-1): earlier occurrences
    if rule == "all":
        right = (same & hit).sum(-1).double() / count.clamp(min=1)
    else:
        first = same.double().argmax(-1, keepdim=True)  # (B, T-1, 1): the first True
        right = hit.gather(-1, first).squeeze(-1).double()
    probs = (1 - epsilon) * right + epsilon / vocab_size
    probs = torch.where(count > 0, probs, torch.full_like(probs, 1 / vocab_size))
    return (-probs.log())[_second_copy_targets(tokens, lengths)].mean().item()


def fit_rule_epsilon(tokens: torch.Tensor, lengths: torch.Tensor, vocab_size: int, rule: str,
                     grid: tuple[float, ...] = tuple(i / 100 for i in range(1, 60))) -> float:
    """The ``epsilon`` of ``occurrence_rule_loss`` with the lowest loss on these sequences
    (give it sequences other than the ones it is measured on)."""
    return min(grid, key=lambda e: occurrence_rule_loss(tokens, lengths, vocab_size, e, rule))


@torch.no_grad()
def first_copy_losses(model: nn.Module, tokens: torch.Tensor, lengths: torch.Tensor
                      ) -> dict[str, tuple[float, int]]:
    """The first copy's loss (the targets of ``half_losses``) split by whether the target
    token already occurs earlier in its sequence (by chance) or is new there:
    ``{"in context": (loss, targets), "new": (loss, targets)}``."""
    with evaluating(model):
        losses = next_token_cross_entropy(model, tokens, reduction="none")  # (B, T-1)
    T = tokens.shape[1]
    target = torch.arange(1, T, device=tokens.device)
    first = target < lengths[:, None]  # (B, T-1)
    earlier = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril(-1)  # (T, T): k < t
    same = (tokens[:, :, None] == tokens[:, None, :]) & earlier  # (B, T, T)
    seen = same.any(-1)[:, 1:]  # (B, T-1): target t + 1 occurred at some k < t + 1
    return {name: (losses[first & mask].mean().item(), int((first & mask).sum()))
            for name, mask in (("in context", seen), ("new", ~seen))}
