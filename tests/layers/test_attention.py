"""The library's attention equals PyTorch's, masks give exactly zero weight, the cache is exact."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers.attention import KVCache, MultiHeadAttention, scaled_dot_product_attention
from attnbook.layers.torch_bridge import to_torch_multihead
from attnbook.layers.masks import causal_mask, token_mask


def _mha(d_model=16, num_heads=4, bias=True, seed=0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d_model, num_heads, bias=bias).eval()
    with torch.no_grad():  # non-zero biases so that a wrong bias copy shows
        for p in mha.parameters():
            p.normal_(0, 0.3)
    return mha


def test_sdpa_matches_definition_and_rows_sum_to_one():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    out, w = scaled_dot_product_attention(q, k, v)
    expected_w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(out, expected_w @ v)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)


def test_sdpa_mask_gives_exact_zero_and_matches_torch():
    torch.manual_seed(1)
    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
    mask = token_mask(torch.tensor([6, 3]))[:, None, :]  # (B, 1, S)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(w[1, :, 3:] == 0)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)


def test_sdpa_shape_errors():
    with pytest.raises(ValueError, match="same last dimension"):
        scaled_dot_product_attention(torch.randn(2, 4), torch.randn(2, 5), torch.randn(2, 5))
    with pytest.raises(ValueError, match="same length"):
        scaled_dot_product_attention(torch.randn(2, 4), torch.randn(3, 4), torch.randn(2, 4))


def _torch_out(torch_mha, x, attn_mask=None, key_padding_mask=None, average=True):
    return torch_mha(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                     need_weights=True, average_attn_weights=average)


@pytest.mark.parametrize("bias", [True, False])
def test_mha_equals_torch_without_mask(bias):
    mha = _mha(bias=bias)
    ref = to_torch_multihead(mha).eval()
    x = torch.randn(3, 5, 16)
    out, w = mha(x, x, x, need_weights=True)
    ref_out, ref_w = _torch_out(ref, x, average=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-5)  # per head (B, H, T, S)
    torch.testing.assert_close(mha(x, x, x), ref_out, atol=1e-5, rtol=1e-5)  # the fused path


def test_mha_equals_torch_with_padding_mask():
    mha = _mha()
    ref = to_torch_multihead(mha).eval()
    x = torch.randn(3, 6, 16)
    valid = token_mask(torch.tensor([6, 2, 4]))  # (B, S)
    out, w = mha(x, x, x, mask=valid[:, None, :], need_weights=True)
    ref_out, ref_w = _torch_out(ref, x, key_padding_mask=~valid)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.mean(1), ref_w, atol=1e-6, rtol=1e-5)  # head-averaged
    torch.testing.assert_close(mha(x, x, x, mask=valid[:, None, :]), ref_out, atol=1e-5, rtol=1e-5)
    assert torch.all(w[1, :, :, 2:] == 0)


def test_mha_equals_torch_with_causal_and_padding_mask():
    mha = _mha()
    ref = to_torch_multihead(mha).eval()
    x = torch.randn(2, 5, 16)
    valid = token_mask(torch.tensor([5, 3]))
    mask = valid[:, None, :] & causal_mask(5)  # (B, T, S)
    out, w = mha(x, x, x, mask=mask, need_weights=True)
    ref_out, ref_w = _torch_out(ref, x, attn_mask=~causal_mask(5), key_padding_mask=~valid, average=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(mha(x, x, x, mask=mask), ref_out, atol=1e-5, rtol=1e-5)


def test_mha_cross_attention_equals_torch():
    mha = _mha()
    ref = to_torch_multihead(mha).eval()
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 7, 16)
    torch.testing.assert_close(mha(q, kv, kv), ref(q, kv, kv, need_weights=False)[0], atol=1e-5, rtol=1e-5)


def test_causal_mask_future_tokens_change_no_earlier_output():
    mha = _mha()
    x = torch.randn(1, 6, 16)
    y = x.clone()
    y[:, 4:] += torch.randn(1, 2, 16)  # change positions 4 and 5 only
    mask = causal_mask(6)
    for need_weights in (False, True):
        out_x = mha(x, x, x, mask=mask, need_weights=need_weights)
        out_y = mha(y, y, y, mask=mask, need_weights=need_weights)
        out_x, out_y = (out_x[0], out_y[0]) if need_weights else (out_x, out_y)
        torch.testing.assert_close(out_x[:, :4], out_y[:, :4], atol=0, rtol=0)
        assert not torch.allclose(out_x[:, 4:], out_y[:, 4:])


def test_causal_gradient_does_not_flow_from_past_outputs_to_future_inputs():
    mha = _mha()
    x = torch.randn(1, 6, 16, requires_grad=True)
    mha(x, x, x, mask=causal_mask(6))[:, :3].sum().backward()
    assert torch.all(x.grad[:, 3:] == 0)
    assert torch.all(x.grad[:, :3].abs().sum(-1) > 0)


def test_fully_masked_row_gives_zero_output_on_both_paths():
    mha = _mha(bias=False)
    x = torch.randn(1, 3, 16)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    fused = mha(x, x, x, mask=mask[None])
    explicit, w = mha(x, x, x, mask=mask[None], need_weights=True)
    assert torch.all(fused[0, 1] == 0) and torch.all(w[0, :, 1] == 0)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)


def test_mha_gradients_equal_torch():
    mha = _mha()
    ref = to_torch_multihead(mha)
    x = torch.randn(2, 5, 16)
    mha(x, x, x).square().sum().backward()
    ref(x, x, x, need_weights=False)[0].square().sum().backward()
    grad_in = torch.cat([mha.q_proj.weight.grad, mha.k_proj.weight.grad, mha.v_proj.weight.grad])
    torch.testing.assert_close(grad_in, ref.in_proj_weight.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(mha.out_proj.weight.grad, ref.out_proj.weight.grad, atol=1e-4, rtol=1e-4)


def test_heads_are_independent_slices():
    """Head h of the library equals single-head attention on columns h*Dh:(h+1)*Dh."""
    mha = _mha(d_model=12, num_heads=3)
    x = torch.randn(2, 4, 12)
    _, w = mha(x, x, x, need_weights=True)
    for h in range(3):
        cols = slice(4 * h, 4 * h + 4)
        q = x @ mha.q_proj.weight[cols].T + mha.q_proj.bias[cols]
        k = x @ mha.k_proj.weight[cols].T + mha.k_proj.bias[cols]
        torch.testing.assert_close(w[:, h], torch.softmax(q @ k.transpose(1, 2) / 2.0, -1))


def test_kv_cache_matches_full_causal_pass():
    mha = _mha()
    x = torch.randn(2, 5, 16)
    full = mha(x, x, x, mask=causal_mask(5))
    cache, steps = None, []
    for t in range(5):
        new = mha.project_kv(x[:, t : t + 1], x[:, t : t + 1])  # (B, H, 1, Dh) each
        cache = new if cache is None else cache.extend(new.key, new.value)
        steps.append(mha.attend(x[:, t : t + 1], cache))
    assert isinstance(cache, KVCache) and len(cache) == 5
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, dropout=0.5)
    x = torch.randn(2, 5, 16)
    mha.eval()
    torch.testing.assert_close(mha(x, x, x), mha(x, x, x))
    mha.train()
    assert not torch.allclose(mha(x, x, x), mha(x, x, x))


def test_mha_errors_are_clear():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"\(B, len, 8\)"):
        mha(torch.randn(2, 3, 6), torch.randn(2, 3, 8), torch.randn(2, 3, 8))
    x = torch.randn(2, 3, 8)
    with pytest.raises(TypeError, match="boolean"):
        mha(x, x, x, mask=torch.zeros(3, 3))
    with pytest.raises(ValueError, match="does not fit"):
        mha(x, x, x, mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="does not fit"):  # a (B, S) token mask where (T, S) is expected
        mha(torch.randn(3, 3, 8), torch.randn(3, 3, 8), torch.randn(3, 3, 8), mask=torch.ones(3, 3, dtype=torch.bool)[:, :1])
    with pytest.raises(ValueError, match="same batch size"):
        mha(x, torch.randn(3, 3, 8), torch.randn(3, 3, 8))
    with pytest.raises(ValueError, match="same \\(B, S\\)"):
        mha(x, torch.randn(2, 3, 8), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=">= 1"):
        MultiHeadAttention(0, 1)
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(8, 2, dropout=1.0)


def test_to_torch_multihead_copies_training_mode_and_dropout():
    mha = MultiHeadAttention(8, 2, dropout=0.1).train()
    ref = to_torch_multihead(mha)
    assert ref.training and ref.dropout == 0.1 and ref.batch_first
    assert isinstance(ref, nn.MultiheadAttention)
