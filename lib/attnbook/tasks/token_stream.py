"""Language modelling on one long stream of token ids (Chapter 8): random training windows,
the held-out loss of a model, and the unigram and bigram baselines scored on exactly the same
held-out targets.

A held-out stream of N tokens is cut into non-overlapping windows of ``window + 1`` tokens
that overlap by one (``held_out_windows``); every token after the first of a window is a
target, predicted from the tokens before it *in its window*. ``held_out_targets`` lists those
targets with the token just before each, which is all a bigram needs, so the three numbers
are mean cross-entropies over the same tokens. The model's loss is
``language_modeling.next_token_cross_entropy``, the same definition training uses.
Legend: B batch, T window length, V vocabulary.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import torch
from torch import nn

from attnbook.tasks.language_modeling import next_token_cross_entropy
from attnbook.train import evaluating


def lm_batches(
    stream: torch.Tensor, window: int, batch_size: int, generator: torch.Generator | None = None,
) -> Iterator[torch.Tensor]:
    """Endless batches ``(B, window + 1)`` of windows starting at random positions of ``stream``
    (a 1-D tensor of ids); the model reads ``[:, :-1]`` and predicts ``[:, 1:]``."""
    if stream.dim() != 1 or len(stream) < window + 2:
        raise ValueError(f"stream must be 1-D with more than window + 1 = {window + 1} tokens, "
                         f"got shape {tuple(stream.shape)}")
    offsets = torch.arange(window + 1)
    while True:
        starts = torch.randint(len(stream) - window, (batch_size,), generator=generator)
        yield stream[starts[:, None] + offsets]  # (B, T + 1)


def held_out_windows(stream: torch.Tensor, window: int) -> torch.Tensor:
    """``(N_windows, window + 1)``: consecutive windows that share their edge token, so every
    token of ``stream[1 : 1 + N_windows * window]`` is a target exactly once."""
    n = (len(stream) - 1) // window
    if n < 1:
        raise ValueError(f"the stream ({len(stream)} tokens) is shorter than one window of {window + 1}")
    starts = torch.arange(n, device=stream.device) * window  # (N,)
    return stream[starts[:, None] + torch.arange(window + 1, device=stream.device)]  # (N, T + 1)


def held_out_targets(stream: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(previous tokens, targets), both ``(N_windows * window,)``, in the order of ``held_out_windows``."""
    windows = held_out_windows(stream, window)
    return windows[:, :-1].reshape(-1), windows[:, 1:].reshape(-1)


@torch.no_grad()
def model_loss(model: nn.Module, stream: torch.Tensor, window: int, batch_size: int = 64) -> float:
    """Mean next-token cross-entropy (nats) of ``model`` over the held-out windows of ``stream``,
    in eval mode (each submodule's mode restored after)."""
    windows = held_out_windows(stream, window)
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with evaluating(model):
        for chunk in windows.split(batch_size):
            total += next_token_cross_entropy(model, chunk.to(device), reduction="sum").item()
            count += chunk[:, 1:].numel()
    return total / count


@torch.no_grad()
def position_losses(model: nn.Module, stream: torch.Tensor, window: int, batch_size: int = 64
                    ) -> torch.Tensor:
    """``(window,)``: the mean held-out loss (nats) at each position of the windows of
    ``held_out_windows``; entry ``t`` is the loss of a target predicted from ``t + 1`` tokens
    of context. Their mean is ``model_loss``."""
    windows = held_out_windows(stream, window)
    device = next(model.parameters()).device
    total = torch.zeros(window, dtype=torch.float64)
    with evaluating(model):
        for chunk in windows.split(batch_size):
            losses = next_token_cross_entropy(model, chunk.to(device), reduction="none")  # (B, T)
            total += losses.double().sum(0).cpu()
    return total / len(windows)


def unigram_probs(stream: torch.Tensor, vocab_size: int, smoothing: float = 1.0) -> torch.Tensor:
    """``(V,)``: token frequencies in ``stream`` with add-``smoothing`` (Laplace) counts."""
    counts = torch.bincount(stream, minlength=vocab_size).double() + smoothing
    return counts / counts.sum()


