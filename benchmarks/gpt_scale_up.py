"""Chapter 8: can the GPT catch the Kneser-Ney 4-gram with more steps or more width?

Usage: ``python benchmarks/gpt_scale_up.py --name long --steps 6000`` (the chapter's model,
2.5 times the 2,400 steps of ``gpt_vs_ngram.py``) and ``python benchmarks/gpt_scale_up.py
--name wide --d-model 128 --lr 5e-3 --steps 3000`` (twice the width; the peak learning rate
scaled by 64/128, not tuned). Each writes ``lib/attnbook/results/gpt_scale_up_NAME.json``;
``--smoke`` runs 20 steps on a slice and writes nothing unless ``--out``.

Same data, tokenizer, windows and recipe as ``gpt_vs_ngram.py`` (AdamW, betas 0.9/0.95, weight
decay 0.01, batch 64 windows of 64 tokens, 10% warm-up then linear decay to 0, gradient clipping
at norm 1, seed 0): only ``--steps``, ``--d-model`` (heads stay 4, d_ff = 4 d_model) and
``--lr`` change (and ``--seed``, which draws the weights and the batches). The held-out
perplexity is measured every tenth of the run, and the results file is rewritten at each
measurement (``"complete": false`` until the end), so a run cut short still leaves its curve.
At the end it adds the mean held-out loss at each of the 64 positions of a window
(``position_losses``: entry t is predicted from t + 1 tokens of context). One thread.

The chapter reads five 2400-step runs: ``gpt_vs_ngram.py``'s (d_model 64, lr 1e-2, seed 0) and
``--name long_seed1 --steps 2400 --seed 1``, ``--name long_seed2 --steps 2400 --seed 2``,
``--name narrow_lr5e-3 --lr 5e-3 --steps 2400`` and ``--name wide --d-model 128 --lr 5e-3
--steps 2400`` (one seed: a second was started and stopped for lack of time).
"""
from __future__ import annotations

import json
import math

import torch

import common
from attnbook.checks import count_parameters
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.tasks.token_stream import lm_batches, model_loss, position_losses
from attnbook.train import fit
from gpt_vs_ngram import VOCAB, WINDOW, streams


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--name", required=True, help="the results file is gpt_scale_up_NAME.json")
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0,
                        help="draws the weights and the batches (default 0, the chapter's)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    steps = 20 if args.smoke else args.steps
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=args.d_model, num_heads=4,
                       d_ff=4 * args.d_model, num_layers=2)
    torch.manual_seed(args.seed)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    batches = lm_batches(train, WINDOW, 64, torch.Generator().manual_seed(args.seed))
    out = common.out_path(args, f"gpt_scale_up_{args.name}.json")
    curve: list[dict] = []
    every = max(1, steps // 10)

    def record(extra: dict) -> None:
        if out is None:
            return
        common.write_result(out, {
            "description": "Chapter 8: the chapter's GPT recipe trained longer or wider, held-out "
                           "perplexity every tenth of the run and, at the end, per position; "
                           "written by benchmarks/gpt_scale_up.py",
            "gpt": {**config.__dict__, "parameters": count_parameters(model), "steps": steps,
                    "lr": args.lr, "seed": args.seed, "clip_norm": 1.0, "curve": curve},
            **extra, "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
            "machine": common.machine()})

    def held_out(m: torch.nn.Module) -> dict[str, float]:
        ppl = math.exp(model_loss(m, test, WINDOW))
        step = min(steps, (len(curve) + 1) * every)
        curve.append({"step": step, "perplexity": round(ppl, 3)})
        print(json.dumps(curve[-1]), flush=True)
        record({"complete": False})
        return {"perplexity": ppl}

    seconds, _ = common.timed(lambda: fit(
        model, batches, next_token_loss, optimizer, steps,
        scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps),
        eval_fn=held_out, eval_every=every, progress=False), torch.device("cpu"))
    losses = position_losses(model, test, WINDOW)
    print(json.dumps({"train_seconds": round(seconds, 1)}), flush=True)
    record({"complete": True, "train_seconds": round(seconds, 1),
            "position_losses": [round(x, 4) for x in losses.tolist()]})


if __name__ == "__main__":
    main()
