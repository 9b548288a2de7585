"""The Llama-style decoder: equal to ``transformers``' LlamaForCausalLM with the same weights
(logits and cached generation), never looks ahead, caches only the key/value heads, is Chapter 8's
GPT when every switch is GPT-2's, and rejects bad configurations and inputs."""
import pytest
import torch

from attnbook.layers import RotaryEmbedding
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.models.llama import Llama, LlamaConfig, from_transformers, to_transformers
from attnbook.tasks.language_modeling import generate, generate_uncached

SMALL = dict(vocab_size=97, max_len=48, d_model=32, num_heads=4, num_kv_heads=2, d_ff=88, num_layers=2)


def _model(seed=0, **changes):
    torch.manual_seed(seed)
    model = Llama(LlamaConfig(**{**SMALL, **changes})).eval()
    with torch.no_grad():  # norms start at 1: move them so a mix-up of norm weights would show
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("changes", [{}, {"tie_embeddings": True}, {"num_kv_heads": 1}, {"num_kv_heads": 4},
                                     {"rope_base": 500.0, "norm_eps": 1e-5}])
def test_logits_equal_transformers_llama(changes):
    pytest.importorskip("transformers")
    model = _model(**changes)
    hf = to_transformers(model)
    tokens = torch.randint(97, (3, 21), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens), hf(tokens).logits, atol=1e-5, rtol=1e-5)
    back = from_transformers(hf)
    assert back.config == model.config
    with torch.no_grad():
        assert torch.equal(back(tokens), model(tokens))


def test_cached_generation_equals_transformers_and_recomputation():
    pytest.importorskip("transformers")
    model = _model()
    hf = to_transformers(model)
    hf.generation_config.eos_token_id = None  # generate exactly max_new_tokens, as ours does
    prompt = torch.randint(97, (2, 5), generator=torch.Generator().manual_seed(2))
    ours = generate(model, prompt, 30)
    assert torch.equal(ours, generate_uncached(model, prompt, 30))
    assert torch.equal(ours, hf.generate(prompt, max_new_tokens=30, do_sample=False, pad_token_id=0))


def test_step_logits_equal_the_full_forward_pass():
    model = _model()
    tokens = torch.randint(97, (2, 12))
    with torch.no_grad():
        full = model(tokens)
        logits, state = model.start(tokens[:, :4])
        torch.testing.assert_close(logits, full[:, 3], atol=1e-5, rtol=1e-5)
        for t in range(4, 12):
            logits, state = model.step(tokens[:, t], state)
            torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)
    assert state.caches[0].key.shape == (2, 2, 12, 8)  # (B, Hkv, P, Dh): the 2 key/value heads only


def test_no_position_sees_the_future():
    model = _model()
    tokens = torch.randint(97, (2, 20))
    changed = tokens.clone()
    changed[:, 12] = (tokens[:, 12] + 1) % 97
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert torch.equal(before[:, :12], after[:, :12])
    assert not torch.allclose(before[:, 12:], after[:, 12:])


def test_gpt_switches_give_chapter_8s_gpt():
    config = LlamaConfig(vocab_size=50, max_len=16, d_model=32, num_heads=4, num_kv_heads=4, d_ff=64,
                         num_layers=2, norm="layernorm", norm_eps=1e-5, feed_forward="gelu",
                         positions="learned", bias=True, tie_embeddings=True)
    llama = Llama(config).eval()
    gpt = GPT(GPTConfig(50, max_len=16, d_model=32, num_heads=4, d_ff=64, num_layers=2)).eval()
    assert sorted(llama.state_dict()) == sorted(gpt.state_dict())
    llama.load_state_dict(gpt.state_dict())
    tokens = torch.randint(50, (2, 16))
    with torch.no_grad():
        assert torch.equal(llama(tokens), gpt(tokens))


def test_rotary_model_reads_past_its_training_length_and_stops_at_max_len():
    model = _model()
    with torch.no_grad():
        assert model(torch.zeros(1, 48, dtype=torch.long)).shape == (1, 48, 97)
        with pytest.raises(ValueError, match="exceed max_len"):
            model(torch.zeros(1, 49, dtype=torch.long))


