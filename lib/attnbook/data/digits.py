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


def affine(images: torch.Tensor, angles: torch.Tensor, zooms: torch.Tensor, shifts: torch.Tensor,
           fill: float) -> torch.Tensor:
    """Rotate image ``i`` by ``angles[i]`` degrees (counter-clockwise as displayed), scale it by ``zooms[i]`` about
    its centre, then move it by ``shifts[i] = (dx, dy)`` pixels (right, down), with bilinear
    resampling; what comes from outside the frame is ``fill``. ``(N, C, H, W)`` -> ``(N, C, H, W)``."""
    N, C, H, W = images.shape
    if angles.shape != (N,) or zooms.shape != (N,) or shifts.shape != (N, 2):
        raise ValueError(f"expected angles ({N},), zooms ({N},), shifts ({N}, 2); got {tuple(angles.shape)}, "
                         f"{tuple(zooms.shape)}, {tuple(shifts.shape)}")
    radians = -angles * torch.pi / 180  # rows grow downwards: minus makes positive angles counter-clockwise on screen
    cos, sin = torch.cos(radians) / zooms, torch.sin(radians) / zooms  # (N,)
    # affine_grid maps each output pixel to the input point it reads, in [-1, 1] coordinates
    # (one pixel = 2 / W across); moving the image right by dx means reading dx pixels to the left.
    tx, ty = -shifts[:, 0] * 2 / W, -shifts[:, 1] * 2 / H  # (N,)
    theta = torch.stack([torch.stack([cos, sin, cos * tx + sin * ty], -1),
                         torch.stack([-sin, cos, -sin * tx + cos * ty], -1)], 1)  # (N, 2, 3)
    grid = nn.functional.affine_grid(theta.to(images.dtype), list(images.shape), align_corners=False)
    out = nn.functional.grid_sample(images - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out + fill


def random_affine(
    images: torch.Tensor, degrees: float, scale: float, shift: float, fill: float, generator: torch.Generator
) -> torch.Tensor:
    """Light augmentation: each image rotated by up to ``degrees``, scaled by a factor in
    ``[1 - scale, 1 + scale]`` and moved by up to ``shift`` pixels along each axis (all uniform, per
    image, drawn from ``generator``). All three 0: the images are returned unchanged."""
    if degrees < 0 or not 0 <= scale < 1 or shift < 0:
        raise ValueError(f"need degrees >= 0, 0 <= scale < 1, shift >= 0; got {degrees}, {scale}, {shift}")
    if degrees == 0 and scale == 0 and shift == 0:
        return images
    N = images.shape[0]
    u = torch.rand(4, N, generator=generator) * 2 - 1  # (4, N) uniform in [-1, 1]
    return affine(images, u[0] * degrees, 1 + u[1] * scale, u[2:].T * shift, fill)


def image_batches(
    data: ImageSet, batch_size: int, generator: torch.Generator,
    degrees: float = 0.0, scale: float = 0.0, shift: float = 0.0, fill: float = 0.0,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches ``(images (B, C, H, W), labels (B,))``, reshuffled every epoch.

    Batches hold ``min(batch_size, len(data))`` images; an epoch's last partial batch is dropped.
    The order depends only on ``generator``, so two models given generators with the same seed
    see the same images in the same order. ``degrees``, ``scale``, ``shift``: random rotation,
    scaling and shift of each image (``random_affine``, drawn from the same generator).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    size = min(batch_size, len(data))  # a set smaller than one batch is one batch
    while True:
        order = torch.randperm(len(data), generator=generator)
        for start in range(0, len(order) - size + 1, size):  # the last partial batch is dropped
            index = order[start:start + size]
            images = random_affine(data.images[index], degrees, scale, shift, fill, generator)
            yield images, data.labels[index]
