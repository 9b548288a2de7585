"""The Transformer: shapes, equality with nn.Transformer, KV-cache decoding, no causal leak."""
import pytest
import torch
from torch import nn

from attnbook.decoding import greedy_decode, greedy_decode_uncached
from attnbook.masks import causal_mask, padding_mask
from attnbook.transformer import (
    DecoderLayer, EncoderLayer, FeedForward, Transformer, TransformerConfig, to_torch_transformer,
)

SRC_V, TGT_V = 11, 13


def make_model(norm_first=False, dropout=0.0, tie_output=True, seed=0):
    torch.manual_seed(seed)
    config = TransformerConfig(SRC_V, TGT_V, d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2,
                               num_decoder_layers=2, dropout=dropout, norm_first=norm_first, tie_output=tie_output)
    model = Transformer(config)
    with torch.no_grad():  # move LayerNorms away from (1, 0) so that a wrong copy shows
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.normal_(1.0, 0.2)
                module.bias.normal_(0.0, 0.2)
    return model.eval()


def make_batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 4, 2, 5])
    src = torch.randint(4, SRC_V, (4, 7), generator=g)
    src[~padding_mask(lengths, 7)] = 0
    tgt = torch.randint(4, TGT_V, (4, 6), generator=g)
    return src, lengths, tgt


def test_forward_shape_and_bad_input():
    model = make_model()
    src, lengths, tgt = make_batch()
    assert model(src, lengths, tgt).shape == (4, 6, TGT_V)
    with pytest.raises(ValueError, match="src_lengths"):
        model(src, lengths[:2], tgt)
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, lengths, tgt[:2])


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(5, 5, d_model=30, num_heads=4)


@pytest.mark.parametrize("norm_first", [False, True])
def test_equal_to_torch_transformer(norm_first):
    model = make_model(norm_first)
    src, lengths, tgt = make_batch()
    ref = to_torch_transformer(model)
    valid = padding_mask(lengths, src.shape[1])
    with torch.no_grad():
        ours = model(src, lengths, tgt)
        out = ref(model.src_embed(src), model.tgt_embed(tgt), tgt_mask=~causal_mask(tgt.shape[1]),
                  src_key_padding_mask=~valid, memory_key_padding_mask=~valid, tgt_is_causal=True)
        theirs = model.output(out)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_torch_transformer_differs_with_a_wrong_copy():
    """The equality test can fail: swapping W_Q and W_K in one layer breaks it."""
    model = make_model()
    src, lengths, tgt = make_batch()
    ref = to_torch_transformer(model)
    D = model.config.d_model
    with torch.no_grad():
        w = ref.encoder.layers[0].self_attn.in_proj_weight
        w.copy_(torch.cat([w[D:2 * D], w[:D], w[2 * D:]]))
        valid = padding_mask(lengths, src.shape[1])
        out = ref(model.src_embed(src), model.tgt_embed(tgt), tgt_mask=~causal_mask(tgt.shape[1]),
                  src_key_padding_mask=~valid, memory_key_padding_mask=~valid)
        assert not torch.allclose(model(src, lengths, tgt), model.output(out), atol=1e-4)


def test_padding_does_not_change_the_output():
    model = make_model()
    src, lengths, tgt = make_batch()
    longer = torch.cat([src, torch.zeros(4, 3, dtype=torch.long)], dim=1)  # three more pad columns
    with torch.no_grad():
        torch.testing.assert_close(model(src, lengths, tgt), model(longer, lengths, tgt))
        # and the padded source tokens' ids do not matter either
        noisy = src.clone()
        noisy[~padding_mask(lengths, 7)] = 5
        torch.testing.assert_close(model(src, lengths, tgt), model(noisy, lengths, tgt))


def test_no_causal_leak():
    """Changing target token t changes no logits at positions before t."""
    model = make_model()
    src, lengths, tgt = make_batch()
    changed = tgt.clone()
    changed[:, 3] = (tgt[:, 3] + 1 - 4) % (TGT_V - 4) + 4
    with torch.no_grad():
        a, b = model(src, lengths, tgt), model(src, lengths, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_decoder_layer_leaks_without_a_causal_mask():
    """The leak test is able to fail: without the mask, the future changes the past."""
    torch.manual_seed(0)
    layer = DecoderLayer(16, 4, 32).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 3, 16)
    y = x.clone()
    y[:, 4] += 1.0
    with torch.no_grad():
        masked = layer(x, memory, causal_mask(5))[:, :4], layer(y, memory, causal_mask(5))[:, :4]
        unmasked = layer(x, memory)[:, :4], layer(y, memory)[:, :4]
    torch.testing.assert_close(*masked)
    assert not torch.allclose(*unmasked)


@pytest.mark.parametrize("norm_first", [False, True])
def test_step_with_cache_equals_teacher_forcing(norm_first):
    model = make_model(norm_first)
    src, lengths, tgt = make_batch()
    with torch.no_grad():
        full = model(src, lengths, tgt)  # (B, T, V)
        state = model.start(src, lengths)
        for t in range(tgt.shape[1]):
            logits, state = model.step(tgt[:, t], state)
            torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)
    assert state.position == tgt.shape[1]


def test_cached_greedy_equals_recomputation():
    model = make_model(tie_output=False, seed=3)
    src, lengths, _ = make_batch()
    cached = greedy_decode(model, src, lengths, 1, 2, max_len=12)
    assert cached == greedy_decode_uncached(model, src, lengths, 1, 2, max_len=12)
    assert any(len(row) > 0 for row in cached)


def test_dropout_is_on_in_training_and_off_in_eval():
    model = make_model(dropout=0.3)
    src, lengths, tgt = make_batch()
    model.train()
    assert not torch.allclose(model(src, lengths, tgt), model(src, lengths, tgt))
    model.eval()
    torch.testing.assert_close(model(src, lengths, tgt), model(src, lengths, tgt))


def test_tied_output_shares_the_embedding():
    model = make_model(tie_output=True)
    assert model.output.weight.data_ptr() == model.tgt_embed.tokens.weight.data_ptr()
    untied = make_model(tie_output=False)
    assert untied.output.weight.data_ptr() != untied.tgt_embed.tokens.weight.data_ptr()


def test_encoder_layer_post_norm_formula():
    """Post-norm: the output is LayerNorm(z + FFN(z)) with z = LayerNorm(x + MHA(x))."""
    torch.manual_seed(0)
    layer = EncoderLayer(16, 4, 32).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        z = layer.norm1(x + layer.self_attn(x, x, x))
        expected = layer.norm2(z + layer.feed_forward(z))
        torch.testing.assert_close(layer(x), expected)
        pre = EncoderLayer(16, 4, 32, norm_first=True).eval()
        pre.load_state_dict(layer.state_dict())
        assert not torch.allclose(pre(x), expected)


def test_feed_forward_is_position_wise():
    torch.manual_seed(0)
    ff = FeedForward(8, 16)
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(ff(x)[:, 2], ff(x[:, 2:3])[:, 0])


def test_attention_weights_shapes():
    model = make_model()
    src, lengths, tgt = make_batch()
    w = model.attention_weights(src, lengths, tgt)
    assert len(w.encoder) == 2 and w.encoder[0].shape == (4, 4, 7, 7)
    assert w.decoder[0].self_attn.shape == (4, 4, 6, 6)
    assert w.decoder[0].cross_attn.shape == (4, 4, 6, 7)
    assert torch.all(w.decoder[0].cross_attn[1, :, :, 4:] == 0)  # padding gets no weight
