"""Score functions for attention over a sequence of encoder states, behind one interface.

Attention(query, source) = Σ_j a_j · value_j with a = softmax_j(score(query, key_j)).
A score module turns queries ``(B, T, Dq)`` and keys ``(B, S, Dk)`` into scores ``(B, T, S)``:

- ``AdditiveScore``   e = vᵀ tanh(W q + U k)          (Bahdanau et al., 2015)
- ``DotScore``        e = qᵀ k                          (Luong et al., 2015, "dot")
- ``ScaledDotScore``  e = qᵀ k / √d                     (Vaswani et al., 2017)
- ``BilinearScore``   e = qᵀ W k                        (Luong et al., 2015, "general")

Every score splits into ``prepare(keys)``, the part that depends on the keys alone (computed
once per source sequence), and ``score(query, prepared)``, the part paid at every decoder
step; ``forward(query, keys)`` does both. ``context_from_scores`` turns scores into weights (soft, or hard:
argmax or a sample) and returns the weighted sum of the values.

Legend: B batch, T queries, S keys, Dq query width, Dk key width, A additive hidden width.
Masks are boolean, ``True`` = may attend (see ``attnbook.layers.masks``).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from attnbook.layers.masks import masked_softmax

WEIGHTINGS = ("soft", "argmax", "sample")
SCORES = ("additive", "dot", "scaled_dot", "bilinear")


def _check_inputs(query: torch.Tensor, keys: torch.Tensor, query_dim: int | None, key_dim: int | None) -> None:
    if query.dim() != 3 or keys.dim() != 3:
        raise ValueError(
            f"query must be (B, T, Dq) and keys (B, S, Dk); got {tuple(query.shape)} and {tuple(keys.shape)}"
        )
    if query.shape[0] != keys.shape[0]:
        raise ValueError(f"query and keys need the same batch size, got {query.shape[0]} and {keys.shape[0]}")
    if query_dim is not None and query.shape[-1] != query_dim:
        raise ValueError(f"query width must be {query_dim}, got {query.shape[-1]}")
    if key_dim is not None and keys.shape[-1] != key_dim:
        raise ValueError(f"key width must be {key_dim}, got {keys.shape[-1]}")


class Score(nn.Module):
    """Base class: ``forward(query (B, T, Dq), keys (B, S, Dk)) -> scores (B, T, S)``."""

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        """The part of the score that depends on the keys only; by default the keys themselves."""
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return self.score(query, self.prepare(keys))  # (B, T, S)


class AdditiveScore(Score):
    """Bahdanau's alignment model, a one-hidden-layer network: e = vᵀ tanh(W q + U k).

    ``W`` is ``(A, Dq)``, ``U`` is ``(A, Dk)``, ``v`` is ``(A,)``; no biases, as in the paper.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden: int) -> None:
        super().__init__()
        self.query_dim, self.key_dim = query_dim, key_dim
        self.W = nn.Linear(query_dim, hidden, bias=False)
        self.U = nn.Linear(key_dim, hidden, bias=False)
        self.v = nn.Linear(hidden, 1, bias=False)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        if keys.dim() != 3 or keys.shape[-1] != self.key_dim:
            raise ValueError(f"keys must be (B, S, {self.key_dim}), got {tuple(keys.shape)}")
        return self.U(keys)  # (B, S, A): U h_j, the same for every decoder step

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        if query.dim() != 3 or query.shape[-1] != self.query_dim:
            raise ValueError(f"query must be (B, T, {self.query_dim}), got {tuple(query.shape)}")
        hidden = torch.tanh(self.W(query)[:, :, None, :] + prepared[:, None, :, :])  # (B, T, S, A)
        return self.v(hidden)[..., 0]  # (B, T, S)


class DotScore(Score):
    """e = qᵀ k: no parameters, so the query and key widths must match."""

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        _check_inputs(query, prepared, None, query.shape[-1])
        return query @ prepared.transpose(1, 2)  # (B, T, S)


class ScaledDotScore(Score):
    """e = qᵀ k / √d: the dot product divided by the square root of the width."""

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        _check_inputs(query, prepared, None, query.shape[-1])
        return query @ prepared.transpose(1, 2) / math.sqrt(query.shape[-1])  # (B, T, S)


class BilinearScore(Score):
    """Luong's "general" score e = qᵀ W k, with ``W`` of shape ``(Dq, Dk)``."""

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.query_dim, self.key_dim = query_dim, key_dim
        self.W = nn.Linear(key_dim, query_dim, bias=False)  # weight (Dq, Dk)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        if keys.dim() != 3 or keys.shape[-1] != self.key_dim:
            raise ValueError(f"keys must be (B, S, {self.key_dim}), got {tuple(keys.shape)}")
        return self.W(keys)  # (B, S, Dq): W k_j

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        _check_inputs(query, prepared, self.query_dim, self.query_dim)
        return query @ prepared.transpose(1, 2)  # (B, T, S)


def make_score(kind: str, query_dim: int, key_dim: int, hidden: int) -> Score:
    """Build a score by name: ``"additive"``, ``"dot"``, ``"scaled_dot"`` or ``"bilinear"``.

    ``hidden`` is used by the additive score only. Dot scores need ``query_dim == key_dim``.
    """
    if kind == "additive":
        return AdditiveScore(query_dim, key_dim, hidden)
    if kind == "bilinear":
        return BilinearScore(query_dim, key_dim)
    if kind in ("dot", "scaled_dot"):
        if query_dim != key_dim:
            raise ValueError(
                f"a {kind} score needs queries and keys of the same width, got {query_dim} and {key_dim}; "
                "use 'bilinear' or 'additive' for different widths"
            )
        return DotScore() if kind == "dot" else ScaledDotScore()
    raise ValueError(f"unknown score {kind!r}; expected one of {SCORES}")


def attention_weights(
    scores: torch.Tensor, mask: torch.Tensor | None, weighting: str = "soft"
) -> torch.Tensor:
    """Scores ``(B, T, S)`` -> weights ``(B, T, S)`` that sum to 1 over the allowed keys.

    ``"soft"``: the masked softmax. ``"argmax"``: all weight on the best key (one-hot).
    ``"sample"``: all weight on one key drawn from the softmax (uses the global torch RNG).
    Hard weights are built from integer indices, so no gradient flows back to the scores.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {weighting!r}; expected one of {WEIGHTINGS}")
    weights = masked_softmax(scores, mask, dim=-1)  # (B, T, S)
    if weighting == "soft":
        return weights
    S = weights.shape[-1]
    if weighting == "argmax":
        index = weights.argmax(dim=-1)  # (B, T)
    else:
        index = torch.multinomial(weights.reshape(-1, S).detach(), 1).reshape(weights.shape[:-1])  # (B, T)
    return nn.functional.one_hot(index, S).to(weights.dtype)  # (B, T, S)


def context_from_scores(
    scores: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None, weighting: str = "soft"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted sum of ``values (B, S, Dv)`` with weights from ``scores (B, T, S)``.

    ``mask`` broadcastable to ``(B, T, S)``, e.g. ``(B, 1, S)`` for padding.
    Returns the contexts ``(B, T, Dv)`` and the weights ``(B, T, S)``.
    """
    if values.dim() != 3 or scores.dim() != 3 or values.shape[:2] != (scores.shape[0], scores.shape[2]):
        raise ValueError(
            f"scores must be (B, T, S) and values (B, S, Dv) with the same B and S; "
            f"got {tuple(scores.shape)} and {tuple(values.shape)}"
        )
    weights = attention_weights(scores, mask, weighting)  # (B, T, S)
    return weights @ values, weights  # (B, T, Dv), (B, T, S)
