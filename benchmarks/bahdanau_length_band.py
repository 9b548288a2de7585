"""Chapter 2's fixed diagonal band on §2.10's joined inputs: does it keep up with learned weights on long inputs?

``python benchmarks/bahdanau_length_band.py --seeds 0`` trains the attention decoder of
``bahdanau_length.py`` with its learned score swapped for section 2.7's parameter-free band (step i
looks at letter i / r, r = 0.85 the training words' phonemes per letter, Gaussian sigma 1 letter:
``bahdanau_length.BandScore``), on that script's joined training inputs, with its recipe (1,500
steps of 64, Adam 3e-3, clip 1), batches and initial weights (the same seed builds the same
encoder and decoder; only the score differs), and tests it on the same 150 joined test inputs
per bucket. It writes ``lib/attnbook/results/bahdanau_length_band.json``: PER per bucket for the
band and, seed for seed, for ``bahdanau_length.json``'s learned additive weights (read from
``bahdanau_length.log``), their difference and a 95% bootstrap interval over inputs.
One run costs about 7 CPU-minutes (0.28 s a step); ``--resume
lib/attnbook/results/bahdanau_length_band.log`` reuses logged seeds. ``--smoke`` runs in seconds.
"""
from __future__ import annotations

import json
import os
import random
import statistics

import torch

import bahdanau_length as bl
import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs
from attnbook.data.g2p import G2PSplit
from attnbook.env import seed_everything
from attnbook.metrics import edit_distance
from attnbook.tasks.g2p import G2PRecipe, predict, train_g2p


def run_band(seed: int, steps: int, smoke: bool) -> dict:
    """``bahdanau_length.run_one``'s attention run with the band in place of the learned score."""
    torch.set_num_threads(1)
    data, train, test = bl.datasets(smoke)
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = bl.baseline_model("band", data, len(src_vocab), len(tgt_vocab), smoke)
    r = bl.RECIPE
    recipe = G2PRecipe(steps=steps, batch_size=r.batch_size, lr=r.lr, clip_norm=r.clip_norm, seed=seed)
    seconds, history = common.timed(
        lambda: train_g2p(model, G2PSplit(train, [], []), src_vocab, tgt_vocab, recipe, progress=False),
        torch.device("cpu"))
    predictions = predict(model, [w for w, _ in test], src_vocab, tgt_vocab)
    row = {"model": "band", "seed": seed, "steps": steps, "parameters": count_parameters(model),
           "train_seconds": round(seconds, 1), "final_loss": round(statistics.mean(history.losses[-50:]), 4),
           "ratio": round(model.decoder.score.ratio, 4), "sigma": model.decoder.score.sigma,
           "errors": [edit_distance(p, ref) for p, (_, ref) in zip(predictions, test)],
           "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = common.experiment_parser(__doc__, conditions=True)
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument("--steps", type=int, default=bl.RECIPE.steps)
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    steps = 4 if args.smoke else args.steps
    done = {(r["seed"], r["steps"]): r for r in common.log_rows(args.resume) if r.get("model") == "band"}
    todo = [s for s in seeds if (s, steps) not in done]
    for row in common.run_jobs(run_band, [(s, steps, args.smoke) for s in todo], args.jobs):
        done[(row["seed"], row["steps"])] = row
    band = [done[(s, steps)] for s in seeds]
    out = common.out_path(args, "bahdanau_length_band.json")
    if out is None:
        return
    _, _, test = bl.datasets(args.smoke)
    learned = {r["seed"]: r for r in common.log_rows([common.RESULTS / "bahdanau_length.log"])
               if r.get("model") == "gru_attention" and r.get("steps") == steps}
    buckets = [bl.bucket_of(len(w)) for w, _ in test]
    ref = [len(p) for _, p in test]
    rng = random.Random(0)
    by_length = {}
    for low, high in bl.BUCKETS:
        name = f"{low}-{high}"
        index = [i for i, b in enumerate(buckets) if b == name]
        total = sum(ref[i] for i in index)
        cell = {"inputs": len(index), "band_per_by_seed": [], "learned_per_by_seed": [],
                "band_minus_learned_interval_95": []}
        for row in band:
            other = learned[row["seed"]]
            cell["band_per_by_seed"].append(round(sum(row["errors"][i] for i in index) / total, 4))
            cell["learned_per_by_seed"].append(round(sum(other["errors"][i] for i in index) / total, 4))
            diffs = []
            for _ in range(bl.BOOTSTRAP):
                pick = [rng.choice(index) for _ in index]
                diffs.append(sum(row["errors"][i] - other["errors"][i] for i in pick)
                             / sum(ref[i] for i in pick))
            diffs.sort()
            cell["band_minus_learned_interval_95"].append(
                [round(diffs[int(0.025 * bl.BOOTSTRAP)], 4), round(diffs[int(0.975 * bl.BOOTSTRAP) - 1], 4)])
        by_length[name] = cell
    common.write_result(out, {
        "description": "Chapter 2: the fixed diagonal band (no parameters) on section 2.10's joined inputs, "
                       "against the learned additive weights of bahdanau_length.json, seed for seed (same "
                       "data, batches, recipe, steps, initial weights but the score); written by "
                       "benchmarks/bahdanau_length_band.py",
        "command": "python benchmarks/bahdanau_length_band.py --seeds " + ",".join(map(str, seeds)),
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"steps": steps, "seeds": seeds, "ratio": band[0]["ratio"], "sigma": band[0]["sigma"],
                  "bootstrap_resamples": bl.BOOTSTRAP, "test_inputs": len(test)},
        "by_length": by_length,
        "runs": [{k: v for k, v in r.items() if k != "errors"} for r in band],
    })


if __name__ == "__main__":
    main()
