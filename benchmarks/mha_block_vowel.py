"""Chapter 4's vowel task (the letter before + the latest vowel) with the heads in a pre-norm block.

Usage (from the repository root):
``python benchmarks/mha_block_vowel.py [--heads 1 2] [--seeds 0 1 2] [--steps 600] [--jobs 2]``

Section 4.6 trains the vowel task in a bare attention layer: one head is well behind two. This
script asks whether that gap survives inside a standard block: ``attnbook.models.tagger.BlockTagger`` (one
pre-norm ``EncoderBlock`` with residuals and a feed-forward layer of width 256, a final LayerNorm
and the chapter's two linear read-outs). Everything else is section 4.6's vowel set-up: 12 letters
out of 16, letters 0-3 play the vowels, width D = 64, Adam at 3e-3, batches of 64 drawn from the
seed, 600 steps, the test set of 2,000 sequences drawn with seed 123, one thread per run. It scores
the share of positions with both answers right (of those with both answers), and the same share
where the latest vowel is 4 or more positions back.
"""
from __future__ import annotations

import json
import sys

import torch

import common
from attnbook.data.synthetic import IGNORE, task_batches
from attnbook.env import seed_everything
from attnbook.tasks.tagging import tagging_loss
from attnbook.train import fit
from mha_block import block_tagger
from narrow_heads import SEQ_LEN, VOCAB

VOWELS = 4  # letters 0 .. 3 play the vowels, as in the chapter
TEST_SEED, TEST_SIZE, BATCH, LR = 123, 2000, 64, 3e-3


def vowel_task(batch_size: int, length: int, vocab_size: int, generator: torch.Generator):
    """The chapter's task: answers (B, T, 2) = the letter before, the latest vowel before it."""
    tokens = torch.randint(vocab_size, (batch_size, length), generator=generator)  # (B, T)
    targets = torch.full((batch_size, length, 2), IGNORE, dtype=torch.long)  # (B, T, 2)
    targets[:, 1:, 0] = tokens[:, :-1]
    last = torch.full((batch_size,), IGNORE, dtype=torch.long)  # (B,)
    for t in range(length):
        targets[:, t, 1] = last
        last = torch.where(tokens[:, t] < VOWELS, tokens[:, t], last)
    return tokens, targets


def vowel_distance(tokens: torch.Tensor) -> torch.Tensor:
    """(B, T): how many positions back the latest vowel is (0: none yet)."""
    back = torch.zeros_like(tokens)
    since = torch.zeros_like(tokens[:, 0])  # (B,)
    for t in range(tokens.shape[1]):
        back[:, t] = since
        since = torch.where(tokens[:, t] < VOWELS, 1, torch.where(since > 0, since + 1, 0))
    return back


def run(num_heads: int, seed: int, steps: int) -> dict:
    torch.set_num_threads(1)
    tokens, targets = vowel_task(TEST_SIZE, SEQ_LEN, VOCAB, torch.Generator().manual_seed(TEST_SEED))
    scored = (targets != IGNORE).all(-1)  # (B, T)
    far = scored & (vowel_distance(tokens) >= 4)  # (B, T)
    gen = seed_everything(seed)
    model = block_tagger(num_heads)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    fit(model, task_batches(vowel_task, BATCH, SEQ_LEN, VOCAB, gen), tagging_loss, optimizer,
        steps, progress=False)
    model.eval()
    with torch.no_grad():
        right = (model(tokens).argmax(-1) == targets).all(-1)  # (B, T)
    row = {"heads": num_heads, "seed": seed, "steps": steps,
           "model": "pre-norm block (MHA + FFN 256, residuals), linear read-outs",
           "scored_positions": int(scored.sum()), "far_positions": int(far.sum()),
           "both_right": right[scored].float().mean().item(),
           "both_right_vowel_4plus_back": right[far].float().mean().item()}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--heads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "mha_block_vowel.json"))
    args = p.parse_args(argv)
    jobs = [(h, s, args.steps) for h in args.heads for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, common.Path(args.out), __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
