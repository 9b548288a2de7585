"""Chapter 4's block with a purely positional task: the letter before + the letter K back.

Usage (from the repository root):
``python benchmarks/mha_block_offsets.py --jobs 2``
(the committed ``mha_block_offsets.json``; ``--smoke`` runs two tiny jobs and writes nothing)

Section 4.6 asks whether one head can carry two relations inside a standard block. The model is
``attnbook.models.tagger.BlockTagger`` (one pre-norm ``EncoderBlock``: residuals, a feed-forward layer of width
256, a final LayerNorm, the chapter's two linear read-outs). The task names, at every position t,
the letter at t-1 and the letter at t-K; only positions with both answers are scored. Everything
else is section 4.6's set-up: 12 letters out of 16, width D = 64, Adam at 3e-3, batches of 64
drawn from the seed, 600 steps, the test set of 2,000 sequences drawn with seed 123, one thread
per run. The sweep (``grid``):

- ``both``: K = 2, 3, 4; H = 1, 2; seeds 0, 1, 2 (the main table);
- ``far only``: one head, both read-outs name the letter 4 back (can one head reach that far?);
- one head at K = 4 with learning rates 1e-2 and 1e-3, and with 2,400 steps (seed 0).

Each run prints one JSON line: the share of scored positions with both answers right, with the
letter before right, and with the far letter right (chance on one letter is 1/16 = 6.25%).
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
from narrow_heads import SEQ_LEN, VOCAB

TEST_SEED, TEST_SIZE, BATCH, LR, STEPS = 123, 2000, 64, 3e-3, 600


def offset_task(k: int, far_only: bool = False):
    """A task function (B, T) -> answers (B, T, 2): the letter before and the letter ``k`` back
    (``far_only``: the letter ``k`` back in both slots)."""
    def task(batch_size: int, length: int, vocab_size: int, generator: torch.Generator):
        tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, T)
        targets = torch.full((batch_size, length, 2), IGNORE, dtype=torch.long)  # (B, T, 2)
        if far_only:
            targets[:, k:, 0] = tokens[:, :-k]
        else:
            targets[:, 1:, 0] = tokens[:, :-1]
        targets[:, k:, 1] = tokens[:, :-k]
        return tokens, targets
    return task


def run(k: int, num_heads: int, seed: int, far_only: bool = False, lr: float = LR,
        steps: int = STEPS) -> dict:
    torch.set_num_threads(1)
    start = time.process_time()
    task = offset_task(k, far_only)
    tokens, targets = task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(num_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    fit(model, task_batches(task, BATCH, SEQ_LEN, VOCAB, gen), tagging_loss, optimizer, steps,
        progress=False)
    model.eval()
    with torch.no_grad():
        right = model(tokens).argmax(-1) == targets  # (B, T, 2)
    row = {"task": "far only" if far_only else "both", "k": k, "heads": num_heads, "seed": seed,
           "lr": lr, "steps": steps, "scored_positions": int(scored.sum()),
           "both_right": round(right.all(-1)[scored].float().mean().item(), 5),
           "before_right": round(right[..., 0][scored].float().mean().item(), 5),
           "far_right": round(right[..., 1][scored].float().mean().item(), 5),
           "cpu_seconds": round(time.process_time() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def grid(smoke: bool = False) -> list[tuple]:
    """The runs, as ``run``'s arguments (k, heads, seed, far_only, lr, steps)."""
    if smoke:
        return [(4, 1, 0, False, LR, 5), (4, 2, 0, True, LR, 5)]
    jobs = [(k, h, s, False, LR, STEPS) for k in (4, 3, 2) for h in (1, 2) for s in (0, 1, 2)]
    jobs += [(4, 1, s, True, LR, STEPS) for s in (0, 1)]
    jobs += [(4, 1, 0, False, lr, STEPS) for lr in (1e-2, 1e-3)]
    jobs += [(4, 1, 0, False, LR, 4 * STEPS)]
    return jobs


def main(argv: list[str] | None = None) -> int:
    return common.grid_main(__doc__, run, grid, "mha_block_offsets.json", argv)


if __name__ == "__main__":
    sys.exit(main())
