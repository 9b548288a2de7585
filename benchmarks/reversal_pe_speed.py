"""Chapter 3's reversal model with learned and with sinusoidal positions, at two sizes, added or concatenated: which trains faster?

Usage (from the repository root): ``python benchmarks/reversal_pe_speed.py [--lrs 0.001 0.003 0.01]
[--seeds 0 1 2] [--steps 400] [--arms ...] [--jobs 1] [--resume LOG ...]`` (``--resume``: rows
already printed in those logs, same arm, learning rate, seed and steps, are reused, not rerun).

The set-up is section 3.7's exactly (sequences of 10 distinct letters out of 20, one attention
layer with a single head, width 32, a linear read-out, Adam, batches of 64, 400 steps, the test
set of 2,000 sequences drawn with seed 123); the chapter trains both position kinds at one shared
learning rate, 3e-3, and this script sweeps 1e-3, 3e-3 and 1e-2 for every arm alike. The arms:

- ``learned`` and ``sinusoidal``: the chapter's two models. Their position rows start at
  different sizes: a learned row drawn from N(0, 1) in 32 dimensions has a norm near
  sqrt(32) = 5.7, every sinusoidal row has norm 4 (16 sin/cos pairs, each adding 1 to the
  squared norm).
- ``learned at norm 4``: the learned arm's own starting table (the same seed's draw), each row
  rescaled to norm 4, the sinusoidal rows' norm.
- ``sinusoidal at norm 5.7``: the sinusoidal table times sqrt(2), so every row has norm
  sqrt(32) = 5.66, the learned rows' typical norm.
- ``concatenated sinusoidal`` and ``concatenated learned``: the same total width 32, but a
  token embedding of width 16 followed by a position part of width 16 (the sinusoidal table of
  width 16, or a learned N(0, 1) table of width 16), concatenated instead of added, so that
  content and position sit in separate coordinates.
- ``concatenated sinusoidal at norm 4``: the concatenated sinusoid times sqrt(2): its rows of
  width 16 (8 pairs) have norm sqrt(8) = 2.8 at the start, this arm's norm 4, the added
  sinusoid's, so that the comparison of adding with concatenating is not also one of sizes.

Within a seed every arm gets the same training batches and the same attention and read-out
weights at the start (they are drawn when the model is built, before an arm changes its input
part). Each run records the first step at which the mean training loss of the last 10 steps
falls below 0.1 (null if never), its test accuracy, the mean weight of each query on its mirror
key (T - 1 - i) over the test set, and the mean norm of a position row at the start, and prints
one JSON line; the results file collects them. About 2 s a run on one busy CPU thread.
"""
from __future__ import annotations

import json
import math
import sys

import torch
from torch import nn

import common
import ch03_reversal
from attnbook.layers.positional import sinusoidal_encoding
from attnbook.tasks.tagging import tagging_accuracy

WIDTH = 32
SEQ_LEN = ch03_reversal.SEQ_LEN
ARMS = ("learned", "sinusoidal", "learned at norm 4", "sinusoidal at norm 5.7",
        "concatenated sinusoidal", "concatenated learned", "concatenated sinusoidal at norm 4",
        "sinusoidal, tokens at norm 4")


class ConcatenatedPositions(nn.Module):
    """x ``(B, T, D/2)`` -> ``[x, P[:T]]`` ``(B, T, D)``: the position part beside the token part."""

    def __init__(self, table: torch.Tensor, trained: bool) -> None:
        super().__init__()
        if trained:
            self.table = nn.Parameter(table)
        else:
            self.register_buffer("table", table)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        return torch.cat([x, self.table[:T].expand(B, T, -1)], dim=-1)  # (B, T, D)


def position_table(model: nn.Module) -> torch.Tensor:
    """The position rows the model starts with, ``(max_len, width of the position part)``."""
    pos = model.position
    return pos.embedding.weight if hasattr(pos, "embedding") else pos.table


def adjust(arm: str):
    """What the arm changes in the freshly built model (None: the chapter's model as it is)."""
    def rescale_rows(model):  # the learned table's own rows, each at norm 4
        with torch.no_grad():
            w = model.position.embedding.weight
            w.mul_(4.0 / w.norm(dim=1, keepdim=True))

    def enlarge(model):  # the sinusoidal table at norm sqrt(32)
        model.position.table.mul_(math.sqrt(2.0))

    def shrink_tokens(model):  # token rows near norm sqrt(32) / sqrt(2) = 4, as when concatenated
        with torch.no_grad():
            model.embedding.weight.div_(math.sqrt(2.0))

    def concatenate(kind, scale=1.0):
        def change(model):
            model.embedding = nn.Embedding(ch03_reversal.VOCAB, WIDTH // 2)  # N(0, 1)
            table = (scale * sinusoidal_encoding(SEQ_LEN, WIDTH // 2) if kind == "sinusoidal"
                     else torch.randn(SEQ_LEN, WIDTH // 2))
            model.position = ConcatenatedPositions(table, trained=kind == "learned")
        return change

    return {"learned at norm 4": rescale_rows, "sinusoidal at norm 5.7": enlarge,
            "concatenated sinusoidal": concatenate("sinusoidal"),
            "concatenated learned": concatenate("learned"),
            "concatenated sinusoidal at norm 4": concatenate("sinusoidal", math.sqrt(2.0)),
            "sinusoidal, tokens at norm 4": shrink_tokens}.get(arm)


def first_step_below(losses: list[float], threshold: float = 0.1, window: int = 10) -> int | None:
    return next((t for t in range(window, len(losses) + 1)
                 if sum(losses[t - window:t]) / window < threshold), None)


def run(arm: str, seed: int, steps: int, lr: float) -> dict:
    tokens, targets = ch03_reversal.test_set()
    kind = "sinusoidal" if "sinusoidal" in arm else "learned"
    norms = []

    def change(model):
        if adjust(arm) is not None:
            adjust(arm)(model)
        norms.append(position_table(model).detach().norm(dim=1).mean().item())

    model, history = ch03_reversal.train(WIDTH, kind, seed, steps, lr, adjust=change)
    mirror = torch.arange(SEQ_LEN - 1, -1, -1).expand(len(tokens), SEQ_LEN)[..., None]  # (B, T, 1)
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)  # (B, 1, T, T)
    row = {"arm": arm, "positional": kind, "lr": lr, "seed": seed, "steps": steps,
           "first_step_below_0.1": first_step_below(history.losses),
           "test_accuracy": round(tagging_accuracy(model, tokens, targets)["answer"], 4),
           "weight_on_mirror": round(weights[:, 0].gather(-1, mirror).mean().item(), 4),
           "position_norm_start": round(norms[0], 3)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "reversal_pe_speed.json"))
    p.add_argument("--resume", type=common.Path, nargs="*", default=[])
    args = p.parse_args(argv)
    jobs = [(arm, s, args.steps, lr) for lr in args.lrs for arm in args.arms for s in args.seeds]
    done = {(r["arm"], r["lr"], r["seed"], r["steps"]): r
            for r in common.log_rows(args.resume) if "arm" in r}
    todo = [job for job in jobs if (job[0], job[3], job[1], job[2]) not in done]
    for row in common.run_jobs(run, todo, args.jobs):
        done[row["arm"], row["lr"], row["seed"], row["steps"]] = row
    rows = [done[arm, lr, s, steps] for arm, s, steps, lr in jobs]
    common.write_result(common.Path(args.out), {
        "description": __doc__.splitlines()[0],
        "machine": common.machine(args.jobs if args.jobs > 1 else None), "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
