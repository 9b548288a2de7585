"""Chapter 7's data-efficiency and shift experiment: ViT vs CNN as the training set shrinks.

Usage: ``python benchmarks/vit_data_efficiency.py [--jobs 2] [--fractions ...] [--seeds ...]
[--resume LOG ...]`` (writes
``lib/attnbook/results/vit_data_efficiency.json``, which the chapter plots), or
``python benchmarks/vit_data_efficiency.py --smoke`` (a seconds-long run that writes nothing
unless ``--out`` is given; the test suite runs it).

For each training fraction (10%, 25% and 100% of the fixed training split, stratified by
class) and each seed, the chapter's ViT and the chapter's CNN are trained with the chapter's
recipe (``ImageRecipe()``: same steps, batch size, optimizer, schedule, augmentation, and the
same batches in the same order for both models). The seed picks the subset, the batch order
and the initial weights. Each model is then measured on the test split, unchanged and shifted
by 1 and 2 pixels (the mean over the four directions up, down, left, right). One thread, so the
numbers do not depend on how many cores the machine has.

Controls (``controls`` in the results file), each with the same recipe, seeds and measurements:
``vit_small``, a ViT of the same depth and heads at half the width (D = 32, d_ff = 64: about the
CNN's parameter count), at 10% and 100% of the data; ``vit_nopos``, the chapter's ViT without
position embeddings (the encoder sees a set of patches: a patch-aligned 2-pixel shift, P = 2,
moves the same patches to new positions, so this isolates what the position table costs there);
``vit_local``, the chapter's ViT with each patch's attention limited to its 3 x 3 neighbourhood of
patches (``LocalViT``: a CNN-like locality prior inside the ViT, same parameters and recipe), at 10%
of the data; ``vit_nopos_noaug``, ``vit_nopos`` trained with no augmentation (the data the
bags of ``vit_bags.py`` are fitted on: the matched comparison); ``vit_noaug`` and ``cnn_noaug``, both models trained with no augmentation (no rotation, scaling
or shift), so that neither has seen any shift; ``vit_rerun`` and ``cnn_rerun``, the chapter's two
models at 100% again (for a results file whose main grid was written by an older version of the
library: the comparison with ``vit_nopos`` then uses one version; the committed file instead holds
this library's 100% runs in its main grid, and its note says which rows are older). ``--controls`` picks the
control kinds the file holds (default: all but the reruns), ``--note`` stores where the runs
come from. ``--models`` runs only some kinds; the results
file is written once every run of the grid is done (with ``--resume`` and earlier logs).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data.digits import load_digits_splits, subset
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.layers import run_blocks
from attnbook.models.vit import ViT, ViTConfig
from attnbook.tasks.image_classification import ImageRecipe, accuracy, shifted_accuracy, train_classifier

FRACTIONS = (0.1, 0.25, 1.0)
SEEDS = (0, 1, 2)
SHIFTS = (1, 2)
MODELS = ("vit", "cnn")
# the controls: kind -> training fractions (the seeds are the grid's)
CONTROLS = {"vit_small": (0.1, 1.0), "vit_nopos": (1.0,), "vit_noaug": (1.0,), "cnn_noaug": (1.0,),
            "vit_local": (0.1,), "vit_nopos_noaug": (1.0,), "vit_rerun": (1.0,), "cnn_rerun": (1.0,)}
# a full run's controls (the reruns only matter beside a main grid from an older library)
DEFAULT_CONTROLS = ("vit_small", "vit_nopos", "vit_noaug", "cnn_noaug", "vit_local", "vit_nopos_noaug")
NO_POSITIONS = ("vit_nopos", "vit_nopos_noaug")
SMALL_VIT = {"d_model": 32, "d_ff": 64}
NO_AUGMENTATION = {"degrees": 0.0, "scale": 0.0, "shift": 0.0}


def neighbour_mask(grid_size: int) -> torch.Tensor:
    """``(1 + N, 1 + N)`` attention mask (True = may attend) for ``vit_local``: a patch attends only to
    the patches of its 3 x 3 neighbourhood on the grid (itself included, Chebyshev distance <= 1),
    not to the class token; the class token attends to every token."""
    index = torch.arange(grid_size * grid_size)
    rows, cols = index // grid_size, index % grid_size  # (N,) each
    near = torch.maximum((rows[:, None] - rows[None]).abs(), (cols[:, None] - cols[None]).abs()) <= 1
    mask = torch.ones(1 + grid_size ** 2, 1 + grid_size ** 2, dtype=torch.bool)
    mask[1:, 0] = False  # patches do not read the class token
    mask[1:, 1:] = near  # (N, N)
    return mask


class LocalViT(ViT):
    """The chapter's ViT with attention limited to neighbouring patches (the same mask in every layer):
    locality built back in, everything else (weights, positions, recipe) unchanged. After L layers a
    patch token has seen the patches within L grid steps, as a stack of 3 x 3 convolutions would."""

    def __init__(self, config: ViTConfig) -> None:
        super().__init__(config)
        self.register_buffer("mask", neighbour_mask(config.grid_size), persistent=False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(images)  # (B, 1 + N, D)
        out = run_blocks(self.blocks, x, self.mask)  # the (1 + N, 1 + N) mask broadcasts over B and heads
        return self.readout(self.final_norm(out.hidden[:, 0]))  # (B, classes)


def vit_config(kind: str, smoke: bool) -> ViTConfig:
    sizes = {"d_model": 16, "num_heads": 2, "num_layers": 1, "d_ff": 32} if smoke else {}
    if kind == "vit_small":
        sizes = {**sizes, **({"d_model": 8, "d_ff": 16} if smoke else SMALL_VIT)}
    return ViTConfig(**sizes, position_embeddings=kind not in NO_POSITIONS)


def build(kind: str, seed: int, smoke: bool) -> torch.nn.Module:
    torch.manual_seed(seed)
    if kind == "vit_local":
        return LocalViT(vit_config(kind, smoke))
    if kind.startswith("vit"):
        return ViT(vit_config(kind, smoke))
    return SmallCNN(CNNConfig(channels=4) if smoke else CNNConfig())


def run_one(fraction: float, seed: int, kind: str, recipe: ImageRecipe, smoke: bool) -> dict:
    """Train one model on one subset and measure it (one thread)."""
    torch.set_num_threads(1)
    digits = load_digits_splits()
    train = subset(digits.train, fraction, seed) if fraction < 1.0 else digits.train
    model = build(kind, seed, smoke)
    if kind.endswith("_noaug"):
        recipe = dataclasses.replace(recipe, **NO_AUGMENTATION)
    seconds, _ = common.timed(lambda: train_classifier(model, train, dataclasses.replace(recipe, seed=seed),
                                                       fill=digits.background, progress=False), torch.device("cpu"))
    row = {"model": kind, "fraction": fraction, "train_images": len(train), "seed": seed,
           "parameters": count_parameters(model), "train_seconds": round(seconds, 1),
           "test_accuracy": round(accuracy(model, digits.test), 4)}
    for pixels in SHIFTS:
        row[f"test_accuracy_shift_{pixels}"] = round(shifted_accuracy(model, digits.test, pixels, digits.background), 4)
    print(json.dumps(row), flush=True)
    return row


def read_rows(paths: list[Path]) -> dict[tuple, dict]:
    """Rows printed by earlier runs (one JSON object per line; other lines are skipped), by key."""
    return {(row["model"], row["fraction"], row["seed"]): row for row in common.log_rows(paths)}


def grids(fractions, seeds, control_kinds=DEFAULT_CONTROLS) -> tuple[list[tuple], list[tuple]]:
    """The main grid and the controls' grid, as (fraction, seed, kind) in the results file's order."""
    main = [(f, s, kind) for f in fractions for s in seeds for kind in MODELS]
    controls = [(f, s, kind) for kind, kind_fractions in CONTROLS.items() if kind in control_kinds
                for f in kind_fractions if f in fractions for s in seeds]
    return main, controls


def run(fractions, seeds, recipe: ImageRecipe, smoke: bool, jobs: int, done: dict[tuple, dict],
        kinds: tuple[str, ...], control_kinds: tuple[str, ...] = DEFAULT_CONTROLS
        ) -> tuple[list[dict], list[dict]] | None:
    """Every (fraction, seed, kind) of ``kinds`` not in ``done``, ``jobs`` at a time, each in its own
    one-thread process; returns all rows of both grids in order (the controls of ``control_kinds``
    only), or None while some are missing."""
    main, controls = grids(fractions, seeds, control_kinds)
    todo = [(f, s, kind) for f, s, kind in main + controls if kind in kinds and (kind, f, s) not in done]
    new = common.run_jobs(run_one, [(f, s, kind, recipe, smoke) for f, s, kind in todo], jobs)
    rows = {**done, **{(r["model"], r["fraction"], r["seed"]): r for r in new}}
    if any((kind, f, s) not in rows for f, s, kind in main + controls):
        return None
    return [rows[(kind, f, s)] for f, s, kind in main], [rows[(kind, f, s)] for f, s, kind in controls]


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS), help="training fractions")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="seeds")
    parser.add_argument("--models", nargs="+", default=[*MODELS, *DEFAULT_CONTROLS], choices=[*MODELS, *CONTROLS],
                        help="run only these kinds (the file is written once all runs are done)")
    parser.add_argument("--controls", nargs="*", default=list(DEFAULT_CONTROLS), choices=list(CONTROLS),
                        help="the control kinds the results file holds (default: all but the reruns)")
    parser.add_argument("--note", default="", help="provenance of the runs, stored in the results file")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    if args.smoke:
        recipe = ImageRecipe(steps=6, batch_size=32, warmup_steps=2)
        fractions, seeds = (0.1, 1.0), (0,)
    else:
        recipe, fractions, seeds = ImageRecipe(), tuple(args.fractions), tuple(args.seeds)
    rows = run(fractions, seeds, recipe, args.smoke, args.jobs, read_rows(args.resume), tuple(args.models),
               tuple(args.controls))
    out = common.out_path(args, "vit_data_efficiency.json")
    if rows is None:
        print("some runs are still missing: no results file written (run the other --models, then --resume)")
    elif out is not None:
        runs, controls = rows
        result = {
            "description": "Chapter 7: test accuracy of the ViT and the CNN by training fraction and seed; "
                           "written by benchmarks/vit_data_efficiency.py",
            "recipe": recipe.__dict__, "vit": ViTConfig().__dict__, "cnn": CNNConfig().__dict__,
            "fractions": list(fractions), "seeds": list(seeds), "shifts": list(SHIFTS),
            "machine": common.machine(),
            **({"note": args.note} if args.note else {}),
            "runs": runs,
            "controls": controls,
            "control_configs": {"vit_small": vit_config("vit_small", False).__dict__,
                                "vit_nopos": vit_config("vit_nopos", False).__dict__,
                                "noaug_recipe": dataclasses.replace(recipe, **NO_AUGMENTATION).__dict__},
        }
        common.write_result(out, result)


if __name__ == "__main__":
    main()
