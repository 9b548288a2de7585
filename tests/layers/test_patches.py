"""Patches: patchify's order, the flatten + linear embedding == Conv2d, the class token."""
import pytest
import torch
from torch import nn

from attnbook.layers.patches import PatchEmbedding, PatchTokens, num_patches, patchify, unpatchify


def test_patchify_reads_patches_row_by_row_channel_first():
    x = torch.arange(2 * 2 * 4 * 6, dtype=torch.float32).view(2, 2, 4, 6)  # (B, C, H, W)
    patches = patchify(x, 2)  # grid 2 rows x 3 cols
    assert patches.shape == (2, 6, 8)
    for b in range(2):
        for row in range(2):
            for col in range(3):
                expected = x[b, :, 2 * row:2 * row + 2, 2 * col:2 * col + 2].flatten()
                torch.testing.assert_close(patches[b, row * 3 + col], expected)


def test_patchify_matches_unfold_and_unpatchify_inverts_it():
    x = torch.randn(3, 3, 8, 8)
    unfolded = nn.functional.unfold(x, kernel_size=4, stride=4).transpose(1, 2)  # (B, N, C*P*P)
    torch.testing.assert_close(patchify(x, 4), unfolded)
    torch.testing.assert_close(unpatchify(patchify(x, 4), 4, 3, 8), x)


def test_a_transposed_patchify_fails_the_order_test():
    """The test above can fail: reading columns first gives different patches."""
    x = torch.randn(1, 1, 4, 4)
    wrong = x.reshape(1, 1, 2, 2, 2, 2).permute(0, 4, 2, 1, 3, 5).reshape(1, 4, 4)  # cols before rows
    assert not torch.allclose(wrong, patchify(x, 2))


@pytest.mark.parametrize("channels,patch,size", [(1, 2, 8), (3, 4, 8), (2, 1, 3)])
def test_flatten_plus_linear_equals_conv2d_with_kernel_equal_stride(channels, patch, size):
    torch.manual_seed(0)
    embed = PatchEmbedding(channels, patch, d_model=16)
    conv = embed.to_conv2d()
    x = torch.randn(2, channels, size, size)
    via_conv = conv(x).flatten(2).transpose(1, 2)  # (B, D, rows, cols) -> (B, N, D)
    torch.testing.assert_close(embed(x), via_conv)


def test_conv2d_with_a_transposed_kernel_differs():
    torch.manual_seed(0)
    embed = PatchEmbedding(1, 2, d_model=4)
    conv = embed.to_conv2d()
    with torch.no_grad():
        conv.weight.copy_(conv.weight.transpose(-1, -2).clone())
    x = torch.randn(1, 1, 4, 4)
    assert not torch.allclose(embed(x), conv(x).flatten(2).transpose(1, 2))


def test_patch_tokens_prepend_the_same_learned_class_token_to_every_image():
    torch.manual_seed(0)
    tokens = PatchTokens(image_size=8, patch_size=2, in_channels=1, d_model=12)
    x = torch.randn(3, 1, 8, 8)
    out = tokens(x)
    assert out.shape == (3, 17, 12) and tokens.num_tokens == 17
    for b in range(3):
        torch.testing.assert_close(out[b, 0], tokens.cls_token[0, 0])
    torch.testing.assert_close(out[:, 1:], tokens.patch_embedding(x))
    out.sum().backward()
    assert tokens.cls_token.grad is not None


def test_num_patches():
    assert num_patches(8, 2) == 16
    assert num_patches(224, 16) == 196
    assert num_patches(8, 8) == 1


@pytest.mark.parametrize("make,images,message", [
    (lambda: PatchEmbedding(1, 3, 4), torch.zeros(1, 1, 8, 8), "not divisible"),
    (lambda: PatchEmbedding(3, 2, 4), torch.zeros(1, 1, 8, 8), "3 channel"),
    (lambda: PatchEmbedding(1, 2, 4), torch.zeros(1, 8, 8), r"\(B, C, H, W\)"),
    (lambda: PatchTokens(8, 2, 1, 4), torch.zeros(1, 1, 6, 6), "8x8 images"),
])
def test_bad_input_says_what_was_expected(make, images, message):
    with pytest.raises(ValueError, match=message):
        make()(images)


def test_bad_sizes_are_rejected_at_construction():
    with pytest.raises(ValueError, match="not divisible"):
        PatchTokens(8, 3, 1, 4)
    with pytest.raises(ValueError, match=">= 1"):
        PatchEmbedding(0, 2, 4)
