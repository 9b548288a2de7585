"""The decoder-only model: no causal leak, cached decoding == recomputation, immutable state,
equality with a hand-assembled reference from PyTorch layers."""
import pytest
import torch
from torch import nn

from attnbook.layers import to_torch_encoder_layer
from attnbook.models.gpt import GPT, GPTConfig
from conftest import perturb_layer_norms

V = 17


def make_gpt(seed=0, **options):
    torch.manual_seed(seed)
    config = GPTConfig(V, max_len=16, d_model=32, num_heads=4, d_ff=64, num_layers=2, **options)
    return perturb_layer_norms(GPT(config)).eval()


def test_shapes_and_weights_only_when_asked():
    model = make_gpt()
    tokens = torch.randint(V, (3, 9))
    assert model(tokens).shape == (3, 9, V)
    logits, maps = model(tokens, need_weights=True)
    assert len(maps) == 2 and maps[0].shape == (3, 4, 9, 9)
    assert torch.all(maps[1].triu(diagonal=1) == 0)  # nothing from the future
    torch.testing.assert_close(logits, model(tokens), atol=1e-5, rtol=1e-5)


def test_no_causal_leak():
    model = make_gpt()
    tokens = torch.randint(V, (2, 10))
    changed = tokens.clone()
    changed[:, 6] = (tokens[:, 6] + 1) % V
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


def test_cached_decoding_equals_recomputation_and_state_is_immutable():
    model = make_gpt(seed=1)
    tokens = torch.randint(V, (2, 12))
    with torch.no_grad():
        full = model(tokens)  # (B, T, V)
        logits, state = model.start(tokens[:, :5])
        torch.testing.assert_close(logits, full[:, 4], atol=1e-5, rtol=1e-5)
        for t in range(5, 12):
            logits, new_state = model.step(tokens[:, t], state)
            again, _ = model.step(tokens[:, t], state)  # the same state, stepped twice
            torch.testing.assert_close(logits, again)
            torch.testing.assert_close(logits, full[:, t], atol=1e-5, rtol=1e-5)
            assert new_state.position == state.position + 1
            state = new_state


def test_equal_to_a_reference_built_from_pytorch_layers():
    """Embedding + nn.TransformerEncoderLayer x L (pre-norm, GELU, causal) + LayerNorm + tied projection."""
    model = make_gpt(seed=2)
    c = model.config
    layers = [to_torch_encoder_layer(block) for block in model.blocks]
    with torch.no_grad():
        tokens = torch.randint(V, (2, 11))
        x = model.embeddings.tokens(tokens) + model.embeddings.positions.embedding.weight[:11]
        mask = nn.Transformer.generate_square_subsequent_mask(11)
        for layer in layers:
            x = layer(x, src_mask=mask, is_causal=True)
        expected = model.final_norm(x) @ model.embeddings.tokens.weight.T
        torch.testing.assert_close(model(tokens), expected, atol=1e-5, rtol=1e-5)


def test_errors_are_clear():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(V, d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="num_layers"):
        GPTConfig(V, num_layers=0)
    model = make_gpt()
    with pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        model(torch.zeros(17, dtype=torch.long))
    _, state = model.start(torch.zeros(2, 15, dtype=torch.long))
    _, state = model.step(torch.zeros(2, dtype=torch.long), state)
    with pytest.raises(ValueError, match="exceed max_len"):
        model.step(torch.zeros(2, dtype=torch.long), state)
    with pytest.raises(ValueError, match="shape"):
        model.step(torch.zeros(3, dtype=torch.long), model.start(torch.zeros(2, 3, dtype=torch.long))[1])


def test_position_and_token_tables_start_equally_small():
    model = GPT(GPTConfig(V, max_len=64, d_model=64, num_heads=4, d_ff=64, num_layers=1))
    tokens_std = model.embeddings.tokens.weight.std().item()
    positions_std = model.embeddings.positions.embedding.weight.std().item()
    assert 0.015 < tokens_std < 0.025 and 0.015 < positions_std < 0.025
