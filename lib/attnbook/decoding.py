"""Generating output sequences from a trained sequence-to-sequence model.

A model decodes through two methods (the book's decoding protocol):
``start(src, src_lengths) -> state`` and ``step(tokens (B,), state) -> (logits (B, V), state)``.
The state is returned, never stored on the model.
"""
from __future__ import annotations

import torch
from torch import nn


@torch.no_grad()
def greedy_decode(
    model: nn.Module, src: torch.Tensor, src_lengths: torch.Tensor, bos_id: int, eos_id: int, max_len: int
) -> list[list[int]]:
    """Pick the most likely token at each step until ``<eos>`` or ``max_len`` tokens.

    Returns one list of ids per sequence, without ``<bos>`` and ``<eos>``. Greedy search is
    not the most likely *sequence*: that would need a search over V^T candidates.
    """
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    B = src.shape[0]
    state = model.start(src, src_lengths)
    tokens = torch.full((B,), bos_id, dtype=torch.long, device=src.device)  # (B,)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    out = []
    for _ in range(max_len):
        logits, state = model.step(tokens, state)  # (B, V)
        tokens = logits.argmax(dim=-1)  # (B,)
        out.append(tokens)
        finished |= tokens == eos_id
        if finished.all():
            break
    ids = torch.stack(out, dim=1).tolist()  # (B, L)
    return [row[: row.index(eos_id)] if eos_id in row else row for row in ids]
