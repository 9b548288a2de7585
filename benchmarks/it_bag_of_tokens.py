"""Chapter 3's section 3.8 baseline: a bag of tokens with a linear classifier, over every held-out split and five seeds.

Usage (from the repository root): ``python benchmarks/it_bag_of_tokens.py [--seeds 0 1 2 3 4]
[--splits 0 1 2 3 4 5] [--steps 300] [--lr 0.1]``

The set-up is section 3.8's probe exactly: each sentence becomes the counts of its words (order
thrown away, a vector of vocabulary size), and one ``nn.Linear(V, V)`` maps the counts to the word
at *it*; Adam at 0.1, 300 full-batch steps on the 120 training sentences. ``seed_everything(seed)``
is called just before the linear layer is built, as in the chapter (seed 0, split 0 is the
chapter's run). A split ``k`` holds out the 6 (animal, thing) pairs with
``animal index == (thing index + k) mod 6`` (``it_tagger_sweep.split``): the six splits cover all
36 pairs once. Each run prints one JSON line with its training and held-out accuracy at *it*; the
results file collects them. Well under a second a run on one CPU thread.
"""
from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F
from torch import nn

import common
from attnbook.env import seed_everything
from it_tagger_sweep import ANIMALS, IT, THINGS, VOCABULARY, sentences, split


def word_counts(tokens: torch.Tensor) -> torch.Tensor:
    """(B, T) token ids -> (B, V) how often each word occurs: the order thrown away."""
    return F.one_hot(tokens, len(VOCABULARY)).sum(1).float()


def run(seed: int, shift: int, steps: int, lr: float) -> dict:
    torch.set_num_threads(1)
    train_cases, held_cases = split(shift)
    train_tokens, train_targets = sentences(train_cases)
    held_tokens, held_targets = sentences(held_cases)
    seed_everything(seed)
    probe = nn.Linear(len(VOCABULARY), len(VOCABULARY))  # counts -> a word
    optimizer = torch.optim.Adam(probe.parameters(), lr=lr)
    for _ in range(steps):  # full batch
        optimizer.zero_grad()
        loss = F.cross_entropy(probe(word_counts(train_tokens)), train_targets[:, IT, 0])
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        right = {name: (probe(word_counts(tok)).argmax(-1) == tgt[:, IT, 0]).float().mean().item()
                 for name, tok, tgt in (("train", train_tokens, train_targets),
                                        ("held_out", held_tokens, held_targets))}
    row = {"seed": seed, "split": shift, "steps": steps, "lr": lr,
           "held_out": [ANIMALS.index(c[0]) * 6 + THINGS.index(c[1]) for c in held_cases[::4]],
           "train_accuracy": round(right["train"], 4),
           "held_out_accuracy": round(right["held_out"], 4)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--out", default=str(common.RESULTS / "it_bag_of_tokens.json"))
    args = p.parse_args(argv)
    jobs = [(s, k, args.steps, args.lr) for k in args.splits for s in args.seeds]
    common.run_and_write(run, jobs, 1, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
