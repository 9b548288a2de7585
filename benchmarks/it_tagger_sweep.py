"""Chapter 3's section 3.8 ("Back to it"): one vs two attention layers over learning rates and held-out splits.

Usage (from the repository root): ``python benchmarks/it_tagger_sweep.py [--lrs 0.001 0.003 0.01]
[--seeds 0 1 2] [--splits 0 3] [--steps 600] [--jobs 1]``

The set-up is section 3.8's exactly: sentences "The X didn't cross the Y because it was too Z"
with one of 6 animals and one of 6 things as X and Y, in either order, Z *tired* (the answer at
*it* is the animal) or *wide* (the thing); no positions; width 32, one head; the embedding table
started from N(0, 0.3²); Adam, batches of 64 drawn from the 120 training sentences, 600 steps. Two
arms: **one layer** (the ``SelfAttentionTagger`` of section 3.7) and **two layers** (the chapter's
``TwoLayerTagger``: a second attention layer reading ``h = x + z``, copied here). The chapter
trains at learning rate 1e-2 on one held-out split; this script sweeps the rate over 1e-3, 3e-3
and 1e-2 and adds a second split. A split ``k`` holds out the 6 (animal, thing) pairs with
``animal index == (thing index + k) mod 6``, each in its 4 sentences (24 held out, 120 trained);
split 0 is the chapter's (it holds out the opening pair, *animal* and *street*); split 3 shares no
held-out pair with it. Each run prints one JSON line with its training and held-out accuracy at
*it*; the results file collects them. About 3 s a run on one busy CPU thread.
"""
from __future__ import annotations

import json
import sys

import torch
from torch import nn

import common
from attnbook.data.synthetic import IGNORE
from attnbook.env import seed_everything
from attnbook.layers.attention import MultiHeadAttention
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_accuracy, tagging_loss
from attnbook.train import fit

ANIMALS = ["animal", "dog", "cat", "horse", "fox", "bird"]
THINGS = ["street", "road", "river", "bridge", "field", "wall"]
TEMPLATE = "The {} didn't cross the {} because it was too {}"
VOCABULARY = sorted({*TEMPLATE.split(), *ANIMALS, *THINGS, "tired", "wide"} - {"{}"})
WORD_ID = {w: n for n, w in enumerate(VOCABULARY)}
IT, WIDTH, BATCH, EMBEDDING_STD = 7, 32, 64, 0.3
CASES = [(a, t, first, adj) for a in ANIMALS for t in THINGS for first in (True, False)
         for adj in ("tired", "wide")]


class TwoLayerTagger(nn.Module):
    """The chapter's two-layer tagger (section 3.8, second="full"): embedding -> attention,
    added to its input -> attention from h to h -> read-out. No positions."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.first = MultiHeadAttention(d_model, num_heads=1)
        self.second = MultiHeadAttention(d_model, num_heads=1)
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embedding(tokens)  # (B, T, D)
        h = x + self.first(x, x, x)  # (B, T, D)
        return self.readout(self.second(h, h, h))[:, :, None, :]  # (B, T, 1, V)


def sentences(cases: list[tuple]) -> tuple[torch.Tensor, torch.Tensor]:
    """(animal, thing, animal first?, adjective) -> tokens (B, T), targets (B, T, 1)."""
    words = [TEMPLATE.format(*((a, t) if first else (t, a)), adj).split()
             for a, t, first, adj in cases]
    tokens = torch.tensor([[WORD_ID[w] for w in s] for s in words])  # (B, T)
    targets = torch.full((*tokens.shape, 1), IGNORE)  # (B, T, 1): only "it" is scored
    targets[:, IT, 0] = torch.tensor([WORD_ID[a if adj == "tired" else t] for a, t, _, adj in cases])
    return tokens, targets


def split(shift: int) -> tuple[list[tuple], list[tuple]]:
    """Training and held-out cases: pairs with animal index == (thing index + shift) % 6 held out."""
    held = [c for c in CASES if ANIMALS.index(c[0]) == (THINGS.index(c[1]) + shift) % 6]
    return [c for c in CASES if c not in held], held


def run(layers: int, lr: float, seed: int, shift: int, steps: int) -> dict:
    torch.set_num_threads(1)
    train_cases, held_cases = split(shift)
    train_tokens, train_targets = sentences(train_cases)
    held_tokens, held_targets = sentences(held_cases)
    gen = seed_everything(seed)
    if layers == 1:
        model = SelfAttentionTagger(len(VOCABULARY), WIDTH, num_heads=1, max_len=11,
                                    positional="none")
    else:
        model = TwoLayerTagger(len(VOCABULARY), WIDTH)
    nn.init.normal_(model.embedding.weight, std=EMBEDDING_STD)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def batches():
        while True:
            pick = torch.randint(len(train_cases), (BATCH,), generator=gen)
            yield train_tokens[pick], train_targets[pick]

    fit(model, batches(), tagging_loss, optimizer, steps, progress=False)
    row = {"layers": layers, "lr": lr, "seed": seed, "split": shift, "steps": steps,
           "held_out": [ANIMALS.index(c[0]) * 6 + THINGS.index(c[1]) for c in held_cases[::4]],
           "train_accuracy": round(tagging_accuracy(model, train_tokens, train_targets)["answer"], 4),
           "held_out_accuracy": round(tagging_accuracy(model, held_tokens, held_targets)["answer"], 4)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--splits", type=int, nargs="+", default=[0, 3])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "it_tagger_sweep.json"))
    args = p.parse_args(argv)
    jobs = [(layers, lr, s, k, args.steps) for k in args.splits for lr in args.lrs
            for layers in (1, 2) for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
