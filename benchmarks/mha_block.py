"""Chapter 4's neighbours task with the heads inside a pre-norm residual + feed-forward block.

Usage (from the repository root):
``python benchmarks/mha_block.py [--heads 1 2 8] [--seeds 0 1 2] [--steps 1200] [--jobs 2]``

Section 4.6 trains a bare attention layer (no residual, no feed-forward network) and finds that
one head fails the task with linear read-outs while two heads solve it. This script asks whether
that gap survives in a standard block. The model is the library's ``EncoderBlock`` in pre-norm
form: embedding + sinusoidal positions, then ``x + MHA(LN(x))``, then ``x + FFN(LN(x))`` (ReLU,
inner width 4D = 256), a final LayerNorm and the chapter's two linear read-outs. Everything else
is section 4.6's set-up exactly, the same for every H: 12 letters out of 16, width D = 64, Adam at
3e-3, batches of 64 drawn from the seed, 1,200 steps (the first 600 are a run of the chapter's
length), the test set of 2,000 sequences drawn with seed 123, one thread per run. Every
``--eval-every`` steps it scores the share of interior positions (1 .. T-2, two answers each) with
both answers right. Each run prints one JSON line; the results file collects them.

The committed run (``mha_block.json``, its log beside it): one head ends at 98.7% to 99.3%, two and
eight heads at 100% from step 400 on, and one head is far behind at step 200.
"""
from __future__ import annotations

import json
import sys

import common
from attnbook.models.tagger import BlockTagger
from narrow_heads import SEQ_LEN, VOCAB, WIDTH, train_on_neighbours

FF = 256  # the block's feed-forward width; the task's sizes and rate are narrow_heads.py's


def block_tagger(num_heads: int) -> BlockTagger:
    """The library's ``BlockTagger`` at this task's sizes (the chapter builds the same one inline)."""
    return BlockTagger(VOCAB, WIDTH, num_heads, SEQ_LEN, FF)


def run(num_heads: int, seed: int, steps: int, eval_every: int) -> dict:
    model, curve, loss = train_on_neighbours(lambda: block_tagger(num_heads), seed, steps, eval_every)
    row = {"heads": num_heads, "head_dim": WIDTH // num_heads, "seed": seed,
           "model": "pre-norm block (MHA + FFN 256, residuals), linear read-outs",
           "parameters": sum(p.numel() for p in model.parameters()),
           "both_right": curve, "loss_last_50_steps": loss}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--heads", type=int, nargs="+", default=[1, 2, 8])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "mha_block.json"))
    args = p.parse_args(argv)
    jobs = [(h, s, args.steps, args.eval_every) for h in args.heads for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
