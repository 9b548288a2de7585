"""Chapter 5's learned-position Transformer on a third seed, so it can join the 3-seed comparison.

Usage: ``python benchmarks/g2p_learned_positions.py --resume lib/attnbook/results/g2p_ablation.log
lib/attnbook/results/g2p_learned_positions.log`` writes ``lib/attnbook/results/g2p_learned_positions.json``
(Chapter 5 prints it); ``python benchmarks/g2p_learned_positions.py --smoke`` is a seconds-long run
for the tests.

The model is ``g2p_ablation.py``'s ``transformer_learned_pos`` (the chapter's Transformer, D=64,
4 heads, 2 + 2 pre-norm layers, with a trained position table started at the sinusoids' scale),
trained exactly like the comparison's Transformer: its dev-chosen recipe and peak rate (6e-3,
chosen for the sinusoidal base, not for this variant), 1,200 steps, the same batches for a given
seed. Seeds 0 and 1 are the ablation's runs (read back from its log, not retrained); seed 2 is new.
The base's rows (seeds 0-2) are the comparison's runs at the chosen rate, copied from
``g2p_compare.json``. One thread per run.
"""
from __future__ import annotations

import common
from g2p_ablation import base_setting, summary
from g2p_compare import BUDGET_STEPS, run_one

KIND = "transformer_learned_pos"
SEEDS = (0, 1, 2)
SMOKE_STEPS = 6


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    args = parser.parse_args()
    steps = SMOKE_STEPS if args.smoke else BUDGET_STEPS
    seeds = SEEDS[:1] if args.smoke else SEEDS
    recipe, rate, base_rows = base_setting()
    done = {r["seed"]: r for r in common.log_rows(args.resume)
            if r.get("model") == KIND and r.get("steps") == steps and r.get("peak_lr") == rate}
    todo = [s for s in seeds if s not in done]
    for s in todo:
        done[s] = run_one(KIND, recipe, s, steps, "learned_positions", args.smoke, rate)
    runs = [done[s] for s in seeds]
    out = common.out_path(args, "g2p_learned_positions.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 5's Transformer with learned positions, three seeds, trained like the "
                       "comparison's Transformer; written by benchmarks/g2p_learned_positions.py",
        "setup": {"recipe": recipe, "peak_lr": rate, "steps": steps, "seeds": list(seeds),
                  "reused": "seeds 0 and 1 are g2p_ablation.py's runs, read from its log",
                  "caveat": "the rate was chosen on dev for the sinusoidal base, not for this variant"},
        "machine": common.machine(1),
        "conditions": args.conditions,
        "base": summary(base_rows),
        "learned_positions": summary(runs),
        "runs": runs,
    })


if __name__ == "__main__":
    main()
