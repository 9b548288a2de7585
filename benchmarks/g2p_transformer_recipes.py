"""The small recipe search behind Chapter 5's Transformer: dev-split WER of a few variants.

Usage: ``python benchmarks/g2p_transformer_recipes.py [NAME ...]`` (default: every variant).

Each variant trains a 2+2-layer Transformer (D=64, 4 heads, d_ff=256, no dropout) for 1,200
steps of 128 words (``G2PRecipe``, seed 0) with Adam(0.9, 0.98, eps 1e-9), then decodes the
dev split greedily. One run per variant, one thread, so variants can run side by side; prints
one JSON line per variant (training seconds are wall-clock and depend on the machine's load).
"""
from __future__ import annotations

import json
import sys

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs, load_g2p
from attnbook.tasks.g2p import evaluate_g2p
from attnbook.tasks.g2p import G2PRecipe, train_g2p
from attnbook.schedules import warmup_linear_scheduler, warmup_scheduler
from attnbook.models.transformer import Transformer, TransformerConfig

VARIANTS = {
    # name: (norm_first, peak lr, schedule, warm-up steps, label smoothing)
    "post-norm, paper schedule, 2e-3": (False, 2e-3, "inverse_sqrt", 200, 0.1),
    "post-norm, linear decay, 2e-3": (False, 2e-3, "linear", 100, 0.1),
    "pre-norm, paper schedule, 3e-3": (True, 3e-3, "inverse_sqrt", 200, 0.1),
    "pre-norm, linear decay, 3e-3": (True, 3e-3, "linear", 100, 0.1),
    "post-norm, constant 3e-3, no smoothing": (False, 3e-3, "constant", 0, 0.0),
    "pre-norm, paper schedule, 3e-3, no smoothing": (True, 3e-3, "inverse_sqrt", 200, 0.0),
}


def run(name: str) -> dict:
    norm_first, lr, schedule, warmup, smoothing = VARIANTS[name]
    torch.manual_seed(0)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    config = TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=64, num_heads=4, d_ff=256,
                               dropout=0.0, norm_first=norm_first)
    model = Transformer(config)
    recipe = G2PRecipe(steps=1200, batch_size=128, lr=lr, label_smoothing=smoothing)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = {
        "inverse_sqrt": lambda: warmup_scheduler(optimizer, warmup),
        "linear": lambda: warmup_linear_scheduler(optimizer, warmup, recipe.steps),
        "constant": lambda: None,
    }[schedule]()
    seconds, history = common.timed(lambda: train_g2p(model, data, src_vocab, tgt_vocab, recipe, optimizer=optimizer,
                                                      scheduler=scheduler, progress=False), torch.device("cpu"))
    result = evaluate_g2p(model, data.dev, src_vocab, tgt_vocab)
    return {"variant": name, "parameters": count_parameters(model), "train_seconds": round(seconds, 1),
            "final_loss": round(sum(history.losses[-50:]) / 50, 3),
            "dev_wer": round(result.wer, 4), "dev_per": round(result.per, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"variants (default: all): {list(VARIANTS)}")
    names = parser.parse_args(argv).names or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")
    torch.set_num_threads(1)
    for name in names:
        print(json.dumps(run(name)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
