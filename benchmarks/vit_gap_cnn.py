"""Chapter 7's global-average-pool control: is the CNN's loss to a 2-pixel move its flatten head?

Usage: ``python benchmarks/vit_gap_cnn.py`` (writes ``lib/attnbook/results/vit_gap_cnn.json``,
which the chapter prints: the chapter's CNN and the same CNN with a global-average-pool head,
seeds 0, 1 and 2, the chapter page's recipe of 1,000 steps, about 12 CPU-seconds a run on one
thread), or ``python benchmarks/vit_gap_cnn.py --smoke`` (a seconds-long run that writes nothing
unless ``--out`` is given; the test suite runs it).

``SmallCNN`` ends in flatten + ``Linear`` on a 2 x 2 x 64 map: a read-out with one weight per
position, which a move of the digit changes. ``GapCNN`` is the same network with the map averaged
over its positions before the ``Linear`` (a head that no move of the map changes). Both are
trained exactly as the chapter page trains its CNN (``seed_everything(seed)`` before the model is
built, the page's recipe, with the augmentation), and scored on the test split unshifted, moved by
1 pixel (mean of four directions) and, by direction, moved by 2 pixels and cropped as that move
crops (shifted, then shifted back) without being moved.
"""
from __future__ import annotations

import dataclasses
import json
import time

import torch
from torch import nn

import common
from attnbook.checks import count_parameters
from attnbook.data.digits import ImageSet, load_digits_splits, shift_images
from attnbook.env import seed_everything
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.tasks.image_classification import (ImageRecipe, accuracy, shifted_accuracy,
                                                  train_classifier)

SEEDS = (0, 1, 2)
MODELS = ("cnn", "cnn_gap")
DIRECTIONS = {"right": (2, 0), "left": (-2, 0), "down": (0, 2), "up": (0, -2)}


class GapCNN(SmallCNN):
    """``SmallCNN`` with a global-average-pool head: (B, 2c, H/4, W/4) -> mean -> Linear."""

    def __init__(self, config: CNNConfig) -> None:
        super().__init__(config)
        self.head = nn.Linear(2 * config.channels, config.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images).mean(dim=(2, 3)))  # (B, classes)


def build(kind: str, seed: int, smoke: bool) -> nn.Module:
    seed_everything(seed)
    config = CNNConfig(channels=4) if smoke else CNNConfig()
    return GapCNN(config) if kind == "cnn_gap" else SmallCNN(config)


def page_recipe(smoke: bool) -> ImageRecipe:
    if smoke:
        return ImageRecipe(steps=4, batch_size=32, warmup_steps=1)
    return dataclasses.replace(ImageRecipe(), steps=1000, warmup_steps=50)


def scores(model: nn.Module, digits) -> dict:
    test, fill = digits.test, digits.background
    row = {"test_accuracy": round(accuracy(model, test), 4),
           "test_accuracy_shift_1": round(shifted_accuracy(model, test, 1, fill), 4)}
    for name, (dx, dy) in DIRECTIONS.items():
        moved = shift_images(test.images, dx, dy, fill)
        cropped = shift_images(moved, -dx, -dy, fill)
        row[f"moved_2_{name}"] = round(accuracy(model, ImageSet(moved, test.labels)), 4)
        row[f"cropped_2_{name}"] = round(accuracy(model, ImageSet(cropped, test.labels)), 4)
    return row


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    digits = load_digits_splits()
    model = build(kind, seed, smoke)
    start = time.process_time()
    train_classifier(model, digits.train, page_recipe(smoke), fill=digits.background,
                     progress=False)
    row = {"model": kind, "seed": seed, "train_images": len(digits.train),
           "parameters": count_parameters(model),
           "train_cpu_seconds": round(time.process_time() - start, 1), **scores(model, digits)}
    print(json.dumps(row), flush=True)
    return row


def main() -> list[dict]:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    args = parser.parse_args()
    seeds = (0,) if args.smoke else tuple(args.seeds)
    out = common.out_path(args, "vit_gap_cnn.json")
    rows = list(common.log_rows(args.resume))
    done = {(r["model"], r["seed"]) for r in rows}
    for kind in MODELS:
        for seed in seeds:
            if (kind, seed) in done:
                continue
            rows.append(run_one(kind, seed, args.smoke))
            if out is not None:
                common.write_result(out, {
                    "description": "Chapter 7: the chapter's CNN (flatten head) and the same CNN "
                                   "with a global-average-pool head, the page's recipe; written "
                                   "by benchmarks/vit_gap_cnn.py",
                    "command": common.command_line(),
                    "recipe": page_recipe(args.smoke).__dict__,
                    "machine": common.machine(), "runs": rows})
    return rows


if __name__ == "__main__":
    main()
