"""Chapter 5's small Table-3 ablation: the G2P Transformer with one thing changed at a time.

Usage: ``python benchmarks/g2p_ablation.py --jobs 2 [--resume LOG ...]`` writes
``lib/attnbook/results/g2p_ablation.json`` (Chapter 5 prints it);
``python benchmarks/g2p_ablation.py --smoke [--out FILE]`` is a seconds-long run for the tests.

The base is ``g2p_compare.py``'s Transformer (D=64, 4 heads, 2 + 2 pre-norm layers, sinusoidal
positions) with its dev-chosen recipe and peak rate, read from ``g2p_compare.json`` (1,200 steps,
the same batches for a given seed). Each variant (``g2p_compare.ABLATIONS``) changes one thing:
one head of width 64 instead of four of 16; one encoder and one decoder layer instead of two
each; a learned position table instead of the sinusoids; dropout 0.1 (the paper's) instead of 0
(added in a later invocation that resumed the first three from ``g2p_ablation.log``). Every variant trains with the base's
recipe, rate, steps and batches on seeds 0 and 1, and is scored like the base (dev and test WER
and PER over the whole splits). The base's rows are the comparison's lr-phase (or budget) runs at
the chosen rate on the same seeds, copied from ``g2p_compare.json``; they are not retrained. The rate was
chosen for the base, not for each variant: a variant that wants another rate is disadvantaged,
which the results file says.

Every run is one thread; ``--jobs 2`` runs two at a time.
"""
from __future__ import annotations

import json
import statistics

import common
from g2p_compare import ABLATIONS, BUDGET_STEPS, PEAK_LR, run_one

SEEDS = (0, 1)
BASE = "transformer"
SMOKE_STEPS = 6


def base_setting() -> tuple[str, float, list[dict]]:
    """The base's recipe, its dev-chosen peak rate and its runs at that rate, from g2p_compare.json."""
    compare = json.loads((common.RESULTS / "g2p_compare.json").read_text())
    recipe = compare["best_recipe"][BASE]
    rate = float(compare["lr_sweep"][BASE]["chosen_on_dev"])
    rows = [r for r in compare["runs"] if r["model"] == BASE and r["recipe"] == recipe
            and r["steps"] == compare["setup"]["budget_steps"] and r.get("peak_lr", PEAK_LR) == rate
            and r["phase"] in ("lr", "tune", "seeds")]
    return recipe, rate, sorted(rows, key=lambda r: r["seed"])


def summary(rows: list[dict]) -> dict:
    """Mean, min and max over seeds of the scores, with the seeds and the parameter count."""
    out = {"seeds": [r["seed"] for r in rows], "parameters": rows[0]["parameters"]}
    for key in ("dev_wer", "test_wer", "test_per"):
        values = [r[key] for r in rows]
        out[key] = {"values": values, "mean": round(statistics.mean(values), 4), "min": min(values),
                    "max": max(values)}
    return out


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    args = parser.parse_args()
    common.check_jobs(parser, args)
    steps = SMOKE_STEPS if args.smoke else BUDGET_STEPS
    seeds = SEEDS[:1] if args.smoke else SEEDS
    recipe, rate, base_rows = base_setting()
    base_rows = [r for r in base_rows if r["seed"] in seeds]  # the variants' seeds only
    done = {(r["model"], r["seed"]): r for r in common.log_rows(args.resume) if "model" in r}
    todo = [(kind, s) for s in seeds for kind in ABLATIONS if (kind, s) not in done]
    new = common.run_jobs(run_one, [(kind, recipe, s, steps, "ablation", args.smoke, rate) for kind, s in todo],
                          args.jobs)
    done.update({(r["model"], r["seed"]): r for r in new})
    runs = [done[(kind, s)] for kind in ABLATIONS for s in seeds]
    out = common.out_path(args, "g2p_ablation.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 5's Transformer on G2P with one change at a time (heads, layers, positions); "
                       "written by benchmarks/g2p_ablation.py",
        "setup": {"recipe": recipe, "peak_lr": rate, "steps": steps, "seeds": list(seeds),
                  "base": "g2p_compare.json's Transformer at its dev-chosen rate (not retrained)",
                  "labels": {kind: change["label"] for kind, change in ABLATIONS.items()},
                  "caveat": "the rate was chosen on dev for the base only; the variants were not tuned"},
        "machine": common.machine(args.jobs),
        "conditions": args.conditions,
        "base": summary(base_rows),
        "variants": {kind: summary([r for r in runs if r["model"] == kind]) for kind in ABLATIONS},
        "runs": runs,
    })


if __name__ == "__main__":
    main()
