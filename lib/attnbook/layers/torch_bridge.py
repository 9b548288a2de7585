"""Copies of the library's layers into PyTorch's own (``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer``, ``nn.TransformerDecoderLayer``), so that tests and chapters can
prove the two compute the same thing. The one place that knows PyTorch's parameter names.

PyTorch's layers have LayerNorm, ReLU or exact GELU, the 1/√Dh scale, as many key/value heads as
query heads, and no bias or rotary position on the scores: a block built with other options has
no PyTorch equivalent, and these functions say so instead of copying half of it.
"""
from __future__ import annotations

import torch
from torch import nn

from attnbook.layers.attention import MultiHeadAttention
from attnbook.layers.feedforward import FeedForward


def _check_torch_compatible(mha: MultiHeadAttention) -> None:
    if mha.num_kv_heads != mha.num_heads or mha.scale is not None or mha.rotary is not None:
        raise ValueError(
            "nn.MultiheadAttention has as many key/value heads as query heads, the 1/√Dh scale and no "
            f"rotary positions; got num_kv_heads={mha.num_kv_heads} (of {mha.num_heads}), "
            f"scale={mha.scale}, rotary={type(mha.rotary).__name__ if mha.rotary is not None else None}"
        )


@torch.no_grad()
def copy_to_torch_multihead(mha: MultiHeadAttention, torch_mha: nn.MultiheadAttention) -> None:
    """Copy ``mha``'s weights into ``torch_mha``, which keeps W^Q, W^K, W^V stacked in one
    ``(3D, D)`` ``in_proj_weight``."""
    _check_torch_compatible(mha)
    if (torch_mha.embed_dim, torch_mha.num_heads) != (mha.d_model, mha.num_heads):
        raise ValueError(
            f"nn.MultiheadAttention has embed_dim={torch_mha.embed_dim}, num_heads={torch_mha.num_heads}; "
            f"expected {mha.d_model} and {mha.num_heads}"
        )
    torch_mha.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
    torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
    if mha.q_proj.bias is not None:
        torch_mha.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        torch_mha.out_proj.bias.copy_(mha.out_proj.bias)


def to_torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An ``nn.MultiheadAttention`` (``batch_first=True``) holding the same weights as ``mha``.

    PyTorch's masks mean the opposite of the book's: pass ``attn_mask=~mask`` and
    ``key_padding_mask=~token_mask``.
    """
    _check_torch_compatible(mha)
    bias = mha.q_proj.bias is not None
    torch_mha = nn.MultiheadAttention(mha.d_model, mha.num_heads, dropout=mha.dropout.p, bias=bias,
                                      batch_first=True)
    torch_mha = torch_mha.to(device=mha.q_proj.weight.device, dtype=mha.q_proj.weight.dtype)
    copy_to_torch_multihead(mha, torch_mha)
    return torch_mha.train(mha.training)


def _torch_activation(block: nn.Module) -> str:
    ff = block.feed_forward
    if not isinstance(ff, FeedForward) or ff.activation not in ("relu", "gelu"):
        got = ff.activation if isinstance(ff, FeedForward) else type(ff).__name__
        raise ValueError(f"PyTorch's Transformer layers have a ReLU or exact-GELU MLP only, got {got!r}")
    if not isinstance(block.norm1, nn.LayerNorm) or block.norm1.bias is None:
        raise ValueError(f"PyTorch's Transformer layers use LayerNorm with a bias, this block has {block.norm1}")
    return ff.activation


@torch.no_grad()
def copy_block_to_torch_layer(block: nn.Module, torch_layer: nn.Module) -> None:
    """Copy an ``EncoderBlock``/``CausalBlock`` into an ``nn.TransformerEncoderLayer``, or a
    ``DecoderBlock`` into an ``nn.TransformerDecoderLayer`` (whose cross-attention is ``multihead_attn``)."""
    _torch_activation(block)
    copy_to_torch_multihead(block.self_attn, torch_layer.self_attn)
    norms = ("norm1", "norm2")
    if hasattr(block, "cross_attn"):
        copy_to_torch_multihead(block.cross_attn, torch_layer.multihead_attn)
        norms += ("norm3",)
    torch_layer.linear1.load_state_dict(block.feed_forward.linear1.state_dict())
    torch_layer.linear2.load_state_dict(block.feed_forward.linear2.state_dict())
    for name in norms:
        getattr(torch_layer, name).load_state_dict(getattr(block, name).state_dict())


def to_torch_encoder_layer(block: nn.Module) -> nn.TransformerEncoderLayer:
    """An ``nn.TransformerEncoderLayer`` (batch_first, dropout 0, eval mode) holding ``block``'s weights,
    on its device and in its dtype.

    Works for a ``CausalBlock`` too (pass PyTorch a causal mask). PyTorch has ReLU and exact GELU
    only, so a ``gelu_tanh`` block has no equivalent.
    """
    activation = _torch_activation(block)
    attn = block.self_attn
    ref = nn.TransformerEncoderLayer(
        attn.d_model, attn.num_heads, block.feed_forward.linear1.out_features, dropout=0.0,
        activation=activation, layer_norm_eps=block.norm1.eps, batch_first=True, norm_first=block.norm_first,
    ).to(attn.q_proj.weight.device, attn.q_proj.weight.dtype)  # float64 stays float64
    copy_block_to_torch_layer(block, ref)
    return ref.eval()
