"""T5 from the library's blocks equals transformers' T5ForConditionalGeneration with the same
weights (logits and cached greedy tokens); cache = recompute; no causal leak; bad inputs."""
import pytest
import torch

from attnbook.decoding import greedy_decode, greedy_decode_uncached
from attnbook.models.t5 import T5, T5Config, reference_config_kwargs, t5_state_dict

transformers = pytest.importorskip("transformers")
transformers.utils.logging.set_verbosity_error()

V = 60


def make(gated=True, seed=0, **sizes) -> T5:
    torch.manual_seed(seed)
    config = T5Config(V, d_model=32, num_heads=4, d_ff=48, num_buckets=8, max_distance=16, gated=gated, **sizes)
    model = T5(config).eval()
    with torch.no_grad():  # a random model would emit <pad> at once; make it say something
        model.shared.weight[:2] = 0.0
    return model


def reference(model: T5):
    ref = transformers.T5ForConditionalGeneration(transformers.T5Config(**reference_config_kwargs(model.config)))
    ref.load_state_dict(t5_state_dict(model), strict=True)
    return ref.eval()


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, V, (3, 20), generator=g)
    lengths = torch.tensor([20, 13, 6])
    tgt = torch.randint(3, V, (3, 25), generator=g)
    tgt[:, 0] = 0  # T5's decoder start token
    return src, lengths, tgt


@pytest.mark.parametrize("gated", [True, False])
def test_logits_equal_transformers(gated, batch):
    model = make(gated)
    src, lengths, tgt = batch
    mask = (torch.arange(src.shape[1])[None] < lengths[:, None]).long()
    with torch.no_grad():
        ours = model(src, lengths, tgt)
        theirs = reference(model)(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_a_wrong_copy_is_detected(batch):
    """The equality can fail: swapping the encoder's two bias-table columns breaks it."""
    model = make()
    ref = reference(model)
    with torch.no_grad():
        w = ref.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
        w.copy_(w[:, [1, 0, 2, 3]])
        src, lengths, tgt = batch
        diff = (model(src, lengths, tgt) - ref(input_ids=src, decoder_input_ids=tgt,
                                              attention_mask=torch.ones_like(src)).logits)[:1]
    assert diff.abs().max() > 1e-3


def test_cached_greedy_equals_transformers_generate(batch):
    model = make()
    with torch.no_grad():  # smaller embeddings: the blocks, not the input token, decide the output
        model.shared.weight.mul_(0.3)
    src, lengths, _ = batch
    mask = (torch.arange(src.shape[1])[None] < lengths[:, None]).long()
    ours = greedy_decode(model, src, lengths, 0, 1, 15)
    theirs = reference(model).generate(input_ids=src, attention_mask=mask, max_new_tokens=15, do_sample=False,
                                       num_beams=1)[:, 1:].tolist()
    assert ours == [row[: row.index(1)] if 1 in row else row for row in theirs]
    assert len({t for row in ours for t in row}) > 3  # not a constant output


def test_cached_greedy_equals_recomputation(batch):
    model = make()
    with torch.no_grad():
        model.shared.weight.mul_(0.3)
    src, lengths, _ = batch
    assert greedy_decode(model, src, lengths, 0, 1, 20) == greedy_decode_uncached(model, src, lengths, 0, 1, 20)


def test_step_logits_equal_teacher_forcing(batch):
    model = make()
    src, lengths, tgt = batch
    with torch.no_grad():
        whole = model(src, lengths, tgt)  # (B, T, V)
        state = model.start(src, lengths)
        for t in range(tgt.shape[1]):
            logits, state = model.step(tgt[:, t], state)
            torch.testing.assert_close(logits, whole[:, t], rtol=1e-5, atol=1e-5)


def test_no_causal_leak_in_the_decoder(batch):
    """Changing target token t+1.. leaves the logits of positions <= t unchanged."""
    model = make()
    src, lengths, tgt = batch
    with torch.no_grad():
        before = model(src, lengths, tgt)
        for t in (0, 5, 17):
            changed = tgt.clone()
            changed[:, t + 1 :] = torch.randint(3, V, changed[:, t + 1 :].shape)
            after = model(src, lengths, changed)
            torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=0)
            assert (after[:, t + 1 :] - before[:, t + 1 :]).abs().max() > 1e-4


def test_padding_does_not_change_real_positions(batch):
    model = make()
    src, lengths, tgt = batch
    with torch.no_grad():
        short = model(src[2:, :6], lengths[2:], tgt[2:])
        padded = model(src[2:], lengths[2:], tgt[2:])  # src[2] has 6 real tokens of 20
    torch.testing.assert_close(padded, short, rtol=1e-5, atol=1e-5)


def test_parts_are_shared_and_t5_shaped():
    model = make()
    assert model.src_embeddings.tokens is model.tgt_embeddings.tokens is model.shared
    assert model.readout.linear.weight is model.shared.weight
    block = model.encoder_blocks[0]
    assert block.norm_first and block.self_attn.scale == 1.0 and block.self_attn.q_proj.bias is None
    assert type(block.norm1).__name__ == "RMSNorm"
    assert type(block.feed_forward).__name__ == "GatedFeedForward"
    assert model.encoder_position_bias.bidirectional and not model.decoder_position_bias.bidirectional


@pytest.mark.parametrize("kwargs, match", [
    (dict(d_model=30, num_heads=4), "divisible"),
    (dict(num_buckets=7), "even"),
    (dict(max_distance=4), "max_distance"),
    (dict(pad_id=99), "pad_id"),
    (dict(num_decoder_layers=0), "num_decoder_layers"),
    (dict(dropout=1.5), "dropout"),
])
def test_config_rejects_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T5Config(V, **kwargs)


def test_bad_token_ids_are_rejected(batch):
    model = make()
    src, lengths, tgt = batch
    with pytest.raises(ValueError):
        model(src + V, lengths, tgt)
    with pytest.raises(TypeError, match="integer"):
        model(src.float(), lengths, tgt)
    with pytest.raises(ValueError, match="src_lengths"):
        model(src, lengths[:2], tgt)
    state = model.start(src, lengths)
    with pytest.raises(ValueError, match="tokens must have shape"):
        model.step(tgt[:2, 0], state)