@pytest.mark.parametrize("changes, message", [
    ({"num_kv_heads": 3}, "divisible by num_kv_heads"),
    ({"d_model": 30}, "divisible by num_heads"),
    ({"d_model": 36}, "must be even"),
    ({"norm": "batchnorm"}, "norm"),
    ({"feed_forward": "relu"}, "feed_forward"),
    ({"positions": "alibi"}, "positions"),
    ({"rope_base": 1.0}, "rope_base"),
    ({"vocab_size": 0}, "vocab_size"),
    ({"norm_eps": 0.0}, "eps"),
])
def test_bad_configurations_are_rejected(changes, message):
    with pytest.raises(ValueError, match=message):
        LlamaConfig(**{**SMALL, **changes})


def test_bad_inputs_are_rejected():
    model = _model()
    with pytest.raises(ValueError):
        model(torch.tensor([[1, 97]]))  # an id outside the vocabulary
    with pytest.raises(TypeError):
        model(torch.zeros(1, 3))  # float "ids"
    with pytest.raises(ValueError, match="tokens must have shape"):
        model.step(torch.zeros(3, dtype=torch.long), model.start(torch.zeros(2, 3, dtype=torch.long))[1])
    with pytest.raises(ValueError, match="only a configuration with all of Llama"):
        to_transformers(Llama(LlamaConfig(**SMALL, norm="layernorm")))


@pytest.mark.parametrize("positions", ["sinusoidal", "none"])
def test_position_controls(positions):
    """The ablation's controls: "sinusoidal" adds the fixed table at the token table's scale
    (rms 0.02), "none" adds no position signal and no rotary turning."""
    model = Llama(LlamaConfig(**{**SMALL, "positions": positions}))
    assert not any(isinstance(m, RotaryEmbedding) for m in model.modules())
    ids = torch.zeros(1, 5, dtype=torch.long)
    with torch.no_grad():
        embedded = model.embeddings(ids)[0]  # one token at 5 positions
    if positions == "none":
        assert torch.equal(embedded, embedded[:1].expand(5, -1))
    else:
        table = model.embeddings.positions.table
        assert abs(table.pow(2).mean().sqrt().item() - 0.02) < 2e-3
        torch.testing.assert_close(embedded - embedded[:1], table[:5] - table[:1])


def test_interpolate_positions_turns_position_p_as_p_times_train_len_over_max_len():
    from attnbook.models.llama import interpolate_positions
    model = _model(max_len=16)
    longer = interpolate_positions(model, train_len=16, max_len=64)
    original, scaled = model.blocks[0].self_attn.rotary, longer.blocks[0].self_attn.rotary
    assert scaled.max_len == 64 and scaled.position_scale == 0.25
    torch.testing.assert_close(scaled.cos[::4], original.cos)  # position 4k reads as position k
    torch.testing.assert_close(scaled.sin[::4], original.sin)
    tokens = torch.randint(97, (2, 64))
    assert longer(tokens).shape == (2, 64, 97)
    assert not torch.allclose(longer(tokens[:, :16]), model(tokens[:, :16]))  # positions moved
    same = interpolate_positions(model, train_len=16)  # max_len = the model's: nothing rescaled
    assert torch.equal(same(tokens[:, :16]), model(tokens[:, :16]))
    with pytest.raises(ValueError, match="rotary"):
        interpolate_positions(_model(positions="learned"), train_len=16)
    with pytest.raises(ValueError, match="at least"):
        interpolate_positions(model, train_len=32, max_len=16)


def test_qk_norm_makes_the_scores_independent_of_the_projections_scale():
    torch.manual_seed(0)
    plain = Llama(LlamaConfig(vocab_size=50))
    normed = Llama(LlamaConfig(vocab_size=50, qk_norm=True))
    assert not any("q_norm" in k or "k_norm" in k for k in plain.state_dict())  # unchanged
    added = [k for k in normed.state_dict() if k not in plain.state_dict()]
    assert added == [f"blocks.{i}.self_attn.{n}_norm.weight" for i in range(2) for n in "qk"]
    ids = torch.randint(50, (2, 12))
    with torch.no_grad():
        before, plain_before = normed(ids), plain(ids)
        for model in (normed, plain):
            for block in model.blocks:
                block.self_attn.q_proj.weight.mul_(30)
                block.self_attn.k_proj.weight.mul_(30)
        torch.testing.assert_close(normed(ids), before, atol=1e-4, rtol=1e-4)
        assert not torch.allclose(plain(ids), plain_before, atol=1e-2)  # without it they move
        prompt = ids[:, :5]
        assert torch.equal(generate(normed, prompt, 8), generate_uncached(normed, prompt, 8))
    with pytest.raises(ValueError, match="qk_norm"):
        to_transformers(normed)
