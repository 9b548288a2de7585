"""Stand-in models for the decoding exercises: tiny, deterministic, and dependent on their state.

``PrefixModel`` is a one-sequence decoder ``step(token, state) -> (logits (V,), new_state)``
whose logits are a fixed pseudo-random function of *everything read so far*: the state is the
tuple of tokens fed in (after any initial tokens that stand for an encoded source). A decoding
loop that drops the new state, or feeds the wrong token, sees different logits and gives a
different answer, as it would with a real model. The state is a tuple, so it cannot be changed
in place. ``BatchedPrefixModel`` wraps one for the batch protocol of ``attnbook.decoding``
(``start`` / ``step`` / ``reorder_state``), so that the library's decoders give the expected
answers.
"""
from __future__ import annotations

import torch


def _mix(seed: int, prefix: tuple[int, ...]) -> int:
    h = seed * 1_000_003 + 12345
    for t in prefix:
        h = (h * 31 + t + 7) % (2**61 - 1)
    return h % (2**31 - 1)


class PrefixModel:
    """``step(token, state) -> (logits (V,), state + (token,))``; logits depend on the whole prefix.

    ``eos_growth`` raises the ``<eos>`` logit by that much per token read, so outputs end after
    a few steps (0: never on purpose); ``eos_start`` is the ``<eos>`` logit's offset.
    """

    def __init__(self, vocab_size: int, seed: int, eos_id: int, eos_growth: float = 0.5,
                 eos_start: float = -1.5, spread: float = 2.0) -> None:
        self.vocab_size, self.seed, self.eos_id = vocab_size, seed, eos_id
        self.eos_growth, self.eos_start, self.spread = eos_growth, eos_start, spread

    def __call__(self, token: int, state: tuple[int, ...]) -> tuple[torch.Tensor, tuple[int, ...]]:
        prefix = tuple(state) + (int(token),)
        g = torch.Generator().manual_seed(_mix(self.seed, prefix))
        logits = torch.randn(self.vocab_size, generator=g) * self.spread  # (V,)
        logits[self.eos_id] += self.eos_start + self.eos_growth * len(prefix)
        return logits, prefix

    def __repr__(self) -> str:
        return f"PrefixModel(V={self.vocab_size}, seed={self.seed})"


class BatchedPrefixModel:
    """``PrefixModel`` behind the batch decoding protocol: ``start``, ``step``, ``reorder_state``."""

    def __init__(self, model: PrefixModel, initial_state: tuple[int, ...] | None) -> None:
        self.model, self.initial_state = model, initial_state

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[tuple[int, ...], ...]:
        """Each row's state starts as ``initial_state``, or (None) as its real source tokens."""
        if self.initial_state is not None:
            return tuple(self.initial_state for _ in range(src.shape[0]))
        return tuple(tuple(row[:n]) for row, n in zip(src.tolist(), src_lengths.tolist()))

    def __repr__(self) -> str:
        return f"Batched{self.model!r}"

    def step(self, tokens: torch.Tensor, state: tuple) -> tuple[torch.Tensor, tuple]:
        outs = [self.model(int(t), s) for t, s in zip(tokens.tolist(), state)]
        return torch.stack([o[0] for o in outs]), tuple(o[1] for o in outs)  # (B, V)

    def reorder_state(self, state: tuple, index: torch.Tensor) -> tuple:
        return tuple(state[i] for i in index.tolist())
