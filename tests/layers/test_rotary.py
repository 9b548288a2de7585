"""Rotary position embeddings: scores depend on the offset only, equal ``transformers``' rotary
implementation, and decode through a KV cache exactly as without one."""
from unittest import mock

import pytest
import torch

from attnbook.layers import AttentionSpec, CausalBlock, RotaryEmbedding, rotate_half


def test_rotation_keeps_length_and_turns_pairs():
    rope = RotaryEmbedding(8, 16)
    x = torch.randn(2, 3, 16, 8)
    torch.testing.assert_close(rope(x).norm(dim=-1), x.norm(dim=-1))  # a rotation keeps lengths
    torch.testing.assert_close(rope(x)[..., 0, :], x[..., 0, :])  # position 0 is not turned
    assert torch.equal(rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_scores_depend_only_on_the_offset():
    rope = RotaryEmbedding(8, 64)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(p, s):
        return (rope(q, offset=p) * rope(k, offset=s)).sum().item()

    assert score(5, 2) == pytest.approx(score(40, 37), abs=1e-4)
    assert score(5, 2) == pytest.approx(score(3, 0), abs=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-3)  # another offset, another score


def test_equals_transformers_rotary():
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(hidden_size=32, num_attention_heads=4, max_position_embeddings=64, rope_theta=500.0)
    theirs = LlamaRotaryEmbedding(config)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    positions = torch.arange(10, 16)[None].expand(2, -1)
    cos, sin = theirs(q, positions)
    expected_q, expected_k = apply_rotary_pos_emb(q, k, cos, sin)
    ours = RotaryEmbedding(8, 64, base=500.0)
    torch.testing.assert_close(ours(q, offset=10), expected_q)
    torch.testing.assert_close(ours(k, offset=10), expected_k)


def test_rotary_block_with_cache_equals_without():
    torch.manual_seed(0)
    block = CausalBlock(16, 4, 32, attention=AttentionSpec(rotary_max_len=32)).eval()
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        full = block(x).hidden
        out = block(x[:, :4])
        outs, cache = [out.hidden], out.cache
        for t in range(4, 9):
            out = block(x[:, t : t + 1], past=cache)
            outs.append(out.hidden)
            cache = out.cache
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=1e-5)
    # without the offset each new position would be turned as if it were position 0: different outputs
    rope = block.self_attn.rotary
    with torch.no_grad(), mock.patch.object(rope, "forward", lambda t, offset=0: RotaryEmbedding.forward(rope, t, 0)):
        wrong = block(x[:, 4:5], past=block(x[:, :4]).cache).hidden
    assert not torch.allclose(wrong, full[:, 4:5], atol=1e-4)


def test_rotary_errors():
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(7, 10)
    rope = RotaryEmbedding(8, 10)
    with pytest.raises(ValueError, match="0..9"):
        rope(torch.randn(1, 1, 4, 8), offset=8)
    with pytest.raises(ValueError, match="head width 8"):
        rope(torch.randn(1, 1, 4, 6))