def bigram_counts(stream: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """``(V, V)``: how often token b follows token a (row a, column b)."""
    pairs = stream[:-1] * vocab_size + stream[1:]
    return torch.bincount(pairs, minlength=vocab_size * vocab_size).double().view(vocab_size, vocab_size)


def bigram_probs(stream: torch.Tensor, vocab_size: int, weight: float) -> torch.Tensor:
    """``(V, V)``: P(b | a) = weight * count(a, b) / count(a) + (1 - weight) * P_unigram(b),
    interpolated so that a pair never seen keeps some probability."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"weight must be in [0, 1), got {weight}")
    counts = bigram_counts(stream, vocab_size)
    rows = counts.sum(1, keepdim=True)
    conditional = torch.where(rows > 0, counts / rows.clamp(min=1), 0.0)  # unseen rows: all from the unigram
    weights = torch.where(rows > 0, weight, 0.0)
    return weights * conditional + (1 - weights) * unigram_probs(stream, vocab_size)[None, :]


def ngram_loss(probs: torch.Tensor, previous: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean cross-entropy (nats) of ``targets`` under a unigram ``(V,)`` or bigram ``(V, V)`` table."""
    p = probs[targets] if probs.dim() == 1 else probs[previous, targets]
    return float(-p.log().mean())


def fit_bigram(train: torch.Tensor, vocab_size: int, grid: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
               ) -> tuple[torch.Tensor, float]:
    """Choose the interpolation weight on the last tenth of the *training* stream (counts from the
    first nine tenths), then count on all of it: ``(probs (V, V), weight)``."""
    cut = len(train) * 9 // 10
    fit_part, check = train[:cut], train[cut:]
    losses = {w: ngram_loss(bigram_probs(fit_part, vocab_size, w), check[:-1], check[1:]) for w in grid}
    best = min(losses, key=losses.get)
    return bigram_probs(train, vocab_size, best), best


class KneserNey:
    """Interpolated Kneser-Ney n-gram counts (Chen and Goodman's "interpolated KN" with one
    discount ``D`` for every order): the strongest simple counting baseline.

    ``P(w | h) = max(c(h, w) - D, 0) / c(h) + D · N1+(h, ·) / c(h) · P(w | h minus its first token)``,
    where ``c`` counts the ``order``-grams of the training stream for the full context and, for
    every shorter context, *continuation* counts (how many different tokens precede the n-gram):
    a token that follows many contexts gets more of the backed-off mass than one that is frequent
    after a single context. The recursion ends at the uniform ``1 / V``; a context never seen
    passes its lower order's probability through unchanged. A context shorter than ``order - 1``
    tokens (the first tokens of a window) starts at its own length; with ``raw_at_start`` its
    highest order then uses *raw* counts, as Kneser-Ney's highest order does (an ``n``-gram model
    for a context of ``n - 1`` tokens), instead of the continuation counts built for backing off.
    """

    def __init__(self, stream: torch.Tensor, vocab_size: int, order: int, discount: float = 0.75,
                 *, raw_at_start: bool = False) -> None:
        if order < 1 or not 0.0 < discount < 1.0:
            raise ValueError(f"order must be >= 1 and discount in (0, 1), got {order} and {discount}")
        tokens = stream.tolist()
        self.order, self.discount, self.vocab_size = order, discount, vocab_size
        self.raw_at_start = raw_at_start
        grams: dict[int, dict[tuple, int]] = {order: {}}
        top = grams[order]
        for i in range(len(tokens) - order + 1):
            g = tuple(tokens[i : i + order])
            top[g] = top.get(g, 0) + 1
        for n in range(order - 1, 0, -1):  # continuation counts: distinct tokens before each n-gram
            cont: dict[tuple, int] = {}
            for g in grams[n + 1]:
                cont[g[1:]] = cont.get(g[1:], 0) + 1
            grams[n] = cont
        self.grams = grams
        self.context_total: dict[int, dict[tuple, int]] = {n: {} for n in grams}
        self.context_types: dict[int, dict[tuple, int]] = {n: {} for n in grams}
        for n, table in grams.items():
            totals, types = self.context_total[n], self.context_types[n]
            for g, c in table.items():
                totals[g[:-1]] = totals.get(g[:-1], 0) + c
                types[g[:-1]] = types.get(g[:-1], 0) + 1
        # raw counts of the shorter n-grams, for a context cut short by the window's start
        self.raw: dict[int, tuple[dict, dict, dict]] = {}
        for n in range(1, order) if raw_at_start else ():
            table: dict[tuple, int] = {}
            for i in range(len(tokens) - n + 1):
                g = tuple(tokens[i : i + n])
                table[g] = table.get(g, 0) + 1
            totals, types = {}, {}
            for g, c in table.items():
                totals[g[:-1]] = totals.get(g[:-1], 0) + c
                types[g[:-1]] = types.get(g[:-1], 0) + 1
            self.raw[n] = table, totals, types

    def _tables(self, n: int, top: int) -> tuple[dict, dict, dict]:
        """(n-gram counts, context totals, context types) for order ``n`` when ``top`` is the
        highest order the context allows: raw counts at the top of a cut-short context."""
        if n == top and n in self.raw:
            return self.raw[n]
        return self.grams[n], self.context_total[n], self.context_types[n]

    def prob(self, context: tuple[int, ...], token: int) -> float:
        """P(token | the last ``order - 1`` tokens of ``context``)."""
        context = tuple(context)[max(0, len(context) - (self.order - 1)):] if self.order > 1 else ()
        p = 1.0 / self.vocab_size
        top = len(context) + 1
        for n in range(1, top + 1):
            h = context[len(context) - (n - 1):] if n > 1 else ()
            grams, totals, types = self._tables(n, top)
            total = totals.get(h, 0)
            if total == 0:
                continue
            count = grams.get(h + (token,), 0)
            p = max(count - self.discount, 0) / total + self.discount * types[h] / total * p
        return p

    def held_out_loss(self, stream: torch.Tensor, window: int) -> float:
        """Mean cross-entropy (nats) over the targets of ``held_out_windows(stream, window)``, each
        predicted from at most ``order - 1`` tokens before it *in its window* (the models' targets)."""
        total, count = 0.0, 0
        for row in held_out_windows(stream, window).tolist():
            for i in range(1, len(row)):
                total -= math.log(self.prob(tuple(row[max(0, i - self.order + 1) : i]), row[i]))
                count += 1
        return total / count

    def position_losses(self, stream: torch.Tensor, window: int) -> torch.Tensor:
        """``(window,)``: the mean loss (nats) at each position of the held-out windows, as
        ``position_losses`` gives for a model (entry t: t + 1 tokens of the window before the
        target, of which the last ``order - 1`` are used)."""
        rows = held_out_windows(stream, window).tolist()
        total = [0.0] * window
        for row in rows:
            for i in range(1, len(row)):
                total[i - 1] -= math.log(self.prob(tuple(row[max(0, i - self.order + 1) : i]), row[i]))
        return torch.tensor(total, dtype=torch.float64) / len(rows)

    @functools.cached_property
    def _sorted_grams(self) -> dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """order n -> (sorted keys of its n-grams, their counts, the counts' running sum)."""
        return {n: self._sort_table(table, n) for n, table in self.grams.items()}

    @functools.cached_property
    def _sorted_raw(self) -> dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """As ``_sorted_grams``, for the raw counts of ``raw_at_start``."""
        return {n: self._sort_table(table, n) for n, (table, _, _) in self.raw.items()}

    def _sort_table(self, table: dict[tuple, int], n: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        grams = torch.tensor(list(table), dtype=torch.int64).reshape(len(table), n)
        keys, order = (grams * self.vocab_size ** torch.arange(n - 1, -1, -1)).sum(-1).sort()
        counts = torch.tensor(list(table.values()), dtype=torch.float64)[order]
        return keys, counts, torch.cat([torch.zeros(1, dtype=torch.float64), counts.cumsum(0)])

    def next_token_probs(self, contexts: torch.Tensor) -> torch.Tensor:
        """``(B, V)`` float64: ``prob(row, w)`` for every row of ``contexts`` ``(B, T)`` and every
        token ``w`` at once (for sampling from the counts). The counts are looked up in sorted
        integer keys (a context of ``n - 1`` tokens and its next token, read as base-V digits),
        sorted once, on the first call."""
        if contexts.dim() != 2:
            raise ValueError(f"contexts must be (B, T), got shape {tuple(contexts.shape)}")
        V, D = self.vocab_size, self.discount
        contexts = contexts.cpu().long()
        k = min(contexts.shape[1], self.order - 1)
        p = torch.full((len(contexts), V), 1.0 / V, dtype=torch.float64)
        for n in range(1, k + 2):
            raw = n == k + 1 and n in self.raw  # the top of a cut-short context
            keys, counts, cumulative = (self._sorted_raw if raw else self._sorted_grams)[n]
            h = contexts[:, contexts.shape[1] - n + 1:] if n > 1 else contexts[:, :0]  # (B, n-1)
            base = (h * V ** torch.arange(n - 2, -1, -1)).sum(-1) * V  # (B,)
            lo, hi = torch.searchsorted(keys, base), torch.searchsorted(keys, base + V)
            total, types = cumulative[hi] - cumulative[lo], (hi - lo).double()  # c(h), N1+(h, .)
            wanted = base[:, None] + torch.arange(V)  # (B, V)
            at = torch.searchsorted(keys, wanted).clamp(max=len(keys) - 1)
            count = torch.where(keys[at] == wanted, counts[at], 0.0)  # (B, V)
            seen = total[:, None] > 0  # an unseen context passes the lower order through
            mixed = ((count - D).clamp(min=0) + D * types[:, None] * p) / total.clamp(min=1)[:, None]
            p = torch.where(seen, mixed, p)
        return p


def fit_kneser_ney(train: torch.Tensor, vocab_size: int, order: int,
                   grid: tuple[float, ...] = (0.6, 0.75, 0.9), window: int = 64,
                   *, raw_at_start: bool = False) -> tuple[KneserNey, float]:
    """Choose the discount on the last tenth of the *training* stream (counts from the first
    nine tenths, scored on its windows of ``window``), then count on all of it:
    ``(model, discount)``. The held-out text is never used to tune. ``raw_at_start``: see
    ``KneserNey``."""
    cut = len(train) * 9 // 10
    losses = {d: KneserNey(train[:cut], vocab_size, order, d, raw_at_start=raw_at_start
                           ).held_out_loss(train[cut:], window)
              for d in grid}
    best = min(losses, key=losses.get)
    return KneserNey(train, vocab_size, order, best, raw_at_start=raw_at_start), best
