"""Each Chapter 2 checker accepts the reference solution and rejects plausible wrong answers."""
import math

import pytest
import torch

from attnbook.exercises.ch02 import check_additive_score, check_masked_softmax, check_scaled_dot_score


# --- reference solutions (they live here, not in the library) --------------------------------
def additive_score(query, keys, W, U, v):
    return torch.tanh((query @ W.T)[:, None, :] + keys @ U.T) @ v  # (B, S)


def masked_softmax(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return weights.masked_fill(~mask, 0.0)


def scaled_dot_score(query, keys):
    return torch.einsum("bd,bsd->bs", query, keys) / math.sqrt(query.shape[-1])


# --- plausible wrong answers -----------------------------------------------------------------
def additive_tanh_outside(query, keys, W, U, v):  # v·tanh(Wq) + v·tanh(Uk): not one network
    return torch.tanh(query @ W.T)[:, None, :] @ v + torch.tanh(keys @ U.T) @ v


def additive_untransposed(query, keys, W, U, v):  # forgets the transposes (works only when square)
    return torch.tanh((query @ W)[:, None, :] + keys @ U) @ v


def softmax_ignoring_mask(scores, mask):
    return torch.softmax(scores, dim=-1)


def softmax_then_zero(scores, mask):  # zeroes padding after the softmax: rows no longer sum to 1
    return torch.softmax(scores, dim=-1) * mask


def softmax_wrong_axis(scores, mask):
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=0)
    return weights.masked_fill(~mask, 0.0).nan_to_num(0.0)


def dot_without_scale(query, keys):
    return torch.einsum("bd,bsd->bs", query, keys)


def dot_scaled_by_length(query, keys):  # the sqrt(sequence length) trap
    return torch.einsum("bd,bsd->bs", query, keys) / math.sqrt(keys.shape[1])


def not_done(*args):
    raise NotImplementedError


def test_additive_checker():
    assert check_additive_score(additive_score)
    assert not check_additive_score(additive_tanh_outside)
    assert not check_additive_score(additive_untransposed)
    assert not check_additive_score(not_done)


@pytest.mark.parametrize("wrong", [softmax_ignoring_mask, softmax_then_zero, softmax_wrong_axis, not_done])
def test_masked_softmax_checker(wrong):
    assert check_masked_softmax(masked_softmax)
    assert not check_masked_softmax(wrong)


@pytest.mark.parametrize("wrong", [dot_without_scale, dot_scaled_by_length, not_done])
def test_scaled_dot_checker(wrong):
    assert check_scaled_dot_score(scaled_dot_score)
    assert not check_scaled_dot_score(wrong)


def test_not_done_message(capsys):
    check_masked_softmax(not_done)
    assert "not done yet" in capsys.readouterr().out
