"""Pre- against post-norm at the learning rate the G2P comparison chose on dev (6e-3).

Usage: ``python benchmarks/g2p_postnorm_lr.py [--jobs 3] [--resume LOG ...]`` writes
``lib/attnbook/results/g2p_postnorm_lr.json`` (Chapter 5 reads it);
``python benchmarks/g2p_postnorm_lr.py --smoke [--out FILE]`` is a seconds-long run for the tests.

``g2p_transformer_recipes.py`` compared the two placements at 3e-3, the shared rate before the
``lr`` phase of ``g2p_compare.py`` moved every model to 6e-3. This script trains the post-norm
Transformer with exactly the recipe of that phase (``g2p_compare.run_one``: D=64, 4 heads, 2+2
layers, warm-up + linear decay, smoothing 0.1, peak 6e-3, 1,200 steps, the same seeds and so the
same batches and the same initial weights); only ``norm_first`` differs. The pre-norm rows are
read from ``g2p_compare.json`` (phase ``lr``, rate 6e-3), and the paired gaps are per seed.

Every run is one thread; ``--jobs 3`` runs the three seeds at once. A run prints one JSON line.
"""
from __future__ import annotations

import json
import statistics

import torch

import common
import g2p_compare
from attnbook.models.transformer import Transformer, TransformerConfig

KIND, RATE, SEEDS = "transformer_postnorm", 6e-3, (0, 1, 2)
RECIPE = "warm-up + linear decay, smoothing 0.1"  # the Transformer's tuned recipe in g2p_compare


def _build(kind: str, src_size: int, tgt_size: int, smoke: bool) -> torch.nn.Module:
    if kind != KIND:
        return _original_build(kind, src_size, tgt_size, smoke)
    width = dict(d_model=16, num_heads=2, d_ff=32) if smoke else dict(d_model=64, num_heads=4, d_ff=256)
    return Transformer(TransformerConfig(src_size, tgt_size, **width, dropout=0.0, norm_first=False))


_original_build = g2p_compare.build


def run_post(seed: int, smoke: bool) -> dict:
    """``g2p_compare.run_one`` for the post-norm model (its lr phase at 6e-3, one seed)."""
    g2p_compare.build = _build  # in the worker process too (spawned: this module is imported)
    steps = 6 if smoke else g2p_compare.BUDGET_STEPS
    return g2p_compare.run_one(KIND, RECIPE, seed, steps, "lr", smoke, RATE)


def pre_rows() -> dict[int, dict]:
    compare = json.loads((common.RESULTS / "g2p_compare.json").read_text())
    return {r["seed"]: r for r in compare["runs"] if r["phase"] == "lr" and r["model"] == "transformer"
            and r["peak_lr"] == RATE and r["recipe"] == RECIPE}


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    args = parser.parse_args()
    common.check_jobs(parser, args)
    seeds = args.seeds[:1] if args.smoke else args.seeds
    done = {r["seed"]: r for r in common.log_rows(args.resume) if r.get("model") == KIND}
    todo = [s for s in seeds if s not in done]
    for row in common.run_jobs(run_post, [(s, args.smoke) for s in todo], args.jobs):
        done[row["seed"]] = row
    post = [done[s] for s in seeds]
    pre = pre_rows()
    per_seed = []
    for row in post:
        other = pre.get(row["seed"])
        entry = {"seed": row["seed"], "post_dev_wer": row["dev_wer"], "post_test_wer": row["test_wer"]}
        if other is not None and not args.smoke:
            entry |= {"pre_dev_wer": other["dev_wer"], "pre_test_wer": other["test_wer"],
                      "dev_gap_post_minus_pre": round(row["dev_wer"] - other["dev_wer"], 4),
                      "test_gap_post_minus_pre": round(row["test_wer"] - other["test_wer"], 4)}
        per_seed.append(entry)
    out = common.out_path(args, "g2p_postnorm_lr.json")
    if out is None:
        print(json.dumps({"per_seed": per_seed}))
        return
    result = {
        "description": "Chapter 5's Transformer on G2P at peak rate 6e-3: post-norm trained here, pre-norm "
                       "read from g2p_compare.json (same recipe, seeds, batches and initial weights)",
        "machine": common.machine(args.jobs),
        "conditions": args.conditions,
        "setup": {"peak_lr": RATE, "recipe": RECIPE, "steps": post[0]["steps"], "seeds": seeds},
        "per_seed": per_seed,
        "mean": {k: round(statistics.mean(e[k] for e in per_seed), 4) for k in per_seed[0] if k != "seed"},
        "runs": post,
    }
    common.write_result(out, result)


if __name__ == "__main__":
    main()
