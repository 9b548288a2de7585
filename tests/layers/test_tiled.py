"""Tiled attention with an online softmax equals PyTorch's attention, merges tiles exactly, holds
only tiles, and rejects bad inputs; the memory probe measures what it says."""
import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.layers.tiled import online_softmax_merge, peak_intermediate_bytes, tiled_attention


def _causal_reference(q, k, v):
    T, S = q.shape[-2], k.shape[-2]
    mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)  # the last query sees every key
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("T, S, block", [(1, 1, 4), (7, 7, 3), (64, 64, 64), (50, 50, 16), (5, 33, 8), (9, 9, 100)])
@pytest.mark.parametrize("causal", [False, True])
def test_equals_scaled_dot_product_attention(T, S, block, causal):
    if causal and T > S:
        pytest.skip("causal needs S >= T")
    g = torch.Generator().manual_seed(T * 100 + S)
    q = torch.randn(2, 3, T, 8, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, S, 8, generator=g, dtype=torch.float64)
    v = torch.randn(2, 3, S, 5, generator=g, dtype=torch.float64)
    expected = _causal_reference(q, k, v) if causal else F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(tiled_attention(q, k, v, causal=causal, block_size=block), expected)


@pytest.mark.parametrize("T, S, block, causal", [(7, 7, 3, True), (5, 33, 8, True), (9, 4, 2, False)])
def test_return_lse_gives_the_log_sum_exp_of_the_scaled_scores(T, S, block, causal):
    g = torch.Generator().manual_seed(T + S)
    q, k, v = (torch.randn(2, n, 6, generator=g, dtype=torch.float64) for n in (T, S, S))
    out, lse = tiled_attention(q, k, v, causal=causal, block_size=block, return_lse=True)
    scores = q @ k.transpose(-2, -1) / math.sqrt(6)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), float("-inf"))
    assert lse.shape == (2, T)
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    torch.testing.assert_close(out, tiled_attention(q, k, v, causal=causal, block_size=block))


def test_scale_and_large_scores_stay_finite():
    q, k, v = torch.randn(1, 10, 4) * 100, torch.randn(1, 10, 4) * 100, torch.randn(1, 10, 4)
    out = tiled_attention(q, k, v, block_size=3, scale=0.5)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.5), atol=1e-5, rtol=1e-4)
    assert torch.isfinite(out).all()


def test_merging_two_tiles_equals_one_softmax():
    s, v = torch.randn(4, 10, dtype=torch.float64), torch.randn(10, 3, dtype=torch.float64)
    parts = []
    for cols in (slice(0, 6), slice(6, 10)):
        m = s[:, cols].amax(-1, keepdim=True)
        p = torch.exp(s[:, cols] - m)
        parts += [m, p.sum(-1, keepdim=True), p @ v[cols]]
    m, l, acc = online_softmax_merge(*parts)
    torch.testing.assert_close(acc / l, s.softmax(-1) @ v)
    torch.testing.assert_close(m, s.amax(-1, keepdim=True))
    empty = (torch.full((4, 1), -math.inf, dtype=torch.float64), torch.zeros(4, 1, dtype=torch.float64),
             torch.zeros(4, 3, dtype=torch.float64))
    m2, l2, acc2 = online_softmax_merge(*empty, *parts[:3])  # nothing seen yet + a tile = the tile
    torch.testing.assert_close(acc2 / l2, torch.softmax(s[:, :6], -1) @ v[:6])


def test_memory_grows_linearly_not_quadratically():
    def peaks(T):
        q = k = v = torch.randn(1, 1, T, 16)
        explicit = peak_intermediate_bytes(lambda: (q @ k.transpose(-2, -1) / 4).softmax(-1) @ v)
        tiled = peak_intermediate_bytes(lambda: tiled_attention(q, k, v, causal=True, block_size=64))
        return explicit, tiled

    (e1, t1), (e2, t2) = peaks(256), peaks(1024)
    assert e1 >= 256 * 256 * 4 and e2 / e1 > 12  # T x 4: scores x 16
    assert t2 / t1 < 4.5  # T x 4: tiles x about 4 at most (output and running sums grow with T)
    assert t2 < e2 / 20


def test_peak_counts_live_tensors_once_and_not_the_inputs():
    x = torch.zeros(1000)
    assert peak_intermediate_bytes(lambda: x[:10]) == 0  # a view of an input: no new memory
    assert peak_intermediate_bytes(lambda: x + 1) == 4000
    assert peak_intermediate_bytes(lambda: ((x + 1) + 1) + 1) == 8000  # two alive at a time at most


def test_bad_inputs_are_rejected():
    q = torch.randn(1, 4, 8)
    with pytest.raises(ValueError, match="last dimension"):
        tiled_attention(q, torch.randn(1, 4, 6), torch.randn(1, 4, 8))
    with pytest.raises(ValueError, match="same length"):
        tiled_attention(q, torch.randn(1, 4, 8), torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match="at least as many keys"):
        tiled_attention(q, torch.randn(1, 3, 8), torch.randn(1, 3, 8), causal=True)
    with pytest.raises(ValueError, match="block_size"):
        tiled_attention(q, q, q, block_size=0)
