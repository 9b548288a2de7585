"""Chapter 4's one-head block at k = 4: does the offset it learns first decide what it keeps?

Usage (from the repository root):
``python benchmarks/mha_block_order.py --jobs 2``
(the committed ``mha_block_order.json``; ``--smoke`` runs two tiny jobs and writes nothing)

Section 4.6 finds one head (``BlockTagger``, H = 1) learns the letter before and leaves the
letter 4 back at chance, though the letter 4 back alone is easy for it. Two runs test whether
one head simply keeps the offset it fixes on first:

- ``far first``: 300 steps on the letter 4 back alone (both read-outs name it), then 600 steps
  on the real task (the letter before + the letter 4 back), the same model and Adam state;
  seeds 0, 1. If the head keeps its first offset, the letter before now stays near chance.
- ``long``: the real task from scratch for 6,000 steps (10 times the page's 600), seed 0.

Everything else is ``mha_block_offsets.py``'s set-up (Adam at 3e-3, batches of 64, the test set
of 2,000 sequences from seed 123, one thread per run). Each row gives the shares of scored
positions (both answers present) with both right, the letter before right and the letter
4 back right, after the whole schedule.
"""
from __future__ import annotations

import json
import sys
import time

import torch

import common
from attnbook.data.synthetic import IGNORE, task_batches
from attnbook.env import seed_everything
from attnbook.tasks.tagging import tagging_loss
from attnbook.train import fit
from mha_block import block_tagger
from mha_block_offsets import BATCH, LR, TEST_SEED, TEST_SIZE, offset_task
from narrow_heads import SEQ_LEN, VOCAB

K = 4


def run(schedule: str, seed: int, first_steps: int, steps: int) -> dict:
    """``first_steps`` on the letter K back alone (``far first``; 0 for ``long``), then
    ``steps`` on both letters; scored on both letters."""
    torch.set_num_threads(1)
    start = time.process_time()
    task = offset_task(K)
    tokens, targets = task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    if first_steps:
        fit(model, task_batches(offset_task(K, far_only=True), BATCH, SEQ_LEN, VOCAB, gen),
            tagging_loss, optimizer, first_steps, progress=False)
    fit(model, task_batches(task, BATCH, SEQ_LEN, VOCAB, gen), tagging_loss, optimizer, steps,
        progress=False)
    model.eval()
    with torch.no_grad():
        right = model(tokens).argmax(-1) == targets  # (B, T, 2)
    row = {"schedule": schedule, "k": K, "heads": 1, "seed": seed, "lr": LR,
           "far_only_steps": first_steps, "both_steps": steps,
           "scored_positions": int(scored.sum()),
           "both_right": round(right.all(-1)[scored].float().mean().item(), 5),
           "before_right": round(right[..., 0][scored].float().mean().item(), 5),
           "far_right": round(right[..., 1][scored].float().mean().item(), 5),
           "cpu_seconds": round(time.process_time() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def grid(smoke: bool = False) -> list[tuple]:
    """The runs, as ``run``'s arguments (schedule, seed, first_steps, steps)."""
    if smoke:
        return [("far first", 0, 3, 3), ("long", 0, 0, 5)]
    return [("long", 0, 0, 6000), ("far first", 0, 300, 600), ("far first", 1, 300, 600)]


def main(argv: list[str] | None = None) -> int:
    return common.grid_main(__doc__, run, grid, "mha_block_order.json", argv)


if __name__ == "__main__":
    sys.exit(main())
