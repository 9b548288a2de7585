"""Chapter 8's position-initialisation box: how the scales of the token and position tables
change how fast a tiny GPT learns a task a bigram solves exactly.

Usage: ``python benchmarks/gpt_position_init.py [--jobs 2] [--steps 800]`` (writes
``lib/attnbook/results/gpt_position_init.json``, which the chapter plots), or
``python benchmarks/gpt_position_init.py --smoke`` (seconds; writes nothing unless ``--out``).

The task and the model are the chapter's toy run: each token is followed by itself + 7
(mod 50), windows of 32, batch 16, the chapter's 2-layer GPT (D = 64), AdamW at 1e-3, no
schedule. The four corners of the two tables' initial standard deviations (token, position):
both small (0.02, 0.02: GPT-2, the library's default), mixed (0.02, 1.0: a position table
left at PyTorch's N(0, 1)), both large (1.0, 1.0) and large tokens (1.0, 0.02). Each runs with seeds 0, 1, 2 (the seed
draws the weights and the batches); the training loss of every step is kept, one thread.
"""
from __future__ import annotations

import json

import torch
from torch import nn

import common
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.tasks.token_stream import lm_batches
from attnbook.train import fit

SETTINGS = {"both small": (0.02, 0.02), "mixed": (0.02, 1.0), "both large": (1.0, 1.0),
            "large tokens": (1.0, 0.02)}
SEEDS = (0, 1, 2)


def run_one(name: str, seed: int, steps: int, smoke: bool) -> dict:
    """Train one model; its per-step training losses (one thread)."""
    torch.set_num_threads(1)
    token_std, position_std = SETTINGS[name]
    torch.manual_seed(seed)
    width = 16 if smoke else 64
    model = GPT(GPTConfig(vocab_size=50, max_len=32, d_model=width, num_heads=4, d_ff=4 * width,
                          num_layers=2, position_init_std=position_std))
    if token_std != 0.02:  # GPT draws its token table at 0.02; redraw it (tied: the read-out too)
        nn.init.normal_(model.embeddings.tokens.weight, std=token_std)
    stream = torch.arange(5000) * 7 % 50
    batches = lm_batches(stream, 32, 16, torch.Generator().manual_seed(seed))
    history = fit(model, batches, next_token_loss, torch.optim.AdamW(model.parameters(), lr=1e-3),
                  steps, progress=False)
    row = {"setting": name, "token_std": token_std, "position_std": position_std, "seed": seed,
           "losses": [round(x, 4) for x in history.losses]}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=800, help="training steps per run")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    steps, seeds = (5, (0,)) if args.smoke else (args.steps, SEEDS)
    done = {(r["setting"], r["seed"]): r for r in common.log_rows(args.resume)}
    todo = [(n, s) for n in SETTINGS for s in seeds if (n, s) not in done]
    new = common.run_jobs(run_one, [(n, s, steps, args.smoke) for n, s in todo], args.jobs)
    rows = {**done, **{(r["setting"], r["seed"]): r for r in new}}
    out = common.out_path(args, "gpt_position_init.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: training loss per step of the toy bigram task for four "
                           "initial scales of the token and position tables, 3 seeds; written by "
                           "benchmarks/gpt_position_init.py",
            "settings": {n: {"token_std": t, "position_std": p} for n, (t, p) in SETTINGS.items()},
            "steps": steps, "seeds": list(seeds), "machine": common.machine(args.jobs),
            "runs": [rows[(n, s)] for n in SETTINGS for s in seeds]})


if __name__ == "__main__":
    main()
