"""Chapter 4's neighbours task with one head: which neighbour it favours, seed by seed.

Usage (from the repository root):
``python benchmarks/one_head_side.py --seeds 3 4 5 6 7 --jobs 1``
(``--steps 4 --out FILE``: a run of seconds, for the tests)

The set-up is the chapter's section 4.6 exactly (12 letters out of 16, width D = 64, sinusoidal
positions, one attention layer with H = 1, two linear read-outs, Adam at 3e-3, batches of 64, 600
steps, the test set of 2,000 sequences drawn with seed 123), one thread per run. The chapter
trains seeds 0, 1 and 2; this script adds other seeds, to see whether the side the single head
favours (the letter before or the letter after) is a property of one head or of the seed. For
every seed it records, on the interior test positions (1 .. T-2), the share with the letter
before right, with the letter after right and with both right, and on the interior queries whose
three letters (before, itself, after) differ, the share at which the head gives the letter before
more weight than the letter after. Each run prints one JSON line; the results file collects them.
"""
from __future__ import annotations

import json
import sys

import torch

import common
from attnbook.data.synthetic import neighbours_task, task_batches
from attnbook.env import seed_everything
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_loss
from attnbook.train import fit

SEQ_LEN, VOCAB, WIDTH, LR = 12, 16, 64, 3e-3


def run(seed: int, steps: int) -> dict:
    torch.set_num_threads(1)
    tokens, targets = neighbours_task(2000, SEQ_LEN, VOCAB, torch.Generator().manual_seed(123))
    gen = seed_everything(seed)
    model = SelfAttentionTagger(VOCAB, WIDTH, 1, SEQ_LEN, positional="sinusoidal", num_outputs=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    batches = task_batches(neighbours_task, 64, SEQ_LEN, VOCAB, gen, "cpu")
    fit(model, batches, tagging_loss, optimizer, steps, progress=False)
    with torch.no_grad():
        logits, w = model(tokens, need_weights=True)  # (B, T, 2, V), (B, 1, T, T)
    i = torch.arange(1, SEQ_LEN - 1)  # the interior queries
    right = logits[:, i].argmax(-1) == targets[:, i]  # (B, T-2, 2)
    before, itself, after = (tokens[:, i + d] for d in (-1, 0, 1))  # (B, T-2) each
    distinct = (before != after) & (before != itself) & (after != itself)
    heavier = (w[:, 0, i, i - 1] > w[:, 0, i, i + 1])[distinct].float().mean().item()
    row = {"heads": 1, "seed": seed, "steps": steps,
           "letter_before_right": round(right[..., 0].float().mean().item(), 4),
           "letter_after_right": round(right[..., 1].float().mean().item(), 4),
           "both_right": round(right.all(-1).float().mean().item(), 4),
           "before_weighted_more": round(heavier, 4),
           "interior_positions": int(right[..., 0].numel()),
           "distinct_queries": int(distinct.sum())}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5, 6, 7])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "one_head_side.json"))
    args = p.parse_args(argv)
    rows = common.run_jobs(run, [(s, args.steps) for s in args.seeds], args.jobs)
    result = {"description": __doc__.splitlines()[0],
              "machine": common.machine(args.jobs if args.jobs > 1 else None), "runs": rows}
    common.write_result(common.Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
