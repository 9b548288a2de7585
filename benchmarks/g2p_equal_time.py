"""Chapter 5's equal-CPU-time G2P comparison at the rate dev chose (6e-3): GRU + attention.

Usage: ``python benchmarks/g2p_equal_time.py [--jobs 2] [--resume LOG ...]`` writes
``lib/attnbook/results/g2p_equal_time.json`` (Chapter 5 reads it);
``python benchmarks/g2p_equal_time.py --smoke [--out FILE]`` is a seconds-long run for the tests.

``g2p_compare.py`` trains every model for 1,200 steps at peak rate 6e-3 (its ``lr`` phase; dev
chose 6e-3 for all three models). GRU + attention is the slowest per step, so that comparison
gives it more CPU time than the Transformer. Here GRU + attention trains (``g2p_compare.run_one``:
same recipe, batches and seeds 0-2) for only as many steps as it runs in the Transformer's time for
1,200 steps, at the one-thread speeds ``g2p_compare.py`` measured side by side
(``round(1200 * speed[gru_attention] / speed[transformer])``: 858 steps). The warm-up and linear
decay are stretched over those steps, as for any budget. Every run is one thread. The committed
results ran seeds 0 and 1 with ``--jobs 2`` and seed 2 in a second process at the same time
(``g2p_compare.run_one`` called directly, logged to ``g2p_equal_time_seed2.log``), then this script
with ``--resume`` on both logs wrote the JSON.
"""
from __future__ import annotations

import json
import statistics

import common
import g2p_compare

KIND, RATE, SEEDS = "gru_attention", 6e-3, (0, 1, 2)


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="seeds (default 0 1 2)")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    compare = json.loads((common.RESULTS / "g2p_compare.json").read_text())
    speed = compare["speed"]["steps_per_second"]
    steps = 6 if args.smoke else round(g2p_compare.BUDGET_STEPS * speed[KIND] / speed["transformer"])
    recipe = compare["best_recipe"][KIND]
    seeds = args.seeds[:1] if args.smoke else args.seeds
    done = {(r["seed"], r["steps"]): r for r in common.log_rows(args.resume) if r.get("model") == KIND}
    todo = [s for s in seeds if (s, steps) not in done]
    for row in common.run_jobs(g2p_compare.run_one,
                               [(KIND, recipe, s, steps, "equal_time_6e-3", args.smoke, RATE) for s in todo],
                               args.jobs):
        done[(row["seed"], row["steps"])] = row
    rows = [done[(s, steps)] for s in seeds]
    out = common.out_path(args, "g2p_equal_time.json")
    if out is None:
        return
    transformer = compare["lr_sweep"]["transformer"]["by_peak_lr"][f"{RATE:g}"]
    common.write_result(out, {
        "description": "GRU + attention at 6e-3 for the Transformer's one-thread time for 1,200 steps; "
                       "written by benchmarks/g2p_equal_time.py",
        "command": "python benchmarks/g2p_equal_time.py --jobs 2" + (
            f" --seeds {' '.join(map(str, seeds))}" if list(seeds) != list(SEEDS) else ""),
        "setup": {"model": KIND, "recipe": recipe, "peak_lr": RATE, "steps": steps, "seeds": list(seeds),
                  "speeds_steps_per_second": speed,
                  "how_steps": "round(1200 * speed[gru_attention] / speed[transformer]), speeds from "
                               "g2p_compare.json"},
        "machine": common.machine(args.jobs),
        "conditions": args.conditions,
        "gru_attention": {key: {"values": [r[key] for r in rows],
                                "mean": round(statistics.mean(r[key] for r in rows), 4)}
                          for key in ("test_wer", "test_per", "dev_wer", "train_seconds")},
        "transformer_1200_steps": {"source": "g2p_compare.json lr_sweep, 6e-3, seeds 0-2",
                                   **{k: transformer[k] for k in ("dev_wer", "test_wer", "test_per")}},
        "runs": rows,
    })


if __name__ == "__main__":
    main()
