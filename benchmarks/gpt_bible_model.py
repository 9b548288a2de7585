"""Chapter 8's Bible GPT, trained once and stored: weights plus held-out perplexity.

Usage: ``python benchmarks/gpt_bible_model.py --steps 2400`` (writes
``lib/attnbook/results/gpt_bible_2400.safetensors`` and ``gpt_bible_2400.json``, which the
chapter loads for Sections 8.4-8.7), ``python benchmarks/gpt_bible_model.py --steps 600``
(the chapter's 600-step run, stored the same way), or ``--smoke`` (seconds; writes nothing
unless ``--out``).

The chapter's data, configuration and recipe, as ``benchmarks/gpt_vs_ngram.py`` trains them:
the World English Bible with one chapter in 20 held out, the 512-token byte-level BPE, a GPT
of width 64, 4 heads, 2 layers, windows of 64; AdamW at 1e-2, betas 0.9/0.95, weight decay
0.01, batches of 64 windows, 10% warm-up then linear decay over ``--steps``, gradients clipped
to norm 1, seed 0 for the weights and the batches, one thread. The held-out perplexity is
measured every tenth of the run, and with it the loss on as many training windows (evenly
spaced over the training text, measured the same way: a train-vs-held-out curve). The results file stores the weights' SHA-256 (the chapter
refuses a file that does not match), the held-out perplexity and per-position losses, and
the CPU seconds (user + sys) of the training.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch

import common
from attnbook.checkpoints import sha256_of
from attnbook.checks import count_parameters
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.tasks.language_modeling import next_token_cross_entropy
from attnbook.tasks.token_stream import (
    held_out_windows, lm_batches, model_loss, position_losses,
)
from attnbook.train import fit
from gpt_vs_ngram import WINDOW, VOCAB, streams


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=2400, help="training steps")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    steps = 20 if args.smoke else args.steps
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    torch.manual_seed(0)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    batches = lm_batches(train, WINDOW, 64, torch.Generator().manual_seed(0))

    # as many training windows as held-out ones, evenly spaced over the training text
    count = len(held_out_windows(test, WINDOW))
    starts = torch.linspace(0, len(train) - WINDOW - 1, count).long()  # (N,)
    train_windows = train[starts[:, None] + torch.arange(WINDOW + 1)]  # (N, WINDOW + 1)

    def train_loss(m: torch.nn.Module) -> float:  # the same measure as model_loss
        with torch.no_grad():
            total = sum(next_token_cross_entropy(m, chunk, reduction="sum").item()
                        for chunk in train_windows.split(64))
        return total / train_windows[:, 1:].numel()

    def held_out(m: torch.nn.Module) -> dict[str, float]:
        row = {"perplexity": math.exp(model_loss(m, test, WINDOW)),
               "train_loss": train_loss(m)}
        print(json.dumps(row), flush=True)
        return row

    cpu_start = sum(os.times()[:2])
    start = time.perf_counter()
    history = fit(model, batches, next_token_loss, optimizer, steps,
                  scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps),
                  eval_fn=held_out, eval_every=max(1, steps // 10), progress=False)
    cpu_seconds = sum(os.times()[:2]) - cpu_start
    wall_seconds = time.perf_counter() - start
    loss = model_loss(model, test, WINDOW)
    out = common.out_path(args, f"gpt_bible_{steps}.json")
    if out is None:
        print(json.dumps({"perplexity": math.exp(loss), "cpu_seconds": cpu_seconds}))
        return
    from safetensors.torch import save_file

    weights = Path(out).with_suffix(".safetensors")
    # the read-out shares the token table: cloned, so that safetensors stores plain tensors
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
              str(weights))
    common.write_result(out, {
        "description": "Chapter 8: the chapter's GPT and recipe (seed 0) trained for "
                       f"{steps} steps, its weights stored in {weights.name}; held-out "
                       "perplexity on the chapter's held-out windows of 64; written by "
                       "benchmarks/gpt_bible_model.py",
        "config": config.__dict__, "parameters": count_parameters(model), "steps": steps,
        "batch": 64, "window": WINDOW, "lr": 1e-2, "seed": 0,
        "weights": weights.name, "sha256": sha256_of(weights),
        "perplexity": round(math.exp(loss), 4), "loss": loss,
        "curve": [{"step": s, "perplexity": round(p, 3)}
                  for s, p in history.metrics["perplexity"]],
        # the same steps: loss (nats) on the training windows, and the mean training-batch
        # loss of the tenth of the run that ends there
        "train_curve": [{"step": s, "train_windows_loss": round(x, 4),
                         "batch_loss": round(sum(history.losses[s - tenth:s]) / tenth, 4)}
                        for s, x in history.metrics["train_loss"]
                        for tenth in [max(1, steps // 10)]],
        "train_windows": count,
        "position_losses": [round(x, 4) for x in position_losses(model, test, WINDOW).tolist()],
        "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
        "cpu_seconds": round(cpu_seconds, 1), "wall_seconds": round(wall_seconds, 1),
        "machine": common.machine()})


if __name__ == "__main__":
    main()
