"""Chapter 3's sinusoidal reversal model, trained on length 10, scored on lengths 8 and 12.

Usage (from the repository root): ``python benchmarks/reversal_length_transfer.py
[--seeds 0 1 ... 11] [--test-seeds 7 8 9 10] [--steps 400] [--jobs 1]``

The set-up is section 3.7's exactly (sequences of 10 distinct letters out of 20, the sinusoidal
table added to the embeddings, one attention layer with a single head, width 32, a linear
read-out, Adam at 3e-3, batches of 64, 400 steps; ``ch03_reversal.train``), on training seeds 0
to 11 (the chapter trains seed 0). Each trained model is scored on ``reversal_task(500, 8, 20,
Generator().manual_seed(s))`` for every test seed ``s`` (the chapter's exercise 5 uses seed 7),
and, with its sinusoidal table stretched to 12 rows (the table holds nothing trained), on
``reversal_task(500, 12, 20, ...)`` with test seed 8, as the exercise's solution does. Each run
records the accuracy at length 8 per test seed and per position (test seed 7), the key each query
looks at most (the mode over the batch, test seed 7), and the accuracy at length 12, and prints
one JSON line. The exercise's checker accepts the range these runs span (its
``LENGTH_TRANSFER_RANGE``). About 2 s a run on one busy CPU thread.
"""
from __future__ import annotations

import json
import sys

import torch

import common
import ch03_reversal
from attnbook.data.synthetic import reversal_task
from attnbook.layers.positional import SinusoidalPositionalEncoding
from attnbook.tasks.tagging import tagging_accuracy

WIDTH, LR = 32, 3e-3


def run(seed: int, steps: int, test_seeds: list[int]) -> dict:
    """One training seed: train on length 10, score on lengths 8 and 12."""
    model, _ = ch03_reversal.train(WIDTH, "sinusoidal", seed, steps, LR)
    model.eval()
    at_8 = {}
    for test_seed in test_seeds:
        tokens, targets = reversal_task(500, 8, ch03_reversal.VOCAB,
                                        torch.Generator().manual_seed(test_seed))
        at_8[str(test_seed)] = round(tagging_accuracy(model, tokens, targets)["answer"], 4)
    tokens, _ = reversal_task(500, 8, ch03_reversal.VOCAB, torch.Generator().manual_seed(7))
    with torch.no_grad():
        logits, weights = model(tokens, need_weights=True)  # (500, 8, 1, V), (500, 1, 8, 8)
    right = (logits.argmax(-1)[..., 0] == tokens.flip(1)).float().mean(0)  # (8,)
    looks_at = weights[:, 0].argmax(-1).mode(0).values  # (8,): each query's most-attended key
    model.position = SinusoidalPositionalEncoding(WIDTH, max_len=12)  # a 12-row table
    long_tokens, long_targets = reversal_task(500, 12, ch03_reversal.VOCAB,
                                              torch.Generator().manual_seed(8))
    row = {"seed": seed, "steps": steps,
           "accuracy_at_8": at_8,
           "accuracy_at_8_by_position": [round(a, 4) for a in right.tolist()],
           "looks_at_8": looks_at.tolist(),
           "accuracy_at_12": round(tagging_accuracy(model, long_tokens, long_targets)["answer"], 4)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    p.add_argument("--test-seeds", type=int, nargs="+", default=[7, 8, 9, 10])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    out = common.Path(args.out) if args.out else common.RESULTS / "reversal_length_transfer.json"
    jobs = [(s, args.steps, args.test_seeds) for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, out, __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
