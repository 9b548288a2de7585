"""Chapter 7's position-table control: does the learned grid come from the digits or the augmentation?

Usage: ``python benchmarks/vit_position_table.py [--jobs 2]`` (writes
``lib/attnbook/results/vit_position_table.json``, which the chapter prints), or
``python benchmarks/vit_position_table.py --smoke`` (a seconds-long run that writes nothing
unless ``--out`` is given).

The chapter's ViT is trained with the page's recipe (``ImageRecipe()`` with 1,000 steps and 50
warm-up steps, the run of Section 7.4) on all the training digits, seeds 0, 1 and 2, once with the
recipe's augmentation (rotation, scaling, the +-1-pixel shift) and once with none. For each run
the script stores the test accuracy and the mean cosine similarity of each patch position's
learned embedding with its 4-neighbours on the 4 x 4 grid, and with all positions further apart
(the statistic of the chapter's Section 7.6). One thread per run.
"""
from __future__ import annotations

import dataclasses
import json
import statistics

import torch
import torch.nn.functional as F

import common
from attnbook.data.digits import load_digits_splits
from attnbook.env import seed_everything
from attnbook.models.vit import ViT, ViTConfig
from attnbook.tasks.image_classification import ImageRecipe, accuracy, train_classifier

SEEDS = (0, 1, 2)
NO_AUGMENTATION = {"degrees": 0.0, "scale": 0.0, "shift": 0.0}


def neighbour_similarity(positions: torch.Tensor, g: int) -> tuple[float, float]:
    """Mean cosine similarity of a position with its grid 4-neighbours, and with all others."""
    sim = F.cosine_similarity(positions[:, None], positions[None], dim=-1)
    near, far = [], []
    for a in range(g * g):
        for b in range(g * g):
            if a != b:
                d = abs(a // g - b // g) + abs(a % g - b % g)
                (near if d == 1 else far).append(sim[a, b].item())
    return statistics.mean(near), statistics.mean(far)


def run_one(augmented: bool, seed: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    digits = load_digits_splits()
    recipe = dataclasses.replace(ImageRecipe(), steps=1000, warmup_steps=50, seed=seed)
    if smoke:
        recipe = dataclasses.replace(recipe, steps=4, warmup_steps=1)
    if not augmented:
        recipe = dataclasses.replace(recipe, **NO_AUGMENTATION)
    seed_everything(seed)
    config = ViTConfig()
    vit = ViT(config)
    train_classifier(vit, digits.train, recipe, fill=digits.background)
    near, far = neighbour_similarity(vit.position_embeddings[1:].detach(), config.grid_size)
    row = {"augmented": augmented, "seed": seed, "test_accuracy": accuracy(vit, digits.test),
           "neighbours": near, "further_apart": far}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = common.experiment_parser(__doc__)
    args = p.parse_args()
    common.check_jobs(p, args)
    done = {(r["augmented"], r["seed"]): r for r in common.log_rows(args.resume)}
    todo = [(aug, seed, args.smoke) for aug in (True, False) for seed in SEEDS if (aug, seed) not in done]
    for row in common.run_jobs(run_one, todo, args.jobs):
        done[(row["augmented"], row["seed"])] = row
    out = common.out_path(args, "vit_position_table.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: neighbour vs further-apart cosine similarity of the ViT's learned "
                           "position embeddings, trained with and without augmentation (page recipe, "
                           "1,000 steps); written by benchmarks/vit_position_table.py",
            "machine": common.machine(args.jobs), "runs": sorted(done.values(), key=lambda r: (not r["augmented"], r["seed"])),
        })


if __name__ == "__main__":
    main()
