"""Chapter 7's patch-grid control: is the ViT's clean gap to the CNN the stride-2 patch grid?

Usage: ``python benchmarks/vit_patch_grid.py --jobs 2 --models vit_p1 vit cnn cnn_stem vit_mlp``
(the committed results: writes ``lib/attnbook/results/vit_patch_grid.json``, which the chapter
prints; about 6 CPU-minutes for the short runs and 20 more for the MLP head's nine full runs, one
thread per run; ``--resume lib/attnbook/results/vit_patch_grid.log`` keeps earlier runs, and
``--logged-only`` writes the file from those logs without training what they lack: the committed
file holds four of the MLP head's nine full runs, seeds 0, 1 and 2 at 125 images and seed 0 at
312, the others not finished on a shared 2-core machine), or
``python benchmarks/vit_patch_grid.py --smoke`` (a seconds-long run that writes nothing unless
``--out`` is given; the test suite runs it).

The chapter's ViT cuts an 8 x 8 digit into 2 x 2 patches at stride 2; the chapter's CNN
convolves at stride 1. Two controls move each model to the other's grid:

- ``vit_p1``: the chapter's ViT with ``patch_size=1`` (every pixel a token: 64 patches on an
  8 x 8 grid, same width, depth, heads and recipe);
- ``cnn_stem``: the chapter's CNN with its first 3 x 3 convolution replaced by a 2 x 2
  convolution at stride 2 (the ViT's patch embedding, followed by ReLU) and its first max-pool
  dropped, so it reads the same 4 x 4 grid of 2 x 2 patches as the ViT and still ends on a
  2 x 2 map of 64 channels.

All four models (``vit``, ``vit_p1``, ``cnn``, ``cnn_stem``) are trained on the same 125 training
digits (10% of the training split, stratified, picked by the seed) with seeds 0, 1 and 2. A ViT
step at P = 1 costs about twice one at P = 2 on a CPU, so, within the chapter's CPU budget, these
runs use a **short recipe**: ``ImageRecipe()`` with 300 steps and 15 warm-up steps (the chapter's
results use 2,000). ``cnn_stem`` is also run with the full recipe (2,000 steps), to set beside the
chapter's 2,000-step runs in ``vit_data_efficiency.json``. ``vit_mlp`` (``--models vit_mlp``) is
the chapter's ViT with the paper's MLP head (``head_hidden = D``, tanh), with the short recipe
and with the full one, the latter also on 312 and all 1,251 training digits (``fraction`` 0.25
and 1.0), to set
beside the linear head's 2,000-step runs in ``vit_data_efficiency.json`` (same subsets, seeds,
initial weights but the head's, and batch order). Each run is measured on the test split, unshifted and shifted by 1 and 2 pixels (mean of four
directions). One thread per run.
"""
from __future__ import annotations

import dataclasses
import json

import torch
from torch import nn

import common
from attnbook.checks import count_parameters
from attnbook.data.digits import load_digits_splits, subset
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.models.vit import ViT, ViTConfig
from attnbook.tasks.image_classification import (ImageRecipe, accuracy, shifted_accuracy,
                                                 train_classifier)

SEEDS = (0, 1, 2)
FRACTION = 0.1
SHIFTS = (1, 2)
SHORT = {"steps": 300, "warmup_steps": 15}
# (kind, recipe name, share of the training split): the default grid; vit_mlp runs only when
# asked for
GRID = (("vit", "short", FRACTION), ("vit_p1", "short", FRACTION), ("cnn", "short", FRACTION),
        ("cnn_stem", "short", FRACTION), ("cnn_stem", "full", FRACTION))
OPTIONAL = (("vit_mlp", "short", FRACTION), ("vit_mlp", "full", FRACTION),
            ("vit_mlp", "full", 0.25), ("vit_mlp", "full", 1.0))


class StemCNN(SmallCNN):
    """The chapter's CNN reading the ViT's grid: a 2 x 2 stride-2 convolution first, no first pool."""

    def __init__(self, config: CNNConfig) -> None:
        super().__init__(config)
        c = config.channels
        self.features = nn.Sequential(
            nn.Conv2d(config.in_channels, c, 2, stride=2), nn.ReLU(),  # (B, c, H/2, W/2)
            nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # (B, 2c, H/4, W/4)
        )


