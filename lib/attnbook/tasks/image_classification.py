"""Image classification: the loss, one training recipe for every model, accuracy.

Every model trained here (the ViT, the CNN) gets the same budget: the same number of steps,
the same batches in the same order (the batch generator is seeded by ``recipe.seed``), the same
optimizer (AdamW), learning-rate schedule (linear warm-up, then linear decay) and augmentation.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.data.digits import ImageSet, image_batches, shift_images
from attnbook.schedules import warmup_linear_scheduler
from attnbook.train import History, evaluating, fit


@dataclass(frozen=True)
class ImageRecipe:
    """How to train an image classifier for a fixed number of steps.

    Augmentation: each training image is rotated by up to ``degrees``, scaled by up to ``scale``
    (a fraction) and shifted by up to ``shift`` pixels along each axis (all 0: none).
    ``seed`` fixes the batch order and the shifts (not the model's initial weights).
    """

    steps: int = 2000
    batch_size: int = 128
    lr: float = 3e-3
    weight_decay: float = 0.1
    warmup_steps: int = 100
    label_smoothing: float = 0.1
    degrees: float = 15.0
    scale: float = 0.1
    shift: float = 1.0
    clip_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"steps and batch_size must be >= 1, got {self.steps} and {self.batch_size}")
        if not 1 <= self.warmup_steps < self.steps:
            raise ValueError(f"need 1 <= warmup_steps < steps, got {self.warmup_steps} and {self.steps}")
        if self.lr <= 0 or self.weight_decay < 0 or not 0 <= self.label_smoothing < 1:
            raise ValueError(f"bad recipe values: lr {self.lr}, weight_decay {self.weight_decay}, "
                             f"label_smoothing {self.label_smoothing}")
        if self.degrees < 0 or not 0 <= self.scale < 1 or self.shift < 0:
            raise ValueError(f"bad augmentation: degrees {self.degrees}, scale {self.scale}, shift {self.shift}")


def classification_loss(
    model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy of ``model(images)`` ``(B, classes)`` against ``labels`` ``(B,)``."""
    images, labels = batch
    device = next(model.parameters()).device
    logits = model(images.to(device))  # (B, classes)
    return nn.functional.cross_entropy(logits, labels.to(device), label_smoothing=label_smoothing)


def train_classifier(
    model: nn.Module, data: ImageSet, recipe: ImageRecipe, fill: float = 0.0, progress: bool = True
) -> History:
    """Train ``model`` (already on its device) on ``data`` with ``recipe``; returns the history.

    ``fill`` is the value of a blank pixel, used for the border that a shift uncovers.
    """
    generator = torch.Generator().manual_seed(recipe.seed)
    batches = image_batches(data, recipe.batch_size, generator, degrees=recipe.degrees, scale=recipe.scale,
                            shift=recipe.shift, fill=fill)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    scheduler = warmup_linear_scheduler(optimizer, recipe.warmup_steps, recipe.steps)
    return fit(
        model, batches, lambda m, batch: classification_loss(m, batch, recipe.label_smoothing),
        optimizer, recipe.steps, clip_norm=recipe.clip_norm, scheduler=scheduler, progress=progress,
    )


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """Predicted classes ``(N,)`` on the CPU for ``images`` ``(N, C, H, W)`` on any device, in eval
    mode (each submodule's mode restored after)."""
    device = next(model.parameters()).device
    with evaluating(model):
        out = [model(images[i:i + batch_size].to(device)).argmax(dim=-1).cpu()
               for i in range(0, len(images), batch_size)]
    return torch.cat(out) if out else torch.empty(0, dtype=torch.long, device="cpu")


def accuracy(model: nn.Module, data: ImageSet, batch_size: int = 512) -> float:
    """Fraction of ``data`` classified correctly."""
    if len(data) == 0:
        raise ValueError("cannot measure accuracy on an empty set")
    return (predict(model, data.images, batch_size) == data.labels.cpu()).float().mean().item()


def shifted_accuracy(model: nn.Module, data: ImageSet, pixels: int, fill: float) -> float:
    """Mean accuracy on ``data`` moved by ``pixels`` in each of the four directions (right, left,
    down, up); the uncovered border is ``fill`` (a blank pixel)."""
    if pixels < 1:
        raise ValueError(f"pixels must be >= 1, got {pixels}")
    moves = ((pixels, 0), (-pixels, 0), (0, pixels), (0, -pixels))
    return sum(accuracy(model, ImageSet(shift_images(data.images, dx, dy, fill), data.labels)) for dx, dy in moves) / 4
