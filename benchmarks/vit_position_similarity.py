"""Chapter 7's position-embedding statistic over seeds: do neighbouring positions become similar?

Usage: ``python benchmarks/vit_position_similarity.py [--jobs 2] [--seeds 0 1 2] [--resume LOG ...]``
(writes ``lib/attnbook/results/vit_position_similarity.json``, which the chapter prints), or
``python benchmarks/vit_position_similarity.py --smoke`` (seconds; writes nothing unless ``--out``).

The chapter's ViT is trained on all 1,251 training digits with the chapter's full recipe
(``ImageRecipe()``), and with the same recipe but no augmentation at all (no rotation, scaling or
shift: the ±1-pixel shifts move ink between neighbouring patches, and so might teach neighbouring
positions alike by themselves), at each seed. For each model the cosine similarity of every pair
of the 16 patch positions' learned embeddings (the class token's row left out) is averaged over
four groups of pairs on the 4×4 grid: grid 4-neighbours, the same row but not adjacent, the same
column but not adjacent, and the rest; the same for the model's untrained initial table.
One thread per run.
"""
from __future__ import annotations

import dataclasses
import json
import statistics

import torch
import torch.nn.functional as F

import common
from attnbook.data.digits import load_digits_splits
from attnbook.tasks.image_classification import ImageRecipe, accuracy, train_classifier
from vit_data_efficiency import NO_AUGMENTATION, build

SEEDS = (0, 1, 2)
KINDS = ("vit", "vit_noaug")
GROUPS = ("neighbours", "same row", "same column", "other")


def group_of(a: int, b: int, grid: int) -> str:
    (ra, ca), (rb, cb) = divmod(a, grid), divmod(b, grid)
    if abs(ra - rb) + abs(ca - cb) == 1:
        return "neighbours"
    return "same row" if ra == rb else "same column" if ca == cb else "other"


def similarity_by_group(positions: torch.Tensor, grid: int) -> dict[str, float]:
    """Mean cosine similarity of the patch positions ``(N, D)`` in each group of pairs (a != b)."""
    sim = F.cosine_similarity(positions[:, None], positions[None], dim=-1)  # (N, N)
    values: dict[str, list[float]] = {g: [] for g in GROUPS}
    n = grid * grid
    for a in range(n):
        for b in range(n):
            if a != b:
                values[group_of(a, b, grid)].append(sim[a, b].item())
    return {g: round(statistics.mean(v), 4) for g, v in values.items()}


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    digits = load_digits_splits()
    recipe = ImageRecipe(steps=8, batch_size=32, warmup_steps=2) if smoke else ImageRecipe()
    recipe = dataclasses.replace(recipe, seed=seed, **(NO_AUGMENTATION if kind == "vit_noaug" else {}))
    model = build("vit", seed, smoke)
    grid = model.config.grid_size
    with torch.no_grad():
        before = similarity_by_group(model.position_embeddings[1:].clone(), grid)
    seconds, _ = common.timed(lambda: train_classifier(model, digits.train, recipe, fill=digits.background,
                                                       progress=False), torch.device("cpu"))
    with torch.no_grad():
        after = similarity_by_group(model.position_embeddings[1:], grid)
    row = {"model": kind, "seed": seed, "train_seconds": round(seconds, 1),
           "test_accuracy": round(accuracy(model, digits.test), 4), "untrained": before, "trained": after}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="seeds")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    seeds = (0,) if args.smoke else tuple(args.seeds)
    done = {(r["model"], r["seed"]): r for r in common.log_rows(args.resume)}
    todo = [(kind, seed, args.smoke) for kind in KINDS for seed in seeds if (kind, seed) not in done]
    for row in common.run_jobs(run_one, todo, args.jobs):
        done[(row["model"], row["seed"])] = row
    out = common.out_path(args, "vit_position_similarity.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: mean cosine similarity of the ViT's learned patch positions by "
                           "group of grid pairs, trained with and without augmentation, by seed; written "
                           "by benchmarks/vit_position_similarity.py",
            "recipe": ImageRecipe().__dict__, "groups": list(GROUPS), "seeds": list(seeds),
            "machine": common.machine(),
            "runs": [done[(kind, seed)] for kind in KINDS for seed in seeds if (kind, seed) in done],
        })


if __name__ == "__main__":
    main()
