"""The Transformer: shapes, equality with nn.Transformer, KV-cache decoding, no causal leak."""
import pytest
import torch
from torch import nn

from attnbook.decoding import greedy_decode, greedy_decode_uncached
from attnbook.layers.masks import causal_mask, token_mask
from attnbook.layers import KVCache
from attnbook.models.transformer import TransformerConfig, to_torch_transformer

from conftest import TGT_V


def test_forward_shape_and_bad_input(make_transformer, seq2seq_batch):
    model = make_transformer()
    src, lengths, tgt = seq2seq_batch
    assert model(src, lengths, tgt).shape == (4, 6, TGT_V)
    with pytest.raises(ValueError, match="src_lengths"):
        model(src, lengths[:2], tgt)
    with pytest.raises(ValueError, match="tgt_in"):
        model(src, lengths, tgt[:2])


def test_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="divisible"):
        TransformerConfig(5, 5, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_decoder_layers"):
        TransformerConfig(5, 5, num_decoder_layers=0)
    with pytest.raises(ValueError, match="d_ff"):
        TransformerConfig(5, 5, d_ff=-1)
    with pytest.raises(ValueError, match="activation"):
        TransformerConfig(5, 5, activation="swish")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_equal_to_torch_transformer(norm_first, activation, make_transformer, seq2seq_batch):
    model = make_transformer(norm_first, activation=activation)
    src, lengths, tgt = seq2seq_batch
    ref = to_torch_transformer(model)
    valid = token_mask(lengths, src.shape[1])
    with torch.no_grad():
        ours = model(src, lengths, tgt)
        out = ref(model.src_embeddings(src), model.tgt_embeddings(tgt), tgt_mask=~causal_mask(tgt.shape[1]),
                  src_key_padding_mask=~valid, memory_key_padding_mask=~valid, tgt_is_causal=True)
        theirs = model.readout(out)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_torch_transformer_differs_with_a_wrong_copy(make_transformer, seq2seq_batch):
    """The equality test can fail: swapping W_Q and W_K in one layer breaks it."""
    model = make_transformer()
    src, lengths, tgt = seq2seq_batch
    ref = to_torch_transformer(model)
    D = model.config.d_model
    with torch.no_grad():
        w = ref.encoder.layers[0].self_attn.in_proj_weight
        w.copy_(torch.cat([w[D:2 * D], w[:D], w[2 * D:]]))
        valid = token_mask(lengths, src.shape[1])
        out = ref(model.src_embeddings(src), model.tgt_embeddings(tgt), tgt_mask=~causal_mask(tgt.shape[1]),
                  src_key_padding_mask=~valid, memory_key_padding_mask=~valid)
        assert not torch.allclose(model(src, lengths, tgt), model.readout(out), atol=1e-4)


def test_padding_does_not_change_the_output(make_transformer, seq2seq_batch):
    model = make_transformer()
    src, lengths, tgt = seq2seq_batch
    longer = torch.cat([src, torch.zeros(4, 3, dtype=torch.long)], dim=1)  # three more pad columns
    with torch.no_grad():
        torch.testing.assert_close(model(src, lengths, tgt), model(longer, lengths, tgt))
        # and the padded source tokens' ids do not matter either
        noisy = src.clone()
        noisy[~token_mask(lengths, 7)] = 5
        torch.testing.assert_close(model(src, lengths, tgt), model(noisy, lengths, tgt))


def test_no_causal_leak(make_transformer, seq2seq_batch):
    """Changing target token t changes no logits at positions before t."""
    model = make_transformer()
    src, lengths, tgt = seq2seq_batch
    changed = tgt.clone()
    changed[:, 3] = (tgt[:, 3] + 1 - 4) % (TGT_V - 4) + 4
    with torch.no_grad():
        a, b = model(src, lengths, tgt), model(src, lengths, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("norm_first", [False, True])
def test_step_with_cache_equals_teacher_forcing(norm_first, make_transformer, seq2seq_batch):
    model = make_transformer(norm_first)
    src, lengths, tgt = seq2seq_batch
    with torch.no_grad():
        full = model(src, lengths, tgt)  # (B, T, V)
        state = model.start(src, lengths)
        for t in range(tgt.shape[1]):
            logits, state = model.step(tgt[:, t], state)
            torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)
    assert state.position == tgt.shape[1]


def test_cached_greedy_equals_recomputation(make_transformer, seq2seq_batch):
    model = make_transformer(tie_output=False, seed=3)
    src, lengths, _ = seq2seq_batch
    cached = greedy_decode(model, src, lengths, 1, 2, max_len=12)
    assert cached == greedy_decode_uncached(model, src, lengths, 1, 2, max_len=12)
    assert any(len(row) > 0 for row in cached)


def test_dropout_is_on_in_training_and_off_in_eval(make_transformer, seq2seq_batch):
    model = make_transformer(dropout=0.3)
    src, lengths, tgt = seq2seq_batch
    model.train()
    assert not torch.allclose(model(src, lengths, tgt), model(src, lengths, tgt))
    model.eval()
    torch.testing.assert_close(model(src, lengths, tgt), model(src, lengths, tgt))


def test_tied_output_shares_the_embedding(make_transformer):
    model = make_transformer(tie_output=True)
    assert model.readout.weight.data_ptr() == model.tgt_embeddings.tokens.weight.data_ptr()
    untied = make_transformer(tie_output=False)
    assert untied.readout.weight.data_ptr() != untied.tgt_embeddings.tokens.weight.data_ptr()


def test_attention_maps_shapes(make_transformer, seq2seq_batch):
    model = make_transformer()
    src, lengths, tgt = seq2seq_batch
    w = model.attention_maps(src, lengths, tgt)
    assert len(w.encoder) == 2 and w.encoder[0].shape == (4, 4, 7, 7)
    assert w.decoder[0].self_attn.shape == (4, 4, 6, 6)
    assert w.decoder[0].cross_attn.shape == (4, 4, 6, 7)
    assert torch.all(w.decoder[0].cross_attn[1, :, :, 4:] == 0)  # padding gets no weight


@pytest.mark.parametrize("norm_first", [False, True])
def test_step_does_not_change_the_state_it_is_given(norm_first, make_transformer, seq2seq_batch):
    """Honest decoding state: stepping twice from one state gives the same logits."""
    model = make_transformer(norm_first)
    src, lengths, tgt = seq2seq_batch
    with torch.no_grad():
        state = model.start(src, lengths)
        _, state = model.step(tgt[:, 0], state)
        first, after_first = model.step(tgt[:, 1], state)
        again, _ = model.step(tgt[:, 1], state)
        other, _ = model.step(tgt[:, 2], state)
    torch.testing.assert_close(first, again)
    assert state.position == 1 and after_first.position == 2
    assert len(state.self_caches[0]) == 1 and len(after_first.self_caches[0]) == 2
    assert not torch.allclose(first, other)


def test_a_stale_state_is_detected_by_the_cache_check(make_transformer, seq2seq_batch):
    """The cache test can fail: a loop that never passes the new state on (always stepping
    from the start state) gives logits that differ from teacher forcing after the first step."""
    model = make_transformer()
    src, lengths, tgt = seq2seq_batch
    with torch.no_grad():
        full = model(src, lengths, tgt)  # (B, T, V)
        start = model.start(src, lengths)
        stale = torch.stack([model.step(tgt[:, t], start)[0] for t in range(tgt.shape[1])], dim=1)
    torch.testing.assert_close(stale[:, 0], full[:, 0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(stale[:, 1:], full[:, 1:], atol=1e-3)


def test_kv_cache_is_immutable_and_checks_shapes():
    cache = KVCache(torch.zeros(2, 4, 3, 8), torch.zeros(2, 4, 3, 8))
    longer = cache.extend(torch.ones(2, 4, 1, 8), torch.ones(2, 4, 1, 8))
    assert len(cache) == 3 and len(longer) == 4
    with pytest.raises(Exception):
        cache.key = torch.zeros(1)  # frozen
    with pytest.raises(ValueError, match="continue"):
        cache.extend(torch.ones(3, 4, 1, 8), torch.ones(3, 4, 1, 8))
    with pytest.raises(ValueError, match="same shape"):
        KVCache(torch.zeros(2, 4, 3, 8), torch.zeros(2, 4, 2, 8))
    assert torch.equal(longer.select(torch.tensor([1, 1, 0])).key[:, :, -1], torch.ones(3, 4, 8))
