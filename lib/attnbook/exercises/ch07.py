"""Checkers for Chapter 7 (the Vision Transformer); ``EXERCISES`` maps the notebook's names to them.

Each checker varies every argument of the exercise; ``attnbook.exercises.core.run_cases`` guards
the inputs against in-place changes and names a known mistake when a wrong answer equals its answer.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from attnbook.exercises.core import Case, CheckResult, Mistake, run_cases


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ----- 1. patchify ----------------------------------------------------------------------------

def _patchify(images: torch.Tensor, P: int) -> torch.Tensor:
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, P, P)
    return x.reshape(B, (H // P) * (W // P), C * P * P)  # (B, N, C*P*P)


def _patchify_channel_last(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (B, rows, cols, P, P, C)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


def _patchify_column_major(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)  # (B, cols, rows, C, P, P)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


def _patchify_no_permute(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, (H // P) * (W // P), C * P * P)


def _patchify_unfold_untransposed(images, P):
    B, C, H, W = images.shape
    return torch.nn.functional.unfold(images, P, stride=P).reshape(B, (H // P) * (W // P), C * P * P)


PATCHIFY_MISTAKES = (
    Mistake("channel_last",
            "each patch is flattened channel-last (P, P, C); flatten it channel-first (C, P, P), the "
            "layout of a Conv2d weight, so that a patch's first P*P numbers are channel 0",
            gives=_patchify_channel_last),
    Mistake("column_major",
            "the patches are read column by column; read them row by row (patch n = row * cols + col)",
            gives=_patchify_column_major),
    Mistake("no_permute",
            "a plain reshape without a permute: it cuts the image into runs of pixels, not into P x P"
            " squares; reshape to (B, C, rows, P, cols, P) and move rows and cols to the front first",
            gives=_patchify_no_permute),
    Mistake("unfold_untransposed",
            "unfold's output is (B, C*P*P, N): transpose it to (B, N, C*P*P) instead of reshaping it",
            gives=_patchify_unfold_untransposed),
)


def check_patchify(fn: Callable) -> CheckResult:
    """``fn(images (B, C, H, W), patch_size) -> (B, N, C * P * P)``, patches row by row, channel-first."""
    settings = [((1, 1, 4, 4), 2), ((2, 1, 8, 8), 2), ((2, 3, 8, 8), 4), ((3, 2, 6, 4), 2),
                ((1, 3, 6, 9), 3), ((2, 2, 3, 3), 1), ((1, 1, 4, 4), 4)]
    cases = [
        Case(f"images {shape}, patch size {P}", (_randn(n, *shape), P), _patchify(_randn(n, *shape), P),
             hint="reshape (B, C, H, W) to (B, C, H/P, P, W/P, P), permute to (B, H/P, W/P, C, P, P), "
                  "then reshape to (B, N, C*P*P).")
        for n, (shape, P) in enumerate(settings)
    ]
    return run_cases("patchify", fn, cases, PATCHIFY_MISTAKES)


# ----- 2. how many tokens, how many parameters --------------------------------------------------

def _sizes(image_size: int, patch_size: int, channels: int, d_model: int) -> tuple[int, int]:
    n = (image_size // patch_size) ** 2
    projection = channels * patch_size ** 2 * d_model + d_model  # weight + bias
    return n + 1, projection + d_model + (n + 1) * d_model  # + class token + one position per token


SIZE_MISTAKES = (
    Mistake("no_class_token",
            "the class token is missing from the sequence length (and from the positions)",
            gives=lambda s, p, c, d: ((s // p) ** 2, c * p * p * d + d + d + (s // p) ** 2 * d)),
    Mistake("one_vector_missing",
            "D parameters (one token vector) are missing: the projection's bias, the class token "
            "itself, or the class token's position (positions are learned for all 1 + N tokens)",
            gives=lambda s, p, c, d: ((s // p) ** 2 + 1, c * p * p * d + d + ((s // p) ** 2 + 1) * d)),
    Mistake("no_channels",
            "the channels are not counted: a patch holds C * P * P numbers",
            gives=lambda s, p, c, d: ((s // p) ** 2 + 1, p * p * d + d + d + ((s // p) ** 2 + 1) * d)),
    Mistake("grid_not_squared",
            "N was computed as image_size / patch_size; the patches form a grid, N = (image_size / "
            "patch_size)^2",
            gives=lambda s, p, c, d: (s // p + 1, c * p * p * d + d + d + (s // p + 1) * d)),
)


def check_vit_sizes(fn: Callable) -> CheckResult:
    """``fn(image_size, patch_size, channels, d_model) -> (tokens, embedding_parameters)``."""
    settings = [(8, 2, 1, 64), (8, 4, 1, 64), (224, 16, 3, 768), (32, 4, 3, 192), (28, 7, 1, 16), (6, 1, 2, 8)]
    cases = [
        Case(f"image {s}x{s}, patch {p}, {c} channel(s), D = {d}", (s, p, c, d), _sizes(s, p, c, d),
             hint="tokens = N + 1 with N = (image_size / patch_size)^2; parameters = the projection's "
                  "weight and bias + the class token + one learned position per token.")
        for s, p, c, d in settings
    ]
    return run_cases("tokens and parameters", fn, cases, SIZE_MISTAKES)


# ----- 3. class token and positions ------------------------------------------------------------

def _prepend(patches: torch.Tensor, cls_token: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    cls = cls_token.expand(patches.shape[0], -1, -1)  # (B, 1, D)
    return torch.cat([cls, patches], dim=1) + positions  # (B, 1 + N, D)


PREPEND_MISTAKES = (
    Mistake("class_token_last",
            "the class token was put at the end; it goes first (position 0, where the head reads it)",
            gives=lambda x, c, p: torch.cat([x, c.expand(x.shape[0], -1, -1)], dim=1) + p),
    Mistake("class_token_unpositioned",
            "the class token got no position: positions[0] belongs to it, positions[1:] to the "
            "patches",
            gives=lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x + p[1:]], dim=1)),
    Mistake("positions_shifted",
            "the patches got positions[:N] (shifted by one): positions[0] is the class token's",
            gives=lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x + p[:-1]], dim=1)),
    Mistake("no_positions",
            "the positions were not added",
            gives=lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x], dim=1)),
)


def check_prepend_class_token(fn: Callable) -> CheckResult:
    """``fn(patches (B, N, D), cls_token (1, 1, D), positions (1 + N, D)) -> (B, 1 + N, D)``."""
    settings = [(1, 4, 3), (2, 16, 8), (3, 1, 5), (4, 9, 2)]
    cases = []
    for n, (B, N, D) in enumerate(settings):
        args = (_randn(3 * n, B, N, D), _randn(3 * n + 1, 1, 1, D), _randn(3 * n + 2, 1 + N, D))
        cases.append(Case(f"B = {B}, N = {N}, D = {D}", args, _prepend(*args),
                          hint="expand the class token to (B, 1, D), concatenate it before the patches "
                               "along dim 1, then add the (1 + N, D) positions."))
    return run_cases("class token and positions", fn, cases, PREPEND_MISTAKES)


# ----- 4. attention rollout --------------------------------------------------------------------

def _rollout(maps: Sequence[torch.Tensor], residual: float) -> torch.Tensor:
    T = maps[0].shape[-1]
    eye = torch.eye(T)
    out = eye.expand(maps[0].shape[0], T, T)
    for layer in maps:
        out = ((1 - residual) * layer.mean(1) + residual * eye) @ out  # (B, T, T)
    return out


def _rollout_wrong_order(maps, residual):
    return _rollout(list(maps)[::-1], residual)


def _rollout_no_residual(maps, residual):
    return _rollout(maps, 0.0)


def _rollout_per_head(maps, residual):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(*maps[0].shape[:2], T, T)
    for layer in maps:
        out = ((1 - residual) * layer + residual * torch.eye(T)) @ out  # (B, H, T, T)
    return out.mean(1)


def _rollout_residual_swapped(maps, residual):
    return _rollout(maps, 1 - residual)


ROLLOUT_MISTAKES = (
    Mistake("wrong_order",
            "the layers are multiplied in the wrong order: the last layer goes on the left, R = A_L @"
            " ... @ A_1",
            gives=_rollout_wrong_order),
    Mistake("no_residual",
            "the residual is ignored: mix each layer with the identity, (1 - r) * A + r * I",
            gives=_rollout_no_residual),
    Mistake("residual_swapped",
            "the weights of the attention and the identity are swapped: (1 - r) * A + r * I",
            gives=_rollout_residual_swapped),
    Mistake("per_head",
            "each head was rolled out on its own and averaged at the end; average the heads in each "
            "layer first",
            gives=_rollout_per_head),
)


def _maps(seed: int, layers: int, B: int, H: int, T: int) -> list[torch.Tensor]:
    return [_randn(seed + l, B, H, T, T).mul(2).softmax(-1) for l in range(layers)]


def check_attention_rollout(fn: Callable) -> CheckResult:
    """``fn(maps: list of (B, H, T, T), residual) -> (B, T, T)``."""
    settings = [(2, 1, 2, 3, 0.5), (3, 2, 4, 5, 0.5), (1, 1, 3, 4, 0.5), (4, 2, 1, 6, 0.3), (2, 3, 2, 17, 0.8)]
    cases = []
    for n, (layers, B, H, T, r) in enumerate(settings):
        maps = _maps(10 * n, layers, B, H, T)
        cases.append(Case(f"{layers} layer(s), B = {B}, H = {H}, T = {T}, residual {r}", (maps, r),
                          _rollout(maps, r),
                          hint="start from the identity; for each layer from the first, average the heads, "
                               "mix with the identity, and multiply it on the left of the running product."))
    return run_cases("attention rollout", fn, cases, ROLLOUT_MISTAKES)


EXERCISES = {
    "patchify": check_patchify,
    "vit_sizes": check_vit_sizes,
    "prepend_class_token": check_prepend_class_token,
    "rollout": check_attention_rollout,
}
