"""Chapter 3's reversal model with learned and with sinusoidal positions, over three learning rates: which trains faster?

Usage (from the repository root): ``python benchmarks/reversal_pe_speed.py [--lrs 0.001 0.003 0.01]
[--seeds 0 1 2] [--steps 400] [--jobs 1]``

The set-up is section 3.7's exactly (sequences of 10 distinct letters out of 20, one attention
layer with a single head, width 32, a linear read-out, Adam, batches of 64, 400 steps, the test
set of 2,000 sequences drawn with seed 123); the chapter trains both position kinds at one shared
learning rate, 3e-3, and this script sweeps 1e-3, 3e-3 and 1e-2 for both alike. Each run records
the first step at which the mean training loss of the last 10 steps falls below 0.1 (null if
never) and its test accuracy, and prints one JSON line; the results file collects them. About
2 s a run on one busy CPU thread.
"""
from __future__ import annotations

import json
import sys

import common
import ch03_reversal
from attnbook.tasks.tagging import tagging_accuracy

WIDTH = 32


def first_step_below(losses: list[float], threshold: float = 0.1, window: int = 10) -> int | None:
    return next((t for t in range(window, len(losses) + 1)
                 if sum(losses[t - window:t]) / window < threshold), None)


def run(positional: str, seed: int, steps: int, lr: float) -> dict:
    tokens, targets = ch03_reversal.test_set()
    model, history = ch03_reversal.train(WIDTH, positional, seed, steps, lr)
    row = {"positional": positional, "lr": lr, "seed": seed, "steps": steps,
           "first_step_below_0.1": first_step_below(history.losses),
           "test_accuracy": round(tagging_accuracy(model, tokens, targets)["answer"], 4)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "reversal_pe_speed.json"))
    args = p.parse_args(argv)
    jobs = [(kind, s, args.steps, lr) for lr in args.lrs for kind in ("learned", "sinusoidal")
            for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
