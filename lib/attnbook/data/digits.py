"""Handwritten digits for the Vision Transformer chapter: scikit-learn's bundled 8x8 images.

``sklearn.datasets.load_digits`` ships 1,797 grey images of the digits 0-9 (8x8 pixels,
values 0-16) inside the package, so nothing is downloaded. Choices, fixed for the whole book:
- split by a SHA-256 hash of each image's pixels: about 70% train, 10% dev, 20% test, the same
  on every machine and independent of the order in which scikit-learn lists the images;
- scale pixels to [0, 1], then standardise with the mean and standard deviation of the
  *training* pixels (one number each, so every pixel keeps the same scale);
- images are float tensors ``(N, 1, 8, 8)`` (``(B, C, H, W)``, one channel), labels int64 ``(N,)``.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import nn

SPLITS = ("train", "dev", "test")
NUM_CLASSES = 10
IMAGE_SIZE = 8
_MAX_PIXEL = 16.0


@dataclass(frozen=True)
class ImageSet:
    """Images ``(N, C, H, W)`` float32 and their labels ``(N,)`` int64."""

    images: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        if self.images.dim() != 4:
            raise ValueError(f"images must be (N, C, H, W), got shape {tuple(self.images.shape)}")
        if self.labels.shape != self.images.shape[:1]:
            raise ValueError(f"labels must be (N,) with N = {self.images.shape[0]}, got {tuple(self.labels.shape)}")

    def __len__(self) -> int:
        return self.labels.shape[0]


@dataclass(frozen=True)
class Digits:
    """The three fixed splits, standardised, and the two numbers used to standardise them."""

    train: ImageSet
    dev: ImageSet
    test: ImageSet
    mean: float
    std: float

    @property
    def background(self) -> float:
        """The standardised value of a blank (0) pixel: what a shifted-in border is filled with."""
        return -self.mean / self.std

    def to_pixels(self, images: torch.Tensor) -> torch.Tensor:
        """Undo the standardisation: values back in [0, 1] (for plotting)."""
        return images * self.std + self.mean


def split_of(image: np.ndarray) -> str:
    """The split of one raw 8x8 image (values 0-16), from a hash of its pixels."""
    bucket = int(hashlib.sha256(np.asarray(image, dtype=np.uint8).tobytes()).hexdigest(), 16) % 100
    return "train" if bucket < 70 else "dev" if bucket < 80 else "test"


@lru_cache(maxsize=1)
def _raw() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits  # imported here: only this chapter needs scikit-learn

    bunch = load_digits()
    return bunch.images.astype(np.float32), bunch.target.astype(np.int64)


def load_digits_splits() -> Digits:
    """The digits in their fixed train / dev / test splits, standardised with training statistics."""
    images, labels = _raw()
    splits = np.array([split_of(im) for im in images])
    pixels = images / _MAX_PIXEL  # (N, 8, 8) in [0, 1]
    train_pixels = pixels[splits == "train"]
    mean, std = float(train_pixels.mean()), float(train_pixels.std())
    parts = {}
    for name in SPLITS:
        keep = splits == name
        x = torch.from_numpy((pixels[keep] - mean) / std)[:, None]  # (N, 1, 8, 8)
        parts[name] = ImageSet(x.contiguous(), torch.from_numpy(labels[keep]))
    return Digits(parts["train"], parts["dev"], parts["test"], mean, std)


def subset(data: ImageSet, fraction: float, seed: int) -> ImageSet:
    """A random ``fraction`` of ``data``, stratified by class (every digit keeps the same share).

    Each class keeps ``round(fraction * count)`` images (at least one); ``seed`` picks which.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    generator = torch.Generator().manual_seed(seed)
    keep = []
    for label in torch.unique(data.labels):
        index = torch.nonzero(data.labels == label).flatten()
        count = max(1, round(fraction * len(index)))
        keep.append(index[torch.randperm(len(index), generator=generator)[:count]])
    chosen = torch.sort(torch.cat(keep)).values
    return ImageSet(data.images[chosen], data.labels[chosen])


