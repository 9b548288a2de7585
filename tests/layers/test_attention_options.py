"""What T5 and Llama change in attention: a float bias on the scores, another scale, grouped-query
heads; each against a hand-written softmax or ``transformers``' Llama attention, on both the fused
and the explicit path."""
import math

import pytest
import torch

from attnbook.layers import AttentionSpec, CausalBlock, KVCache, MultiHeadAttention, causal_mask, to_torch_multihead


def _mha(seed=0, **options):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(16, 4, **options).eval()
    with torch.no_grad():
        for p in mha.parameters():
            p.normal_(0, 0.3)
    return mha


def _hand(mha, x, mask=None, bias=None, scale=None):
    """softmax(scale · Q Kᵀ + bias) V with key/value head h // (H / Hkv) for query head h."""
    B, T, _ = x.shape
    H, Hkv, Dh = mha.num_heads, mha.num_kv_heads, mha.head_dim
    q = mha.q_proj(x).view(B, T, H, Dh).transpose(1, 2)
    k = mha.k_proj(x).view(B, T, Hkv, Dh).transpose(1, 2)
    v = mha.v_proj(x).view(B, T, Hkv, Dh).transpose(1, 2)
    group = H // Hkv
    k = torch.stack([k[:, h // group] for h in range(H)], dim=1)
    v = torch.stack([v[:, h // group] for h in range(H)], dim=1)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(Dh) if scale is None else scale)
    if bias is not None:
        scores = scores + bias
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return mha.out_proj((weights @ v).transpose(1, 2).reshape(B, T, H * Dh)), weights


@pytest.mark.parametrize("need_weights", [False, True])
def test_float_bias_and_mask_equal_hand_written(need_weights):
    mha = _mha()
    x, bias = torch.randn(2, 5, 16), torch.randn(1, 4, 5, 5)
    mask = causal_mask(5)
    expected, expected_weights = _hand(mha, x, mask, bias)
    out = mha(x, x, x, mask, need_weights=need_weights, bias=bias)
    got = out[0] if need_weights else out
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    if need_weights:
        torch.testing.assert_close(out[1], expected_weights, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(got, mha(x, x, x, mask), atol=1e-3)  # the bias changes the output


@pytest.mark.parametrize("need_weights", [False, True])
def test_scale_one_equals_hand_written(need_weights):
    mha = _mha(scale=1.0)
    x = torch.randn(2, 5, 16)
    expected, _ = _hand(mha, x, scale=1.0)
    out = mha(x, x, x, need_weights=need_weights)
    torch.testing.assert_close(out[0] if need_weights else out, expected, atol=1e-5, rtol=1e-5)
    default = _mha()
    default.load_state_dict(mha.state_dict())
    assert not torch.allclose(default(x, x, x), expected, atol=1e-3)  # 1/√Dh is a different model


@pytest.mark.parametrize("num_kv_heads", [1, 2])
@pytest.mark.parametrize("need_weights", [False, True])
def test_grouped_query_attention_equals_hand_written(num_kv_heads, need_weights):
    mha = _mha(num_kv_heads=num_kv_heads)
    assert mha.k_proj.out_features == num_kv_heads * 4
    x, mask = torch.randn(3, 6, 16), causal_mask(6)
    expected, _ = _hand(mha, x, mask)
    out = mha(x, x, x, mask, need_weights=need_weights)
    torch.testing.assert_close(out[0] if need_weights else out, expected, atol=1e-5, rtol=1e-5)


def test_gqa_with_as_many_kv_heads_as_heads_is_todays_attention():
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 4)
    torch.manual_seed(0)
    grouped = MultiHeadAttention(16, 4, num_kv_heads=4)
    x = torch.randn(2, 5, 16)
    assert torch.equal(plain(x, x, x, causal_mask(5)), grouped(x, x, x, causal_mask(5)))


def test_the_cache_holds_only_the_kv_heads():
    torch.manual_seed(0)
    block = CausalBlock(16, 4, 32, attention=AttentionSpec(num_kv_heads=2)).eval()
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        first = block(x[:, :3])
        assert first.cache.key.shape == (2, 2, 3, 4)  # (B, Hkv, P, Dh), not (B, H, P, Dh)
        outs, cache = [first.hidden], first.cache
        for t in range(3, 7):
            out = block(x[:, t : t + 1], past=cache)
            outs.append(out.hidden)
            cache = out.cache
        torch.testing.assert_close(torch.cat(outs, 1), block(x).hidden, atol=1e-5, rtol=1e-5)


def test_gqa_equals_transformers_llama_attention():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    config = transformers.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=16, attention_bias=False, rope_theta=10000.0)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    theirs = LlamaAttention(config, layer_idx=0).eval()
    ours = AttentionSpec(num_kv_heads=2, bias=False, rotary_max_len=16)(32, 4)
    ours.load_state_dict(theirs.state_dict(), strict=False)  # q/k/v/o_proj; ours names o_proj out_proj
    with torch.no_grad():
        ours.out_proj.weight.copy_(theirs.o_proj.weight)
    x = torch.randn(2, 6, 32)
    positions = torch.arange(6)[None].expand(2, -1)
    cos_sin = LlamaRotaryEmbedding(config)(x, positions)
    additive = torch.zeros(6, 6).masked_fill(~causal_mask(6), float("-inf"))[None, None]
    expected, _ = theirs(x, position_embeddings=cos_sin, attention_mask=additive)
    got = ours.attend(x, ours.project_kv(x, x), causal_mask(6))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_options_are_checked_and_torch_bridge_refuses_what_torch_lacks():
    with pytest.raises(ValueError, match="divisible by num_kv_heads"):
        MultiHeadAttention(16, 4, num_kv_heads=3)
    mha = _mha()
    x = torch.randn(2, 5, 16)
    with pytest.raises(TypeError, match="floating-point"):
        mha(x, x, x, bias=causal_mask(5))
    with pytest.raises(ValueError, match="bias of shape"):
        mha(x, x, x, bias=torch.zeros(5, 4))
    with pytest.raises(TypeError, match="boolean"):
        mha(x, x, x, mask=torch.zeros(5, 5))
    with pytest.raises(ValueError, match="key/value heads"):
        _mha(num_kv_heads=2).attend(x, KVCache(torch.zeros(2, 4, 5, 4), torch.zeros(2, 4, 5, 4)))
    for options in (dict(num_kv_heads=2), dict(scale=1.0)):
        with pytest.raises(ValueError, match="nn.MultiheadAttention"):
            to_torch_multihead(_mha(**options))
