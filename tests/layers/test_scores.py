"""Score functions and attention weights (attnbook.layers.scores)."""
import math

import pytest
import torch

from attnbook.layers.masks import token_mask
from attnbook.layers.scores import (
    AdditiveScore, BilinearScore, DotScore, ScaledDotScore, attention_weights, context_from_scores, make_score,
)


def _fill(module, **weights):
    with torch.no_grad():
        for name, value in weights.items():
            getattr(module, name).weight.copy_(torch.tensor(value, dtype=torch.float32))
    return module


@pytest.mark.parametrize("kind", ["additive", "dot", "scaled_dot", "bilinear"])
def test_every_score_gives_B_T_S(kind):
    torch.manual_seed(0)
    score = make_score(kind, 6, 6, 5)
    out = score(torch.randn(3, 2, 6), torch.randn(3, 7, 6))
    assert out.shape == (3, 2, 7)
    # prepare + score is the same as forward, and each query is scored on its own
    q, k = torch.randn(3, 2, 6), torch.randn(3, 7, 6)
    torch.testing.assert_close(score.score(q, score.prepare(k)), score(q, k))
    torch.testing.assert_close(score(q[:, 1:], k), score(q, k)[:, 1:])


def test_additive_score_hand_computed():
    # q = [1, 0], k = [0, 2]; W = I, U = I, v = [1, -1]:
    # e = 1 * tanh(1 + 0) - 1 * tanh(0 + 2) = tanh(1) - tanh(2)
    score = _fill(AdditiveScore(2, 2, 2), W=[[1, 0], [0, 1]], U=[[1, 0], [0, 1]], v=[[1, -1]])
    e = score(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[0.0, 2.0]]]))
    assert e.shape == (1, 1, 1)
    assert math.isclose(e.item(), math.tanh(1) - math.tanh(2), rel_tol=1e-6)


def test_additive_score_accepts_different_widths():
    score = AdditiveScore(query_dim=3, key_dim=8, hidden=4)
    assert score(torch.randn(2, 1, 3), torch.randn(2, 5, 8)).shape == (2, 1, 5)
    with pytest.raises(ValueError, match="keys must be"):
        score(torch.randn(2, 1, 3), torch.randn(2, 5, 7))


def test_dot_and_scaled_dot_hand_computed():
    q = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    k = torch.tensor([[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, -1.0]]])
    torch.testing.assert_close(DotScore()(q, k), torch.tensor([[[10.0, -4.0]]]))
    torch.testing.assert_close(ScaledDotScore()(q, k), torch.tensor([[[5.0, -2.0]]]))  # / sqrt(4)


def test_bilinear_score_hand_computed():
    # e = qᵀ W k with q = [1, 2], W = [[0, 1, 0], [2, 0, 0]], k = [3, 4, 5]: W k = [4, 6], e = 4 + 12
    score = _fill(BilinearScore(2, 3), W=[[0, 1, 0], [2, 0, 0]])
    e = score(torch.tensor([[[1.0, 2.0]]]), torch.tensor([[[3.0, 4.0, 5.0]]]))
    assert e.item() == pytest.approx(16.0)


def test_dot_scores_refuse_different_widths():
    with pytest.raises(ValueError, match="same width"):
        make_score("dot", 4, 6, 8)
    with pytest.raises(ValueError):
        DotScore()(torch.randn(1, 1, 4), torch.randn(1, 3, 6))
    with pytest.raises(ValueError, match="unknown score"):
        make_score("cosine", 4, 4, 4)


def test_soft_weights_sum_to_one_and_are_zero_on_padding():
    torch.manual_seed(0)
    lengths = torch.tensor([5, 2, 3])
    mask = token_mask(lengths, 6)[:, None, :]  # (B, 1, S)
    scores = torch.randn(3, 4, 6) * 5
    scores[1, :, 2:] = 100.0  # huge scores on padding must still get nothing
    values = torch.randn(3, 6, 2)
    context, weights = context_from_scores(scores, values, mask)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4))
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
    # the context only mixes real positions: changing the padding values changes nothing
    values2 = values.clone()
    values2[~token_mask(lengths, 6)] = 1e6
    torch.testing.assert_close(context_from_scores(scores, values2, mask)[0], context)


@pytest.mark.parametrize("weighting", ["argmax", "sample"])
def test_hard_weights_are_one_hot_on_real_positions(weighting):
    torch.manual_seed(0)
    mask = token_mask(torch.tensor([3, 5]), 5)[:, None, :]
    scores = torch.randn(2, 6, 5, requires_grad=True)
    weights = attention_weights(scores, mask, weighting)
    assert ((weights == 0) | (weights == 1)).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 6))
    assert (weights[0, :, 3:] == 0).all()
    assert not weights.requires_grad  # hard attention: no gradient reaches the scores


def test_argmax_picks_the_largest_score():
    scores = torch.tensor([[[0.1, 3.0, -1.0]]])
    torch.testing.assert_close(attention_weights(scores, None, "argmax"), torch.tensor([[[0.0, 1.0, 0.0]]]))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown weighting"):
        attention_weights(torch.randn(1, 1, 3), None, "gumbel")
    with pytest.raises(ValueError, match="values"):
        context_from_scores(torch.randn(2, 1, 3), torch.randn(2, 4, 5), None)
    with pytest.raises(TypeError, match="boolean"):
        context_from_scores(torch.randn(2, 1, 3), torch.randn(2, 3, 5), torch.ones(2, 1, 3))
