"""One plain training loop for every chapter: ``fit``, and the ``History`` it returns; and
``evaluating``, the one way an evaluation helper switches a model to eval mode.

Models return logits; the loss is computed outside the model by a ``loss_fn(model, batch)``.
Training runs for a fixed number of steps (never for a wall-clock budget) so results repeat.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

from attnbook.progress import progress_bar


@dataclass
class History:
    """What happened during ``fit``: the loss at every step, and metrics at evaluation steps."""

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    seconds: float = 0.0
    clipped: int = 0  # steps whose gradient norm exceeded ``clip_norm`` (clipping shortened them)

    def log_metric(self, name: str, step: int, value: float) -> None:
        self.metrics.setdefault(name, []).append((step, float(value)))

    def smoothed_losses(self, window: int = 50) -> list[float]:
        """Running mean of the loss over the last ``window`` steps."""
        out, total = [], 0.0
        for i, loss in enumerate(self.losses):
            total += loss - (self.losses[i - window] if i >= window else 0.0)
            out.append(total / min(i + 1, window))
        return out

    @property
    def steps_per_second(self) -> float:
        return len(self.steps) / self.seconds if self.seconds else float("nan")


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """Eval mode (no dropout) inside the ``with`` block; on leaving it, also after an exception,
    every submodule gets back the mode it had before, so a model whose parts were in mixed
    modes (a frozen encoder kept in eval under a training head) comes back exactly as it was.

    Gradients are untouched: combine with ``torch.no_grad()`` where none are needed.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"evaluating() expects a torch.nn.Module, got {type(model).__name__}")
    modes = [(module, module.training) for module in model.modules()]  # parents before children
    model.eval()
    try:
        yield model
    finally:
        for module, was_training in modes:  # each module's own flag, not train(), which would
            module.training = was_training  # also reset the children (and a shared one twice)


def fit(
    model: nn.Module,
    batches: Iterator,
    loss_fn: Callable[[nn.Module, object], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    steps: int,
    clip_norm: float | None = 1.0,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int | None = None,
    progress: bool = True,
) -> History:
    """Train ``model`` for ``steps`` optimizer steps on batches drawn from ``batches``.

    ``loss_fn(model, batch)`` returns a scalar loss. Gradients are clipped to ``clip_norm``
    (None: no clipping). ``eval_fn(model)`` runs every ``eval_every`` steps and at the end,
    with the model in eval mode, and returns named metrics for the history.

    Modes: ``fit`` puts the whole model in train mode to start, and hands it back in eval mode,
    ready to evaluate (the chapters rely on this); ``eval_fn`` runs inside ``evaluating``.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if (eval_fn is None) != (eval_every is None):
        raise ValueError("give eval_fn and eval_every together, or neither")
    history = History()
    bar = progress_bar(steps, desc="training", enabled=progress)
    start = time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        try:
            batch = next(batches)
        except StopIteration:
            raise ValueError(f"the batch iterator ran out after {step - 1} of {steps} steps") from None
        loss = loss_fn(model, batch)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss became {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_norm is not None:
            norm = nn.utils.clip_grad_norm_(model.parameters(), clip_norm)  # before clipping
            history.clipped += int(norm > clip_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        history.steps.append(step)
        history.losses.append(loss.item())
        recent = history.losses[-50:]
        bar.set_postfix(loss=f"{sum(recent) / len(recent):.3f}", refresh=False)
        bar.update(1)
        if eval_fn is not None and (step % eval_every == 0 or step == steps):
            _evaluate_into(history, model, eval_fn, step)
    history.seconds = time.perf_counter() - start
    bar.close()
    model.eval()
    return history


def _evaluate_into(history: History, model: nn.Module, eval_fn, step: int) -> None:
    with evaluating(model), torch.no_grad():
        metrics = eval_fn(model)
    for name, value in metrics.items():
        if not math.isfinite(value):
            raise FloatingPointError(f"metric {name} is {value} at step {step}")
        history.log_metric(name, step, value)
