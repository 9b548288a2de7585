"""Building blocks shared by every model in the book. Layers import nothing above them.

validation -> masks, norms, rotary -> attention, scores -> feedforward, positional,
relative_position, patches, embedding -> blocks; torch_bridge copies them into PyTorch's own
layers; tiled computes attention tile by tile with an online softmax (FlashAttention's idea)
and measures the memory it holds.
"""
from attnbook.layers.attention import AttentionSpec, KVCache, MultiHeadAttention, scaled_dot_product_attention
from attnbook.layers.blocks import (
    AttentionOnlyBlock, BlockOutput, CausalBlock, DecoderAttentionMaps, DecoderBlock, EncoderBlock, ResidualBlock, StackOutput,
    run_blocks,
)
from attnbook.layers.embedding import Embeddings
from attnbook.layers.feedforward import ACTIVATIONS, FeedForward, FeedForwardSpec, GatedFeedForward
from attnbook.layers.masks import causal_mask, key_mask, masked_softmax, token_mask, validate_bias, validate_mask
from attnbook.layers.norms import Norm, RMSNorm, rms_norm
from attnbook.layers.patches import PatchEmbedding, PatchTokens, num_patches, patchify, unpatchify
from attnbook.layers.relative_position import RelativePositionBias, relative_position_bucket
from attnbook.layers.positional import (
    LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_shift_matrix,
)
from attnbook.layers.rotary import RotaryEmbedding, rotate_half
from attnbook.layers.tiled import online_softmax_merge, peak_intermediate_bytes, tiled_attention
from attnbook.layers.torch_bridge import (
    copy_block_to_torch_layer, copy_to_torch_multihead, to_torch_encoder_layer, to_torch_multihead,
)

__all__ = [
    "ACTIVATIONS", "AttentionOnlyBlock", "AttentionSpec", "BlockOutput", "CausalBlock", "DecoderAttentionMaps", "DecoderBlock",
    "Embeddings", "EncoderBlock", "FeedForward", "FeedForwardSpec", "GatedFeedForward", "KVCache",
    "LearnedPositionalEmbedding", "MultiHeadAttention", "Norm", "PatchEmbedding", "PatchTokens", "RMSNorm",
    "RelativePositionBias", "ResidualBlock", "RotaryEmbedding", "SinusoidalPositionalEncoding", "StackOutput", "causal_mask",
    "copy_block_to_torch_layer", "copy_to_torch_multihead", "key_mask", "masked_softmax", "num_patches",
    "online_softmax_merge", "patchify", "peak_intermediate_bytes", "relative_position_bucket",
    "rms_norm", "rotate_half", "run_blocks", "scaled_dot_product_attention", "sinusoidal_encoding",
    "sinusoidal_shift_matrix", "tiled_attention", "to_torch_encoder_layer", "to_torch_multihead",
    "token_mask", "unpatchify",
    "validate_bias", "validate_mask",
]
