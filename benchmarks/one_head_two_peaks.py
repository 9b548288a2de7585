"""Chapter 4's k = 4 task with one head started from a two-peaked pattern: kept, or pulled apart?

Usage (from the repository root):
``python benchmarks/one_head_two_peaks.py``
(the committed ``one_head_two_peaks.json``; ``--smoke`` runs two tiny jobs and writes nothing)

Section 4.6 finds one head at chance on its second letter at k = 4 (the letter before and the
letter 4 back). Is that because one softmax cannot put weight on two far-apart keys, or because
training does not take it there? Two steps, one head, the chapter's block (``mha_block.py``'s
``block_tagger``, the set-up of ``mha_block_offsets.py``):

1. **Pre-fit** (``prefit_steps`` > 0): train only the head's own W^Q and W^K (with their biases),
   everything else at its initial values, to a two-peaked target pattern: 0.5 on the letter before
   and 0.5 on the letter 4 back for the queries that have both (the letter before alone for the
   first queries, itself at position 0), cross-entropy against the head's weights, Adam at 3e-3,
   batches of 64 random sequences drawn from their own generator (seed 1000 + seed).
2. **Task**: then train the whole model on the k = 4 task exactly as section 4.6 does (Adam at
   3e-3, 600 steps, batches of 64, the test set of 2,000 sequences drawn with seed 123).

``prefit_steps`` = 0 is the control: the same initial model, the same task batches, no pre-fit.
Each row records the head's mean weight on the letter before and on the letter 4 back (queries
4 .. 11) after the pre-fit and during the task training, and the share of scored test positions
with both letters right (chance on the far letter: 1/16 = 6.25%). A few CPU-seconds a run.
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

K = 4
PREFIT_STEPS = 1500
CHECKPOINTS = (50, 150, 300)  # task steps at which the head's weights are also recorded


def two_peak_target(length: int = SEQ_LEN, k: int = K) -> torch.Tensor:
    """(T, T) rows of the pattern: 0.5 on i - 1 and 0.5 on i - k, else all on i - 1 (or on 0)."""
    target = torch.zeros(length, length)
    for i in range(length):
        if i >= k:
            target[i, i - 1] = target[i, i - k] = 0.5
        else:
            target[i, max(i - 1, 0)] = 1.0
    return target


def head_weights(model, tokens: torch.Tensor) -> tuple[float, float]:
    """The single head's mean weight on offset -1 and on offset -K (queries K .. T-1)."""
    with torch.no_grad():
        _, w = model(tokens, need_weights=True)  # (B, 1, T, T)
    q = torch.arange(K, SEQ_LEN)
    return round(w[:, 0, q, q - 1].mean().item(), 3), round(w[:, 0, q, q - K].mean().item(), 3)


def prefit(model, steps: int, seed: int) -> None:
    """Fit the head's own W^Q, W^K to the two-peaked target; nothing else moves."""
    attn = model.block.self_attn
    params = [*attn.q_proj.parameters(), *attn.k_proj.parameters()]
    optimizer = torch.optim.Adam(params, lr=LR)
    target, gen = two_peak_target(), torch.Generator().manual_seed(1000 + seed)
    for _ in range(steps):
        tokens = torch.randint(VOCAB, (BATCH, SEQ_LEN), generator=gen)
        h = model.block.norm1(model.position(model.embedding(tokens)))
        _, w = attn(h, h, h, need_weights=True)  # (B, 1, T, T)
        loss = -(target * torch.log(w[:, 0] + 1e-9)).sum(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def run(prefit_steps: int, seed: int, steps: int = STEPS) -> dict:
    torch.set_num_threads(1)
    start = time.process_time()
    task = offset_task(K)
    tokens, targets = task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(1)
    if prefit_steps:
        prefit(model, prefit_steps, seed)
    model.eval()
    curve = {"0": head_weights(model, tokens)}
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    batches = task_batches(task, BATCH, SEQ_LEN, VOCAB, gen)
    done = 0
    for at in (*[c for c in CHECKPOINTS if c < steps], steps):
        fit(model, batches, tagging_loss, optimizer, at - done, progress=False)
        done = at
        curve[str(at)] = head_weights(model, tokens)
    with torch.no_grad():
        logits = model(tokens)  # (B, T, 2, V)
    right = logits.argmax(-1) == targets  # (B, T, 2)
    row = {"k": K, "heads": 1, "seed": seed, "prefit_steps": prefit_steps, "lr": LR,
           "steps": steps, "scored_positions": int(scored.sum()),
           "weights_before_and_far": curve,  # {task steps: [weight on -1, weight on -K]}
           "both_right": round(right.all(-1)[scored].float().mean().item(), 5),
           "before_right": round(right[..., 0][scored].float().mean().item(), 5),
           "far_right": round(right[..., 1][scored].float().mean().item(), 5),
           "cpu_seconds": round(time.process_time() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def grid(smoke: bool = False) -> list[tuple]:
    if smoke:
        return [(0, 0, 3), (5, 0, 3)]
    return [(p, s, STEPS) for s in (0, 1, 2) for p in (0, PREFIT_STEPS)]


def main(argv: list[str] | None = None) -> int:
    return common.grid_main(__doc__, run, grid, "one_head_two_peaks.json", argv)


if __name__ == "__main__":
    sys.exit(main())
