"""The Vision Transformer (Dosovitskiy et al., 2020), built from the library's blocks.

An image ``(B, C, H, W)`` becomes ``N`` patch tokens (flatten + linear), a learned class token is
put in front, learned position embeddings are added, and a stack of pre-norm encoder blocks
with GELU (as in the paper) mixes the ``1 + N`` tokens. A final LayerNorm (pre-norm stacks need
one) and a linear read-out read the class token's output: ``(B, classes)`` logits.

``to_torch_reference`` copies the weights into a model made of PyTorch's own pieces
(``nn.Conv2d`` patches, ``nn.TransformerEncoder`` with ``norm_first=True`` and GELU) that must
compute the same logits.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers import EncoderBlock, Embeddings, LearnedPositionalEmbedding, run_blocks, to_torch_encoder_layer
from attnbook.layers.validation import check_dropout, check_eps, check_heads, check_positive
from attnbook.layers.patches import PatchTokens, num_patches


@dataclass(frozen=True)
class ViTConfig:
    """Sizes of a ViT for square images. ``layer_norm_eps`` 1e-6 is the paper's code's value.

    ``position_embeddings=False`` builds the model with no position table (a control: the encoder
    then sees the patches as a set, and only the class token's slot is special).
    ``head_hidden`` 0 (the default) makes the read-out one linear layer, as the paper fine-tunes; a
    width > 0 makes it the paper's pre-training head, an MLP with one hidden layer of that width and
    tanh: ``Linear(D, head_hidden) -> tanh -> Linear(head_hidden, classes)``.
    """

    image_size: int = 8
    patch_size: int = 2
    in_channels: int = 1
    num_classes: int = 10
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 4
    d_ff: int = 128
    dropout: float = 0.0
    layer_norm_eps: float = 1e-6
    position_embeddings: bool = True
    head_hidden: int = 0

    def __post_init__(self) -> None:
        check_positive(image_size=self.image_size, patch_size=self.patch_size, in_channels=self.in_channels,
                       num_classes=self.num_classes, num_layers=self.num_layers, d_ff=self.d_ff)
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size {self.image_size} is not divisible by patch_size {self.patch_size}")
        check_heads(self.d_model, self.num_heads)
        check_dropout(self.dropout)
        check_eps(self.layer_norm_eps)
        if self.head_hidden < 0:
            raise ValueError(f"head_hidden must be 0 (a linear head) or a positive width, got {self.head_hidden}")

    @property
    def num_patches(self) -> int:
        return num_patches(self.image_size, self.patch_size)

    @property
    def grid_size(self) -> int:
        """Patches per row (and per column)."""
        return self.image_size // self.patch_size


class ViT(nn.Module):
    """Images ``(B, C, H, W)`` -> logits ``(B, classes)`` (and, when asked, each layer's attention)."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        cfg = config
        tokens = PatchTokens(cfg.image_size, cfg.patch_size, cfg.in_channels, cfg.d_model)
        # N(0, 0.02²) as the paper's code; nn.Embedding's N(0, 1) would drown the patches
        positions = (LearnedPositionalEmbedding(cfg.d_model, max_len=tokens.num_tokens, init_std=0.02)
                     if cfg.position_embeddings else None)
        self.embeddings = Embeddings(tokens, positions, dropout=cfg.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(cfg.d_model, cfg.num_heads, cfg.d_ff, dropout=cfg.dropout, activation="gelu",
                         norm_first=True, layer_norm_eps=cfg.layer_norm_eps)
            for _ in range(cfg.num_layers)
        )
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.readout = make_head(cfg)

    def forward(
        self, images: torch.Tensor, need_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """``need_weights=True`` also returns a tuple with one ``(B, H, 1 + N, 1 + N)`` map per layer."""
        x = self.embeddings(images)  # (B, 1 + N, D): class token + patches, positions added
        out = run_blocks(self.blocks, x, need_weights=need_weights)  # (B, 1 + N, D)
        logits = self.readout(self.final_norm(out.hidden[:, 0]))  # the class token's output -> (B, classes)
        return (logits, out.attention) if need_weights else logits

    @property
    def position_embeddings(self) -> torch.Tensor:
        """The learned positions ``(1 + N, D)``: row 0 is the class token's, then the patches row by row
        (zeros for a model built without a position table)."""
        if self.embeddings.positions is None:
            return self.final_norm.weight.new_zeros(self.embeddings.tokens.num_tokens, self.config.d_model)
        return self.embeddings.positions.embedding.weight


def make_head(config: ViTConfig) -> nn.Module:
    """The read-out ``(B, D) -> (B, classes)``: linear, or an MLP with one tanh hidden layer."""
    if config.head_hidden == 0:
        return nn.Linear(config.d_model, config.num_classes)
    return nn.Sequential(nn.Linear(config.d_model, config.head_hidden), nn.Tanh(),
                         nn.Linear(config.head_hidden, config.num_classes))


class TorchReferenceViT(nn.Module):
    """The same architecture from PyTorch's own modules, to check ``ViT`` against."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        cfg = config
        self.patches = nn.Conv2d(cfg.in_channels, cfg.d_model, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.positions = nn.Parameter(torch.zeros(1, 1 + cfg.num_patches, cfg.d_model))
        layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.num_heads, cfg.d_ff, dropout=cfg.dropout,
                                           activation="gelu", layer_norm_eps=cfg.layer_norm_eps,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, enable_nested_tensor=False)
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.readout = make_head(cfg)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.patches(images).flatten(2).transpose(1, 2)  # (B, D, rows, cols) -> (B, N, D)
        x = torch.cat([self.cls_token.expand(len(images), -1, -1), patches], dim=1) + self.positions
        return self.readout(self.final_norm(self.encoder(x)[:, 0]))  # (B, classes)


@torch.no_grad()
def to_torch_reference(model: ViT) -> TorchReferenceViT:
    """A ``TorchReferenceViT`` holding a copy of ``model``'s weights (same mode, device, dtype)."""
    reference = TorchReferenceViT(model.config)
    tokens = model.embeddings.tokens
    reference.patches.load_state_dict(tokens.patch_embedding.to_conv2d().state_dict())
    reference.cls_token.copy_(tokens.cls_token)
    reference.positions.copy_(model.position_embeddings[None])
    # each block becomes an nn.TransformerEncoderLayer(norm_first=True, GELU) with the same weights
    reference.encoder.layers = nn.ModuleList(to_torch_encoder_layer(block) for block in model.blocks)
    reference.final_norm.load_state_dict(model.final_norm.state_dict())
    reference.readout.load_state_dict(model.readout.state_dict())
    param = model.final_norm.weight
    return reference.to(param.device, param.dtype).train(model.training)
