"""Chapter 7's recipe check: is the ViT's gap to the CNN at 125 images an optimisation artefact?

Usage: ``python benchmarks/vit_recipe_sweep.py [--jobs 2] [--stages sweep seeds [shift]]
[--resume LOG ...]`` (writes ``lib/attnbook/results/vit_recipe_sweep.json``, which the chapter
prints), or ``python benchmarks/vit_recipe_sweep.py --smoke`` (a seconds-long run that writes
nothing unless ``--out`` is given; the test suite runs it).

Three stages, each with one thread per run and the data of ``vit_data_efficiency.py``:

- ``sweep``: the chapter's ViT and CNN on the same 125 training images (10% of the training
  split, subset seed 0), each trained with five recipes: learning rate {1e-3, 3e-3} x warm-up
  {100, 400} steps at the chapter's 2,000 steps, and the chapter's recipe (lr 3e-3, warm-up 100)
  at twice the steps (4,000). Everything else is the chapter's ``ImageRecipe()``. Each model's
  recipe is **chosen on the dev split** (174 digits; ties go to the chapter's recipe, then to
  the earlier candidate in the order above); the test split is measured too but chooses nothing.
- ``seeds``: each model's chosen recipe at seeds 1 and 2 as well (seed 0 is the sweep's run), so
  the chosen recipes have three seeds like the chapter's grid. A model whose chosen recipe is the
  chapter's own needs no new runs: its seeds 1 and 2 are in ``vit_data_efficiency.json`` (same
  library, same subsets; the sweep's seed-0 run repeats that file's seed 0), except in ``--smoke``.
- ``shift`` (not run by default): both models on all 1,251 training images with a **shift-only** augmentation (no
  rotation, no scaling, shifts of up to 1 pixel), seeds 0-2, so that no training image has ink
  moved by more than 1 pixel and a 2-pixel test shift is new to both models.

Every run records dev and test accuracy and the test accuracy under 1- and 2-pixel shifts (mean
of the four directions). The results file is rewritten after each stage with the runs done so far.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

import common
from attnbook.data.digits import load_digits_splits, subset
from attnbook.tasks.image_classification import ImageRecipe, accuracy, shifted_accuracy, train_classifier
from vit_data_efficiency import SHIFTS, build

MODELS = ("vit", "cnn")
SWEEP_FRACTION = 0.1
# name -> changes to ImageRecipe(); the chapter's recipe is "chapter"
CANDIDATES = {
    "lr 1e-3, warm-up 100": {"lr": 1e-3, "warmup_steps": 100},
    "lr 1e-3, warm-up 400": {"lr": 1e-3, "warmup_steps": 400},
    "chapter": {},
    "lr 3e-3, warm-up 400": {"lr": 3e-3, "warmup_steps": 400},
    "chapter, 2x steps": {"steps": 4000},
}
DEFAULT = "chapter"
SHIFT_ONLY = {"degrees": 0.0, "scale": 0.0, "shift": 1.0}
STAGES = ("sweep", "seeds", "shift")
DEFAULT_STAGES = ("sweep", "seeds")


def recipe_for(name: str, smoke: bool) -> ImageRecipe:
    base = ImageRecipe(steps=8, batch_size=32, warmup_steps=2) if smoke else ImageRecipe()
    changes = dict(CANDIDATES[name]) if name in CANDIDATES else dict(SHIFT_ONLY)
    if smoke:  # keep the candidates' ratios at a few steps
        changes["warmup_steps"] = 4 if changes.get("warmup_steps") == 400 else 2
        changes["steps"] = 16 if "steps" in changes else 8
    return dataclasses.replace(base, **changes)


def run_one(stage: str, name: str, kind: str, fraction: float, seed: int, smoke: bool) -> dict:
    """Train one model with one recipe and measure it (one thread)."""
    torch.set_num_threads(1)
    digits = load_digits_splits()
    train = subset(digits.train, fraction, seed) if fraction < 1.0 else digits.train
    model = build(kind, seed, smoke)
    recipe = dataclasses.replace(recipe_for(name, smoke), seed=seed)
    seconds, _ = common.timed(lambda: train_classifier(model, train, recipe, fill=digits.background,
                                                       progress=False), torch.device("cpu"))
    row = {"stage": stage, "recipe": name, "model": kind, "fraction": fraction, "train_images": len(train),
           "seed": seed, "lr": recipe.lr, "warmup_steps": recipe.warmup_steps, "steps": recipe.steps,
           "train_seconds": round(seconds, 1), "dev_accuracy": round(accuracy(model, digits.dev), 4),
           "test_accuracy": round(accuracy(model, digits.test), 4)}
    for pixels in SHIFTS:
        row[f"test_accuracy_shift_{pixels}"] = round(shifted_accuracy(model, digits.test, pixels, digits.background), 4)
    print(json.dumps(row), flush=True)
    return row


def key(row: dict) -> tuple:
    return row["stage"], row["recipe"], row["model"], row["seed"]


def choose(rows: list[dict], kind: str) -> str:
    """The recipe with the best seed-0 dev accuracy for ``kind`` (ties: the chapter's, then the first)."""
    sweep = {r["recipe"]: r["dev_accuracy"] for r in rows if r["stage"] == "sweep" and r["model"] == kind}
    order = [DEFAULT] + [name for name in CANDIDATES if name != DEFAULT]
    return max(order, key=lambda name: (sweep[name], -order.index(name)))


def swept(rows: list[dict], kind: str) -> bool:
    """Whether every candidate of the sweep has run for ``kind``."""
    return {r["recipe"] for r in rows if r["stage"] == "sweep" and r["model"] == kind} == set(CANDIDATES)


def jobs_for(stage: str, rows: list[dict], smoke: bool) -> list[tuple]:
    if stage == "sweep":  # the ViT runs first, the longest first, so the short runs fill the gaps
        jobs = [(stage, name, kind, SWEEP_FRACTION, 0, smoke) for kind in MODELS for name in CANDIDATES]
        return sorted(jobs, key=lambda job: (MODELS.index(job[2]), -CANDIDATES[job[1]].get("steps", 0)))
    if stage == "seeds":  # the chapter's recipe has its seeds in vit_data_efficiency.json already
        return [(stage, choose(rows, kind), kind, SWEEP_FRACTION, seed, smoke)
                for kind in MODELS if swept(rows, kind) and (smoke or choose(rows, kind) != DEFAULT)
                for seed in ((1,) if smoke else (1, 2))]
    return [(stage, "shift only", kind, 1.0, seed, smoke) for seed in ((0,) if smoke else (0, 1, 2))
            for kind in MODELS]


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--stages", nargs="+", default=list(DEFAULT_STAGES), choices=STAGES,
                        help="stages to run, in order")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    done = {key(r): r for r in common.log_rows(args.resume) if "stage" in r}
    rows = list(done.values())
    out = common.out_path(args, "vit_recipe_sweep.json")
    for stage in STAGES:
        if stage not in args.stages:
            continue
        todo = [job for job in jobs_for(stage, rows, args.smoke) if (job[0], job[1], job[2], job[4]) not in done]
        new = common.run_jobs(run_one, todo, args.jobs)
        for row in new:
            done[key(row)] = row
        rows = list(done.values())
        if out is not None:
            chosen = {kind: choose(rows, kind) for kind in MODELS if swept(rows, kind)}
            common.write_result(out, {
                "description": "Chapter 7: a learning-rate x warm-up sweep and a 2x-steps run for the ViT "
                               "and the CNN at 125 training images, each model's recipe chosen on dev "
                               "(and the stages asked for); written by benchmarks/vit_recipe_sweep.py",
                "base_recipe": ImageRecipe().__dict__, "candidates": CANDIDATES, "shift_only": SHIFT_ONLY,
                "chosen_on_dev": chosen, "machine": common.machine(), "runs": rows,
            })


if __name__ == "__main__":
    main()
