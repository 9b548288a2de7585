"""The blocks: hand-written references, PyTorch's own layers, the KV cache, the causal mask,
and deliberately broken variants that the tests must catch."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnbook.layers import (
    CausalBlock, DecoderBlock, Embeddings, EncoderBlock, FeedForward, FeedForwardSpec, LearnedPositionalEmbedding,
    key_mask, to_torch_encoder_layer, token_mask,
)
from attnbook.layers import blocks as blocks_module
from conftest import perturb_layer_norms


def _block(cls, seed=0, **options):
    torch.manual_seed(seed)
    return perturb_layer_norms(cls(16, 4, 32, **options)).eval()


def _hand_attention(mha, x, mask=None):
    """softmax(Q Kᵀ / √Dh) V per head, written out once more with the block's own weights."""
    B, T, D = x.shape
    H, Dh = mha.num_heads, mha.head_dim
    q, k, v = (proj(x).view(B, T, H, Dh).transpose(1, 2) for proj in (mha.q_proj, mha.k_proj, mha.v_proj))
    scores = q @ k.transpose(-2, -1) / math.sqrt(Dh)  # (B, H, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return mha.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


def _hand_feed_forward(ff, x, act):
    return ff.linear2(act(ff.linear1(x)))


ACTS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda h: F.gelu(h, approximate="tanh")}


@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_equals_a_hand_written_reference(activation, norm_first):
    block = _block(EncoderBlock, activation=activation, norm_first=norm_first, layer_norm_eps=1e-12)
    x = torch.randn(2, 5, 16)
    act = ACTS[activation]
    with torch.no_grad():
        if norm_first:  # x + MHA(LN(x)), then z + FFN(LN(z))
            z = x + _hand_attention(block.self_attn, block.norm1(x))
            expected = z + _hand_feed_forward(block.feed_forward, block.norm2(z), act)
        else:  # LN(x + MHA(x)), then LN(z + FFN(z))
            z = block.norm1(x + _hand_attention(block.self_attn, x))
            expected = block.norm2(z + _hand_feed_forward(block.feed_forward, z, act))
        torch.testing.assert_close(block(x).hidden, expected, atol=1e-5, rtol=1e-5)
        assert block.norm1.eps == 1e-12


