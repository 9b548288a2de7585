"""Images as sequences of patches: the Vision Transformer's tokens (Dosovitskiy et al., 2020).

An image ``(B, C, H, W)`` is cut into non-overlapping ``P x P`` patches, read row by row
(left to right, top to bottom); each patch is flattened channel-first (``C, P, P``, the layout of a
``Conv2d`` weight) into a vector of ``C * P * P`` numbers and projected to ``D`` by one linear
map. That "flatten + linear" embedding is exactly a ``Conv2d`` with kernel = stride = ``P``
(``to_conv2d`` builds it with the same weights). ``PatchTokens`` prepends a learnable class token,
so it can serve as the ``tokens`` part of ``attnbook.layers.Embeddings``.

Shapes: B batch, C channels, H x W image, P patch size, N = (H / P) * (W / P) patches, D width.
"""
from __future__ import annotations

import torch
from torch import nn


def _check_images(images: torch.Tensor, patch_size: int, in_channels: int | None = None) -> None:
    if not isinstance(images, torch.Tensor) or images.dim() != 4:
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise ValueError(f"images must be (B, C, H, W), got {shape}")
    if patch_size < 1:
        raise ValueError(f"patch_size must be >= 1, got {patch_size}")
    B, C, H, W = images.shape
    if in_channels is not None and C != in_channels:
        raise ValueError(f"expected images with {in_channels} channel(s), got {C} (shape {tuple(images.shape)})")
    if H % patch_size or W % patch_size:
        raise ValueError(f"image size {H}x{W} is not divisible by the patch size {patch_size}")


def num_patches(image_size: int, patch_size: int) -> int:
    """How many ``patch_size`` patches tile a square ``image_size`` image: ``(image_size / P)^2``."""
    if image_size < 1 or patch_size < 1:
        raise ValueError(f"image_size and patch_size must be >= 1, got {image_size} and {patch_size}")
    if image_size % patch_size:
        raise ValueError(f"image size {image_size} is not divisible by the patch size {patch_size}")
    return (image_size // patch_size) ** 2


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut ``(B, C, H, W)`` images into flattened patches ``(B, N, C * P * P)``.

    Patch ``n = row * (W / P) + col`` holds pixels ``[row*P:(row+1)*P, col*P:(col+1)*P]`` of every
    channel, flattened channel-first: ``patchify(x, P)[b, n]`` equals
    ``x[b, :, rows, cols].flatten()``.
    """
    _check_images(images, patch_size)
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, rows, P, cols, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, P, P)
    return x.reshape(B, (H // P) * (W // P), C * P * P)  # (B, N, C*P*P)


def unpatchify(patches: torch.Tensor, patch_size: int, in_channels: int, image_size: int) -> torch.Tensor:
    """The inverse of ``patchify`` for square images: ``(B, N, C * P * P)`` -> ``(B, C, H, W)``."""
    P, C = patch_size, in_channels
    grid = image_size // P
    if patches.dim() != 3 or patches.shape[1:] != (grid * grid, C * P * P) or image_size % P:
        raise ValueError(f"expected patches (B, {grid * grid}, {C * P * P}) of a {image_size}x{image_size} "
                         f"image, got {tuple(patches.shape)}")
    B = patches.shape[0]
    x = patches.reshape(B, grid, grid, C, P, P).permute(0, 3, 1, 4, 2, 5)  # (B, C, rows, P, cols, P)
    return x.reshape(B, C, image_size, image_size)


class PatchEmbedding(nn.Module):
    """Flatten each patch and project it: ``(B, C, H, W)`` -> ``(B, N, D)``.

    ``projection`` is an ``nn.Linear(C * P * P, D)``; ``to_conv2d()`` returns the equal ``Conv2d``.
    """

    def __init__(self, in_channels: int, patch_size: int, d_model: int, bias: bool = True) -> None:
        super().__init__()
        if in_channels < 1 or patch_size < 1 or d_model < 1:
            raise ValueError(f"in_channels, patch_size and d_model must be >= 1, got {in_channels}, "
                             f"{patch_size} and {d_model}")
        self.in_channels = in_channels
        self.patch_size = patch_size
        self.projection = nn.Linear(in_channels * patch_size * patch_size, d_model, bias=bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        _check_images(images, self.patch_size, self.in_channels)
        return self.projection(patchify(images, self.patch_size))  # (B, N, D)

    @torch.no_grad()
    def to_conv2d(self) -> nn.Conv2d:
        """A ``Conv2d(C, D, kernel_size=P, stride=P)`` holding the same weights.

        Its output ``(B, D, H/P, W/P)``, flattened to ``(B, D, N)`` and transposed, equals ``forward``.
        """
        P, C, D = self.patch_size, self.in_channels, self.projection.out_features
        conv = nn.Conv2d(C, D, kernel_size=P, stride=P, bias=self.projection.bias is not None)
        conv = conv.to(self.projection.weight.device, self.projection.weight.dtype)
        conv.weight.copy_(self.projection.weight.view(D, C, P, P))
        if self.projection.bias is not None:
            conv.bias.copy_(self.projection.bias)
        return conv


class PatchTokens(nn.Module):
    """A class token followed by the patch embeddings: ``(B, C, H, W)`` -> ``(B, 1 + N, D)``.

    For square images of exactly ``image_size`` pixels (the number of positions is fixed).
    ``cls_token`` ``(1, 1, D)`` is learned; the model reads its output at position 0.
    """

    def __init__(self, image_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.image_size = image_size
        self.num_patches = num_patches(image_size, patch_size)
        self.patch_embedding = PatchEmbedding(in_channels, patch_size, d_model)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d_model) * 0.02)

    @property
    def num_tokens(self) -> int:
        """Sequence length the encoder sees: the class token plus N patches."""
        return 1 + self.num_patches

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.dim() == 4 and tuple(images.shape[-2:]) != (self.image_size, self.image_size):
            raise ValueError(f"expected {self.image_size}x{self.image_size} images, got "
                             f"{images.shape[-2]}x{images.shape[-1]} (shape {tuple(images.shape)})")
        patches = self.patch_embedding(images)  # (B, N, D)
        cls = self.cls_token.expand(patches.shape[0], -1, -1)  # (B, 1, D)
        return torch.cat([cls, patches], dim=1)  # (B, 1 + N, D)
