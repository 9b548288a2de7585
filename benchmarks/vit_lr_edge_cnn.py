"""Chapter 7's learning-rate edge for the CNN: the CNN at learning rate 1e-2, seeds 0, 1 and 2.

Usage: ``python benchmarks/vit_lr_edge_cnn.py --jobs 2 --resume LOG`` (writes
``lib/attnbook/results/vit_lr_edge_cnn.json``, which the chapter prints; about 3 CPU-minutes on an
idle machine, one thread per run; ``--resume`` keeps the runs an earlier log printed: the
committed log is ``lib/attnbook/results/vit_lr_edge_cnn.log``), or
``python benchmarks/vit_lr_edge_cnn.py --smoke`` (a seconds-long run that writes nothing unless
``--out`` is given; the test suite runs it).

``vit_lr_edge.py`` and ``vit_lr_edge_seeds.py`` trained the chapter's ViT at learning rate 1e-2
(400 warm-up steps) on the recipe sweep's 125-image subsets, one step past the sweep's largest
rate. This script gives the chapter's CNN the same three runs (same rate, warm-up, subsets, seeds
and batch order, the sweep's own ``run_one``), so that both models have been tried at 1e-2.
"""
from __future__ import annotations

import common
import vit_lr_edge as edge
import vit_recipe_sweep as sweep

SEEDS = (0, 1, 2)
# registered at import, so that the worker processes (spawned, not forked) know the recipe too
sweep.CANDIDATES[edge.NAME] = {"lr": 1e-2, "warmup_steps": 400}


def run_one(seed: int, smoke: bool) -> dict:
    """The sweep's ``run_one`` for the CNN at learning rate 1e-2 for one seed (one thread)."""
    return sweep.run_one("edge seeds", edge.NAME, "cnn", sweep.SWEEP_FRACTION, seed, smoke)


def main() -> None:
    p = common.experiment_parser(__doc__)
    args = p.parse_args()
    common.check_jobs(p, args)
    seeds = SEEDS[:1] if args.smoke else SEEDS
    done = {row["seed"]: row for row in common.log_rows(args.resume)}
    jobs = [(seed, args.smoke) for seed in seeds if seed not in done]
    rows = {**done, **{row["seed"]: row for row in common.run_jobs(run_one, jobs, args.jobs)}}
    out = common.out_path(args, "vit_lr_edge_cnn.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: the CNN at learning rate 1e-2 (warm-up 400) on the recipe "
                           "sweep's 125-image subsets, seeds 0, 1 and 2; written by "
                           "benchmarks/vit_lr_edge_cnn.py",
            "machine": common.machine(args.jobs if args.jobs > 1 else None),
            "runs": [rows[seed] for seed in sorted(rows)]})


if __name__ == "__main__":
    main()
