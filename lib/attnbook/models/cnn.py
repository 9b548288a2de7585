"""A small convolutional network: the baseline the Vision Transformer is compared with.

Three 3x3 convolutions with ReLU and two 2x2 max-pools, then one linear layer on the flattened
feature map. The convolutions bring two priors a Transformer must learn from data: *locality*
(a unit sees a 3x3 neighbourhood) and *translation equivariance* (the same kernel slides
everywhere, so a shifted input gives a shifted feature map). Returns logits ``(B, classes)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class CNNConfig:
    """Square images of ``image_size`` pixels (divisible by 4: two 2x2 pools) with ``in_channels``."""

    image_size: int = 8
    in_channels: int = 1
    num_classes: int = 10
    channels: int = 32

    def __post_init__(self) -> None:
        for name in ("image_size", "in_channels", "num_classes", "channels"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.image_size % 4:
            raise ValueError(f"image_size must be divisible by 4 (two 2x2 pools), got {self.image_size}")


class SmallCNN(nn.Module):
    """conv3x3 - ReLU - conv3x3 - ReLU - pool - conv3x3 - ReLU - pool - linear."""

    def __init__(self, config: CNNConfig) -> None:
        super().__init__()
        self.config = config
        c = config.channels
        self.features = nn.Sequential(
            nn.Conv2d(config.in_channels, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * c * (config.image_size // 4) ** 2, config.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        expected = (cfg.in_channels, cfg.image_size, cfg.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"expected images (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        features = self.features(images)  # (B, 2c, H/4, W/4)
        return self.head(features.flatten(1))  # (B, classes)
