"""Chapter 4's positional task one step further: the letter before + the letter 5 back.

Usage (from the repository root):
``python benchmarks/mha_block_far.py``
(the committed ``mha_block_far.json``; ``--smoke`` runs two tiny jobs and writes nothing)

``benchmarks/mha_block_offsets.py`` finds one head at 92% both right for K = 3 and at chance for
K = 4. This script adds K = 5 (one and two heads, seed 0) with the same set-up (its ``run``), and
for one head at K = 3, 4 and 5 (seed 0) the mean attention weight on each key offset -1 .. -5
over the queries that have both keys: where does the single head put its weight when it succeeds
(K = 3) and when it fails (K = 4, 5)? About 6 CPU-seconds a run, 4 runs.
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
from mha_block_offsets import BATCH, LR, STEPS, TEST_SEED, TEST_SIZE, offset_task
from narrow_heads import SEQ_LEN, VOCAB

OFFSETS = (-1, -2, -3, -4, -5)


def run(k: int, num_heads: int, seed: int, steps: int = STEPS) -> dict:
    torch.set_num_threads(1)
    start = time.process_time()
    task = offset_task(k)
    tokens, targets = task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(num_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    fit(model, task_batches(task, BATCH, SEQ_LEN, VOCAB, gen), tagging_loss, optimizer, steps,
        progress=False)
    model.eval()
    with torch.no_grad():
        logits, w = model(tokens, need_weights=True)  # w: (B, H, T, T)
    right = logits.argmax(-1) == targets  # (B, T, 2)
    queries = torch.arange(5, SEQ_LEN)  # queries with every key offset -1 .. -5
    weights = {str(d): [round(v, 3) for v in w[:, :, queries, queries + d].mean((0, 2)).tolist()]
               for d in OFFSETS}  # {offset: one mean weight per head}
    row = {"k": k, "heads": num_heads, "seed": seed, "lr": LR, "steps": steps,
           "scored_positions": int(scored.sum()),
           "both_right": round(right.all(-1)[scored].float().mean().item(), 5),
           "before_right": round(right[..., 0][scored].float().mean().item(), 5),
           "far_right": round(right[..., 1][scored].float().mean().item(), 5),
           "mean_weight_on_offset": weights,
           "cpu_seconds": round(time.process_time() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def grid(smoke: bool = False) -> list[tuple]:
    if smoke:
        return [(5, 1, 0, 5), (5, 2, 0, 5)]
    return [(5, 1, 0, STEPS), (5, 2, 0, STEPS), (3, 1, 0, STEPS), (4, 1, 0, STEPS)]


def main(argv: list[str] | None = None) -> int:
    return common.grid_main(__doc__, run, grid, "mha_block_far.json", argv)


if __name__ == "__main__":
    sys.exit(main())
