"""Chapter 7's learning-rate edge at three seeds: the ViT at learning rate 1e-2, seeds 1 and 2.

Usage: ``python benchmarks/vit_lr_edge_seeds.py --jobs 2`` (writes
``lib/attnbook/results/vit_lr_edge_seeds.json``, which the chapter prints), or
``python benchmarks/vit_lr_edge_seeds.py --smoke`` (a seconds-long run that writes nothing unless
``--out`` is given; the test suite runs it).

``benchmarks/vit_lr_edge.py`` trained the chapter's ViT on the recipe sweep's 125 training images
(10% of the training split) at learning rate 1e-2 with 400 warm-up steps, seed 0 only. This
script repeats that run at seeds 1 and 2 (model initialisation, training subset and batch order
all follow the seed, as in ``vit_data_efficiency.py``), with the sweep's own ``run_one`` (one
thread per run), so the rate 1e-2 has three seeds like the chapter's recipe.
"""
from __future__ import annotations

import common
import vit_lr_edge as edge
import vit_recipe_sweep as sweep

SEEDS = (1, 2)
# registered at import, so that the worker processes (spawned, not forked) know the recipe too
sweep.CANDIDATES[edge.NAME] = {"lr": 1e-2, "warmup_steps": 400}


def run_one(seed: int, smoke: bool) -> dict:
    """The sweep's ``run_one`` at learning rate 1e-2 for one seed (one thread)."""
    return sweep.run_one("edge seeds", edge.NAME, "vit", sweep.SWEEP_FRACTION, seed, smoke)


def main() -> None:
    p = common.experiment_parser(__doc__)
    args = p.parse_args()
    common.check_jobs(p, args)
    seeds = SEEDS[:1] if args.smoke else SEEDS
    jobs = [(seed, args.smoke) for seed in seeds]
    out = common.out_path(args, "vit_lr_edge_seeds.json")
    if out is None:
        common.run_jobs(run_one, jobs, args.jobs)
        return
    common.run_and_write(run_one, jobs, args.jobs, out,
                         "Chapter 7: the ViT at learning rate 1e-2 (warm-up 400) on 125 training "
                         "images, seeds 1 and 2 (seed 0 is in vit_lr_edge.json); written by "
                         "benchmarks/vit_lr_edge_seeds.py")


if __name__ == "__main__":
    main()
