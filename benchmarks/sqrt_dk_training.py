"""Chapter 3's reversal task trained with and without the 1/√d_k, at d_k = 256.

Usage (from the repository root): ``python benchmarks/sqrt_dk_training.py [--seeds 0 1 2]
[--lrs 0.0003 0.001 0.003] [--steps 200] [--width 256] [--jobs 1]``

The set-up is section 3.7's exactly (sequences of 10 distinct letters out of 20, learned
positions, one attention layer with a single head, so d_k = the width, a linear read-out, Adam,
batches of 64, the test set of 2,000 sequences drawn with seed 123), except the width: 256
instead of 32, and the learning rate, swept over 3e-4, 1e-3 and 3e-3 (the chapter's) for both
arms alike. The two arms differ only in the score scale: ``MultiHeadAttention``'s default
``Q Kᵀ / √d_k``, or ``scale=1`` (the raw ``Q Kᵀ``). Same seeds, same batches, same initial
weights for both arms of a seed. Each run records its loss at every step and its test
accuracy, and prints one JSON line; the results file collects them. About 7 s a run on one busy
CPU thread.
"""
from __future__ import annotations

import json
import sys

import common
import ch03_reversal
from attnbook.tasks.tagging import tagging_accuracy


def _unscaled(model) -> None:
    model.attention.scale = 1.0  # scores Q Kᵀ, not divided by √d_k


def run(scaled: bool, seed: int, steps: int, width: int, lr: float) -> dict:
    tokens, targets = ch03_reversal.test_set()
    model, history = ch03_reversal.train(width, "learned", seed, steps, lr,
                                         adjust=None if scaled else _unscaled)
    row = {"scaled": scaled, "d_k": width, "lr": lr, "seed": seed,
           "test_accuracy": round(tagging_accuracy(model, tokens, targets)["answer"], 4),
           "losses": [round(x, 4) for x in history.losses]}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "sqrt_dk_training.json"))
    args = p.parse_args(argv)
    jobs = [(scaled, s, args.steps, args.width, lr)
            for lr in args.lrs for scaled in (True, False) for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
