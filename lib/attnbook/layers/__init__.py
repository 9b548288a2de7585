"""Building blocks shared by every model in the book. Layers import nothing above them.

masks -> attention, scores -> feedforward, positional, patches, embedding -> blocks.
"""
from attnbook.layers.attention import (
    KVCache, MultiHeadAttention, copy_to_torch_multihead, scaled_dot_product_attention, to_torch_multihead,
)
from attnbook.layers.blocks import (
    CausalBlock, DecoderAttentionMaps, DecoderBlock, EncoderBlock, ResidualBlock, to_torch_encoder_layer,
)
from attnbook.layers.embedding import Embeddings
from attnbook.layers.feedforward import ACTIVATIONS, FeedForward
from attnbook.layers.masks import causal_mask, key_mask, masked_softmax, token_mask, validate_mask
from attnbook.layers.patches import PatchEmbedding, PatchTokens, num_patches, patchify, unpatchify
from attnbook.layers.positional import (
    LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_encoding, sinusoidal_shift_matrix,
)

__all__ = [
    "ACTIVATIONS", "CausalBlock", "DecoderAttentionMaps", "DecoderBlock", "Embeddings", "EncoderBlock",
    "FeedForward", "KVCache", "LearnedPositionalEmbedding", "MultiHeadAttention", "PatchEmbedding",
    "PatchTokens", "ResidualBlock", "SinusoidalPositionalEncoding", "causal_mask", "copy_to_torch_multihead",
    "key_mask", "masked_softmax", "num_patches", "patchify", "scaled_dot_product_attention",
    "sinusoidal_encoding", "sinusoidal_shift_matrix", "to_torch_encoder_layer", "to_torch_multihead",
    "token_mask", "unpatchify", "validate_mask",
]
