"""Every block built from each combination of the seams (post/pre-norm × LayerNorm/RMSNorm ×
MLP/SwiGLU) passes the same tests: a hand-written reference, no look-ahead, cache == no cache,
and the one interface (``BlockOutput``, ``run_blocks``)."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from attnbook.layers import (
    AttentionOnlyBlock, AttentionSpec, BlockOutput, CausalBlock, DecoderBlock, EncoderBlock, FeedForwardSpec, Norm,
    causal_mask, rms_norm, run_blocks,
)

NORMS = {"layernorm": Norm(), "rmsnorm": rms_norm()}
FEED_FORWARDS = {"mlp": FeedForwardSpec(32, "gelu"), "swiglu": FeedForwardSpec(24, "silu", gated=True, bias=False)}
COMBINATIONS = list(itertools.product([False, True], NORMS, FEED_FORWARDS))


def _build(cls, norm_first, norm, ff, seed=0, **options):
    torch.manual_seed(seed)
    block = cls(16, 4, norm_first=norm_first, norm=NORMS[norm], feed_forward=FEED_FORWARDS[ff], **options).eval()
    with torch.no_grad():  # norms away from (1, 0), so that a norm in the wrong place shows
        for name, p in block.named_parameters():
            if "norm" in name:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.2)
    return block


def _hand_block(block, x, mask):
    """The block written out: attention by its definition, the network by its kind."""
    def attention(h):
        mha = block.self_attn
        B, T, D = h.shape
        q, k, v = (p(h).view(B, T, 4, 4).transpose(1, 2) for p in (mha.q_proj, mha.k_proj, mha.v_proj))
        scores = (q @ k.transpose(-2, -1) / math.sqrt(4)).masked_fill(~mask, float("-inf"))
        return mha.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))

    def network(h):
        ff = block.feed_forward
        if hasattr(ff, "gate_proj"):
            return ff.down_proj(F.silu(ff.gate_proj(h)) * ff.up_proj(h))
        return ff.linear2(F.gelu(ff.linear1(h)))

    if block.norm_first:
        z = x + attention(block.norm1(x))
        return z + network(block.norm2(z))
    z = block.norm1(x + attention(x))
    return block.norm2(z + network(z))


@pytest.mark.parametrize("norm_first, norm, ff", COMBINATIONS)
def test_each_combination_equals_its_hand_written_block(norm_first, norm, ff):
    x = torch.randn(2, 5, 16)
    full = torch.ones(5, 5, dtype=torch.bool)
    with torch.no_grad():
        encoder = _build(EncoderBlock, norm_first, norm, ff)
        torch.testing.assert_close(encoder(x).hidden, _hand_block(encoder, x, full), atol=1e-5, rtol=1e-5)
        causal = _build(CausalBlock, norm_first, norm, ff)
        torch.testing.assert_close(causal(x).hidden, _hand_block(causal, x, causal_mask(5)), atol=1e-5, rtol=1e-5)
        # the reference can fail: the same weights with the other norm placement differ
        other = _build(EncoderBlock, not norm_first, norm, ff)
        other.load_state_dict(encoder.state_dict())
        assert not torch.allclose(other(x).hidden, _hand_block(encoder, x, full), atol=1e-3)


@pytest.mark.parametrize("norm_first, norm, ff", COMBINATIONS)
def test_each_combination_decodes_with_a_cache_as_without(norm_first, norm, ff):
    x, memory = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    for cls in (CausalBlock, DecoderBlock):
        block = _build(cls, norm_first, norm, ff, attention=AttentionSpec(num_kv_heads=2, rotary_max_len=8))
        context = {"memory_kv": block.project_memory(memory)} if cls is DecoderBlock else {}
        with torch.no_grad():
            full = block(x, **context).hidden
            out = block(x[:, :2], **context)
            outs, cache = [out.hidden], out.cache
            for t in range(2, 6):
                out = block(x[:, t : t + 1], past=cache, **context)
                outs.append(out.hidden)
                cache = out.cache
        torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
        y = x.clone()
        y[:, -1] += torch.randn(2, 16)
        with torch.no_grad():
            assert torch.equal(block(y, **context).hidden[:, :-1], full[:, :-1])  # no look-ahead


def test_every_block_returns_a_block_output():
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 3, 16)
    decoder = DecoderBlock(16, 4, 32)
    blocks = {EncoderBlock(16, 4, 32): {}, CausalBlock(16, 4, 32): {}, AttentionOnlyBlock(16, 4): {},
              decoder: {"memory_kv": decoder.project_memory(memory)}}
    for block, context in blocks.items():
        plain, weighted = block(x, **context), block(x, need_weights=True, **context)
        assert isinstance(plain, BlockOutput) and plain.attention is None
        assert plain.hidden.shape == (2, 4, 16) and weighted.attention is not None
        assert (plain.cache is None) == isinstance(block, EncoderBlock)


def test_blocks_reject_inputs_they_have_no_use_for():
    x = torch.randn(2, 4, 16)
    causal = CausalBlock(16, 4, 32)
    with pytest.raises(ValueError, match="an encoder block has no use for past"):
        EncoderBlock(16, 4, 32)(x, past=causal(x).cache)
    with pytest.raises(ValueError, match="a causal block has no use for memory_mask"):
        causal(x, memory_mask=torch.ones(2, 1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="needs memory_kv"):
        DecoderBlock(16, 4, 32)(x)


def test_run_blocks_collects_caches_maps_and_hidden_states():
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(CausalBlock(16, 4, 32) for _ in range(3)).eval()
    x = torch.randn(2, 5, 16)
    out = run_blocks(blocks, x, need_weights=True, all_hidden=True)
    h = x
    for i, block in enumerate(blocks):
        step = block(h, need_weights=True)
        assert torch.equal(out.hidden_states[i], h) and torch.equal(out.attention[i], step.attention)
        h = step.hidden
    assert torch.equal(out.hidden, h) and torch.equal(out.hidden_states[-1], h)
    assert len(out.caches) == 3 and out.caches[0].key.shape == (2, 4, 5, 4)
    assert run_blocks(blocks, x).attention is None and run_blocks(blocks, x).hidden_states is None
    with pytest.raises(ValueError, match="one entry per block"):
        run_blocks(blocks, x, pasts=out.caches[:2])


def test_decoder_cross_attention_gets_no_rotary_positions():
    block = DecoderBlock(16, 4, 32, attention=AttentionSpec(rotary_max_len=8))
    assert block.self_attn.rotary is not None and block.cross_attn.rotary is None