def shift_images(images: torch.Tensor, dx: int, dy: int, fill: float) -> torch.Tensor:
    """Move every image ``dx`` pixels right and ``dy`` pixels down (negative: left / up).

    Pixels that leave the frame are lost; the uncovered border is set to ``fill`` (use
    ``Digits.background``, a blank pixel). ``images`` is ``(N, C, H, W)``; returns a new tensor.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    H, W = images.shape[-2:]
    if abs(dx) >= W or abs(dy) >= H:
        raise ValueError(f"shift ({dx}, {dy}) moves the whole {H}x{W} image out of the frame")
    out = torch.full_like(images, fill)
    src_y, dst_y = slice(max(0, -dy), H - max(0, dy)), slice(max(0, dy), H - max(0, -dy))
    src_x, dst_x = slice(max(0, -dx), W - max(0, dx)), slice(max(0, dx), W - max(0, -dx))
    out[..., dst_y, dst_x] = images[..., src_y, src_x]
    return out


def random_shifts(images: torch.Tensor, max_shift: int, fill: float, generator: torch.Generator) -> torch.Tensor:
    """Shift each image by its own random ``(dx, dy)``, each in ``[-max_shift, max_shift]``
    (light augmentation; ``max_shift = 0`` returns the images unchanged)."""
    if max_shift < 0:
        raise ValueError(f"max_shift must be >= 0, got {max_shift}")
    if max_shift == 0:
        return images
    N, C, H, W = images.shape
    padded = torch.nn.functional.pad(images, (max_shift,) * 4, value=fill)  # (N, C, H + 2m, W + 2m)
    offsets = torch.randint(0, 2 * max_shift + 1, (2, N), generator=generator)  # crop corner per image
    rows = offsets[0][:, None] + torch.arange(H)  # (N, H)
    cols = offsets[1][:, None] + torch.arange(W)  # (N, W)
    batch = torch.arange(N)[:, None, None]
    # (N, H, W, C) -> (N, C, H, W): each image cropped at its own offset
    return padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def random_affine(
    images: torch.Tensor, degrees: float, scale: float, shift: float, fill: float, generator: torch.Generator
) -> torch.Tensor:
    """Rotate each image by up to ``degrees``, scale it by a factor in ``[1 - scale, 1 + scale]`` and
    move it by up to ``shift`` pixels (each drawn uniformly, per image), with bilinear resampling;
    pixels from outside the frame are ``fill``. ``(N, C, H, W)`` -> ``(N, C, H, W)``."""
    N, C, H, W = images.shape
    u = torch.rand(4, N, generator=generator) * 2 - 1  # (4, N) uniform in [-1, 1]
    angle = u[0] * degrees * torch.pi / 180
    zoom = 1 + u[1] * scale
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    # affine_grid works in [-1, 1] coordinates: a shift of one pixel is 2 / W (or 2 / H)
    theta = torch.stack([torch.stack([cos, -sin, u[2] * shift * 2 / W], -1),
                         torch.stack([sin, cos, u[3] * shift * 2 / H], -1)], 1)  # (N, 2, 3)
    grid = nn.functional.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
    out = nn.functional.grid_sample(images - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out + fill


def image_batches(
    data: ImageSet, batch_size: int, generator: torch.Generator, max_shift: int = 0, fill: float = 0.0
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches ``(images (B, C, H, W), labels (B,))``, reshuffled every epoch.

    Batches hold ``min(batch_size, len(data))`` images; an epoch's last partial batch is dropped.
    The order depends only on ``generator``, so two models given generators with the same seed
    see the same images in the same order. ``max_shift > 0`` shifts each image randomly by up to
    that many pixels (the shifts come from the same generator).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    size = min(batch_size, len(data))  # a set smaller than one batch is one batch
    while True:
        order = torch.randperm(len(data), generator=generator)
        for start in range(0, len(order) - size + 1, size):  # the last partial batch is dropped
            index = order[start:start + size]
            images = random_shifts(data.images[index], max_shift, fill, generator)
            yield images, data.labels[index]
