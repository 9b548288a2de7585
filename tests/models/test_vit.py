"""The ViT equals a PyTorch-built reference with the same weights; the CNN; their errors."""
import pytest
import torch

from attnbook.attention_maps import attention_rollout
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.models.vit import ViT, ViTConfig, to_torch_reference

SMALL = ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=10, d_model=32, num_heads=4,
                  num_layers=2, d_ff=64)


def _trained_looking(model):
    """Random weights everywhere (LayerNorms and biases too), so that no copy can pass by luck."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


@pytest.mark.parametrize("config", [
    SMALL,
    ViTConfig(image_size=8, patch_size=4, in_channels=3, num_classes=5, d_model=24, num_heads=2, num_layers=3, d_ff=48),
    ViTConfig(image_size=6, patch_size=1, in_channels=2, num_classes=3, d_model=16, num_heads=1, num_layers=1, d_ff=16,
              layer_norm_eps=1e-12),
])
def test_vit_equals_the_pytorch_reference_with_the_same_weights(config):
    model = _trained_looking(ViT(config)).eval()
    reference = to_torch_reference(model).eval()
    images = torch.randn(5, config.in_channels, config.image_size, config.image_size)
    with torch.no_grad():
        torch.testing.assert_close(model(images), reference(images), atol=1e-5, rtol=1e-5)


def test_a_wrongly_wired_reference_differs():
    """The equality test can fail: swap two blocks' weights in the copy and the logits change."""
    model = _trained_looking(ViT(SMALL)).eval()
    reference = to_torch_reference(model).eval()
    layers = reference.encoder.layers
    state0, state1 = layers[0].state_dict(), layers[1].state_dict()
    layers[0].load_state_dict(state1)
    layers[1].load_state_dict(state0)
    images = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        assert not torch.allclose(model(images), reference(images), atol=1e-3)


def test_need_weights_returns_one_map_per_layer_and_the_same_logits():
    model = _trained_looking(ViT(SMALL)).eval()
    images = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        logits = model(images)
        logits_too, maps = model(images, need_weights=True)
    torch.testing.assert_close(logits, logits_too)
    assert len(maps) == SMALL.num_layers
    for m in maps:
        assert m.shape == (4, SMALL.num_heads, 17, 17)
        torch.testing.assert_close(m.sum(-1), torch.ones(4, SMALL.num_heads, 17))
    assert attention_rollout(maps).shape == (4, 17, 17)


def test_the_class_token_reads_the_image_and_positions_matter():
    torch.manual_seed(0)
    model = _trained_looking(ViT(SMALL)).eval()
    images = torch.randn(2, 1, 8, 8)
    with torch.no_grad():
        logits = model(images)
        assert not torch.allclose(logits[0], logits[1])  # different images, different logits
        model.embeddings.positions.embedding.weight.zero_()
        assert not torch.allclose(model(images), logits)  # positions were used
    assert model.position_embeddings.shape == (17, SMALL.d_model)


def test_parameter_count_of_the_chapter_model():
    model = ViT(ViTConfig())
    D, N, F = 64, 16, 128
    per_block = 4 * (D * D + D) + (D * F + F) + (F * D + D) + 2 * 2 * D
    expected = (4 * D + D) + D + (1 + N) * D + 4 * per_block + 2 * D + (D * 10 + 10)
    assert sum(p.numel() for p in model.parameters()) == expected


@pytest.mark.parametrize("kwargs,message", [
    (dict(patch_size=3), "not divisible by patch_size"),
    (dict(d_model=30, num_heads=4), "must be divisible by num_heads"),
    (dict(num_layers=0), "num_layers.: 0"),
    (dict(dropout=1.0), "dropout"),
])
def test_bad_configs_say_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ViTConfig(**kwargs)


def test_vit_rejects_images_of_the_wrong_size_or_channels():
    model = ViT(SMALL)
    with pytest.raises(ValueError, match="8x8 images"):
        model(torch.zeros(1, 1, 4, 4))
    with pytest.raises(ValueError, match="1 channel"):
        model(torch.zeros(1, 3, 8, 8))


def test_cnn_logits_and_errors():
    model = SmallCNN(CNNConfig())
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 10)
    with pytest.raises(ValueError, match=r"\(B, 1, 8, 8\)"):
        model(torch.randn(3, 1, 6, 6))
    with pytest.raises(ValueError, match="divisible by 4"):
        CNNConfig(image_size=6)


def test_cnn_is_translation_equivariant_before_pooling():
    """The first convolution commutes with a shift (away from the border): the prior the ViT lacks."""
    torch.manual_seed(0)
    conv = SmallCNN(CNNConfig()).features[0]
    x = torch.zeros(1, 1, 8, 8)
    x[0, 0, 2:4, 2:4] = torch.randn(2, 2)
    shifted = torch.roll(x, shifts=(1, 2), dims=(2, 3))
    torch.testing.assert_close(conv(shifted), torch.roll(conv(x), shifts=(1, 2), dims=(2, 3)))


def test_the_mlp_head_option_is_linear_tanh_linear_and_matches_the_reference():
    """``head_hidden`` > 0: the paper's pre-training head, one tanh hidden layer; 0 stays linear."""
    config = ViTConfig(**{**SMALL.__dict__, "head_hidden": 7})
    model = _trained_looking(ViT(config)).eval()
    images = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        first, _, second = model.readout
        state = run_blocks_state(model, images)  # (B, D): the class token after the final norm
        by_hand = second(torch.tanh(first(state)))
        torch.testing.assert_close(model(images), by_hand)
        torch.testing.assert_close(model(images), to_torch_reference(model).eval()(images), atol=1e-5, rtol=1e-5)
    assert first.out_features == 7 and second.in_features == 7
    assert isinstance(ViT(SMALL).readout, torch.nn.Linear)
    linear = sum(p.numel() for p in ViT(SMALL).parameters())
    assert sum(p.numel() for p in model.parameters()) - linear == (32 * 7 + 7) + (7 * 10 + 10) - (32 * 10 + 10)
    with pytest.raises(ValueError, match="head_hidden"):
        ViTConfig(head_hidden=-1)


def run_blocks_state(model, images):
    from attnbook.layers import run_blocks
    x = run_blocks(model.blocks, model.embeddings(images)).hidden
    return model.final_norm(x[:, 0])
