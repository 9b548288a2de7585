"""Chapter 1's reversal task at page scale: reverse a random string through one fixed context C.

``benchmarks/rnn_reverse_bottleneck.py`` is the full-scale version (1,500 steps, lengths 5-30,
three seeds); this module runs a small version live in the notebook and computes the
bag-of-symbols baselines that the edit-distance "symbols kept" count is read against.
"""
from __future__ import annotations

import torch

from attnbook.data.batching import make_batch
from attnbook.data.vocab import Vocab
from attnbook.decoding import greedy_decode
from attnbook.metrics import edit_distance
from attnbook.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.train import evaluating

LETTERS = "abcdefgh"


def reversal_vocab() -> Vocab:
    return Vocab(list(LETTERS))


def random_pairs(n: int, g: torch.Generator, lo: int, hi: int, lengths=None):
    """``n`` (string, reversed string) pairs, lengths uniform on ``lo..hi`` unless given."""
    if lengths is None:
        lengths = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
    pairs = []
    for L in lengths:
        s = [LETTERS[i] for i in torch.randint(len(LETTERS), (L,), generator=g).tolist()]
        pairs.append((s, s[::-1]))
    return pairs


def train_reversal(width: int, steps: int, lo: int, hi: int, seed: int = 0, batch: int = 64,
                   lr: float = 3e-3, emb: int = 16) -> RNNSeq2Seq:
    """Chapter 1's RNNSeq2Seq with C of ``width`` numbers (``width // 2`` GRU units per
    direction) and a decoder ``width`` wide, trained on fresh random strings; the strings
    depend only on ``seed``, so two widths see the same batches. The global random state is
    left as it was."""
    vocab = reversal_vocab()
    with torch.random.fork_rng():  # leave the caller's random state as it was
        torch.manual_seed(seed)
        config = RNNSeq2SeqConfig(len(vocab), len(vocab), emb_dim=emb, enc_hidden=width // 2,
                                  dec_hidden=width)
        model = RNNSeq2Seq(config)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(1000 + seed)
    for _ in range(steps):
        b = make_batch(random_pairs(batch, g, lo, hi), vocab, vocab)
        logits = model(b.src, b.src_lengths, b.tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(),
                                                 ignore_index=vocab.pad_id)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return model


def ed_score(out, ref) -> float:
    """1 - ED(out, ref) / len(ref): 1 when right, about the random-string level when empty-handed."""
    return 1 - edit_distance(list(out), list(ref)) / len(ref)


@torch.no_grad()
def score_reversal(model, test) -> dict:
    """Per length: mean 1 - ED/L of greedy outputs, and the share exactly right."""
    vocab = reversal_vocab()
    b = make_batch(test, vocab, vocab)
    with evaluating(model):  # eval mode while decoding, every submodule's mode restored after
        outs = greedy_decode(model, b.src, b.src_lengths, vocab.bos_id, vocab.eos_id,
                             max(len(r) for _, r in test) + 5)
    by_len = {}
    for (_, ref), out in zip(test, outs):
        out = vocab.decode(out)
        row = by_len.setdefault(len(ref), [0.0, 0, 0])
        row[0] += ed_score(out, ref)
        row[1] += int(list(out) == list(ref))
        row[2] += 1
    return {L: {"ed_score": s / n, "exact": e / n, "n": n} for L, (s, e, n) in sorted(by_len.items())}


def baseline_scores(lengths, per_length: int = 100, keep: int = 8, seed: int = 0) -> dict:
    """Mean 1 - ED/L per length for three outputs built from the reference, no model:
    ``random``: a random string of the right length (kept nothing; the benchmark's null);
    ``shuffled``: the reference's own symbols in a random order (the right bag of symbols);
    ``keep``: the reference's first ``min(keep, L)`` symbols, then random ones (a decoder that
    writes ``keep`` symbols right and then loses the thread)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for L in lengths:
        sums = {"random": 0.0, "shuffled": 0.0, "keep": 0.0}
        for _ in range(per_length):
            ref = [LETTERS[i] for i in torch.randint(len(LETTERS), (L,), generator=g).tolist()]
            noise = [LETTERS[i] for i in torch.randint(len(LETTERS), (L,), generator=g).tolist()]
            sums["random"] += ed_score(noise, ref)
            sums["shuffled"] += ed_score([ref[i] for i in torch.randperm(L, generator=g)], ref)
            sums["keep"] += ed_score(ref[:keep] + noise[keep:], ref)
        out[L] = {k: v / per_length for k, v in sums.items()}
    return out


def symbols_kept(score: float, null: float, length: int) -> float:
    """kappa: the symbols a decoder keeps if it keeps kappa and scores ``null`` on the rest,
    solved from ``score = (kappa + (L - kappa) * null) / L``."""
    return length * (score - null) / (1 - null)
