"""Chapter 3's section 3.8 with filler words that move the names: does attention transfer to offsets never seen in training?

Usage (from the repository root): ``python benchmarks/it_fillers.py [--seeds 0 1 2] [--steps 600]
[--jobs 1] [--smoke] [--out PATH]``

Section 3.8's sentences, *The NAME1 didn't chase the NAME2 because it was too ADJ*, with filler
words *big*: ``a`` of them before NAME1, ``b`` before NAME2 and ``4 - a - b`` after ADJ, so every
sentence has 15 tokens and the names, *it* and ADJ move. Training uses the offsets with ``a`` and
``b`` even ((0, 0), (0, 2), (0, 4), (2, 0), (2, 2), (4, 0)); the test, all nine with ``a`` or ``b``
odd. All 90 ordered pairs of 10 names and both adjectives occur in both (1,080 training
sentences, 1,620 test sentences), so only the offsets are new. A test name sits at a position
where no training sentence had a name whenever ``a`` is odd (NAME1 at 2 or 4) or ``a + b`` is odd
(NAME2 at 6 or 8), and position 5 holds NAME1 in one training offset and NAME2 in another: no
rule on absolute positions answers every sentence.

Arms, each trained with Adam on batches of 64, ``--steps`` steps, at each rate of ``--lrs``:

- ``rule``: section 3.8's fixed-offset rule, no weights: token 1 if token 10 is *tired*, else
  token 5 (right on every sentence without fillers);
- ``mlp``: the chapter's flat one-hot MLP (256 ReLU units) over the 15 one-hot tokens;
- ``learned``: the chapter's two-layer ``ItTagger`` (width 32, one head, a learned position
  table), read out at *it*;
- ``sinusoidal``: the same with the sinusoidal table;
- ``causal``: the same with no position table and a causal mask in both layers, read out at ADJ
  (the last word that can see both names).

Each run prints one JSON line (training and test accuracy, and test accuracy per offset); the
results file collects them. Under a second a run on one thread.
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
from attnbook.layers.masks import causal_mask
from attnbook.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding

NAMES = ["cat", "dog", "fox", "hen", "owl", "rat", "cow", "pig", "bat", "elk"]
FILLER, FILLERS, WIDTH, BATCH = "big", 4, 32, 64
TEMPLATE = "The {} didn't chase the {} because it was too {}"
VOCABULARY = sorted({*TEMPLATE.split(), *NAMES, "tired", "fast", FILLER} - {"{}"})
WORD_ID = {w: n for n, w in enumerate(VOCABULARY)}
LENGTH = 11 + FILLERS
OFFSETS = [(a, b) for a in range(FILLERS + 1) for b in range(FILLERS + 1 - a)]
TRAIN_OFFSETS = [(a, b) for a, b in OFFSETS if a % 2 == 0 and b % 2 == 0]
TEST_OFFSETS = [o for o in OFFSETS if o not in TRAIN_OFFSETS]
ARMS = ("rule", "mlp", "learned", "sinusoidal", "causal")


def sentences(offsets: list[tuple[int, int]]) -> dict[str, torch.Tensor]:
    """Every ordered pair of names, both adjectives, each offset: tokens (B, 15), the answer,
    the positions of *it* and ADJ, and the offset's index (B,)."""
    rows, answers, at_it, at_adj, which = [], [], [], [], []
    for k, (a, b) in enumerate(offsets):
        for s in NAMES:
            for o in NAMES:
                if s == o:
                    continue
                for adj in ("tired", "fast"):
                    words = (["The"] + [FILLER] * a + [s, "didn't", "chase", "the"]
                             + [FILLER] * b + [o, "because", "it", "was", "too", adj]
                             + [FILLER] * (FILLERS - a - b))
                    rows.append([WORD_ID[w] for w in words])
                    answers.append(WORD_ID[s if adj == "tired" else o])
                    at_it.append(7 + a + b)
                    at_adj.append(10 + a + b)
                    which.append(k)
    return {"tokens": torch.tensor(rows), "answers": torch.tensor(answers),
            "it": torch.tensor(at_it), "adj": torch.tensor(at_adj), "offset": torch.tensor(which)}


