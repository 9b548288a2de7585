"""Each Chapter 7 checker accepts a reference solution, rejects a table of plausible wrong answers,
and names the mistake when it recognises it."""
import pytest
import torch

from attnbook.exercises.core import MUTATION
from attnbook.exercises.ch07 import (
    check_attention_rollout, check_patchify, check_prepend_class_token, check_vit_sizes,
)


# ----- reference solutions (kept here, not in the library) -----

def patchify_reference(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


def patchify_unfold(images, patch_size):
    return torch.nn.functional.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


def sizes_reference(image_size, patch_size, channels, d_model):
    n = (image_size // patch_size) ** 2
    return n + 1, channels * patch_size ** 2 * d_model + d_model + d_model + (n + 1) * d_model


def prepend_reference(patches, cls_token, positions):
    return torch.cat([cls_token.expand(len(patches), -1, -1), patches], dim=1) + positions


def rollout_reference(maps, residual):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer in maps:
        out = ((1 - residual) * layer.mean(1) + residual * torch.eye(T)) @ out
    return out


def rollout_library(maps, residual):
    from attnbook.attention_maps import attention_rollout
    return attention_rollout(maps, residual)


@pytest.mark.parametrize("checker,fn", [
    (check_patchify, patchify_reference), (check_patchify, patchify_unfold),
    (check_vit_sizes, sizes_reference), (check_prepend_class_token, prepend_reference),
    (check_attention_rollout, rollout_reference), (check_attention_rollout, rollout_library),
])
def test_checkers_accept_correct_answers(checker, fn):
    assert checker(fn)


def test_checkers_say_not_done_for_the_stub(capsys):
    def stub(*args):
        raise NotImplementedError
    for checker in (check_patchify, check_vit_sizes, check_prepend_class_token, check_attention_rollout):
        assert not checker(stub)
    assert capsys.readouterr().out.count("not done yet") == 4


# ----- wrong answers: (function, the diagnosis it must get or None for a generic failure) -----

def _grid(images, P):
    B, C, H, W = images.shape
    return images.reshape(B, C, H // P, P, W // P, P)


PATCHIFY_WRONG = {
    "channel-last": (lambda x, P: _grid(x, P).permute(0, 2, 4, 3, 5, 1).reshape(x.shape[0], -1, x.shape[1] * P * P),
                     "channel_last"),
    "column by column": (lambda x, P: _grid(x, P).permute(0, 4, 2, 1, 3, 5).reshape(x.shape[0], -1, x.shape[1] * P * P),
                         "column_major"),
    "no permute": (lambda x, P: x.reshape(x.shape[0], -1, x.shape[1] * P * P), "no_permute"),
    "unfold reshaped": (lambda x, P: torch.nn.functional.unfold(x, P, stride=P).reshape(x.shape[0], -1, x.shape[1] * P * P),
                        "unfold_untransposed"),
    "square images only": (lambda x, P: patchify_reference(x[..., :x.shape[-2], :x.shape[-2]], P)
                           if x.shape[-1] >= x.shape[-2] else patchify_reference(x, P), None),
    "ignores the patch size": (lambda x, P: patchify_reference(x, 2) if x.shape[-1] % 2 == 0 and x.shape[-2] % 2 == 0
                               else patchify_reference(x, P), None),
    "mutates its input": (lambda x, P: patchify_reference(x.mul_(1.0).add_(0.0).abs_(), P), MUTATION),
}


@pytest.mark.parametrize("name", PATCHIFY_WRONG)
def test_patchify_checker_rejects(name, capsys):
    fn, diagnosis = PATCHIFY_WRONG[name]
    result = check_patchify(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


SIZES_WRONG = {
    "no class token": (lambda s, p, c, d: ((s // p) ** 2, c * p * p * d + 2 * d + (s // p) ** 2 * d), "no_class_token"),
    "class token without position": (lambda s, p, c, d: ((s // p) ** 2 + 1, c * p * p * d + 2 * d + (s // p) ** 2 * d),
                                     "one_vector_missing"),
    "no bias": (lambda s, p, c, d: ((s // p) ** 2 + 1, c * p * p * d + d + ((s // p) ** 2 + 1) * d), "one_vector_missing"),
    "no channels": (lambda s, p, c, d: ((s // p) ** 2 + 1, p * p * d + 2 * d + ((s // p) ** 2 + 1) * d), "no_channels"),
    "N not squared": (lambda s, p, c, d: (s // p + 1, c * p * p * d + 2 * d + (s // p + 1) * d), "grid_not_squared"),
    "fixed to one channel-count case": (lambda s, p, c, d: sizes_reference(s, p, 1, d), "no_channels"),
    "floats": (lambda s, p, c, d: (float(sizes_reference(s, p, c, d)[0]) + 0.5, sizes_reference(s, p, c, d)[1]), None),
}


@pytest.mark.parametrize("name", SIZES_WRONG)
def test_sizes_checker_rejects(name, capsys):
    fn, diagnosis = SIZES_WRONG[name]
    result = check_vit_sizes(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def _cls(patches, cls_token):
    return cls_token.expand(len(patches), -1, -1)


PREPEND_WRONG = {
    "class token last": (lambda x, c, p: torch.cat([x, _cls(x, c)], dim=1) + p, "class_token_last"),
    "class token unpositioned": (lambda x, c, p: torch.cat([_cls(x, c), x + p[1:]], dim=1), "class_token_unpositioned"),
    "positions shifted": (lambda x, c, p: torch.cat([_cls(x, c), x + p[:-1]], dim=1), "positions_shifted"),
    "no positions": (lambda x, c, p: torch.cat([_cls(x, c), x], dim=1), "no_positions"),
    "in-place add": (lambda x, c, p: torch.cat([_cls(x, c), x.add_(p[1:])], dim=1) + p * torch.cat(
        [torch.ones(1, 1), torch.zeros(len(p) - 1, 1)]), MUTATION),
    "one class token for the first image only": (
        lambda x, c, p: torch.cat([torch.cat([c, torch.zeros(len(x) - 1, 1, x.shape[-1])]), x], dim=1) + p, None),
}


@pytest.mark.parametrize("name", PREPEND_WRONG)
def test_prepend_checker_rejects(name, capsys):
    fn, diagnosis = PREPEND_WRONG[name]
    result = check_prepend_class_token(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def _per_head(maps, r):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(*maps[0].shape[:2], T, T)
    for layer in maps:
        out = ((1 - r) * layer + r * torch.eye(T)) @ out
    return out.mean(1)


ROLLOUT_WRONG = {
    "wrong order": (lambda maps, r: rollout_reference(list(maps)[::-1], r), "wrong_order"),
    "no residual": (lambda maps, r: rollout_reference(maps, 0.0), "no_residual"),
    "residual swapped": (lambda maps, r: rollout_reference(maps, 1 - r), "residual_swapped"),
    "per head": (_per_head, "per_head"),
    "residual fixed at 0.5": (lambda maps, r: rollout_reference(maps, 0.5), None),
    "last layer only": (lambda maps, r: rollout_reference(maps[-1:], r), None),
    "max over heads": (lambda maps, r: rollout_reference([m.max(1, keepdim=True).values.expand_as(m) for m in maps], r),
                       None),
    "pops the list": (lambda maps, r: rollout_reference([maps.pop(0)] + maps, r), MUTATION),
}


@pytest.mark.parametrize("name", ROLLOUT_WRONG)
def test_rollout_checker_rejects(name, capsys):
    fn, diagnosis = ROLLOUT_WRONG[name]
    result = check_attention_rollout(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")
