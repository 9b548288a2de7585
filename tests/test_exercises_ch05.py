"""Each Chapter 5 checker accepts the reference solution and rejects plausible wrong answers."""
import math

import torch

from attnbook.exercises.ch05 import (
    check_decoder_self_mask, check_encoder_layer, check_greedy_decode, check_transformer_lr,
)


# --- reference solutions (they live here, not in the library) --------------------------------
def encoder_layer(layer, x, mask):
    z = layer.norm1(x + layer.self_attn(x, x, x, mask=mask))
    return layer.norm2(z + layer.feed_forward(z))


def decoder_self_mask(tgt_lengths, T):
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    real = torch.arange(T)[None, :] < tgt_lengths[:, None]  # (B, T)
    return causal[None] & real[:, None, :]  # (B, T, T)


def transformer_lr(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def greedy_decode(model, src, src_lengths, bos_id, eos_id, max_len):
    state = model.start(src, src_lengths)
    tokens = torch.full((src.shape[0],), bos_id)
    rows = [[] for _ in range(src.shape[0])]
    done = [False] * src.shape[0]
    for _ in range(max_len):
        logits, state = model.step(tokens, state)
        tokens = logits.argmax(-1)
        for i, t in enumerate(tokens.tolist()):
            done[i] = done[i] or t == eos_id
            if not done[i]:
                rows[i].append(t)
        if all(done):
            break
    return rows


# --- plausible wrong answers -----------------------------------------------------------------
def encoder_layer_pre_norm(layer, x, mask):
    z = x + layer.self_attn(layer.norm1(x), layer.norm1(x), layer.norm1(x), mask=mask)
    return z + layer.feed_forward(layer.norm2(z))


def encoder_layer_no_residual(layer, x, mask):
    z = layer.norm1(layer.self_attn(x, x, x, mask=mask))
    return layer.norm2(layer.feed_forward(z))


def encoder_layer_ignores_mask(layer, x, mask):
    z = layer.norm1(x + layer.self_attn(x, x, x))
    return layer.norm2(z + layer.feed_forward(z))


def mask_upper_triangle(tgt_lengths, T):
    causal = torch.ones(T, T, dtype=torch.bool).triu()
    return causal[None] & (torch.arange(T)[None, :] < tgt_lengths[:, None])[:, None, :]


def mask_without_diagonal(tgt_lengths, T):
    causal = torch.ones(T, T, dtype=torch.bool).tril(-1)
    return causal[None] & (torch.arange(T)[None, :] < tgt_lengths[:, None])[:, None, :]


def mask_causal_only(tgt_lengths, T):
    return torch.ones(T, T, dtype=torch.bool).tril()[None].expand(len(tgt_lengths), T, T)


def lr_without_model_scale(step, d_model, warmup_steps):
    return min(step ** -0.5, step * warmup_steps ** -1.5)


def lr_wrong_warmup_power(step, d_model, warmup_steps):
    return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -0.5)


def greedy_always_feeds_bos(model, src, src_lengths, bos_id, eos_id, max_len):
    state = model.start(src, src_lengths)
    bos = torch.full((src.shape[0],), bos_id)
    out = []
    for _ in range(max_len):
        logits, state = model.step(bos, state)
        out.append(logits.argmax(-1))
    rows = torch.stack(out, 1).tolist()
    return [r[: r.index(eos_id)] if eos_id in r else r for r in rows]


def greedy_keeps_eos(model, src, src_lengths, bos_id, eos_id, max_len):
    rows = greedy_decode(model, src, src_lengths, bos_id, eos_id, max_len)
    return [r + [eos_id] if len(r) < max_len else r for r in rows]


def not_done(*args):
    raise NotImplementedError


# --- tests ------------------------------------------------------------------------------------
def test_encoder_layer_checker():
    assert check_encoder_layer(encoder_layer)
    for wrong in (encoder_layer_pre_norm, encoder_layer_no_residual, encoder_layer_ignores_mask, not_done):
        assert not check_encoder_layer(wrong), wrong.__name__


def test_decoder_self_mask_checker():
    assert check_decoder_self_mask(decoder_self_mask)
    for wrong in (mask_upper_triangle, mask_without_diagonal, mask_causal_only, not_done):
        assert not check_decoder_self_mask(wrong), wrong.__name__


def test_transformer_lr_checker():
    assert check_transformer_lr(transformer_lr)
    for wrong in (lr_without_model_scale, lr_wrong_warmup_power, not_done):
        assert not check_transformer_lr(wrong), wrong.__name__
    assert math.isclose(transformer_lr(4000, 512, 4000), (512 * 4000) ** -0.5)


def test_greedy_decode_checker():
    assert check_greedy_decode(greedy_decode)
    for wrong in (greedy_always_feeds_bos, greedy_keeps_eos, not_done):
        assert not check_greedy_decode(wrong), wrong.__name__
