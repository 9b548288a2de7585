"""Checkers for Chapter 7 (the Vision Transformer); ``EXERCISES`` maps the notebook's names to them.

Each checker varies every argument of the exercise, guards the inputs against in-place changes,
and, when a wrong answer equals a known mistake's answer, says which mistake in the hint line.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from attnbook.exercises.core import Case, CheckResult, compare, run_cases


# ----- shared machinery: diagnoses and untouched inputs ----------------------------------------

def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _untouched(fn: Callable) -> Callable:
    """Wrap ``fn`` so that changing an input in place raises an error that says so."""

    def guarded(*args):
        before = _clone(args)
        out = fn(*args)
        for n, (old, new) in enumerate(zip(before, args), start=1):
            if not _same(old, new):
                raise ValueError(f"argument {n} was changed in place; leave the inputs alone "
                                 "(use out-of-place operations such as x + y, torch.cat)")
        return out

    return guarded


def _diagnosed(fn: Callable, cases: Sequence[Case], mistakes: Sequence[tuple[str, Callable]]) -> list[Case]:
    """The cases, each whose answer from ``fn`` equals a known mistake's getting that diagnosis as hint."""
    out = []
    for case in cases:
        args = _clone(case.args)
        try:
            got = fn(*args)
        except Exception:  # noqa: BLE001 - run_cases reports it
            out.append(case)
            continue
        diagnosis = None
        if not _same(args, case.args):
            diagnosis = "your function changes an input in place; the caller's tensors must stay as they were"
        elif compare(got, case.expected, case.atol, case.rtol) is not None:
            for message, wrong in mistakes:
                if compare(got, wrong(*_clone(case.args)), case.atol, case.rtol) is None:
                    diagnosis = message
                    break
        out.append(dataclasses.replace(case, hint=f"looks like {diagnosis}") if diagnosis else case)
    return out


def _check(exercise: str, fn: Callable, cases: Sequence[Case], mistakes: Sequence[tuple[str, Callable]]) -> CheckResult:
    if not callable(fn):
        return run_cases(exercise, fn, cases)
    return run_cases(exercise, _untouched(fn), _diagnosed(fn, cases, mistakes))


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
    ("each patch is flattened channel-last (P, P, C); flatten it channel-first (C, P, P), the layout "
     "of a Conv2d weight, so that a patch's first P*P numbers are channel 0", _patchify_channel_last),
    ("the patches are read column by column; read them row by row (patch n = row * cols + col)",
     _patchify_column_major),
    ("a plain reshape without a permute: it cuts the image into runs of pixels, not into P x P squares; "
     "reshape to (B, C, rows, P, cols, P) and move rows and cols to the front first", _patchify_no_permute),
    ("unfold's output is (B, C*P*P, N): transpose it to (B, N, C*P*P) instead of reshaping it",
     _patchify_unfold_untransposed),
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
    return _check("patchify", fn, cases, PATCHIFY_MISTAKES)


# ----- 2. how many tokens, how many parameters --------------------------------------------------

def _sizes(image_size: int, patch_size: int, channels: int, d_model: int) -> tuple[int, int]:
    n = (image_size // patch_size) ** 2
    projection = channels * patch_size ** 2 * d_model + d_model  # weight + bias
    return n + 1, projection + d_model + (n + 1) * d_model  # + class token + one position per token


SIZE_MISTAKES = (
    ("the class token is missing from the sequence length (and from the positions)",
     lambda s, p, c, d: ((s // p) ** 2, c * p * p * d + d + d + (s // p) ** 2 * d)),
    ("D parameters (one token vector) are missing: the projection's bias, the class token itself, "
     "or the class token's position (positions are learned for all 1 + N tokens)",
     lambda s, p, c, d: ((s // p) ** 2 + 1, c * p * p * d + d + ((s // p) ** 2 + 1) * d)),
    ("the channels are not counted: a patch holds C * P * P numbers",
     lambda s, p, c, d: ((s // p) ** 2 + 1, p * p * d + d + d + ((s // p) ** 2 + 1) * d)),
    ("N was computed as image_size / patch_size; the patches form a grid, N = (image_size / patch_size)^2",
     lambda s, p, c, d: (s // p + 1, c * p * p * d + d + d + (s // p + 1) * d)),
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
    return _check("tokens and parameters", fn, cases, SIZE_MISTAKES)


# ----- 3. class token and positions ------------------------------------------------------------

def _prepend(patches: torch.Tensor, cls_token: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    cls = cls_token.expand(patches.shape[0], -1, -1)  # (B, 1, D)
    return torch.cat([cls, patches], dim=1) + positions  # (B, 1 + N, D)


PREPEND_MISTAKES = (
    ("the class token was put at the end; it goes first (position 0, where the head reads it)",
     lambda x, c, p: torch.cat([x, c.expand(x.shape[0], -1, -1)], dim=1) + p),
    ("the class token got no position: positions[0] belongs to it, positions[1:] to the patches",
     lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x + p[1:]], dim=1)),
    ("the patches got positions[:N] (shifted by one): positions[0] is the class token's",
     lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x + p[:-1]], dim=1)),
    ("the positions were not added", lambda x, c, p: torch.cat([c.expand(x.shape[0], -1, -1), x], dim=1)),
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
    return _check("class token and positions", fn, cases, PREPEND_MISTAKES)


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
    ("the layers are multiplied in the wrong order: the last layer goes on the left, "
     "R = A_L @ ... @ A_1", _rollout_wrong_order),
    ("the residual is ignored: mix each layer with the identity, (1 - r) * A + r * I", _rollout_no_residual),
    ("the weights of the attention and the identity are swapped: (1 - r) * A + r * I", _rollout_residual_swapped),
    ("each head was rolled out on its own and averaged at the end; average the heads in each layer first",
     _rollout_per_head),
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
    return _check("attention rollout", fn, cases, ROLLOUT_MISTAKES)


EXERCISES = {
    "patchify": check_patchify,
    "vit_sizes": check_vit_sizes,
    "prepend_class_token": check_prepend_class_token,
    "rollout": check_attention_rollout,
}
