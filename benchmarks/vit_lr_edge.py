"""Chapter 7's recipe sweep, one step past its edge: the ViT at learning rate 1e-2.

Usage: ``python benchmarks/vit_lr_edge.py`` (writes ``lib/attnbook/results/vit_lr_edge.json``,
which the chapter prints), or ``python benchmarks/vit_lr_edge.py --smoke`` (a seconds-long run
that writes nothing unless ``--out`` is given).

``benchmarks/vit_recipe_sweep.py`` chose the ViT's recipe on dev at 125 training images
(subset seed 0) among learning rates {1e-3, 3e-3}; the best, 3e-3 with 400 warm-up steps, was
the largest rate tried. This script trains the same ViT on the same 125 images, seed 0, with that
recipe's warm-up and learning rate 1e-2 (everything else the chapter's ``ImageRecipe()``), with
the sweep's own ``run_one`` (one thread), and stores dev and test accuracy beside the sweep's.
"""
from __future__ import annotations

import common
import vit_recipe_sweep as sweep

NAME = "lr 1e-2, warm-up 400"


def main() -> None:
    p = common.experiment_parser(__doc__)
    args = p.parse_args()
    sweep.CANDIDATES[NAME] = {"lr": 1e-2, "warmup_steps": 400}
    row = sweep.run_one("edge", NAME, "vit", sweep.SWEEP_FRACTION, 0, args.smoke)
    out = common.out_path(args, "vit_lr_edge.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: the ViT at learning rate 1e-2 (warm-up 400) on the recipe "
                           "sweep's 125 images, seed 0; written by benchmarks/vit_lr_edge.py",
            "machine": common.machine(), "runs": [row],
        })


if __name__ == "__main__":
    main()
