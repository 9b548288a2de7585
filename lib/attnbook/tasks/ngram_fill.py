"""Count models that fill a masked position from its visible neighbours: Chapter 6's rivals to a
tiny BERT (used by that chapter only).

Every rival copies a visible token and differs in its guess at ``[MASK]``:

- :func:`position_unigram_fill`: the most frequent training token at that position;
- :func:`right_bigram_fill`: the commonest predecessor of the visible token on the right;
- :meth:`NGramFill.back_off_fill`: the commonest token seen between the same visible neighbours,
  up to two on each side, backing off to narrower contexts (``BACK_OFF`` lists the tables);
- :meth:`NGramFill.smoothed`: Witten-Bell interpolation of the same counts, a probability over the
  vocabulary at every chosen position, and :meth:`NGramFill.theta_rule`, which keeps a visible
  token only if its probability is at least ``theta``.

The counts run on the CPU; the fills come back on the device of the input ids, the smoothed
estimates and :meth:`NGramFill.theta_rule`'s ids stay on the CPU. Contexts are
coded as integers in base 1024, so the vocabulary (plus one edge id) must have at most 1024 ids.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from attnbook.tasks.masked_lm import MaskedInputs, baseline_predictions

BASE = 1024  # contexts and (context, token) pairs are coded in this base

BACK_OFF = {
    "copy-or-both-neighbours": [(-1, 1), (1,), (-1,)],
    "copy-or-4-gram": [(-2, -1, 1), (-1, 1, 2), (-1, 1), (1,), (-1,)],
    "copy-or-5-gram": [(-2, -1, 1, 2), (-2, -1, 1), (-1, 1, 2), (-1, 1), (1,), (-1,)],
}
"""The offsets each back-off table reads, widest first; it backs off to the next where a context
token is ``[MASK]`` or the context never occurs in training."""

LEVELS = [[(-1,), (1,)], [(-1, 1)], [(-2, -1, 1), (-1, 1, 2)], [(-2, -1, 1, 2)]]
"""Witten-Bell's levels, narrowest first; a level averages its contexts' estimates."""


def most_frequent_by_position(sentences: Sequence[Sequence[int]], vocab_size: int, exclude: Sequence[int],
                              length: int = 32) -> torch.Tensor:
    """``(length,)``: the most frequent token at each position of ``[CLS] sentence [SEP]`` (the
    sentence's first ``length - 2`` tokens), ids in ``exclude`` never chosen."""
    cells = [(p + 1) * vocab_size + t for s in sentences for p, t in enumerate(s[:length - 2])]
    at_position = torch.zeros(length * vocab_size).index_add_(0, torch.tensor(cells, dtype=torch.long),
                                                                torch.ones(len(cells)))
    at_position = at_position.view(length, vocab_size)
    at_position[:, list(exclude)] = -1
    return at_position.argmax(-1)


def position_unigram_fill(seen: torch.Tensor, position_best: torch.Tensor, mask_id: int,
                          unigram_id: int) -> torch.Tensor:
    """copy-or-position-unigram ``(B, S)``: copy a visible token; at ``[MASK]`` the most frequent
    training token at that position (``position_best`` from :func:`most_frequent_by_position`)."""
    copy = baseline_predictions(seen, mask_id, unigram_id)
    at = position_best.to(seen.device)[:seen.shape[1]].expand_as(seen)
    return torch.where(seen == mask_id, at, copy)


def right_bigram_fill(seen: torch.Tensor, bigrams: torch.Tensor, exclude: Sequence[int], mask_id: int,
                      unigram_id: int) -> torch.Tensor:
    """copy-or-right-bigram ``(B, S)``: copy a visible token; at ``[MASK]`` the token that most often
    comes just before the visible token on its right (the unigram guess where that token is
    ``[MASK]`` too). ``bigrams`` ``(V, V)``: counts of (token, next token)."""
    table = bigrams.T.clone()  # (V, V): row = the right token, column = the one before it
    table[:, list(exclude)] = -1
    before = table.argmax(-1).to(seen.device)  # (V,): the most frequent previous token of each token
    right = F.pad(seen[:, 1:], (0, 1), value=mask_id)  # (B, S): the token on the right
    copy = baseline_predictions(seen, mask_id, unigram_id)
    return torch.where((seen == mask_id) & (right != mask_id), before[right.clamp(max=len(before) - 1)], copy)


class NGramFill:
    """Counts of each token between up to two visible tokens on each side, from training sentences
    read as ``[CLS] s[:width] [SEP]`` with two edge ids (``vocab_size``) on each side; special ids
    (below ``num_special``) are context, never targets."""

    def __init__(self, sentences: Sequence[Sequence[int]], vocab_size: int, *, num_special: int, cls_id: int,
                 sep_id: int, pad_id: int, mask_id: int, width: int = 30):
        if vocab_size + 1 > BASE:
            raise ValueError(f"at most {BASE - 1} ids can be coded in base {BASE}, got {vocab_size}")
        self.vocab_size, self.edge = vocab_size, vocab_size
        self.pad_id, self.mask_id = pad_id, mask_id
        framed = torch.full((len(sentences), width + 6), self.edge)  # (N, width + 6)
        for n, s in enumerate(sentences):
            framed[n, 2:len(s[:width]) + 4] = torch.tensor([cls_id, *s[:width], sep_id])
        self.framed = framed
        # every position a table learns from, in reading order
        self.from_verse, self.from_token = ((framed >= num_special) & (framed != self.edge)).nonzero().T
        self._tables: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self._pairs: dict[tuple[int, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        unigram = torch.bincount(framed[self.from_verse, self.from_token], minlength=vocab_size).double()
        self.unigram_p = unigram / unigram.sum()  # (V,)

    def _train_codes(self, offsets: Sequence[int]) -> torch.Tensor:
        code = torch.zeros_like(self.from_verse)
        for d in offsets:
            code = code * BASE + self.framed[self.from_verse, self.from_token + d]
        return code

    def _seen_codes(self, framed_seen: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
                    offsets: Sequence[int]) -> torch.Tensor:
        code = torch.zeros_like(rows)
        for d in offsets:  # a context holding [MASK] never occurs in training
            code = code * BASE + framed_seen[rows, cols + 2 + d]
        return code

    def _frame(self, seen: torch.Tensor) -> torch.Tensor:
        return F.pad(seen.masked_fill(seen == self.pad_id, self.edge), (2, 2), value=self.edge)

    def context_table(self, offsets: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """For each context seen in training (the tokens at ``offsets`` around a target, coded as
        one integer), the target seen there most often (ties: the one seen first). Returns
        (contexts, targets), sorted by context."""
        offsets = tuple(offsets)
        if offsets not in self._tables:
            code = self._train_codes(offsets)
            pairs, which, counts = torch.unique(code * BASE + self.framed[self.from_verse, self.from_token],
                                                return_inverse=True, return_counts=True)
            first_seen = torch.full_like(pairs, len(code)).scatter_reduce(
                0, which, torch.arange(len(code), device=code.device), "amin")  # where each pair first occurs
            order = first_seen.argsort(stable=True)
            order = order[(-counts[order]).argsort(stable=True)]  # most frequent first
            order = order[(pairs[order] // BASE).argsort(stable=True)]  # grouped by context
            context, target = pairs[order] // BASE, pairs[order] % BASE
            keep = torch.cat([torch.tensor([True]), context[1:] != context[:-1]])
            self._tables[offsets] = context[keep], target[keep]
        return self._tables[offsets]

    def back_off_fill(self, seen: torch.Tensor, contexts: Sequence[Sequence[int]], unigram_id: int) -> torch.Tensor:
        """``(B, S)``: copy the visible token; at ``[MASK]`` the widest context in ``contexts`` seen
        in training gives its most frequent token (else ``unigram_id``)."""
        device, seen = seen.device, seen.cpu()
        guess = baseline_predictions(seen, self.mask_id, unigram_id)
        framed_seen = self._frame(seen)
        rows, cols = (seen == self.mask_id).nonzero().T
        todo = torch.ones(len(rows), dtype=torch.bool, device=rows.device)
        for offsets in contexts:
            code = self._seen_codes(framed_seen, rows, cols, offsets)
            context, target = self.context_table(offsets)
            at = torch.searchsorted(context, code).clamp(max=len(context) - 1)
            found = todo & (context[at] == code)
            guess[rows[found], cols[found]] = target[at[found]]
            todo &= ~found
        return guess.to(device)

    # ------------------------------------------------------------------ Witten-Bell smoothing
    def pair_counts(self, offsets: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(codes, counts) of each (context at ``offsets``, token) seen in training, coded as
        ``context * BASE + token`` and sorted."""
        offsets = tuple(offsets)
        if offsets not in self._pairs:
            code = self._train_codes(offsets)
            self._pairs[offsets] = torch.unique(code * BASE + self.framed[self.from_verse, self.from_token],
                                                return_counts=True)
        return self._pairs[offsets]

    def witten_bell(self, lower: torch.Tensor, codes: torch.Tensor, offsets: Sequence[int]) -> torch.Tensor:
        """p(w | u) = (C(u, w) + N1(u) p_lower(w)) / (C(u) + N1(u)), N1(u) the number of distinct
        tokens seen in context u; ``lower`` where u never occurs. (N, V), (N,) -> (N, V)"""
        pairs, n = self.pair_counts(offsets)
        lo = torch.searchsorted(pairs, codes * BASE)
        hi = torch.searchsorted(pairs, codes * BASE + BASE - 1, right=True)
        query = torch.repeat_interleave(torch.arange(len(codes), device=codes.device), hi - lo)
        first = torch.cumsum(hi - lo, 0) - (hi - lo)  # where each query's pairs start
        at = lo[query] + torch.arange(len(query), device=query.device) - first[query]
        counts = torch.zeros_like(lower).index_put_((query, pairs[at] % BASE), n[at].double())
        total, types = counts.sum(1, keepdim=True), (counts > 0).sum(1, keepdim=True)
        return torch.where(total > 0, (counts + types * lower) / (total + types).clamp(min=1), lower)

    def smoothed(self, masked: MaskedInputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The chosen positions (rows, cols), the token seen there, and p ``(N, V)`` given up to two
        visible tokens on each side (Witten-Bell down to the unigram frequencies)."""
        seen = masked.input_ids.cpu()
        rows, cols = masked.chosen.cpu().nonzero().T
        framed_seen = self._frame(seen)
        p = self.unigram_p.expand(len(rows), self.vocab_size)
        for level in LEVELS:
            estimates = [self.witten_bell(p, self._seen_codes(framed_seen, rows, cols, offsets), offsets)
                         for offsets in level]
            p = sum(estimates) / len(estimates)
        return rows, cols, seen[rows, cols], p

    def theta_rule(self, found: tuple, shape: Sequence[int], theta: float) -> torch.Tensor:
        """Predicted ids ``shape``: the most likely token, or a visible token with p >= theta
        (``found`` from :meth:`smoothed`; theta = 0 copies every visible token)."""
        rows, cols, visible, p = found
        p_visible = p.gather(1, visible.clamp(max=self.vocab_size - 1)[:, None])[:, 0]
        keep = (visible != self.mask_id) & (p_visible >= theta)
        guess = torch.zeros(tuple(shape), dtype=torch.long, device=rows.device)
        guess[rows, cols] = torch.where(keep, visible, p.argmax(-1))
        return guess

    def nats(self, masked: MaskedInputs, found: tuple, copy_weight: Callable[[torch.Tensor], torch.Tensor]) -> float:
        """Mean -ln p(target) over the chosen positions: at ``[MASK]`` the smoothed estimate; at a
        visible token w [token = target] + (1 - w) p(target | context), w = ``copy_weight(p(token))``."""
        rows, cols, visible, p = found
        target = masked.targets.cpu()[rows, cols]
        p_target = p.gather(1, target[:, None])[:, 0]
        p_visible = p.gather(1, visible.clamp(max=self.vocab_size - 1)[:, None])[:, 0]
        w = copy_weight(p_visible)
        mixed = torch.where(visible == self.mask_id, p_target,
                            w * (visible == target).double() + (1 - w) * p_target)
        return float(-mixed.log().mean())