def build(kind: str, seed: int, smoke: bool) -> nn.Module:
    torch.manual_seed(seed)
    if kind.startswith("vit"):
        sizes = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32} if smoke else {}
        if kind == "vit_p1":
            sizes["patch_size"] = 1
        if kind == "vit_mlp":
            sizes["head_hidden"] = sizes.get("d_model", ViTConfig().d_model)
        return ViT(ViTConfig(**sizes))
    config = CNNConfig(channels=4) if smoke else CNNConfig()
    return StemCNN(config) if kind == "cnn_stem" else SmallCNN(config)


def recipes(smoke: bool) -> dict[str, ImageRecipe]:
    if smoke:
        tiny = ImageRecipe(steps=4, batch_size=32, warmup_steps=1)
        return {"short": tiny, "full": tiny}
    return {"short": dataclasses.replace(ImageRecipe(), **SHORT), "full": ImageRecipe()}


def run_one(kind: str, recipe_name: str, fraction: float, seed: int, smoke: bool) -> dict:
    """Train one model on the seed's share of the training digits and measure it (one thread)."""
    torch.set_num_threads(1)
    digits = load_digits_splits()
    train = subset(digits.train, fraction, seed) if fraction < 1.0 else digits.train
    model = build(kind, seed, smoke)
    recipe = dataclasses.replace(recipes(smoke)[recipe_name], seed=seed)
    seconds, _ = common.timed(lambda: train_classifier(model, train, recipe, fill=digits.background,
                                                       progress=False), torch.device("cpu"))
    row = {"model": kind, "recipe": recipe_name, "steps": recipe.steps, "seed": seed,
           "fraction": fraction, "train_images": len(train), "parameters": count_parameters(model),
           "train_seconds": round(seconds, 1),
           **accuracy_and_shifts(model, digits)}
    print(json.dumps(row), flush=True)
    return row


def accuracy_and_shifts(model: torch.nn.Module, digits) -> dict:
    """Test accuracy, plain and with the test digits shifted by each of SHIFTS pixels."""
    scores = {"test_accuracy": round(accuracy(model, digits.test), 4)}
    for pixels in SHIFTS:
        scores[f"test_accuracy_shift_{pixels}"] = round(
            shifted_accuracy(model, digits.test, pixels, digits.background), 4)
    return scores


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=None,
                        help="kinds to run (default: the grid; vit_mlp only when named)")
    parser.add_argument("--logged-only", action="store_true",
                        help="write the results from the --resume logs alone, training nothing")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    grid = [(k, r, f) for k, r, f in GRID + OPTIONAL
            if (args.models is None and (k, r, f) in GRID) or (args.models and k in args.models)]
    seeds = (0,) if args.smoke else SEEDS

    def key(row):  # the first runs (all at FRACTION) did not record the fraction
        row.setdefault("fraction", FRACTION)
        return row["model"], row["recipe"], row["fraction"], row["seed"]

    done = {key(row): row for row in common.log_rows(args.resume)}
    todo = [(k, r, f, s, args.smoke) for k, r, f in grid for s in seeds
            if (k, r, f, s) not in done]
    if args.logged_only:
        print(f"not run (--logged-only): {[t[:4] for t in todo]}")
        todo = []
    new = common.run_jobs(run_one, todo, args.jobs)
    rows = {**done, **{key(row): row for row in new}}
    out = common.out_path(args, "vit_patch_grid.json")
    if out is not None:
        result = {
            "description": "Chapter 7: the ViT at P = 1 and the CNN with a 2x2 stride-2 stem, beside "
                           "the chapter's two models, 125 training digits, three seeds (the ViT with "
                           "an MLP head also at 2,000 steps: the runs listed); written by "
                           "benchmarks/vit_patch_grid.py",
            "recipes": {name: r.__dict__ for name, r in recipes(args.smoke).items()},
            "seeds": list(seeds), "shifts": list(SHIFTS), "machine": common.machine(args.jobs),
            "runs": [rows[key] for key in sorted(rows)],
        }
        common.write_result(out, result)


if __name__ == "__main__":
    main()
