"""Chapter 7's finished models: the 2,000-step ViTs and CNNs of the results file, with their weights.

Usage: ``python benchmarks/vit_finished_models.py [--jobs 2]`` (writes
``lib/attnbook/results/vit_finished_models.json`` and one ``.safetensors`` file per run,
``vit_finished_KIND_seedS.safetensors``), or ``python benchmarks/vit_finished_models.py --smoke``
(a seconds-long run that writes nothing unless ``--out`` is given; the weights then go beside
``--out``).

``vit_data_efficiency.py`` trains the chapter's ViT and CNN for 2,000 steps (``ImageRecipe()``) on
all 1,251 training digits, seeds 0, 1 and 2, and keeps only their scores. This script repeats
exactly those runs (the same ``build`` and recipe, one thread: the same numbers) for ``vit`` and
``cnn`` (``--kinds`` adds ``vit_noaug``, the ViT trained without augmentation, which the committed
file does not hold), and stores the trained weights,
so that the chapter's Section 7.5 and 7.6 can measure the finished models on the page: the
shifted test digits, the learned position table, the heads' attention. Each row records whether
the rerun reproduces the results file's test accuracy and shifted accuracies exactly.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

import common
import vit_data_efficiency as grid
from attnbook.checkpoints import sha256_of
from attnbook.results import load_result

KINDS = ("vit", "cnn", "vit_noaug")
SEEDS = (0, 1, 2)
KEYS = ("test_accuracy", "test_accuracy_shift_1", "test_accuracy_shift_2")


def weights_name(kind: str, seed: int) -> str:
    return f"vit_finished_{kind}_seed{seed}.safetensors"


def run_one(kind: str, seed: int, smoke: bool, folder: str | None) -> dict:
    """``vit_data_efficiency.run_one`` at fraction 1.0, keeping the model; saves its weights."""
    from safetensors.torch import save_file

    built = []
    make = grid.build

    def build(kind_: str, seed_: int, smoke_: bool) -> torch.nn.Module:
        built.append(make(kind_, seed_, smoke_))
        return built[-1]

    grid.build = build  # this process only: keep a handle on the trained model
    recipe = (grid.ImageRecipe(steps=6, batch_size=32, warmup_steps=2) if smoke
              else grid.ImageRecipe())
    row = grid.run_one(1.0, seed, kind, recipe, smoke)
    model = built[-1]
    if not smoke:
        stored = {(r["model"], r["seed"]): r
                  for r in (load_result("vit_data_efficiency.json")["runs"]
                            + load_result("vit_data_efficiency.json")["controls"])
                  if r["fraction"] == 1.0}[kind, seed]
        row["same_as_results_file"] = all(row[k] == stored[k] for k in KEYS)
    if folder is not None:
        path = Path(folder) / weights_name(kind, seed)
        save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                  str(path))
        path.chmod(0o644)  # save_file creates it readable by its owner only
        row |= {"weights": path.name, "sha256": sha256_of(path)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS[:2]), choices=list(KINDS),
                        help="the kinds to run (default: vit cnn)")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    out = common.out_path(args, "vit_finished_models.json")
    folder = None if out is None else str(out.parent)
    seeds = (0,) if args.smoke else SEEDS
    done = {(r["model"], r["seed"]): r for r in common.log_rows(args.resume)}
    todo = [(kind, seed, args.smoke, folder) for kind in args.kinds for seed in seeds
            if (kind, seed) not in done]
    for row in common.run_jobs(run_one, todo, args.jobs):
        done[row["model"], row["seed"]] = row
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: vit_data_efficiency.json's 2,000-step runs ("
                           + ", ".join(args.kinds) + ") on all 1,251 training digits, "
                           "rerun to store their weights; written by "
                           "benchmarks/vit_finished_models.py",
            "machine": common.machine(args.jobs if args.jobs > 1 else None),
            "runs": [done[k, s] for k in args.kinds for s in seeds if (k, s) in done]})


if __name__ == "__main__":
    main()
