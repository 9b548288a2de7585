"""Checkers for Chapter 5 (the Transformer).

Each ``check_*`` runs the reader's function on fixed cases whose answers come from the book's
library (``attnbook.models.transformer``, ``attnbook.layers.masks``, ``attnbook.schedules``,
``attnbook.decoding``) and prints a verdict.
Legend: B batch, S source length, T target length, D model width, V vocabulary.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from attnbook.decoding import greedy_decode
from attnbook.exercises.core import Case, CheckResult, run_cases
from attnbook.layers.masks import causal_mask, token_mask
from attnbook.schedules import transformer_lr
from attnbook.layers import EncoderBlock
from attnbook.models.transformer import Transformer, TransformerConfig


def _encoder_layer(seed: int, d_model: int = 16, num_heads: int = 4) -> EncoderBlock:
    torch.manual_seed(seed)
    layer = EncoderBlock(d_model, num_heads, 2 * d_model).eval()
    with torch.no_grad():  # LayerNorms away from (1, 0), so that a skipped norm shows
        for norm in (layer.norm1, layer.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    return layer


def check_encoder_layer(fn: Callable) -> CheckResult:
    """``fn(layer: EncoderBlock, x (B, S, D), mask (B, 1, S)) -> (B, S, D)``, post-norm:
    ``z = LayerNorm1(x + MHA(x, x, x)); out = LayerNorm2(z + FFN(z))`` with the layer's modules."""
    cases = []
    for seed, (B, S, lengths) in enumerate([(1, 4, [4]), (3, 6, [6, 3, 1])]):
        layer = _encoder_layer(seed)
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(B, S, 16, generator=g)
        mask = token_mask(torch.tensor(lengths), S)[:, None, :]  # (B, 1, S)
        with torch.no_grad():
            expected = layer(x, mask)
        cases.append(Case(
            f"B={B}, S={S}, lengths {lengths}", (layer, x, mask), expected,
            hint="post-norm: add the sublayer's output to its input, THEN apply the LayerNorm "
                 "(norm1 after attention, norm2 after the feed-forward); pass the mask to self_attn.",
            atol=1e-5,
        ))
    return run_cases("encoder layer", _no_grad(fn), cases)


def check_decoder_self_mask(fn: Callable) -> CheckResult:
    """``fn(tgt_lengths (B,), T) -> (B, T, T)`` bool: True where query i may attend to key j,
    i.e. j <= i (causal) and j is a real target token (not padding)."""
    cases = []
    for lengths, T in (([3], 3), ([4, 2], 4), ([1, 5, 3], 5)):
        lengths = torch.tensor(lengths)
        expected = causal_mask(T)[None] & token_mask(lengths, T)[:, None, :]  # (B, T, T)
        cases.append(Case(
            f"lengths {lengths.tolist()}, T={T}", (lengths, T), expected,
            hint="combine a lower-triangular (T, T) mask (diagonal kept) with a (B, 1, T) padding "
                 "mask using &; True means 'may attend'.",
        ))
    return run_cases("decoder self-attention mask", fn, cases)


def check_transformer_lr(fn: Callable) -> CheckResult:
    """``fn(step, d_model, warmup_steps) -> float``: the paper's learning rate (steps count from 1)."""
    cases = [
        Case(f"step {s}, d_model {d}, warmup {w}", (s, d, w), transformer_lr(s, d, w),
             hint="lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)", atol=1e-12, rtol=1e-6)
        for s, d, w in ((1, 512, 4000), (4000, 512, 4000), (100, 512, 4000), (20000, 512, 4000), (250, 64, 100))
    ]
    return run_cases("transformer_lr", fn, cases)


def _decoding_model(seed: int, eos_bias: float) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(9, 10, d_model=16, num_heads=2, d_ff=32, dropout=0.0, tie_output=False))
    with torch.no_grad():
        model.output.bias[2] += eos_bias  # tuned so that rows end at different steps (<eos> is id 2)
    return model.eval()


def check_greedy_decode(fn: Callable) -> CheckResult:
    """``fn(model, src (B, S), src_lengths (B,), bos_id, eos_id, max_len) -> list of B lists of ids``
    through ``model.start`` / ``model.step``; each list stops before ``<eos>`` or at ``max_len``."""
    cases = []
    for seed, eos_bias, max_len in ((3, 0.5, 10), (4, 0.0, 10), (0, 1.0, 10), (3, 0.5, 3)):
        model = _decoding_model(seed, eos_bias)
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(4, 9, (4, 6), generator=g)  # (B, S)
        lengths = torch.randint(1, 7, (4,), generator=g)
        lengths[0] = 6
        expected = greedy_decode(model, src, lengths, 1, 2, max_len)
        cases.append(Case(
            f"model {seed}, output lengths {[len(r) for r in expected]}, max_len={max_len}",
            (model, src, lengths, 1, 2, max_len), expected,
            hint="start with <bos> for every row; feed each step's argmax back as the next token; "
                 "cut every row at its first <eos> (not included) and stop after max_len steps.",
        ))
    return run_cases("greedy decode", _no_grad(fn), cases)


def _no_grad(fn: Callable) -> Callable:
    if not callable(fn):
        return fn

    def wrapped(*args):
        with torch.no_grad():
            return fn(*args)

    wrapped.__name__ = getattr(fn, "__name__", "fn")
    return wrapped
