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
The band is also scored every 500 steps (one log row each), so an interrupted run keeps what it
reached. One run costs about 8 CPU-minutes (0.28 s a step, plus scoring); ``--resume
lib/attnbook/results/bahdanau_length_band.log`` reuses logged checkpoints and writes the results
from them (``--steps 1000 --resume ...`` writes a run that stopped after its 1,000-step row
without training again). ``--smoke`` runs in seconds.
"""
from __future__ import annotations

import json
import os
import random
import statistics
import time

import torch

import bahdanau_length as bl
import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs
from attnbook.env import seed_everything
from attnbook.metrics import edit_distance
from attnbook.tasks.g2p import G2PRecipe, predict


EVERY = 500  # scored every 500 steps, one log row each, so an interrupted run keeps what it reached


def run_band(seed: int, steps: int, smoke: bool) -> list[dict]:
    """``bahdanau_length.run_one``'s attention run with the band in place of the learned score,
    scored on the test inputs every ``EVERY`` steps (``train_g2p``'s batches and optimizer, via
    ``bahdanau_length.train_g2p_with_eval``); one printed row per checkpoint."""
    torch.set_num_threads(1)
    data, train, test = bl.datasets(smoke)
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = bl.baseline_model("band", data, len(src_vocab), len(tgt_vocab), smoke)
    r = bl.RECIPE
    recipe = G2PRecipe(steps=steps, batch_size=r.batch_size, lr=r.lr, clip_norm=r.clip_norm, seed=seed)
    every = 2 if smoke else EVERY
    rows = []

    def score(m) -> dict:
        predictions = predict(m, [w for w, _ in test], src_vocab, tgt_vocab)
        row = {"model": "band", "seed": seed, "steps": every * (len(rows) + 1),
               "parameters": count_parameters(m), "ratio": round(m.decoder.score.ratio, 4),
               "sigma": m.decoder.score.sigma, "cpu_seconds": round(time.process_time(), 1),
               "errors": [edit_distance(p, ref) for p, (_, ref) in zip(predictions, test)],
               "load_average": os.getloadavg()[0]}
        print(json.dumps(row), flush=True)
        rows.append(row)
        return {}

    _, history = common.timed(
        lambda: bl.train_g2p_with_eval(model, train, src_vocab, tgt_vocab, recipe, score, every),
        torch.device("cpu"))
    for row in rows:
        row["loss"] = round(statistics.mean(history.losses[row["steps"] - 50:row["steps"]]), 4)
    print(json.dumps({"model": "band", "seed": seed, "losses": {str(r["steps"]): r["loss"] for r in rows}}),
          flush=True)
    return rows


def main() -> None:
    p = common.experiment_parser(__doc__, conditions=True)
    p.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    p.add_argument("--steps", type=int, default=bl.RECIPE.steps)
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    steps = 4 if args.smoke else args.steps
    logged = [r for r in common.log_rows(args.resume) if r.get("model") == "band" and "errors" in r]
    todo = [s for s in seeds if not any(r["seed"] == s and r["steps"] == steps for r in logged)]
    for rows in common.run_jobs(run_band, [(s, steps, args.smoke) for s in todo], args.jobs):
        logged += rows
    out = common.out_path(args, "bahdanau_length_band.json")
    if out is None:
        return
    _, _, test = bl.datasets(args.smoke)
    learned = {r["seed"]: r for r in common.log_rows([common.RESULTS / "bahdanau_length.log"])
               if r.get("model") == "gru_attention" and r.get("steps") == bl.RECIPE.steps}
    buckets = [bl.bucket_of(len(w)) for w, _ in test]
    ref = [len(p) for _, p in test]
    rng = random.Random(0)
    by_length = {}  # bucket -> PER of the band by seed and checkpoint, and the learned weights'
    for low, high in bl.BUCKETS:
        name = f"{low}-{high}"
        index = [i for i, b in enumerate(buckets) if b == name]
        total = sum(ref[i] for i in index)
        cell = {"inputs": len(index), "band_per": {}, "learned_per_1500_by_seed": {},
                "band_minus_learned_1500_interval_95": {}}
        for row in sorted(logged, key=lambda r: (r["seed"], r["steps"])):
            cell["band_per"].setdefault(str(row["seed"]), {})[str(row["steps"])] = round(
                sum(row["errors"][i] for i in index) / total, 4)
            other = learned.get(row["seed"])
            if other is None or row["steps"] != bl.RECIPE.steps:
                continue
            cell["learned_per_1500_by_seed"][str(row["seed"])] = round(
                sum(other["errors"][i] for i in index) / total, 4)
            diffs = []
            for _ in range(bl.BOOTSTRAP):
                pick = [rng.choice(index) for _ in index]
                diffs.append(sum(row["errors"][i] - other["errors"][i] for i in pick) / sum(ref[i] for i in pick))
            diffs.sort()
            cell["band_minus_learned_1500_interval_95"][str(row["seed"])] = [
                round(diffs[int(0.025 * bl.BOOTSTRAP)], 4), round(diffs[int(0.975 * bl.BOOTSTRAP) - 1], 4)]
        by_length[name] = cell
    common.write_result(out, {
        "description": "Chapter 2: the fixed diagonal band (no parameters) on section 2.10's joined inputs, "
                       "scored every 500 steps, against the learned additive weights of bahdanau_length.json "
                       "at 1,500 steps, seed for seed (same data, batches, recipe and initial weights but the "
                       "score); written by benchmarks/bahdanau_length_band.py",
        "command": "python benchmarks/bahdanau_length_band.py --seeds " + ",".join(map(str, seeds))
                   + ("" if steps == bl.RECIPE.steps else f" --steps {steps}")
                   + " --resume lib/attnbook/results/bahdanau_length_band.log",
        "machine": common.machine(args.jobs if args.jobs > 1 else None), "conditions": args.conditions,
        "setup": {"steps": steps, "seeds": seeds, "every": EVERY, "ratio": logged[0]["ratio"],
                  "sigma": logged[0]["sigma"], "bootstrap_resamples": bl.BOOTSTRAP, "test_inputs": len(test)},
        "by_length": by_length,
        "runs": [{k: v for k, v in r.items() if k != "errors"} for r in logged],
    })


if __name__ == "__main__":
    main()
