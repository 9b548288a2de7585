"""Learning-rate schedules. The Transformer paper's: linear warm-up, then 1/√step decay.

Vaswani et al. (2017), eq. 3: ``lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``.
It rises linearly for ``warmup`` steps, peaks at ``(d_model · warmup)^-0.5``, then decays as
``step^-0.5``. Steps count from 1.
"""
from __future__ import annotations

import math

import torch


def transformer_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """The paper's learning rate at optimizer step ``step`` (1, 2, ...)."""
    if step < 1:
        raise ValueError(f"steps count from 1, got {step}")
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(f"d_model and warmup_steps must be >= 1, got {d_model} and {warmup_steps}")
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def warmup_factor(step: int, warmup_steps: int) -> float:
    """The paper's schedule divided by its peak: ``min(step / warmup, √(warmup / step))``, 1 at the peak."""
    if step < 1:
        raise ValueError(f"steps count from 1, got {step}")
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be >= 1, got {warmup_steps}")
    return min(step / warmup_steps, math.sqrt(warmup_steps / step))


def warmup_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The paper's schedule shape with the optimizer's ``lr`` as its peak.

    The optimizer's learning rate is multiplied by ``warmup_factor``. With
    ``lr = (d_model · warmup_steps)^-0.5`` this is exactly ``transformer_lr``; a chosen peak is
    easier to tune. Call ``scheduler.step()`` after every ``optimizer.step()``, as ``fit`` does.
    """
    # LambdaLR calls the function with 0 before the first step: optimizer step n uses factor(n).
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: warmup_factor(done + 1, warmup_steps))


def warmup_linear_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """Linear warm-up to 1 over ``warmup_steps``, then a straight line down that would reach 0
    at step ``total_steps + 1``: the last step still learns, at ``1 / (total - warmup)``."""
    if step < 1:
        raise ValueError(f"steps count from 1, got {step}")
    if not 1 <= warmup_steps < total_steps:
        raise ValueError(f"need 1 <= warmup_steps < total_steps, got {warmup_steps} and {total_steps}")
    if step <= warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps + 1 - step) / (total_steps - warmup_steps))


def warmup_linear_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """The same warm-up, then a straight line down to (almost) zero at ``total_steps``: for a run whose
    length is fixed in advance, where the 1/√step tail would stop at a still-high rate."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda done: warmup_linear_factor(done + 1, warmup_steps, total_steps)
    )
