"""Each Chapter 7 checker accepts a reference solution, rejects a table of plausible wrong answers,
and names the mistake when it recognises it."""
import pytest
import torch
import torch.nn.functional as F

from attnbook.exercises import ch07
from attnbook.exercises.ch07 import (
    check_attention_rollout, check_mean_pool_logits, check_patch_halving_prediction, check_unpatchify,
    check_vit_sizes,
)
from attnbook.exercises.core import MUTATION, CheckResult
from attnbook.layers import run_blocks
from attnbook.models.vit import ViT, ViTConfig


# ----- reference solutions (kept here, not in the library) -----

def sizes_reference(image_size, patch_size, channels, d_model):
    n = (image_size // patch_size) ** 2
    return n + 1, channels * patch_size ** 2 * d_model + d_model, d_model, (n + 1) * d_model


def _sizes_with(**parts):  # the reference with some parts replaced by f(s, p, c, d, n)
    def wrong(s, p, c, d):
        answer = list(sizes_reference(s, p, c, d))
        for index, f in parts.items():
            answer[int(index[1:])] = f(s, p, c, d, (s // p) ** 2)
        return tuple(answer)
    return wrong


def unpatchify_fold(patches, patch_size, stride, height, width):
    cols = patches.transpose(1, 2)  # (B, C*P*P, N)
    ones = torch.ones_like(cols[:1])
    return (F.fold(cols, (height, width), patch_size, stride=stride)
            / F.fold(ones, (height, width), patch_size, stride=stride))


def unpatchify_loops(patches, patch_size, stride, height, width):
    B, N, CPP = patches.shape
    P = patch_size
    C = CPP // (P * P)
    cols = (width - P) // stride + 1
    total = torch.zeros(B, C, height, width)
    count = torch.zeros(height, width)
    for n in range(N):
        r, c = divmod(n, cols)
        total[:, :, r * stride:r * stride + P, c * stride:c * stride + P] += patches[:, n].view(B, C, P, P)
        count[r * stride:r * stride + P, c * stride:c * stride + P] += 1
    return total / count


def rollout_reference(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.mean(1) + r * torch.eye(T)) @ out
    return out


def rollout_library_per_layer(maps, residuals):
    from attnbook.attention_maps import attention_rollout
    out = None
    for layer, r in zip(maps, residuals):  # one layer at a time, each with its own weight
        step = attention_rollout([layer], r)
        out = step if out is None else step @ out
    return out


def mean_pool_reference(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    x = run_blocks(model.blocks, x).hidden
    return model.readout(model.final_norm(x).mean(dim=1))


def mean_pool_by_blocks(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    for block in model.blocks:
        x = block(x).hidden
    return model.readout(model.final_norm(x).mean(dim=1))


def count_scores(patch_size):
    model = ViT(ViTConfig(patch_size=patch_size)).eval()
    _, maps = model(torch.zeros(1, 1, 8, 8), need_weights=True)
    return maps[0][0].numel()


@pytest.mark.parametrize("checker,fn", [
    (check_vit_sizes, sizes_reference),
    (check_unpatchify, unpatchify_fold), (check_unpatchify, unpatchify_loops),
    (check_attention_rollout, rollout_reference), (check_attention_rollout, rollout_library_per_layer),
    (check_mean_pool_logits, mean_pool_reference), (check_mean_pool_logits, mean_pool_by_blocks),
])
def test_checkers_accept_correct_answers(checker, fn):
    assert checker(fn)


def test_checkers_say_not_done_for_the_stub(capsys):
    def stub(*args):
        raise NotImplementedError
    for checker in (check_vit_sizes, check_unpatchify, check_attention_rollout, check_mean_pool_logits):
        assert not checker(stub)
    assert not check_patch_halving_prediction(None, count_scores)
    assert not check_patch_halving_prediction(16, stub)
    assert capsys.readouterr().out.count("not done yet") == 6


def test_every_exercise_is_in_the_cli_map():
    assert set(ch07.EXERCISES) == {"vit_sizes", "count_scores", "unpatchify", "rollout", "mean_pool_logits",
                                   "local_attention_mask", "interpolate_positions", "layers_to_cross"}


def test_the_measurement_alone_is_checked_for_the_command_line(capsys):
    assert ch07.check_count_scores(count_scores)
    result = ch07.check_count_scores(lambda P: count_scores(P) // 4)
    assert not result and result.diagnosis == "one_head"


# ----- wrong answers: (function, the diagnosis it must get or None for a generic failure) -----

SIZES_WRONG = {
    "class token forgotten everywhere": (
        _sizes_with(i0=lambda s, p, c, d, n: n, i2=lambda s, p, c, d, n: 0, i3=lambda s, p, c, d, n: n * d),
        "class_token_forgotten"),
    "tokens without the class token": (_sizes_with(i0=lambda s, p, c, d, n: n), "tokens_no_class_token"),
    "N not squared": (_sizes_with(i0=lambda s, p, c, d, n: s // p + 1), "grid_not_squared"),
    "N = s^2 / P": (_sizes_with(i0=lambda s, p, c, d, n: s * s // p + 1), "area_over_patch"),
    "no bias": (_sizes_with(i1=lambda s, p, c, d, n: c * p * p * d), "no_bias"),
    "no channels": (_sizes_with(i1=lambda s, p, c, d, n: p * p * d + d), "no_channels"),
    "P not squared in the projection": (_sizes_with(i1=lambda s, p, c, d, n: c * p * d + d),
                                        "patch_not_squared"),
    "fixed to one channel-count case": (lambda s, p, c, d: sizes_reference(s, p, 1, d), "no_channels"),
    "no class token parameters": (_sizes_with(i2=lambda s, p, c, d, n: 0), "no_class_token"),
    "class token without position": (_sizes_with(i3=lambda s, p, c, d, n: n * d), "class_position_missing"),
    "class token's position counted twice": (_sizes_with(i3=lambda s, p, c, d, n: (n + 2) * d),
                                             "one_position_extra"),
    "the total, not the parts": (lambda s, p, c, d: (sizes_reference(s, p, c, d)[0],
                                                     sum(sizes_reference(s, p, c, d)[1:])), "wrong_shape"),
    "class token counted as 1 parameter": (_sizes_with(i2=lambda s, p, c, d, n: 1), "class_token_one_parameter"),
    "floats": (_sizes_with(i0=lambda s, p, c, d, n: n + 1.5), "not_integers"),
    "projection D x D": (_sizes_with(i1=lambda s, p, c, d, n: d * d + d), "projection_d_by_d"),
    "bias counted once per patch": (_sizes_with(i1=lambda s, p, c, d, n: c * p * p * d + n * d),
                                    "bias_per_patch"),
    "channels as tokens (589 for ViT-B/16)": (
        lambda s, p, c, d: (c * (s // p) ** 2 + 1, p * p * d + d, d, (c * (s // p) ** 2 + 1) * d),
        "channels_as_tokens"),
    "channels as tokens, projection right": (
        _sizes_with(i0=lambda s, p, c, d, n: c * n + 1), "channels_as_tokens"),
}


@pytest.mark.parametrize("name", SIZES_WRONG)
def test_sizes_checker_rejects(name, capsys):
    fn, diagnosis = SIZES_WRONG[name]
    result = check_vit_sizes(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def _last_wins(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    cols = (W - P) // stride + 1
    out = torch.zeros(B, C, H, W)
    for n in range(N):
        r, c = divmod(n, cols)
        out[:, :, r * stride:r * stride + P, c * stride:c * stride + P] = patches[:, n].view(B, C, P, P)
    return out


def _first_wins(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    cols = (W - P) // stride + 1
    out = torch.zeros(B, C, H, W)
    for n in reversed(range(N)):
        r, c = divmod(n, cols)
        out[:, :, r * stride:r * stride + P, c * stride:c * stride + P] = patches[:, n].view(B, C, P, P)
    return out


def _column_major(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    rows = (H - P) // stride + 1
    row_major = torch.stack([patches[:, (n % rows) * (N // rows) + n // rows] for n in range(N)], dim=1)
    return unpatchify_fold(row_major, P, stride, H, W)


def _channel_last(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    return unpatchify_fold(patches.view(B, N, P, P, C).permute(0, 1, 4, 2, 3).reshape(B, N, CPP), P, stride, H, W)


def _stride_as_patch(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    rows, cols = H // P, W // P
    x = patches[:, :rows * cols].reshape(B, rows, cols, C, P, P).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, C, rows * P, cols * P)


def _grid_without_overlap(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    cols = W // P  # as if the windows did not overlap
    total, count = torch.zeros(B, C, H, W), torch.zeros(H, W)
    for n in range(N):
        r, c = divmod(n, cols)
        total[:, :, r * stride:r * stride + P, c * stride:c * stride + P] += patches[:, n].view(B, C, P, P)
        count[r * stride:r * stride + P, c * stride:c * stride + P] += 1
    return total / count.clamp(min=1)


def _cols_over_stride(patches, P, stride, H, W):  # W // stride windows per row, cut at the border
    B, N, CPP = patches.shape
    C, cols = CPP // (P * P), W // stride
    total, count = torch.zeros(B, C, H, W), torch.zeros(H, W)
    for n in range(N):
        r, c = divmod(n, cols)
        block = patches[:, n].view(B, C, P, P)
        y, x = r * stride, c * stride
        h, w = total[:, :, y:y + P, x:x + P].shape[-2:]
        total[:, :, y:y + h, x:x + w] += block[:, :, :h, :w]
        count[y:y + h, x:x + w] += 1
    return total / count.clamp(min=1)


def _cols_over_stride_crash(patches, P, stride, H, W):  # W // stride per row, no care at the border
    B, N, CPP = patches.shape
    C, cols = CPP // (P * P), W // stride
    total, count = torch.zeros(B, C, H, W), torch.zeros(H, W)
    for n in range(N):
        r, c = divmod(n, cols)
        total[:, :, r * stride:r * stride + P, c * stride:c * stride + P] += patches[:, n].view(B, C, P, P)
        count[r * stride:r * stride + P, c * stride:c * stride + P] += 1
    return total / count


def _rows_from_width(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    cols = (H - P) // stride + 1  # the height where the width belongs
    total, count = torch.zeros(B, C, H, W), torch.zeros(H, W)
    for n in range(N):
        r, c = divmod(n, cols)
        total[:, :, r * stride:r * stride + P, c * stride:c * stride + P] += patches[:, n].view(B, C, P, P)
        count[r * stride:r * stride + P, c * stride:c * stride + P] += 1
    return total / count.clamp(min=1)


def _max_of_copies(patches, P, stride, H, W):  # every copy written, the largest kept
    B, N, CPP = patches.shape
    cols = (W - P) // stride + 1
    out = torch.full((B, CPP // (P * P), H, W), -1e9)
    for n in range(N):
        r, c = divmod(n, cols)
        window = patches[:, n].reshape(B, -1, P, P)
        view = out[..., r * stride:r * stride + P, c * stride:c * stride + P]
        out[..., r * stride:r * stride + P, c * stride:c * stride + P] = torch.max(view, window)
    return out


UNPATCHIFY_WRONG = {
    "fold, not divided": (lambda x, P, s, H, W: F.fold(x.transpose(1, 2), (H, W), P, stride=s), "summed"),
    "last copy wins": (_last_wins, "last_wins"),
    "first copy wins": (_first_wins, "first_wins"),
    "column by column": (_column_major, "column_major"),
    "channel-last": (_channel_last, "channel_last"),
    "ignores the stride": (_stride_as_patch, "stride_ignored"),
    "divides by the largest count": (
        lambda x, P, s, H, W: F.fold(x.transpose(1, 2), (H, W), P, stride=s)
        / F.fold(torch.ones_like(x.transpose(1, 2)[:1]), (H, W), P, stride=s).max(), "constant_overlap"),
    "grid of W // P windows": (_grid_without_overlap, "grid_without_overlap"),
    "W // stride windows per row, cut at the border": (_cols_over_stride, "cols_w_over_stride"),
    "W // stride windows per row, crashing": (_cols_over_stride_crash, "grid_without_overlap"),
    "rows counted from the width": (_rows_from_width, "rows_cols_swapped"),
    "fold divided by (P / stride)^2": (
        lambda x, P, s, H, W: F.fold(x.transpose(1, 2), (H, W), P, stride=s) / (P / s) ** 2, "constant_overlap"),
    "each patch transposed": (lambda x, P, s, H, W: unpatchify_fold(
        x.unflatten(2, (-1, P, P)).transpose(-1, -2).flatten(2), P, s, H, W), "patch_transposed"),
    "divided by sqrt(count)": (
        lambda x, P, s, H, W: F.fold(x.transpose(1, 2), (H, W), P, stride=s)
        / F.fold(torch.ones_like(x.transpose(1, 2)[:1]), (H, W), P, stride=s).sqrt(), "sqrt_count"),
    "in-place transpose trick": (lambda x, P, s, H, W: unpatchify_fold(x.mul_(1.0).abs_(), P, s, H, W), MUTATION),
    "output transposed": (lambda x, P, s, H, W: unpatchify_fold(x, P, s, H, W).transpose(-1, -2),
                          "output_transposed"),
    "max of the overlapping copies": (_max_of_copies, "max_of_copies"),
    "count capped at 2": (
        lambda x, P, s, H, W: F.fold(x.transpose(1, 2), (H, W), P, stride=s)
        / F.fold(torch.ones_like(x.transpose(1, 2)[:1]), (H, W), P, stride=s).clamp(max=2),
        "count_capped"),
    "count capped at 3": (
        lambda x, P, s, H, W: F.fold(x.transpose(1, 2), (H, W), P, stride=s)
        / F.fold(torch.ones_like(x.transpose(1, 2)[:1]), (H, W), P, stride=s).clamp(max=3),
        "count_capped"),
}


@pytest.mark.parametrize("name", UNPATCHIFY_WRONG)
def test_unpatchify_checker_rejects(name, capsys):
    fn, diagnosis = UNPATCHIFY_WRONG[name]
    result = check_unpatchify(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def _per_head(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(*maps[0].shape[:2], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer + r * torch.eye(T)) @ out
    return out.mean(1)


def _added_renormalised(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        mixed = layer.mean(1) + r * torch.eye(T)
        out = (mixed / mixed.sum(-1, keepdim=True)) @ out
    return out


def _max_heads(maps, residuals, renormalise):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        mixed = (1 - r) * layer.max(1).values + r * torch.eye(T)
        out = (mixed / mixed.sum(-1, keepdim=True) if renormalise else mixed) @ out
    return out


def _first_layer_bare(maps, residuals):
    out = maps[0].mean(1)
    for layer, r in zip(maps[1:], residuals[1:]):
        out = ((1 - r) * layer.mean(1) + r * torch.eye(out.shape[-1])) @ out
    return out


def _heads_summed(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.sum(1) + r * torch.eye(T)) @ out
    return out


def _no_identity(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = (1 - r) * layer.mean(1) @ out
    return out


def _columns_renormalised(maps, residuals, each_layer):  # sum(dim=-2) where rows sum to 1
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        mixed = (1 - r) * layer.mean(1) + r * torch.eye(T)
        out = (mixed / mixed.sum(-2, keepdim=True) if each_layer else mixed) @ out
    return out if each_layer else out / out.sum(-2, keepdim=True)


def _map_columns_renormalised(maps, residuals, per_head):  # each A / A.sum(dim=-2), then mixed
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        a = (layer / layer.sum(-2, keepdim=True)).mean(1) if per_head else layer.mean(1)
        a = a if per_head else a / a.sum(-2, keepdim=True)
        out = ((1 - r) * a + r * torch.eye(T)) @ out
    return out


def _column_vector_form(maps, residuals):  # out @ Â^T each layer: R transposed
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = out @ ((1 - r) * layer.mean(1) + r * torch.eye(T)).transpose(-1, -2)
    return out


def _each_layer_transposed(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.mean(1) + r * torch.eye(T)).transpose(-1, -2) @ out
    return out


def _last_layer_skipped(maps, residuals):  # range(len(maps) - 1)
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for l in range(len(maps) - 1):
        out = ((1 - residuals[l]) * maps[l].mean(1) + residuals[l] * torch.eye(T)) @ out
    return out


ROLLOUT_WRONG = {
    "product transposed at the end": (lambda maps, rs: rollout_reference(maps, rs).transpose(-1, -2),
                                      "product_transposed"),
    "column-vector form, out @ A^T": (_column_vector_form, "product_transposed"),
    "each layer transposed": (_each_layer_transposed, "product_transposed"),
    "last layer skipped": (_last_layer_skipped, "last_layer_skipped"),
    "maps renormalised over columns": (lambda maps, rs: _map_columns_renormalised(maps, rs, False),
                                       "map_columns_renormalised"),
    "each head renormalised over columns": (lambda maps, rs: _map_columns_renormalised(maps, rs, True),
                                            "map_columns_renormalised"),
    "wrong order": (lambda maps, rs: rollout_reference(list(maps)[::-1], list(rs)[::-1]), "wrong_order"),
    "residuals reversed": (lambda maps, rs: rollout_reference(maps, list(rs)[::-1]), "residuals_reversed"),
    "first weight everywhere": (lambda maps, rs: rollout_reference(maps, [rs[0]] * len(maps)), "one_residual"),
    "mean weight everywhere": (lambda maps, rs: rollout_reference(maps, [sum(rs) / len(rs)] * len(maps)),
                               "mean_residual"),
    "weights swapped": (lambda maps, rs: rollout_reference(maps, [1 - r for r in rs]), "swapped"),
    "per head": (_per_head, "per_head"),
    "head 0 instead of the mean over heads": (
        lambda maps, rs: rollout_reference([m[:, :1] for m in maps], rs), "one_head"),
    "last head instead of the mean over heads": (
        lambda maps, rs: rollout_reference([m[:, -1:] for m in maps], rs), "one_head"),
    "(A + rI) renormalised": (_added_renormalised, "added_and_renormalised"),
    "max over heads, renormalised": (lambda maps, rs: _max_heads(maps, rs, True), "max_over_heads"),
    "max over heads": (lambda maps, rs: _max_heads(maps, rs, False), "max_over_heads"),
    "first layer without its residual": (_first_layer_bare, "first_layer_bare"),
    "fixed 0.5": (lambda maps, rs: rollout_reference(maps, [0.5] * len(maps)), "fixed_half"),
    "library call, r = 0.5": (lambda maps, rs: __import__("attnbook.attention_maps", fromlist=["x"])
                              .attention_rollout(maps), "fixed_half"),
    "heads summed": (lambda maps, rs: _heads_summed(maps, rs), "heads_summed"),
    "no identity, (1 - r) A": (_no_identity, "no_identity"),
    "plain product, residuals ignored": (lambda maps, rs: rollout_reference(maps, [0.0] * len(maps)),
                                         "residuals_ignored"),
    "last layer only": (lambda maps, rs: rollout_reference(maps[-1:], rs[-1:]), "last_layer_only"),
    "each layer's columns renormalised": (lambda maps, rs: _columns_renormalised(maps, rs, True),
                                          "columns_renormalised"),
    "the product's columns renormalised": (lambda maps, rs: _columns_renormalised(maps, rs, False),
                                           "columns_renormalised"),
    "pops the list": (lambda maps, rs: rollout_reference([maps.pop(0)] + maps, rs), MUTATION),
    "layers averaged, not multiplied": (
        lambda maps, rs: torch.stack([(1 - r) * m.mean(1) + r * torch.eye(m.shape[-1])
                                      for m, r in zip(maps, rs)]).mean(0), "layers_averaged"),
    "head-averaged maps averaged over layers": (
        lambda maps, rs: torch.stack([m.mean(1) for m in maps]).mean(0), "layers_averaged"),
}


@pytest.mark.parametrize("name", ROLLOUT_WRONG)
def test_rollout_checker_rejects(name, capsys):
    fn, diagnosis = ROLLOUT_WRONG[name]
    result = check_attention_rollout(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def _patches(model, images):
    return model.embeddings.tokens.patch_embedding(images)


MEAN_POOL_WRONG = {
    "the unchanged model": (lambda m, x: m(x), "class_token_read"),
    "class token kept": (lambda m, x: m.readout(m.final_norm(run_blocks(m.blocks, m.embeddings(x)).hidden).mean(1)),
                         "class_token_kept"),
    "positions[:N]": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[:-1]).hidden).mean(1)), "positions_shifted"),
    "no positions": (lambda m, x: m.readout(m.final_norm(run_blocks(m.blocks, _patches(m, x)).hidden).mean(1)),
                     "no_positions"),
    "norm after the mean": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden.mean(1))), "norm_after_mean"),
    "no final norm": (lambda m, x: m.readout(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden.mean(1)), "no_final_norm"),
    "blocks skipped": (lambda m, x: m.readout(m.final_norm(_patches(m, x) + m.position_embeddings[1:]).mean(1)),
                       "blocks_skipped"),
    "first layer only": (lambda m, x: m.readout(m.final_norm(
        m.blocks[0](_patches(m, x) + m.position_embeddings[1:]).hidden).mean(1)), "first_block_only"),
    "max pooling": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden).amax(1)), "max_pool"),
    "class token in the sequence, not in the mean": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, m.embeddings(x)).hidden[:, 1:]).mean(1)), "class_token_not_pooled"),
    "sum pooling": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden).sum(1)), "sum_pool"),
    "sum divided by N + 1": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden).sum(1)
        / (_patches(m, x).shape[1] + 1)), "divided_by_n_plus_one"),
    "class token's position on every patch": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[0]).hidden).mean(1)),
        "class_position_everywhere"),
    "class token's position added to every patch": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:] + m.position_embeddings[0]).hidden
    ).mean(1)), "class_position_added"),
    "token 0 read": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden)[:, 0]), "first_patch"),
    "trains the model": (lambda m, x: [p.data.mul_(1.01) for p in m.parameters()] and mean_pool_reference(m, x),
                         MUTATION),
    "median pooling": (lambda m, x: m.readout(m.final_norm(
        run_blocks(m.blocks, _patches(m, x) + m.position_embeddings[1:]).hidden).median(1).values),
        "median_pool"),
}