class FillerTagger(nn.Module):
    """Section 3.8's two-layer ItTagger, read out at a given position per sentence."""

    def __init__(self, positional: str):
        super().__init__()
        self.embedding = nn.Embedding(len(VOCABULARY), WIDTH)
        self.position = {"learned": lambda: LearnedPositionalEmbedding(WIDTH, LENGTH),
                         "sinusoidal": lambda: SinusoidalPositionalEncoding(WIDTH, LENGTH),
                         "causal": nn.Identity}[positional]()
        self.mask = causal_mask(LENGTH) if positional == "causal" else None
        self.read_at = "adj" if positional == "causal" else "it"
        self.blocks = nn.ModuleList(MultiHeadAttention(WIDTH, num_heads=1) for _ in range(2))
        self.readout = nn.Linear(WIDTH, len(VOCABULARY))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        x = self.position(self.embedding(batch["tokens"]))  # (B, T, D)
        x = x + self.blocks[0](x, x, x, mask=self.mask)  # x' = x + z
        z = self.blocks[1](x, x, x, mask=self.mask)  # (B, T, D)
        return self.readout(z[torch.arange(len(z)), batch[self.read_at]])  # (B, V)


class FlatMLP(nn.Module):
    """The chapter's flat one-hot MLP: 15 one-hot tokens -> 256 ReLU units -> a read-out."""

    def __init__(self, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LENGTH * len(VOCABULARY), hidden), nn.ReLU(),
                                 nn.Linear(hidden, len(VOCABULARY)))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(F.one_hot(batch["tokens"], len(VOCABULARY)).float().flatten(1))


def rule(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Token 1 if token 10 is *tired*, else token 5: no weights."""
    tokens = batch["tokens"]
    return torch.where(tokens[:, 10] == WORD_ID["tired"], tokens[:, 1], tokens[:, 5])


def scores(answer: torch.Tensor, data: dict[str, torch.Tensor], n_offsets: int) -> tuple:
    right = (answer == data["answers"]).float()
    per = [right[data["offset"] == k].mean().item() for k in range(n_offsets)]
    return round(right.mean().item(), 4), [round(p, 4) for p in per]


def run(arm: str, lr: float, seed: int, steps: int) -> dict:
    torch.set_num_threads(1)
    train, test = sentences(TRAIN_OFFSETS), sentences(TEST_OFFSETS)
    if arm == "rule":
        answer_train, answer_test = rule(train), rule(test)
    else:
        gen = seed_everything(seed)
        model = FlatMLP() if arm == "mlp" else FillerTagger(arm)
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        for _ in range(steps):
            pick = torch.randint(len(train["tokens"]), (BATCH,), generator=gen)
            batch = {k: v[pick] for k, v in train.items()}
            loss = F.cross_entropy(model(batch), batch["answers"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            answer_train, answer_test = model(train).argmax(-1), model(test).argmax(-1)
    train_acc, _ = scores(answer_train, train, len(TRAIN_OFFSETS))
    test_acc, per_offset = scores(answer_test, test, len(TEST_OFFSETS))
    row = {"arm": arm, "lr": lr, "seed": seed, "steps": steps, "train_accuracy": train_acc,
           "test_accuracy": test_acc, "test_offsets": TEST_OFFSETS,
           "test_accuracy_per_offset": per_offset}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    args = p.parse_args(argv)
    common.check_jobs(p, args)
    steps = 5 if args.smoke else args.steps
    seeds, lrs = (args.seeds[:1], args.lrs[:1]) if args.smoke else (args.seeds, args.lrs)
    jobs = [("rule", 0.0, 0, 0)] if "rule" in args.arms else []
    jobs += [(arm, lr, s, steps) for arm in args.arms if arm != "rule" for lr in lrs
             for s in seeds]
    rows = common.run_jobs(run, jobs, args.jobs)
    out = common.out_path(args, "it_fillers.json")
    if out is not None:
        common.write_result(out, {"description": __doc__.splitlines()[0],
                                  "machine": common.machine(args.jobs if args.jobs > 1 else None),
                                  "train_offsets": TRAIN_OFFSETS, "test_offsets": TEST_OFFSETS,
                                  "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