def test_a_wrongly_wired_block_fails_the_reference():
    """The reference can fail: the same weights run pre-norm, or with ReLU for GELU, differ."""
    post = _block(EncoderBlock, activation="gelu")
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        z = post.norm1(x + _hand_attention(post.self_attn, x))
        expected = post.norm2(z + _hand_feed_forward(post.feed_forward, z, F.gelu))
        for wrong in (dict(activation="gelu", norm_first=True), dict(activation="relu")):
            other = EncoderBlock(16, 4, 32, **wrong).eval()
            other.load_state_dict(post.state_dict())
            assert not torch.allclose(other(x).hidden, expected, atol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_equals_torch_encoder_layer(norm_first, activation):
    block = _block(EncoderBlock, norm_first=norm_first, activation=activation)
    ref = to_torch_encoder_layer(block)
    with torch.no_grad():
        x = torch.randn(3, 6, 16)
        tokens = token_mask(torch.tensor([6, 3, 1]), 6)
        torch.testing.assert_close(block(x, key_mask(tokens)).hidden[tokens], ref(x, src_key_padding_mask=~tokens)[tokens],
                                   atol=1e-5, rtol=1e-5)


def test_feed_forward_activations_and_errors():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    for name, act in ACTS.items():
        ff = FeedForward(8, 16, activation=name)
        torch.testing.assert_close(ff(x), _hand_feed_forward(ff, x, act))
        torch.testing.assert_close(ff(x)[:, 2], ff(x[:, 2:3])[:, 0])  # position-wise
    assert not torch.allclose(FeedForward(8, 16, "gelu")(x), FeedForward(8, 16, "gelu_tanh")(x))
    with pytest.raises(ValueError, match="activation"):
        FeedForward(8, 16, activation="swish")
    with pytest.raises(ValueError, match="d_ff"):
        FeedForward(8, 0)


def test_blocks_reject_bad_sizes():
    with pytest.raises(ValueError, match="divisible"):
        EncoderBlock(30, 4, 64)
    with pytest.raises(ValueError, match=">= 1"):
        CausalBlock(16, 0, 64)
    with pytest.raises(ValueError, match="dropout"):
        DecoderBlock(16, 4, 64, dropout=1.5)
    with pytest.raises(ValueError, match="eps must be > 0"):
        EncoderBlock(16, 4, 64, layer_norm_eps=0.0)
    with pytest.raises(ValueError, match="d_ff"):
        EncoderBlock(16, 4)
    with pytest.raises(ValueError, match="not both"):
        EncoderBlock(16, 4, 64, feed_forward=FeedForwardSpec(64))


def _leaks(block, x, **kwargs):
    """Largest change of the outputs at positions 0..T-2 when the last position changes."""
    y = x.clone()
    y[:, -1] = torch.randn_like(x[:, -1])  # a random change: a constant shift would vanish in a LayerNorm
    with torch.no_grad():
        return (block(x, **kwargs).hidden[:, :-1] - block(y, **kwargs).hidden[:, :-1]).abs().max().item()


def test_causal_block_does_not_leak_and_a_broken_mask_does(monkeypatch):
    block = _block(CausalBlock)
    x = torch.randn(2, 6, 16)
    assert _leaks(block, x) == 0.0
    monkeypatch.setattr(blocks_module, "causal_mask", lambda t, s, device=None: torch.ones(t, s, dtype=torch.bool))
    assert _leaks(block, x) > 1e-3


def test_decoder_block_does_not_leak_and_a_broken_mask_does(monkeypatch):
    block = _block(DecoderBlock)
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    memory_kv = block.project_memory(memory)
    assert _leaks(block, x, memory_kv=memory_kv) == 0.0
    monkeypatch.setattr(blocks_module, "causal_mask", lambda t, s, device=None: torch.ones(t, s, dtype=torch.bool))
    assert _leaks(block, x, memory_kv=memory_kv) > 1e-3


@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_block_with_cache_equals_without(norm_first):
    """Full sequence at once == a prompt of 3 then one position at a time through the cache."""
    block = _block(CausalBlock, norm_first=norm_first)
    x = torch.randn(2, 7, 16)
    with torch.no_grad():
        full, full_cache = block(x).hidden, block(x).cache
        first = block(x[:, :3])
        outs, cache = [first.hidden], first.cache
        for t in range(3, 7):
            before = cache
            step = block(x[:, t : t + 1], past=cache)
            cache = step.cache
            assert len(before) == t and len(cache) == t + 1  # the past is not changed
            outs.append(step.hidden)
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(cache.key, full_cache.key, atol=1e-5, rtol=1e-5)


def test_causal_block_equals_torch_encoder_layer_with_a_causal_mask():
    block = _block(CausalBlock)  # pre-norm, GELU
    ref = to_torch_encoder_layer(block)
    with torch.no_grad():
        x = torch.randn(2, 6, 16)
        expected = ref(x, src_mask=nn.Transformer.generate_square_subsequent_mask(6), is_causal=True)
        torch.testing.assert_close(block(x).hidden, expected, atol=1e-5, rtol=1e-5)


def test_weights_only_when_asked():
    block = _block(CausalBlock)
    x = torch.randn(2, 4, 16)
    assert block(x).attention is None
    out = block(x, need_weights=True)
    assert out.attention.shape == (2, 4, 4, 4)
    assert torch.all(out.attention[..., 0, 1:] == 0)  # the first position sees only itself
    torch.testing.assert_close(out.hidden, block(x).hidden, atol=1e-6, rtol=1e-5)  # fused path == explicit path
    enc = _block(EncoderBlock)
    assert enc(x).attention is None and enc(x).cache is None
    assert enc(x, need_weights=True).attention.shape == (2, 4, 4, 4)


def test_embeddings_compose_tokens_positions_segments_and_norm():
    torch.manual_seed(0)
    tokens, segments = nn.Embedding(20, 8), nn.Embedding(2, 8)
    positions, norm = LearnedPositionalEmbedding(8, 10), nn.LayerNorm(8, eps=1e-12)
    emb = Embeddings(tokens, positions, segments, scale=2.0, norm=norm).eval()
    ids, seg = torch.randint(20, (3, 5)), torch.randint(2, (3, 5))
    expected = norm(tokens(ids) * 2.0 + positions.embedding.weight[2:7] + segments(seg))
    torch.testing.assert_close(emb(ids, seg, offset=2), expected)
    with pytest.raises(ValueError, match="segment_ids must be given"):
        emb(ids)
    with pytest.raises(ValueError, match="shape"):
        emb(ids, seg[:, :3])
    with pytest.raises(ValueError, match="offset"):
        emb(ids, seg, offset=-1)
    plain = Embeddings(tokens, None)
    with pytest.raises(ValueError, match="segment_ids must be given"):
        plain(ids, seg)
    torch.testing.assert_close(plain(ids), tokens(ids))


def test_torch_bridge_rejects_tanh_gelu_and_a_wrong_copy_fails():
    with pytest.raises(ValueError, match="gelu_tanh"):
        to_torch_encoder_layer(EncoderBlock(16, 4, 32, activation="gelu_tanh"))
    block = _block(EncoderBlock, activation="gelu")
    ref = to_torch_encoder_layer(block)
    with torch.no_grad():
        ref.norm2.weight.mul_(-1.0)  # one wrong tensor
        x = torch.randn(2, 5, 16)
        assert not torch.allclose(block(x).hidden, ref(x), atol=1e-4)
