"""Each Chapter 3 checker accepts a reference solution and rejects plausible wrong answers."""
import math

import torch

from attnbook.exercises.ch03 import check_causal_mask, check_scaled_dot_product_attention, check_sinusoidal_encoding


def sdpa_reference(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def sdpa_no_scale(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def sdpa_wrong_axis(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2) @ v


def sdpa_scale_by_length(q, k, v):  # the trap of seed 003's BERT code: √(sequence length)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-2]), dim=-1) @ v


def sdpa_scale_by_dk(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], dim=-1) @ v


def test_sdpa_checker():
    assert check_scaled_dot_product_attention(sdpa_reference)
    for wrong in (sdpa_no_scale, sdpa_wrong_axis, sdpa_scale_by_length, sdpa_scale_by_dk):
        assert not check_scaled_dot_product_attention(wrong), wrong.__name__


def test_sdpa_checker_reports_not_done(capsys):
    def stub(q, k, v):
        raise NotImplementedError
    assert not check_scaled_dot_product_attention(stub)
    assert "not done yet" in capsys.readouterr().out


def test_causal_mask_checker():
    assert check_causal_mask(lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool)))
    assert not check_causal_mask(lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1))
    assert not check_causal_mask(lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)))
    assert not check_causal_mask(lambda n: torch.tril(torch.ones(n, n)))  # float, not bool


def pe_reference(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / 10000 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def pe_swapped(max_len, d_model):
    pe = pe_reference(max_len, d_model)
    return pe[:, [j + 1 if j % 2 == 0 else j - 1 for j in range(d_model)]]


def pe_exponent_i(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float32)
    angle = pos / 10000 ** (i / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


def test_sinusoidal_checker():
    assert check_sinusoidal_encoding(pe_reference)
    assert not check_sinusoidal_encoding(pe_swapped)
    assert not check_sinusoidal_encoding(pe_exponent_i)
