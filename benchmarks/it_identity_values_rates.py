"""Chapter 3's section 3.8: three arms of it_identity_values.py at two more learning rates.

Usage (from the repository root): ``python benchmarks/it_identity_values_rates.py [--lrs 0.003
0.001] [--seeds 0 1 2 3 4] [--splits 0 3] [--steps 600] [--jobs 1]``

``it_identity_values.py`` runs every arm at Adam 1e-2. This script reruns three of its arms,
``uniform``, ``no attention, linear`` and ``no attention, two linear layers``, with the same
function (``it_identity_values.run``: same data, splits, seeds, batches and 600 steps) at 3e-3
and 1e-3, to check whether the chapter's reading (the shallow linear model generalises, the
deeper linear path and the uniform layer do not) depends on the rate. About 3 s a run on one
busy CPU thread; results in ``lib/attnbook/results/it_identity_values_rates.json``.
"""
from __future__ import annotations

import sys

import common
from it_identity_values import run

ARMS = ("uniform", "no attention, linear", "no attention, two linear layers")
COMMAND = "python benchmarks/it_identity_values_rates.py"


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    p.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 1e-3])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--splits", type=int, nargs="+", default=[0, 3])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=str(common.RESULTS / "it_identity_values_rates.json"))
    args = p.parse_args(argv)
    jobs = [(arm, lr, s, k, args.steps) for lr in args.lrs for k in args.splits
            for arm in args.arms for s in args.seeds]
    rows = common.run_jobs(run, jobs, args.jobs)
    common.write_result(common.Path(args.out), {
        "description": __doc__.splitlines()[0], "command": COMMAND,
        "machine": common.machine(args.jobs if args.jobs > 1 else None), "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
