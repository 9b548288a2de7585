"""Chapter 3's section 3.8: the flat one-hot MLP and the two attention layers over width and learning rate.

Usage (from the repository root): ``python benchmarks/it_mlp_sweep.py [--seeds 0 1 2]
[--mlp-widths 8 16 32 64 256 1024] [--attention-widths 8 16 32] [--lrs 0.001 0.003 0.01 0.03]
[--jobs 1] [--smoke] [--out PATH]``

The set-up is section 3.8's exactly (copied here): sentences *The NAME1 didn't chase the NAME2
because it was too ADJ* over 10 names; seed ``s`` holds out 9 of the 45 pairs of names, in both
orders and with both adjectives (36 held-out sentences, 144 trained); Adam, 400 steps of 64
training sentences drawn with the seed's generator. The chapter trains one size of each model at
3e-3; this script sweeps the MLP's hidden width and the attention model's width (two layers,
learned positions, one head) over four rates. Each run prints one JSON line; the results file
collects them. Under a second a run on one thread.
"""
from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F
from torch import nn

import common
from attnbook.env import seed_everything
from attnbook.layers.attention import MultiHeadAttention
from attnbook.layers.positional import LearnedPositionalEmbedding

NAMES = ["cat", "dog", "fox", "hen", "owl", "rat", "cow", "pig", "bat", "elk"]
TEMPLATE = "The {} didn't chase the {} because it was too {}"
VOCABULARY = sorted({*TEMPLATE.split(), *NAMES, "tired", "fast"} - {"{}"})
WORD_ID = {w: n for n, w in enumerate(VOCABULARY)}
IT, LENGTH = 7, 11
NAME_PAIRS = [(a, b) for n, a in enumerate(NAMES) for b in NAMES[n + 1:]]


def it_sentences(cases):
    tokens = torch.tensor([[WORD_ID[w] for w in TEMPLATE.format(s, o, adj).split()]
                           for s, o, adj in cases])  # (B, T)
    answers = torch.tensor([WORD_ID[s if adj == "tired" else o] for s, o, adj in cases])
    return tokens, answers


def it_split(seed, n_held=9):
    """The chapter's split: n_held pairs of names held out, both orders, both adjectives."""
    order = torch.randperm(len(NAME_PAIRS), generator=torch.Generator().manual_seed(seed))
    held = {NAME_PAIRS[k] for k in order[:n_held].tolist()}
    cases = [(s, o, adj) for s in NAMES for o in NAMES if s != o for adj in ("tired", "fast")]
    is_held = [tuple(sorted((s, o), key=NAMES.index)) in held for s, o, _ in cases]
    return (it_sentences([c for c, h in zip(cases, is_held) if not h]),
            it_sentences([c for c, h in zip(cases, is_held) if h]))


class ItTagger(nn.Module):
    """The chapter's ItTagger with two layers and learned positions."""

    def __init__(self, d_model):
        super().__init__()
        self.embedding = nn.Embedding(len(VOCABULARY), d_model)
        self.position = LearnedPositionalEmbedding(d_model, LENGTH)
        self.blocks = nn.ModuleList(MultiHeadAttention(d_model, num_heads=1) for _ in range(2))
        self.readout = nn.Linear(d_model, len(VOCABULARY))

    def forward(self, tokens):
        x = self.position(self.embedding(tokens))
        x = x + self.blocks[0](x, x, x)
        return self.readout(self.blocks[1](x, x, x)[:, IT])


def flat_mlp(hidden):
    """The chapter's FlatMLP: the 11 one-hot tokens -> `hidden` ReLU units -> a read-out."""
    return nn.Sequential(nn.Flatten(), nn.Linear(LENGTH * len(VOCABULARY), hidden), nn.ReLU(),
                         nn.Linear(hidden, len(VOCABULARY)))


def run(arm: str, width: int, lr: float, seed: int, steps: int) -> dict:
    torch.set_num_threads(1)
    (tokens, answers), (held, held_answers) = it_split(seed)
    seed_everything(seed)
    if arm == "mlp":
        net = flat_mlp(width)
        model = lambda t: net(F.one_hot(t, len(VOCABULARY)).float())  # noqa: E731
        params = net.parameters()
    else:
        net = ItTagger(width)
        model, params = net, net.parameters()
    params = list(params)
    optimizer = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        pick = torch.randint(len(tokens), (64,), generator=gen)
        loss = F.cross_entropy(model(tokens[pick]), answers[pick])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        right = [(model(t).argmax(-1) == a).float().mean().item()
                 for t, a in ((tokens, answers), (held, held_answers))]
    row = {"arm": arm, "width": width, "lr": lr, "seed": seed, "steps": steps,
           "weights": sum(p.numel() for p in params),
           "train_accuracy": round(right[0], 4), "held_out_accuracy": round(right[1], 4)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--mlp-widths", type=int, nargs="+", default=[8, 16, 32, 64, 256, 1024])
    p.add_argument("--attention-widths", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2, 3e-2])
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args(argv)
    common.check_jobs(p, args)
    if args.smoke:
        args.seeds, args.lrs, args.steps = args.seeds[:1], args.lrs[:1], 5
        args.mlp_widths, args.attention_widths = args.mlp_widths[:1], args.attention_widths[:1]
    jobs = [(arm, w, lr, s, args.steps)
            for arm, widths in (("mlp", args.mlp_widths), ("attention", args.attention_widths))
            for w in widths for lr in args.lrs for s in args.seeds]
    rows = common.run_jobs(run, jobs, args.jobs)
    out = common.out_path(args, "it_mlp_sweep.json")
    if out is not None:
        common.write_result(out, {"description": __doc__.splitlines()[0],
                                  "machine": common.machine(args.jobs if args.jobs > 1 else None),
                                  "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
