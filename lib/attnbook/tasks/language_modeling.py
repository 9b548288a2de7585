"""Language modelling with a decoder-only model (Chapter 8): the next-token cross-entropy
(the one definition that training, ``token_stream`` and ``induction`` all use), perplexity, and
generation — greedy, temperature, top-k and top-p (nucleus) sampling — with or without a
key–value cache.

A model here is ``model(tokens (B, T)) -> logits (B, T, V)`` that also decodes through
``attnbook.decoding.PromptDecoder`` (``start(prompt)``, ``step(tokens, state)``), such as
``attnbook.models.gpt.GPT``. Legend: B batch, T length, V vocabulary, L generated length.
"""
from __future__ import annotations

import math
import re
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.decoding import PromptDecoder
from attnbook.train import evaluating

Reduction = Literal["mean", "sum", "none"]


def next_token_cross_entropy(model: nn.Module, tokens: torch.Tensor, reduction: Reduction = "mean") -> torch.Tensor:
    """Cross-entropy (nats) of predicting ``tokens[:, t+1]`` from ``tokens[:, :t+1]``, all t at
    once: ``model`` reads ``tokens[:, :-1]`` ``(B, T-1)`` and is scored on ``tokens[:, 1:]``.

    ``reduction``: ``"mean"`` or ``"sum"`` over every target (a scalar), or ``"none"``: one loss
    per target, ``(B, T-1)`` (column t scores the prediction of ``tokens[:, t+1]``).
    """
    if tokens.dim() != 2 or tokens.shape[1] < 2:
        raise ValueError(f"tokens must be (B, T) with T >= 2, got shape {tuple(tokens.shape)}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    logits = model(tokens[:, :-1])  # (B, T-1, V)
    losses = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), reduction=reduction)
    return losses.view(tokens.shape[0], -1) if reduction == "none" else losses  # (B, T-1) or ()


def next_token_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``tokens (B, T)``: the training loss (a ``loss_fn`` for ``fit``)."""
    return next_token_cross_entropy(model, tokens)


def perplexity(mean_loss: float) -> float:
    """exp(mean cross-entropy in nats): the model is as unsure as a uniform pick among this many tokens."""
    return math.exp(mean_loss)


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Set to -inf every logit outside the ``top_k`` largest and outside the smallest set of
    tokens whose probabilities add up to ``top_p`` (the nucleus; the most likely token always
    stays). logits ``(B, V)`` -> ``(B, V)``; None switches a filter off.
    """
    if top_k is not None:
        if not 1 <= top_k:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        if top_p < 1.0:  # 1.0 keeps every token: in float32 the running sum can reach 1.0 before
            logits = _nucleus(logits, top_p)  # the tail, and the tail would be dropped
    return logits


def _nucleus(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """``logits (B, V)`` with -inf outside the smallest set of tokens whose mass reaches top_p."""
    # stable: tied tokens keep their index order, so a tie at the edge keeps the lower index
    sorted_logits, order = logits.sort(dim=-1, descending=True, stable=True)  # (B, V)
    probs = sorted_logits.softmax(-1)  # (B, V)
    before = probs.cumsum(-1) - probs  # (B, V) mass of the better tokens
    drop_sorted = before >= top_p  # the nucleus is full before this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def choose_next(
    logits: torch.Tensor, temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """logits ``(B, V)`` -> token ids ``(B,)``. ``temperature == 0``: the argmax (greedy);
    otherwise a sample from softmax(filtered logits / temperature)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = filter_logits(logits / temperature, top_k, top_p).softmax(dim=-1)  # (B, V)
    if generator is not None and generator.device != probs.device:  # e.g. a CPU generator, GPU logits:
        # draw where the generator lives, so one seed gives the same tokens on every device
        return torch.multinomial(probs.to(generator.device), 1, generator=generator)[:, 0].to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


@torch.no_grad()
def generate(
    model: PromptDecoder, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 0.0,
    top_k: int | None = None, top_p: float | None = None, generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Continue ``prompt (B, T)`` by ``max_new_tokens`` tokens with the cache: ``(B, T + L)``.
    The model runs in eval mode; each submodule's mode is restored after."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    out = [prompt]
    with evaluating(model):
        logits, state = model.start(prompt)  # (B, V)
        for i in range(max_new_tokens):
            tokens = choose_next(logits, temperature, top_k, top_p, generator)  # (B,)
            out.append(tokens[:, None])
            if i + 1 < max_new_tokens:
                logits, state = model.step(tokens, state)
    return torch.cat(out, dim=1)  # (B, T + L)


@torch.no_grad()
def generate_uncached(
    model: nn.Module, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 0.0,
    top_k: int | None = None, top_p: float | None = None, generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The same as ``generate`` the slow way: the whole sequence so far through ``model`` at
    every step. The reference that cached generation must reproduce token for token (eval mode,
    each submodule's mode restored after)."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    tokens = prompt
    with evaluating(model):
        for _ in range(max_new_tokens):
            nxt = choose_next(model(tokens)[:, -1], temperature, top_k, top_p, generator)  # (B,)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


_WORD = re.compile(r"[a-z]+")


def words_of(text: str) -> list[str]:
    """The words of ``text``: its runs of letters a-z, lower-cased (punctuation and digits split)."""
    return _WORD.findall(text.lower())


def sample_stats(texts: list[str], known_words: set[str]) -> dict[str, float]:
    """How a set of generated texts reads, measured:

    - ``invented``: the share of their words not in ``known_words`` (the training text's), the
      last word of each text left out (the length limit may cut it);
    - ``repeated_pairs``: per text, the share of its word pairs that already occurred earlier
      in the same text (loops), averaged over the texts;
    - ``distinct_pairs``: distinct word pairs over all pairs of all texts (distinct-2; low when
      the texts say the same thing);
    - ``words``: how many words were scored for ``invented``.
    """
    invented, scored, repeated, pairs_all = 0, 0, [], []
    for text in texts:
        words = words_of(text)[:-1]
        invented += sum(w not in known_words for w in words)
        scored += len(words)
        pairs = list(zip(words, words[1:]))
        pairs_all += pairs
        if pairs:
            repeated.append(sum(p in pairs[:i] for i, p in enumerate(pairs)) / len(pairs))
    return {"invented": invented / max(scored, 1),
            "repeated_pairs": sum(repeated) / max(len(repeated), 1),
            "distinct_pairs": len(set(pairs_all)) / max(len(pairs_all), 1),
            "words": scored}
