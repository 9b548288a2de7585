"""Chapter 3's reversal task trained with and without the 1/√d_k, at d_k = 256.

Usage (from the repository root): ``python benchmarks/sqrt_dk_training.py [--seeds 0 1 2]
[--lrs 0.0003 0.001 0.003 0.01] [--steps 200] [--width 256] [--jobs 1] [--resume LOG ...]``
(``--resume``: runs whose JSON line is in those logs are read back, not repeated; the committed
file was made by the 3-rate run, then ``--lrs 0.0003 0.001 0.003 0.01 --resume`` its log).
The chapter's second width: ``python benchmarks/sqrt_dk_training.py --width 64 --out
lib/attnbook/results/sqrt_dk_training_64.json`` (one run, about 1 s a run).

The set-up is section 3.7's exactly (sequences of 10 distinct letters out of 20, learned
positions, one attention layer with a single head, so d_k = the width, a linear read-out, Adam,
batches of 64, the test set of 2,000 sequences drawn with seed 123), except the width: 256
instead of 32, and the learning rate, swept over 3e-4, 1e-3, 3e-3 (the chapter's) and 1e-2 for
both arms alike. The two arms differ only in the score scale: ``MultiHeadAttention``'s default
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
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3, 1e-2])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "sqrt_dk_training.json"))
    p.add_argument("--resume", type=common.Path, nargs="*", default=[],
                   help="logs of earlier runs (their printed JSON lines): runs found there are not repeated")
    args = p.parse_args(argv)
    jobs = [(scaled, s, args.steps, args.width, lr)
            for lr in args.lrs for scaled in (True, False) for s in args.seeds]
    done = {_key(r["scaled"], r["seed"], len(r["losses"]), r["d_k"], r["lr"]): r
            for r in common.log_rows(args.resume)}
    todo = [job for job in jobs if _key(*job) not in done]
    for job, row in zip(todo, common.run_jobs(run, todo, args.jobs)):
        done[_key(*job)] = row
    common.write_result(common.Path(args.out), {
        "description": __doc__.splitlines()[0].replace("256", str(args.width)),
        "machine": common.machine(args.jobs if args.jobs > 1 else None),
        "runs": [done[_key(*job)] for job in jobs]})
    return 0


def _key(scaled: bool, seed: int, steps: int, width: int, lr: float) -> tuple:
    """A run's identity, for ``--resume``."""
    return (bool(scaled), int(seed), int(steps), int(width), round(float(lr), 8))


if __name__ == "__main__":
    sys.exit(main())
