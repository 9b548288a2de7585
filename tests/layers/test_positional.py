"""Sinusoidal encoding follows its formula; a shift is a fixed rotation; modules add position."""
import math

import pytest
import torch

from attnbook.layers.positional import (
    LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_shift_matrix,
)


def test_sinusoidal_formula_entries():
    pe = sinusoidal_encoding(60, 16)
    pos, i = 37, 3
    angle = pos / 10000 ** (2 * i / 16)
    assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
    assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    assert torch.equal(pe[0, 0::2], torch.zeros(8)) and torch.equal(pe[0, 1::2], torch.ones(8))
    assert pe.abs().max() <= 1.0


def test_sinusoidal_errors():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError):
        sinusoidal_encoding(0, 8)


@pytest.mark.parametrize("offset", [1, 5, 40])
def test_shift_is_a_fixed_rotation(offset):
    pe = sinusoidal_encoding(200, 64)
    m = sinusoidal_shift_matrix(offset, 64)
    torch.testing.assert_close(pe[offset:], pe[:-offset] @ m.T, atol=2e-4, rtol=0)
    torch.testing.assert_close(m @ m.T, torch.eye(64), atol=1e-5, rtol=0)  # orthogonal


def test_shift_matrix_depends_on_offset():
    assert not torch.allclose(sinusoidal_shift_matrix(1, 8), sinusoidal_shift_matrix(2, 8))


def test_sinusoidal_module_adds_table_with_offset():
    enc = SinusoidalPositionalEncoding(8, max_len=10)
    x = torch.zeros(2, 3, 8)
    torch.testing.assert_close(enc(x, offset=4), sinusoidal_encoding(10, 8)[4:7].expand(2, 3, 8))
    assert len(list(enc.parameters())) == 0  # nothing is learned
    with pytest.raises(ValueError, match="table holds"):
        enc(torch.zeros(1, 8, 8), offset=3)
    with pytest.raises(ValueError, match="width"):
        enc(torch.zeros(1, 3, 6))


def test_learned_embedding_adds_trainable_vectors():
    torch.manual_seed(0)
    emb = LearnedPositionalEmbedding(4, max_len=5)
    x = torch.zeros(1, 3, 4)
    torch.testing.assert_close(emb(x, offset=2)[0], emb.embedding.weight[2:5])
    assert sum(p.numel() for p in emb.parameters()) == 20
    with pytest.raises(ValueError, match="learned"):
        emb(torch.zeros(1, 4, 4), offset=2)
