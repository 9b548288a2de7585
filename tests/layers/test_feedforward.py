"""The gated feed-forward networks (SwiGLU, GeGLU) against hand-written ones and ``transformers``'
Llama MLP; the ``FeedForwardSpec`` recipe."""
import pytest
import torch
import torch.nn.functional as F

from attnbook.layers import FeedForward, FeedForwardSpec, GatedFeedForward


def _hand_gated(ff, x, act):
    return ff.down_proj(act(ff.gate_proj(x)) * ff.up_proj(x))


@pytest.mark.parametrize("activation, act", [("silu", F.silu),
                                             ("gelu_tanh", lambda h: F.gelu(h, approximate="tanh"))])
@pytest.mark.parametrize("bias", [False, True])
def test_gated_feed_forward_equals_hand_written(activation, act, bias):
    torch.manual_seed(0)
    ff = GatedFeedForward(8, 20, activation, bias=bias)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(ff(x), _hand_gated(ff, x, act))
    assert (ff.gate_proj.bias is not None) == bias
    ungated = ff.down_proj(act(ff.gate_proj(x)))  # the likely mistake: forgetting the up projection
    assert not torch.allclose(ff(x), ungated, atol=1e-3)


def test_swiglu_equals_transformers_llama_mlp():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaMLP

    config = transformers.LlamaConfig(hidden_size=16, num_attention_heads=4, intermediate_size=44, hidden_act="silu",
                                      mlp_bias=False)
    torch.manual_seed(0)
    theirs = LlamaMLP(config)
    ours = FeedForwardSpec(44, "silu", gated=True, bias=False)(16)
    ours.load_state_dict(theirs.state_dict())  # the same names: gate_proj, up_proj, down_proj
    x = torch.randn(3, 7, 16)
    torch.testing.assert_close(ours(x), theirs(x))


def test_feed_forward_spec_builds_each_kind():
    mlp = FeedForwardSpec(32, "gelu")(8, dropout=0.1)
    assert isinstance(mlp, FeedForward) and mlp.activation == "gelu" and mlp.dropout.p == 0.1
    assert mlp.linear1.out_features == 32 and mlp.linear1.bias is not None
    no_bias = FeedForwardSpec(32, bias=False)(8)
    assert no_bias.linear1.bias is None and no_bias.linear2.bias is None
    swiglu = FeedForwardSpec(24, "silu", gated=True, bias=False)(8)
    assert isinstance(swiglu, GatedFeedForward) and swiglu.up_proj.bias is None
    # 8/3 · D hidden units with three matrices: about the parameters of a 4 · D two-matrix MLP
    D = 48
    gated = sum(p.numel() for p in FeedForwardSpec(128, "silu", gated=True, bias=False)(D).parameters())
    plain = sum(p.numel() for p in FeedForwardSpec(4 * D, "gelu", bias=False)(D).parameters())
    assert gated == plain


def test_feed_forward_spec_rejects_bad_options():
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        FeedForwardSpec(16, "swish")
    with pytest.raises(ValueError, match="d_ff"):
        FeedForwardSpec(0)