@pytest.mark.parametrize("name", MEAN_POOL_WRONG)
def test_mean_pool_checker_rejects(name, capsys):
    fn, diagnosis = MEAN_POOL_WRONG[name]
    result = check_mean_pool_logits(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


@pytest.mark.parametrize("prediction", [16, 14.6, 15])
def test_prediction_near_the_measurement_passes(prediction, capsys):
    assert check_patch_halving_prediction(prediction, count_scores)
    assert "x14.6" in capsys.readouterr().out


PREDICTION_WRONG = {256: "squared_twice", 4: "tokens_not_pairs", 3.82: "tokens_not_pairs", 2: "side_not_area", 0.0625: "upside_down",
                    64: "cubic", 8: "two_cubed", 12: "between_linear_and_square", 7: "other", "sixteen": ""}


@pytest.mark.parametrize("prediction", PREDICTION_WRONG)
def test_prediction_far_from_the_measurement_fails(prediction, capsys):
    result = check_patch_halving_prediction(prediction, count_scores)
    assert not result
    assert result.diagnosis == PREDICTION_WRONG[prediction]


MEASURE_WRONG = {
    "one head": (lambda P: count_scores(P) // 4, "one_head"),
    "all layers": (lambda P: count_scores(P) * 4, "all_layers"),
    "patches only": (lambda P: 4 * ((8 // P) ** 2) ** 2, "no_class_token"),
    "the tokens, not the scores": (lambda P: (8 // P) ** 2 + 1, ""),
    "a batch of two digits": (lambda P: 2 * count_scores(P), "batch"),
    "a formula, no model": (lambda P: 4 * ((8 // P) ** 2 + 1) ** 2, "no_model_run"),
    "a model run without need_weights, then a formula": (
        lambda P: ViT(ViTConfig(patch_size=P))(torch.zeros(1, 1, 8, 8)) is not None and 4 * ((8 // P) ** 2 + 1) ** 2,
        "no_model_run"),
}


@pytest.mark.parametrize("name", MEASURE_WRONG)
def test_a_wrong_measurement_is_rejected(name, capsys):
    fn, diagnosis = MEASURE_WRONG[name]
    result = check_patch_halving_prediction(16, fn)
    assert not result
    assert result.diagnosis == diagnosis


def test_the_command_line_checks_the_prediction_too(tmp_path, capsys):
    from attnbook.exercises.__main__ import check_file
    answers = tmp_path / "answers.py"
    body = ("import torch\nfrom attnbook.models.vit import ViT, ViTConfig\n\n"
            "def count_scores(patch_size):\n"
            "    _, maps = ViT(ViTConfig(patch_size=patch_size))(torch.zeros(1, 1, 8, 8), need_weights=True)\n"
            "    return maps[0][0].numel()\n")
    answers.write_text(body + "\npredicted_ratio = 16\n")
    check_file("ch07", answers)
    assert "✓ halving the patch size: you predicted x16" in capsys.readouterr().out
    answers.write_text(body + "\npredicted_ratio = 4\n")
    check_file("ch07", answers)
    assert "✗ halving the patch size: you predicted x4" in capsys.readouterr().out
    answers.write_text(body)  # no prediction in the file
    check_file("ch07", answers)
    assert "write your prediction into predicted_ratio" in capsys.readouterr().out
    # the CLI's generic names for a prediction are read too, and still judged
    for variable in ("prediction_count_scores", "prediction"):
        answers.write_text(body + f"\n{variable} = 16\n")
        check_file("ch07", answers)
        assert "✓ halving the patch size: you predicted x16" in capsys.readouterr().out
        answers.write_text(body + f"\n{variable} = 4\n")
        check_file("ch07", answers)
        assert "✗ halving the patch size: you predicted x4" in capsys.readouterr().out


def test_the_cli_listing_names_the_prediction_variable(capsys):
    from attnbook.exercises.__main__ import list_functions
    list_functions("ch07")
    assert "predicted_ratio" in capsys.readouterr().out


# ----- 6. a local attention mask for any grid and radius -----

def local_mask_reference(grid_size, radius):
    index = torch.arange(grid_size * grid_size)
    rows, cols = index // grid_size, index % grid_size
    near = torch.maximum((rows[:, None] - rows[None]).abs(), (cols[:, None] - cols[None]).abs()) <= radius
    mask = torch.ones(1 + grid_size ** 2, 1 + grid_size ** 2, dtype=torch.bool)
    mask[1:, 0] = False
    mask[1:, 1:] = near
    return mask


def local_mask_loops(grid_size, radius):
    n = grid_size * grid_size
    mask = torch.zeros(1 + n, 1 + n, dtype=torch.bool)
    mask[0] = True
    for a in range(n):
        for b in range(n):
            (ra, ca), (rb, cb) = divmod(a, grid_size), divmod(b, grid_size)
            mask[1 + a, 1 + b] = max(abs(ra - rb), abs(ca - cb)) <= radius
    return mask


def _edited(**changes):
    def wrong(g, r):
        mask = local_mask_reference(g, r)
        if "patches_read_class" in changes:
            mask[1:, 0] = True
        if "class_self" in changes:
            mask[0, 1:] = False
        if "float" in changes:
            mask = mask.float()
        return mask
    return wrong


def _manhattan(g, r):
    index = torch.arange(g * g)
    rows, cols = index // g, index % g
    mask = local_mask_reference(g, r)
    mask[1:, 1:] = (rows[:, None] - rows[None]).abs() + (cols[:, None] - cols[None]).abs() <= r
    return mask


def _flat(g, r):
    index = torch.arange(g * g)
    mask = local_mask_reference(g, r)
    mask[1:, 1:] = (index[:, None] - index[None]).abs() <= r
    return mask


def _flat_scaled(g, r):  # a 1-D distance scaled to reach the next row: |n - m| <= r (g + 1)
    index = torch.arange(g * g)
    mask = local_mask_reference(g, r)
    mask[1:, 1:] = (index[:, None] - index[None]).abs() <= r * (g + 1)
    return mask


def _disc(g, r):  # Euclidean distance between patch centres < radius + 1: a disc, not a square
    index = torch.arange(g * g)
    rows, cols = index // g, index % g
    mask = local_mask_reference(g, r)
    mask[1:, 1:] = ((rows[:, None] - rows[None]) ** 2 + (cols[:, None] - cols[None]) ** 2) < (r + 1) ** 2
    return mask


def _disc_within(g, r):  # Euclidean distance <= radius: a diamond at radius 1 and 2, not at 3
    index = torch.arange(g * g)
    rows, cols = index // g, index % g
    mask = local_mask_reference(g, r)
    mask[1:, 1:] = ((rows[:, None] - rows[None]) ** 2 + (cols[:, None] - cols[None]) ** 2) <= r ** 2
    return mask


def _inverted_block(g, r):  # the class token right, mask[1:, 1:] = ~near (PyTorch's convention)
    mask = local_mask_reference(g, r).clone()
    mask[1:, 1:] = ~mask[1:, 1:]
    return mask


def _inverted_rows(g, r):  # every patch's row negated: True = blocked, the class row kept
    mask = local_mask_reference(g, r).clone()
    mask[1:] = ~mask[1:]
    return mask


def _no_self(g, r):  # the neighbourhood with the patch itself left out
    mask = local_mask_reference(g, r).clone()
    mask[1:, 1:] &= ~torch.eye(g * g, dtype=torch.bool)
    return mask


def _class_skips_itself(g, r):  # row 0: every patch, but not the class token itself
    mask = local_mask_reference(g, r).clone()
    mask[0, 0] = False
    return mask


def _torus(g, r, rows=True, cols=True):  # distances wrapped around the edges: min(d, g - d)
    index = torch.arange(g * g)
    dr = (index[:, None] // g - index[None] // g).abs()
    dc = (index[:, None] % g - index[None] % g).abs()
    if rows:
        dr = torch.minimum(dr, g - dr)
    if cols:
        dc = torch.minimum(dc, g - dc)
    mask = local_mask_reference(g, r).clone()
    mask[1:, 1:] = torch.maximum(dr, dc) <= r
    return mask


LOCAL_MASK_WRONG = {
    "True = blocked": (lambda g, r: ~local_mask_reference(g, r), "inverted"),
    "a patch may not read itself": (_no_self, "self_excluded"),
    "patch block inverted (True = too far)": (_inverted_block, "inverted_patches"),
    "patch rows inverted (True = blocked below row 0)": (_inverted_rows, "inverted_patches"),
    "a diamond (Manhattan distance)": (_manhattan, "manhattan"),
    "a disc (Euclidean distance < radius + 1)": (_disc, "euclidean"),
    "a disc (Euclidean distance <= radius)": (_disc_within, "euclidean_within_radius"),
    "distance < radius": (lambda g, r: local_mask_reference(g, r - 1), "strict"),
    "neighbours along the flattened sequence": (_flat, "flattened_sequence"),
    "1-D distance |n - m| <= r (g + 1)": (_flat_scaled, "flattened_distance"),
    "wrap-around (torus) neighbourhood": (_torus, "wrap_around"),
    "wrap-around in the columns only": (lambda g, r: _torus(g, r, rows=False), "wrap_around"),
    "patches read the class token": (_edited(patches_read_class=True), "patches_read_class"),
    "class token reads only itself": (_edited(class_self=True), "class_reads_self_only"),
    "class token does not read itself": (_class_skips_itself, "class_skips_itself"),
    "no class token": (lambda g, r: local_mask_reference(g, r)[1:, 1:], "no_class_token"),
    "radius fixed at 1": (lambda g, r: local_mask_reference(g, 1), "radius_fixed"),
    "grid fixed at 4x4": (lambda g, r: local_mask_reference(4, r), "grid_fixed"),
    "floats, not booleans": (_edited(float=True), "not_boolean"),
}


@pytest.mark.parametrize("fn", [local_mask_reference, local_mask_loops])
def test_local_mask_accepts_correct_answers(fn):
    assert ch07.check_local_attention_mask(fn)


@pytest.mark.parametrize("name", LOCAL_MASK_WRONG)
def test_local_mask_checker_rejects(name, capsys):
    fn, diagnosis = LOCAL_MASK_WRONG[name]
    result = ch07.check_local_attention_mask(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def test_local_mask_checker_names_the_first_wrong_entry(capsys):
    def one_off(g, r):
        mask = local_mask_reference(g, r).clone()
        mask[2, 1] = ~mask[2, 1]  # patch 2 may no longer read patch 1 (or the other way)
        return mask

    assert not ch07.check_local_attention_mask(one_off)
    out = capsys.readouterr().out
    assert ("first wrong entry of 1: mask[2, 1], the patch at grid row 0, column 1 attending to "
            "the patch at grid row 0, column 0: expected True, got False") in out


def test_the_chapter_local_mask_is_the_benchmark_mask():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "vit_data_efficiency.py"
    import sys
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("vit_data_efficiency", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert torch.equal(module.neighbour_mask(4), local_mask_reference(4, 1))


# ----- 7. the position table interpolated in 2-D -----

def interpolate_reference(positions, new_grid):
    g = int(round((positions.shape[0] - 1) ** 0.5))
    grid = positions[1:].reshape(g, g, -1).permute(2, 0, 1)[None]  # (1, D, g, g)
    resized = F.interpolate(grid, size=(new_grid, new_grid), mode="bilinear", align_corners=False)
    return torch.cat([positions[:1], resized[0].flatten(1).T])


def interpolate_by_einops_style(positions, new_grid):
    cls, rest = positions.split([1, positions.shape[0] - 1])
    g = int(len(rest) ** 0.5)
    grid = rest.T.reshape(1, -1, g, g)  # (1, D, g, g): the transpose first keeps the order
    resized = F.interpolate(grid, scale_factor=None, size=new_grid, mode="bilinear", align_corners=False)
    return torch.cat([cls, resized.reshape(positions.shape[1], -1).T])


def test_interpolation_checker_accepts_correct_answers(capsys):
    assert ch07.check_interpolate_positions(interpolate_reference)
    assert ch07.check_interpolate_positions(interpolate_by_einops_style)
    assert not ch07.check_interpolate_positions(lambda p, g: (_ for _ in ()).throw(NotImplementedError))
    assert "not done yet" in capsys.readouterr().out


def _resize(positions, new_grid, **kwargs):
    g = int(round((positions.shape[0] - 1) ** 0.5))
    grid = positions[1:].reshape(g, g, -1).permute(2, 0, 1)[None]
    resized = F.interpolate(grid, size=(new_grid, new_grid), **kwargs)
    return torch.cat([positions[:1], resized[0].flatten(1).T])


INTERPOLATE_WRONG = {
    "class row dropped": (lambda p, G: interpolate_reference(p, G)[1:], "class_row_dropped"),
    "class row zeroed": (lambda p, G: torch.cat([torch.zeros_like(p[:1]), interpolate_reference(p, G)[1:]]),
                         "class_row_reset"),
    "reshape without permute": (lambda p, G: torch.cat([p[:1], F.interpolate(
        p[1:].reshape(1, p.shape[1], int(round((p.shape[0] - 1) ** 0.5)), -1), size=(G, G), mode="bilinear",
        align_corners=False).reshape(G * G, -1)]), "no_permute"),
    "permuted on the way out only": (lambda p, G: torch.cat([p[:1], F.interpolate(
        p[1:].reshape(1, p.shape[1], int(round((p.shape[0] - 1) ** 0.5)), -1), size=(G, G), mode="bilinear",
        align_corners=False)[0].permute(1, 2, 0).reshape(G * G, -1)]), "permute_out_only"),
    "permuted on the way in only": (lambda p, G: torch.cat([p[:1], F.interpolate(
        p[1:].reshape(int(round((p.shape[0] - 1) ** 0.5)), -1, p.shape[1]).permute(2, 0, 1)[None],
        size=(G, G), mode="bilinear", align_corners=False).reshape(G * G, -1)]), "permute_in_only"),
    "1-D stretch": (lambda p, G: torch.cat([p[:1], F.interpolate(p[1:].T[None], size=G * G, mode="linear",
                                                                 align_corners=False)[0].T]), "one_d"),
    "read back column by column": (lambda p, G: torch.cat([p[:1], interpolate_reference(p, G)[1:].reshape(
        G, G, -1).transpose(0, 1).reshape(G * G, -1)]), "transposed"),
    "align_corners=True": (lambda p, G: _resize(p, G, mode="bilinear", align_corners=True), "align_corners"),
    "bicubic": (lambda p, G: _resize(p, G, mode="bicubic", align_corners=False), "bicubic"),
    "nearest": (lambda p, G: _resize(p, G, mode="nearest"), "nearest"),
    "class row = mean of the patch rows": (lambda p, G: torch.cat(
        [p[1:].mean(0, keepdim=True), interpolate_reference(p, G)[1:]]), "class_row_mean"),
    "bicubic, align_corners=True": (lambda p, G: _resize(p, G, mode="bicubic", align_corners=True),
                                    "bicubic_align_corners"),
    "antialiased bilinear": (lambda p, G: _resize(p, G, mode="bilinear", align_corners=False,
                                                  antialias=True), "antialiased"),
    "class row interpolated with the grid": (lambda p, G: interpolate_reference(
        torch.cat([p[1:2], p[1:]]), G), "class_row_from_grid"),
    "zeroes the class row in place": (lambda p, G: (p[0].zero_(), interpolate_reference(p, G))[1], MUTATION),
}


@pytest.mark.parametrize("name", INTERPOLATE_WRONG)
def test_interpolation_checker_rejects(name, capsys):
    fn, diagnosis = INTERPOLATE_WRONG[name]
    result = ch07.check_interpolate_positions(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


def test_every_interpolation_mistake_is_triggered():
    named = {d for _, d in INTERPOLATE_WRONG.values() if d not in (None, MUTATION)}
    assert named == {m.name for m in ch07.INTERPOLATE_MISTAKES}
    named = {d for _, d in ROLLOUT_WRONG.values() if d not in (None, MUTATION)}
    assert named == {m.name for m in ch07.ROLLOUT_MISTAKES}


# ----- 6b. layers until a local mask has crossed the grid -----

def layers_formula(grid_size, radius):
    return -(-(grid_size - 1) // radius)


def layers_by_reachability(grid_size, radius):
    step = local_mask_reference(grid_size, radius)[1:, 1:].float()
    reach, layers = torch.eye(grid_size ** 2), 0
    while not bool((reach > 0).all()):
        reach, layers = reach @ step, layers + 1
    return layers


def test_layers_checker_accepts_correct_answers():
    assert ch07.check_layers_to_cross(layers_formula)
    assert ch07.check_layers_to_cross(layers_by_reachability)


LAYERS_WRONG = {
    "ceil(g / r)": (lambda g, r: -(-g // r), "no_minus_one"),
    "g - 1, radius ignored": (lambda g, r: g - 1, "radius_ignored"),
    "floor": (lambda g, r: (g - 1) // r, "floor"),
    "there and back": (lambda g, r: 2 * layers_formula(g, r), "both_directions"),
    "one per patch": (lambda g, r: g * g, "whole_grid"),
    "always three (the 4x4 answer)": (lambda g, r: 3, None),
    "diagonal in Manhattan steps": (lambda g, r: -(-2 * (g - 1) // r), "both_directions"),
    "2 * radius per layer": (lambda g, r: -(-(g - 1) // (2 * r)), "two_radius_per_layer"),
    "two halves, each rounded up": (lambda g, r: 2 * -(-(g - 1) // (2 * r)), "halves_rounded_up"),
}


@pytest.mark.parametrize("name", LAYERS_WRONG)
def test_layers_checker_rejects(name, capsys):
    fn, diagnosis = LAYERS_WRONG[name]
    result = ch07.check_layers_to_cross(fn)
    assert not result
    assert result.diagnosis == (diagnosis or "")


# ----- Section 7.5's prediction: the ViT without positions ----------------------------------------

@pytest.mark.parametrize("measured", [0.815, 0.70, 0.88])
def test_position_free_prediction_near_the_measurement_passes(measured, capsys):
    for guess in (measured, measured - 0.04, measured + 0.049):
        assert ch07.grade_position_free_prediction(guess, measured)


@pytest.mark.parametrize("guess, measured, diagnosis", [
    (0.95, 0.815, "paper_three_points"),  # the paper's 3-point loss
    (0.965, 0.70, "paper_three_points"),  # the ViT with positions
    (0.10, 0.815, "chance"),  # a set of patches carries nothing
    (0.0, 0.60, "chance"),
    (0.90, 0.815, "too_high"),
    (0.50, 0.815, "too_low"),
    (81.5, 0.815, "percent"),  # a percentage, not a fraction
    (-0.2, 0.815, "out_of_range"),
    ("high", 0.815, "not_a_number"),
])
def test_position_free_prediction_names_the_misconception(guess, measured, diagnosis, capsys):
    result = ch07.grade_position_free_prediction(guess, measured)
    assert not result and result.diagnosis == diagnosis


def test_position_free_prediction_not_given_is_not_done(capsys):
    result = ch07.grade_position_free_prediction(None, 0.815)
    assert not result and "not done yet" in result.message


# ----- Section 7.5's second guess: does the augmentation help the ViT without positions? ----------

@pytest.mark.parametrize("plain, augmented, guess", [(0.815, 0.61, False), (0.70, 0.75, True)])
def test_augmentation_guess_in_the_measured_direction_passes(plain, augmented, guess, capsys):
    assert ch07.grade_augmentation_guess(guess, plain, augmented)


@pytest.mark.parametrize("guess, plain, augmented, diagnosis", [
    (True, 0.815, 0.61, "wrong_direction"),  # the chapter's measurement: it hurts
    (False, 0.70, 0.75, "wrong_direction"),
    ("yes", 0.815, 0.61, "not_a_bool"),
    (1, 0.815, 0.61, "not_a_bool"),
])
def test_augmentation_guess_rejects(guess, plain, augmented, diagnosis, capsys):
    result = ch07.grade_augmentation_guess(guess, plain, augmented)
    assert not result and result.diagnosis == diagnosis


@pytest.mark.parametrize("guess, plain, augmented", [(True, 0.815, 0.61), (False, 0.70, 0.75)])
def test_augmentation_guess_offers_the_cause_as_untested(guess, plain, augmented, capsys):
    # the chapter does not test why the augmentation moves the position-free ViT
    result = ch07.grade_augmentation_guess(guess, plain, augmented)
    assert not result and "not tested" in result.message and "candidate" in result.message


def test_augmentation_guess_not_given_is_not_done(capsys):
    result = ch07.grade_augmentation_guess(None, 0.815, 0.61)
    assert not result and "not done yet" in result.message


def test_too_high_position_free_guess_names_the_measured_confusion(capsys):
    result = ch07.grade_position_free_prediction(0.90, 0.815)
    assert not result and "2 with 5" in result.message and "6" not in result.message.split("points)")[1]


def test_position_free_exercise_grades_both_predictions(capsys):
    assert not ch07.check_position_free_prediction(None, None, (0.815, 0.61))
    out = capsys.readouterr().out
    assert "not done yet" in out and "81.5" not in out and "61.0" not in out
    assert not ch07.check_position_free_prediction(0.8, None, (0.815, 0.61))
    assert "81.5" not in capsys.readouterr().out
    assert ch07.check_position_free_prediction(0.8, False, (0.815, 0.61))
    assert not ch07.check_position_free_prediction(0.95, False, (0.815, 0.61))  # the paper's 3 points
    assert not ch07.check_position_free_prediction(0.8, True, (0.815, 0.61))  # wrong direction


def test_position_free_exercise_returns_one_check_result(capsys):
    # like every other checker: a CheckResult (no bare bool shown in the notebook), with the
    # failing guess's diagnosis
    waiting = ch07.check_position_free_prediction(None, False, (0.815, 0.61))
    assert isinstance(waiting, CheckResult) and not waiting and waiting.diagnosis == "not_done"
    right = ch07.check_position_free_prediction(0.8, False, (0.815, 0.61))
    assert isinstance(right, CheckResult) and right and right.diagnosis == ""
    assert ch07.check_position_free_prediction(0.95, False, (0.815, 0.61)).diagnosis == "paper_three_points"
    assert ch07.check_position_free_prediction(0.1, False, (0.815, 0.61)).diagnosis == "chance"
    assert ch07.check_position_free_prediction(0.8, True, (0.815, 0.61)).diagnosis == "wrong_direction"
    assert ch07.check_position_free_prediction(80, False, (0.815, 0.61)).diagnosis == "percent"
    assert ch07.check_position_free_prediction(0.8, "no", (0.815, 0.61)).diagnosis == "not_a_bool"
    capsys.readouterr()


def test_position_free_exercise_reads_the_committed_results(capsys):
    plain, augmented = ch07.committed_position_free_accuracies()
    assert round(100 * plain, 1) == 81.5 and round(100 * augmented, 1) == 61.0
    assert ch07.check_position_free_prediction(0.82, False)
