"""Chapter 8's component ladder on the Bible: what attention and the feed-forward layer buy.

Usage: ``python benchmarks/gpt_component_ladder.py`` (writes
``lib/attnbook/results/gpt_component_ladder.json``; about 3 CPU-minutes, one thread), or
``--smoke`` (seconds; writes nothing unless ``--out``).

The chapter's GPT, data and 600-step recipe exactly as ``benchmarks/gpt_bible_model.py --steps
600`` trains them (the same seed for the weights and the batches), three times:

- ``no_attention``: every block's attention output is replaced by zeros, so each position
  reads only its own token and position (its prediction can use one token of context);
- ``no_feed_forward``: every block's feed-forward output is replaced by zeros (attention,
  norms and the tied read-out remain);
- ``full``: the chapter's model, unchanged (it must reproduce ``gpt_bible_600.json``).

A removed sublayer still exists (so the seed draws the same weights) but gets no gradient and
adds nothing; ``parameters`` counts only the parameters that are used. One seed; the held-out
perplexity is measured on the chapter's held-out windows of 64. The results file is written
after every variant.
"""
from __future__ import annotations

import math
import os

import torch
from torch import nn

import common
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.tasks.token_stream import lm_batches, model_loss
from attnbook.train import fit
from gpt_vs_ngram import WINDOW, VOCAB, streams

VARIANTS = ("no_attention", "no_feed_forward", "full")


class Zero(nn.Module):
    """A removed sublayer: adds nothing to the residual stream."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def build(variant: str, config: GPTConfig) -> tuple[GPT, int]:
    """The seed-0 GPT with ``variant``'s sublayers removed, and its count of used parameters."""
    torch.manual_seed(0)
    model = GPT(config)
    unused: set[int] = set()
    for block in model.blocks:
        if variant == "no_attention":
            block.dropout1 = Zero()  # wraps the attention output in the residual sum
            unused |= {id(p) for m in (block.self_attn, block.norm1) for p in m.parameters()}
        elif variant == "no_feed_forward":
            block.dropout2 = Zero()  # wraps the feed-forward output
            unused |= {id(p) for m in (block.feed_forward, block.norm2) for p in m.parameters()}
    used = sum(p.numel() for p in model.parameters() if id(p) not in unused)
    return model, used


def run(variant: str, train: torch.Tensor, test: torch.Tensor, steps: int) -> dict:
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    model, used = build(variant, config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    batches = lm_batches(train, WINDOW, 64, torch.Generator().manual_seed(0))
    cpu_start = sum(os.times()[:2])
    fit(model, batches, next_token_loss, optimizer, steps,
        scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps), progress=False)
    cpu_seconds = sum(os.times()[:2]) - cpu_start
    loss = model_loss(model, test, WINDOW)
    row = {"variant": variant, "parameters": used, "perplexity": round(math.exp(loss), 4),
           "loss": loss, "cpu_seconds": round(cpu_seconds, 1)}
    print(row, flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=600, help="training steps")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    steps = 10 if args.smoke else args.steps
    out = common.out_path(args, "gpt_component_ladder.json")
    rows = []
    for variant in VARIANTS:
        rows.append(run(variant, train, test, steps))
        if out is not None:
            common.write_result(out, {
                "description": "Chapter 8: the chapter's GPT and 600-step recipe (seed 0) with "
                               "the attention or the feed-forward sublayers removed, held-out "
                               "perplexity on the chapter's windows of 64; written by "
                               "benchmarks/gpt_component_ladder.py",
                "steps": steps, "batch": 64, "window": WINDOW, "lr": 1e-2, "seed": 0,
                "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
                "runs": rows, "machine": common.machine()})


if __name__ == "__main__":
    main()
