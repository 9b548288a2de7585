"""Chapter 4's capacity control: one head with a fixed score bias on offsets -1 and -K.

Usage (from the repository root):
``python benchmarks/mha_block_bias.py``
(the committed ``mha_block_bias.json``; ``--smoke`` runs one tiny job and writes nothing)

Section 4.6 finds one head at chance (6.0% both right) on the letter before + the letter 4 back,
two heads at 100%. Is that a limit of what one head can represent, or of what training finds?
This script trains the same one-head block (``mha_block_far.run``'s set-up: seed 0, 600 steps,
Adam at 3e-3, the test set drawn with seed 123) with a fixed, untrained score bias added to every
attention score: +6 at key offset -1 and +5.6 at key offset -K (passed through the block's
``bias`` argument), and reports both-right and the head's mean weight on each offset. If the
feed-forward layer can decode a blend of two letters, this run solves the task. About 6
CPU-seconds a run.
"""
from __future__ import annotations

import json
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

BIAS = {-1: 6.0, "-k": 5.6}  # fixed score bias at offset -1 and at offset -K


def score_bias(k: int, length: int = SEQ_LEN) -> torch.Tensor:
    """(T, T) additive score bias: BIAS[-1] where key = query - 1, BIAS['-k'] where key = query - k."""
    offset = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # key - query
    bias = torch.zeros(length, length)
    bias[offset == -1], bias[offset == -k] = BIAS[-1], BIAS["-k"]
    return bias


def biased_forward(model, tokens, bias, need_weights=False):
    """``BlockTagger.forward`` with ``bias`` added to the block's attention scores."""
    B, T = tokens.shape
    out = model.block(model.position(model.embedding(tokens)), bias=bias[:T, :T],
                      need_weights=need_weights)
    logits = model.readout(model.norm(out.hidden)).view(B, T, 2, VOCAB)
    return (logits, out.attention) if need_weights else logits


def run(k: int, seed: int, steps: int = STEPS) -> dict:
    torch.set_num_threads(1)
    start = time.process_time()
    task = offset_task(k)
    tokens, targets = task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(1)
    bias = score_bias(k)
    model.forward = lambda toks, need_weights=False: biased_forward(model, toks, bias, need_weights)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    fit(model, task_batches(task, BATCH, SEQ_LEN, VOCAB, gen), tagging_loss, optimizer, steps,
        progress=False)
    model.eval()
    with torch.no_grad():
        logits, w = model(tokens, need_weights=True)  # w: (B, 1, T, T)
    right = logits.argmax(-1) == targets  # (B, T, 2)
    queries = torch.arange(k, SEQ_LEN)  # queries with both keys
    row = {"k": k, "heads": 1, "seed": seed, "lr": LR, "steps": steps,
           "bias": {"-1": BIAS[-1], f"-{k}": BIAS["-k"]},
           "scored_positions": int(scored.sum()),
           "both_right": round(right.all(-1)[scored].float().mean().item(), 5),
           "before_right": round(right[..., 0][scored].float().mean().item(), 5),
           "far_right": round(right[..., 1][scored].float().mean().item(), 5),
           "mean_weight_on_offset": {str(d): round(w[:, 0, queries, queries + d].mean().item(), 3)
                                     for d in (-1, -k)},
           "cpu_seconds": round(time.process_time() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    args = p.parse_args(argv)
    common.check_jobs(p, args)
    rows = common.run_jobs(run, [(4, 0, 5)] if args.smoke else [(4, 0, STEPS)], args.jobs)
    out = common.out_path(args, "mha_block_bias.json")
    if out is not None:
        common.write_result(out, {"description": __doc__.splitlines()[0],
                                  "command": "python benchmarks/mha_block_bias.py",
                                  "machine": common.machine(args.jobs if args.jobs > 1 else None),
                                  "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
