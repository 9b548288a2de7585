"""Chapter 3's section 3.8 ("Back to it"): one layer with its value path fixed at the identity.

Usage (from the repository root): ``python benchmarks/it_identity_values.py [--seeds 0 1 2 3 4]
[--splits 0 3] [--steps 600] [--lr 0.01] [--jobs 1]``

The set-up is section 3.8's (and ``it_tagger_sweep.py``'s) exactly: the 144 sentences "The X
didn't cross the Y because it was too Z", no positions, width 32, one head, the embedding table
started from N(0, 0.3²), Adam at 1e-2, batches of 64 drawn from the 120 training sentences, 600
steps; split 0 holds out the chapter's 6 (animal, thing) pairs, split 3 six others. Every arm is
the one-layer ``SelfAttentionTagger``; the arms differ only in which attention matrices are
frozen (never trained):

- ``one layer``: nothing frozen (the chapter's one layer);
- ``uniform``: W^Q = W^K = 0 (and their biases), so every weight is 1/T (the chapter's
  "one layer, uniform");
- ``identity values``: W^V = W^O = the identity, their biases 0; W^Q and W^K trained;
- ``uniform, identity values``: both, so only the embedding and the read-out are trained: the
  output at *it* is the mean of the sentence's embedding rows, and the read-out a linear map of it;
- ``no attention, linear``: no attention module at all, the control for the two above: the mean
  of the sentence's embedding rows (its word counts / T times the embedding table) goes straight
  to the read-out;
- ``no attention, two linear layers``: the same with two trained 32 x 32 linear layers (default
  ``nn.Linear`` initialisation, like W^V and W^O) between the mean and the read-out.

A uniform layer is a linear map of the word counts (counts / T -> embedding -> W^V -> W^O ->
read-out), so the last two arms ask whether its held-out failure needs attention at all.

The question: does the one layer fail on held-out sentences because it cannot route, or because of
how its trained value path (embedding, W^V, W^O, read-out multiplied together) is fitted? Each run
prints one JSON line with its training and held-out accuracy at *it*; the results file collects
them. About 3 s a run on one busy CPU thread.
"""
from __future__ import annotations

import json
import sys

import torch
from torch import nn

import common
from attnbook.env import seed_everything
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_accuracy, tagging_loss
from attnbook.train import fit
from it_tagger_sweep import ANIMALS, BATCH, EMBEDDING_STD, THINGS, VOCABULARY, WIDTH, sentences, split

ARMS = ("one layer", "uniform", "identity values", "uniform, identity values",
        "no attention, linear", "no attention, two linear layers")


class MeanOfWords(nn.Module):
    """No attention: tokens -> the mean of their embedding rows -> ``depth`` linear layers ->
    read-out, the same answer at every position (only *it* is scored)."""

    def __init__(self, vocab_size: int, width: int, depth: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, width)
        self.middle = nn.Sequential(*(nn.Linear(width, width) for _ in range(depth)))
        self.readout = nn.Linear(width, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        mean = self.embedding(tokens).mean(1)  # (B, D): counts / T times the table
        logits = self.readout(self.middle(mean))  # (B, V)
        return logits[:, None, None, :].expand(-1, tokens.shape[1], 1, -1)  # (B, T, 1, V)


def freeze(module: nn.Linear, weight: torch.Tensor) -> None:
    """Set a projection to ``weight`` (bias 0) and never train it."""
    with torch.no_grad():
        module.weight.copy_(weight)
        if module.bias is not None:
            module.bias.zero_()
    for p in module.parameters():
        p.requires_grad_(False)


def run(arm: str, lr: float, seed: int, shift: int, steps: int) -> dict:
    torch.set_num_threads(1)
    train_cases, held_cases = split(shift)
    train_tokens, train_targets = sentences(train_cases)
    held_tokens, held_targets = sentences(held_cases)
    gen = seed_everything(seed)
    if arm.startswith("no attention"):
        model = MeanOfWords(len(VOCABULARY), WIDTH, depth=2 if "two" in arm else 0)
    else:
        model = SelfAttentionTagger(len(VOCABULARY), WIDTH, num_heads=1, max_len=11,
                                    positional="none")
    nn.init.normal_(model.embedding.weight, std=EMBEDDING_STD)
    attention = getattr(model, "attention", None)
    if arm.startswith("uniform"):
        freeze(attention.q_proj, torch.zeros(WIDTH, WIDTH))
        freeze(attention.k_proj, torch.zeros(WIDTH, WIDTH))
    if arm.endswith("identity values"):
        freeze(attention.v_proj, torch.eye(WIDTH))
        freeze(attention.out_proj, torch.eye(WIDTH))
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trained, lr=lr)

    def batches():
        while True:
            pick = torch.randint(len(train_cases), (BATCH,), generator=gen)
            yield train_tokens[pick], train_targets[pick]

    history = fit(model, batches(), tagging_loss, optimizer, steps, progress=False)
    row = {"arm": arm, "lr": lr, "seed": seed, "split": shift, "steps": steps,
           "trained_parameters": sum(p.numel() for p in trained),
           "held_out": [ANIMALS.index(c[0]) * 6 + THINGS.index(c[1]) for c in held_cases[::4]],
           "final_loss": round(sum(history.losses[-10:]) / 10, 5),
           "train_accuracy": round(tagging_accuracy(model, train_tokens, train_targets)["answer"], 4),
           "held_out_accuracy": round(tagging_accuracy(model, held_tokens, held_targets)["answer"], 4)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--splits", type=int, nargs="+", default=[0, 3])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "it_identity_values.json"))
    args = p.parse_args(argv)
    jobs = [(arm, args.lr, s, k, args.steps) for k in args.splits for arm in args.arms
            for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
