"""Attention rollout and mean attention distance on cases computed by hand."""
import math

import pytest
import torch

from attnbook.attention_maps import attention_rollout, mean_attention_distance, patch_centres


def _layer(*rows):
    return torch.tensor(rows, dtype=torch.float32)[None, None]  # (1, 1, T, T)


def test_rollout_of_two_layers_by_hand():
    # A1 = [[1, 0], [.5, .5]] -> 0.5 A1 + 0.5 I = [[1, 0], [.25, .75]]
    # A2 = [[0, 1], [1, 0]]   -> 0.5 A2 + 0.5 I = [[.5, .5], [.5, .5]]
    # R = A2_hat @ A1_hat = [[.625, .375], [.625, .375]]
    first, second = _layer([1.0, 0.0], [0.5, 0.5]), _layer([0.0, 1.0], [1.0, 0.0])
    expected = torch.tensor([[[0.625, 0.375], [0.625, 0.375]]])
    torch.testing.assert_close(attention_rollout([first, second]), expected)
    # the order matters: A1_hat @ A2_hat = [[.5, .5], [.5, .5]]
    torch.testing.assert_close(attention_rollout([second, first]), torch.full((1, 2, 2), 0.5))


def test_rollout_averages_heads_and_without_residual_is_the_plain_product():
    heads = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])[None]  # (1, 2, 2, 2)
    torch.testing.assert_close(attention_rollout([heads], residual=0.0), torch.full((1, 2, 2), 0.5))
    torch.manual_seed(0)
    maps = [torch.randn(3, 4, 5, 5).softmax(-1) for _ in range(3)]
    plain = maps[2].mean(1) @ maps[1].mean(1) @ maps[0].mean(1)
    torch.testing.assert_close(attention_rollout(maps, residual=0.0), plain)
    assert torch.allclose(attention_rollout(maps).sum(-1), torch.ones(3, 5))


def test_rollout_with_full_residual_is_the_identity():
    maps = [torch.randn(2, 2, 4, 4).softmax(-1)]
    torch.testing.assert_close(attention_rollout(maps, residual=1.0), torch.eye(4).expand(2, 4, 4))


def test_rollout_rejects_bad_maps():
    with pytest.raises(ValueError, match="empty"):
        attention_rollout([])
    with pytest.raises(ValueError, match="differs"):
        attention_rollout([torch.ones(1, 1, 3, 3), torch.ones(1, 1, 4, 4)])
    with pytest.raises(ValueError, match=r"\(B, H, T, T\)"):
        attention_rollout([torch.ones(1, 3, 3)])


def test_patch_centres():
    torch.testing.assert_close(patch_centres(2, 2), torch.tensor([[0.5, 0.5], [0.5, 2.5], [2.5, 0.5], [2.5, 2.5]]))


def test_mean_attention_distance_by_hand():
    # 2x2 grid of 1-pixel patches plus a class token. Head 0 attends uniformly to the patches:
    # from any patch the distances are 0, 1, 1, sqrt(2) -> (2 + sqrt 2) / 4. Head 1 attends only
    # to itself -> 0. The class token's row and column are ignored.
    uniform = torch.full((5, 5), 0.2)
    itself = torch.eye(5) * 0.5
    itself[:, 0] += 0.5
    weights = torch.stack([uniform, itself])[None]  # (1, 2, 5, 5)
    got = mean_attention_distance(weights, grid_size=2, patch_size=1)
    torch.testing.assert_close(got, torch.tensor([(2 + math.sqrt(2)) / 4, 0.0]))
    # patches of 2 pixels double every distance
    torch.testing.assert_close(mean_attention_distance(weights, 2, 2), 2 * got)
    with pytest.raises(ValueError, match="3x3 grid"):
        mean_attention_distance(weights, grid_size=3, patch_size=1)
