"""The one mask convention: boolean, True = may attend."""
import pytest
import torch

from attnbook.layers.masks import causal_mask, key_mask, masked_softmax, token_mask, validate_mask


def test_padding_mask_values_and_errors():
    m = token_mask(torch.tensor([3, 1]), max_len=4)
    assert m.dtype == torch.bool
    assert m.tolist() == [[True, True, True, False], [True, False, False, False]]
    with pytest.raises(ValueError, match="1-D"):
        token_mask(torch.tensor([[3]]))
    with pytest.raises(ValueError, match=">= 1"):
        token_mask(torch.tensor([2, 0]))
    with pytest.raises(ValueError, match="shorter"):
        token_mask(torch.tensor([5]), max_len=3)


def test_causal_mask_keeps_diagonal():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    assert torch.equal(m, torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool))
    with pytest.raises(ValueError):
        causal_mask(0)


def test_key_padding_to_attention_mask_broadcasts_over_queries():
    valid = token_mask(torch.tensor([2, 3]))
    m = key_mask(valid)
    assert m.shape == (2, 1, 3)
    with pytest.raises(ValueError, match="bool"):
        key_mask(valid.float())


def test_masked_softmax_exact_zeros_and_rows_sum_to_one():
    torch.manual_seed(0)
    scores = torch.randn(2, 4, 5) * 10
    mask = token_mask(torch.tensor([5, 2]))[:, None, :] & causal_mask(5)[:4]
    w = masked_softmax(scores, mask)
    assert torch.all(w[~mask.expand_as(w)] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4))


def test_masked_softmax_equals_softmax_of_kept_entries():
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    w = masked_softmax(scores, torch.tensor([[True, False, True, False]]))
    expected = torch.softmax(torch.tensor([1.0, 3.0]), 0)
    torch.testing.assert_close(w[0, [0, 2]], expected)


def test_masked_softmax_empty_row_is_zero_not_nan():
    w = masked_softmax(torch.randn(2, 3), torch.tensor([[False] * 3, [True] * 3]))
    assert torch.all(w[0] == 0) and not torch.isnan(w).any()


def test_masked_softmax_gradient_is_zero_at_masked_positions():
    scores = torch.randn(3, 4, requires_grad=True)
    mask = causal_mask(4)[:3]
    (masked_softmax(scores, mask) * torch.randn(3, 4)).sum().backward()
    assert torch.all(scores.grad[~mask] == 0)


def test_validate_mask_errors():
    with pytest.raises(TypeError, match="boolean"):
        validate_mask(torch.zeros(3, 3), (2, 3, 3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        validate_mask([[True]], (1, 1))
    with pytest.raises(ValueError, match="does not fit"):
        validate_mask(torch.ones(2, 4, dtype=torch.bool), (2, 3, 3))
    validate_mask(torch.ones(3, 1, 3, dtype=torch.bool), (3, 3, 3))  # broadcasts: no error
