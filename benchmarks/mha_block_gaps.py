"""Chapter 4's gap sweep: one head, the letters `near` and `far` back, 1, 2 or 3 apart.

Usage (from the repository root):
``python benchmarks/mha_block_gaps.py``
(the committed ``mha_block_gaps.json``; ``--smoke`` runs two tiny jobs and writes nothing)

Section 4.6 trains one head in the pre-norm block on two answers per position, the letter
``near`` back and the letter ``far`` back, seed 0, and finds that 1 apart it gets both and 3 apart
it stays at chance on one of them, whatever the distance from the query. This script repeats
every pair of the page's sweep and more, seeds 0, 1 and 2: gap 1 at 1&2, 3&4, 4&5; gap 2 at
1&3, 2&4, 3&5, 4&6; gap 3 at 1&4, 2&5, 3&6. The set-up is the page's ``train_block`` (its
seed 0 reproduces the page's runs). About 6 CPU-seconds a run, 30 runs.
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
from mha_block_offsets import BATCH, LR, STEPS, TEST_SEED, TEST_SIZE
from narrow_heads import SEQ_LEN, VOCAB

PAIRS = ((1, 2), (3, 4), (4, 5), (1, 3), (2, 4), (3, 5), (4, 6), (1, 4), (2, 5), (3, 6))


def pair_task(near: int, far: int):
    """A task function (B, T) -> answers (B, T, 2): the letters ``near`` and ``far`` back."""
    def task(batch_size: int, length: int, vocab_size: int, generator: torch.Generator):
        tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, T)
        targets = torch.full((batch_size, length, 2), IGNORE, dtype=torch.long)  # (B, T, 2)
        targets[:, near:, 0], targets[:, far:, 1] = tokens[:, :-near], tokens[:, :-far]
        return tokens, targets
    return task


def run(near: int, far: int, seed: int, steps: int = STEPS) -> dict:
    torch.set_num_threads(1)
    start = time.process_time()
    task = pair_task(near, far)
    tokens, targets = task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    fit(model, task_batches(task, BATCH, SEQ_LEN, VOCAB, gen), tagging_loss, optimizer, steps,
        progress=False)
    model.eval()
    with torch.no_grad():
        logits, w = model(tokens, need_weights=True)  # w: (B, 1, T, T)
    right = logits.argmax(-1) == targets  # (B, T, 2)
    queries = torch.arange(far, SEQ_LEN)  # the queries with both keys
    weights = [round(w[:, 0, queries, queries - d].mean().item(), 3) for d in range(far + 1)]
    row = {"near": near, "far": far, "gap": far - near, "heads": 1, "seed": seed, "lr": LR,
           "steps": steps, "scored_positions": int(scored.sum()),
           "both_right": round(right.all(-1)[scored].float().mean().item(), 5),
           "near_right": round(right[..., 0][scored].float().mean().item(), 5),
           "far_right": round(right[..., 1][scored].float().mean().item(), 5),
           "mean_weight_back": weights,  # on the keys 0 .. far back
           "cpu_seconds": round(time.process_time() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def grid(smoke: bool = False) -> list[tuple]:
    if smoke:
        return [(1, 3, 0, 5), (4, 6, 0, 5)]
    return [(near, far, seed, STEPS) for seed in (0, 1, 2) for near, far in PAIRS]


def main(argv: list[str] | None = None) -> int:
    return common.grid_main(__doc__, run, grid, "mha_block_gaps.json", argv)


if __name__ == "__main__":
    sys.exit(main())
