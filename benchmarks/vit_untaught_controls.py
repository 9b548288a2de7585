"""Chapter 7's untaught controls: is the untaught ViT's 1-pixel collapse the patch grid or attention?

Usage: ``python benchmarks/vit_untaught_controls.py`` (writes
``lib/attnbook/results/vit_untaught_controls.json``, which the chapter prints: the stem CNN with
seeds 0, 1 and 2, about 15 CPU-seconds each, and the local ViT with seed 0 only, about 2
CPU-minutes, one thread; ``--local-seeds 0 1 2`` adds its other seeds), or ``python benchmarks/vit_untaught_controls.py --smoke`` (a seconds-long run that
writes nothing unless ``--out`` is given; the test suite runs it).

``vit_data_efficiency.py`` trained the ViT and the CNN with no augmentation (``vit_noaug``,
``cnn_noaug``, all 1,251 training digits): a 1-pixel shift then keeps far less of the ViT's accuracy.
Two models separate the patch grid from attention, each trained exactly as those controls (the
chapter's recipe with no rotation, scaling or shift; all training digits; the same seeds):

- ``cnn_stem_noaug``: ``vit_patch_grid.py``'s ``StemCNN``, the chapter's CNN reading the ViT's grid
  (a 2 x 2 stride-2 convolution first): convolution on the ViT's grid;
- ``vit_local_noaug``: ``vit_data_efficiency.py``'s ``LocalViT``, the ViT with each patch attending
  only to its 3 x 3 neighbourhood of patches: locality inside attention, on the same grid.

Each is measured on the test split, unshifted and shifted by 1 and 2 pixels (mean of the four
directions). The results file is rewritten after every run (``--seeds``, ``--local-seeds`` and
``--models`` pick the runs), so a run cut short keeps what it finished.
"""
from __future__ import annotations

import dataclasses
import json
import time

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data.digits import load_digits_splits
from attnbook.models.cnn import CNNConfig
from attnbook.models.vit import ViTConfig
from attnbook.tasks.image_classification import ImageRecipe, train_classifier
from vit_data_efficiency import NO_AUGMENTATION, LocalViT
from vit_patch_grid import SHIFTS, StemCNN, accuracy_and_shifts

SEEDS = (0, 1, 2)
LOCAL_SEEDS = (0,)  # a local-attention run costs about 8 stem-CNN runs
MODELS = ("cnn_stem_noaug", "vit_local_noaug")


def build(kind: str, seed: int, smoke: bool) -> torch.nn.Module:
    torch.manual_seed(seed)
    if kind == "vit_local_noaug":
        sizes = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32} if smoke else {}
        return LocalViT(ViTConfig(**sizes))
    return StemCNN(CNNConfig(channels=4) if smoke else CNNConfig())


def run_one(kind: str, seed: int, recipe: ImageRecipe, smoke: bool) -> dict:
    """Train one model on all the training digits with no augmentation and measure it."""
    torch.set_num_threads(1)
    digits = load_digits_splits()
    model = build(kind, seed, smoke)
    recipe = dataclasses.replace(recipe, seed=seed, **NO_AUGMENTATION)
    start = time.process_time()
    train_classifier(model, digits.train, recipe, fill=digits.background, progress=False)
    row = {"model": kind, "fraction": 1.0, "train_images": len(digits.train), "seed": seed,
           "parameters": count_parameters(model),
           "train_cpu_seconds": round(time.process_time() - start, 1),
           **accuracy_and_shifts(model, digits)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="the stem CNN's seeds")
    parser.add_argument("--local-seeds", type=int, nargs="+", default=list(LOCAL_SEEDS),
                        help="the local ViT's seeds")
    args = parser.parse_args()
    if args.smoke:
        recipe, seeds = ImageRecipe(steps=4, batch_size=32, warmup_steps=1), {kind: (0,) for kind in MODELS}
    else:
        recipe = ImageRecipe()
        seeds = {"cnn_stem_noaug": tuple(args.seeds), "vit_local_noaug": tuple(args.local_seeds)}
    out = common.out_path(args, "vit_untaught_controls.json")
    rows = list(common.log_rows(args.resume))
    done = {(r["model"], r["seed"]) for r in rows}
    for kind in args.models:
        for seed in seeds[kind]:
            if (kind, seed) in done:
                continue
            rows.append(run_one(kind, seed, recipe, args.smoke))
            if out is not None:
                common.write_result(out, {
                    "description": "Chapter 7: the stem CNN and the local-attention ViT trained with no "
                                   "augmentation on all the training digits; written by "
                                   "benchmarks/vit_untaught_controls.py",
                    "command": common.command_line(),
                    "recipe": dataclasses.replace(recipe, **NO_AUGMENTATION).__dict__,
                    "shifts": list(SHIFTS), "machine": common.machine(), "runs": rows})
    return rows


if __name__ == "__main__":
    main()
