"""The book's G2P comparison (Chapters 1, 2 and 5) at an equal budget, tuned alike, with seeds.

Usage: ``python benchmarks/g2p_compare.py [--jobs 2] [--phase tune seeds equal_time converge]
[--resume LOG ...]`` writes ``lib/attnbook/results/g2p_compare.json`` (the chapters read it);
``python benchmarks/g2p_compare.py --smoke [--out FILE]`` is a seconds-long run for the tests.

The three models are the chapters' own: the GRU encoder-decoder (Chapter 1), GRU + additive
attention (Chapter 2) and the pre-norm Transformer (Chapter 5, D=64, 2+2 layers, 4 heads).
Every run uses the same optimizer (Adam, betas 0.9/0.98, eps 1e-9, peak learning rate 3e-3,
gradients clipped at 1), batch size (128 words) and, for a given seed, the same batches in the
same order. The phases:

- ``tune``: each model tries the same four recipes on the dev split at 1,200 steps, seed 0:
  {constant rate, linear warm-up (100 steps) then linear decay} x {label smoothing 0, 0.1}.
  Each model keeps the recipe with its lowest dev WER (the same tuning budget for all three).
- ``seeds``: each model's best recipe again with seeds 1 and 2 (seed 0 is the tuning run).
- ``equal_time`` (a run identical to a ``seeds``/``tune`` run is reused, not repeated):
  each model's best recipe for as many steps as it runs in the time the fastest
  model needs for 1,200 steps (speeds measured side by side: ``measure_speeds``), seeds 0-2.
- ``converge``: each model's best recipe for 8,000 steps (about 10 epochs), seed 0, with the
  dev WER of a fixed 1,000-word sample every 1,000 steps.
- ``lr``: each model's best recipe at the budget with the peak learning rate doubled (``ALT_LR``,
  6e-3), seeds ``--lr-seeds`` (default 0-2): the shared rate 3e-3 was never tuned, so this
  measures what it costs each model (``lr_sweep`` in the results: both rates side by side).
- ``lr`` also runs the rates of ``--lr-rates`` (default both of ``ALT_LRS``: 6e-3 and 1.2e-2), so the
  dev choice is not at the grid's edge unless the data say so; ``--matched-rates`` runs the matched
  Transformer at those rates too (phase ``matched_lr``, on the lr seeds), and ``--converge-seeds`` adds
  seeds to the converge phase (``converged_seeds`` in the results: mean, min and max).
- ``matched``: a wider Transformer (D=84, 4 heads, d_ff=336: 407,107 parameters, against
  414,251 for GRU + attention) with the Transformer's best recipe at the budget, seeds 0-2,
  so the size explanation of the gap can be tested.

The committed results ran every phase (a later invocation added the lr phase's seeds 1-2 at 6e-3, then the
1.2e-2 rate, the matched model at 6e-3 and converge seed 1, then the matched model at 1.5e-3 and 1.2e-2
(``g2p_compare_lr3.log``), each resuming the earlier logs, the 8,000-step ones included): first
``--phase tune seeds equal_time converge lr``, then the matched phase (seeds 0-2) with the rest
resumed from their logs (``g2p_compare_matched.log``), on the same kind of 2-core machine shared
with other jobs. The matched runs' speeds are wall times under a different load from the
side-by-side ``speed`` measurement, so Chapter 5 gives them no equal-time entry. The command in
the results file reruns everything. A smoke run uses one seed for both.

Every run is one thread; ``--jobs 2`` runs two at a time (on a 2-core machine, as measured).
A run prints one JSON line; ``--resume`` reads such lines back so finished runs are not repeated.
"""
from __future__ import annotations

import itertools
import json
import os
import statistics
import time
from pathlib import Path

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs, iterate_batches, load_g2p
from attnbook.env import seed_everything
from attnbook.layers.positional import LearnedPositionalEmbedding
from attnbook.metrics import length_bucket, phoneme_error_rate, word_error_rate
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.g2p import evaluate_g2p, g2p_loss
from attnbook.train import fit

MODELS = ("gru", "gru_attention", "transformer")
LABELS = {"gru": "GRU encoder-decoder (Ch. 1)", "gru_attention": "GRU + additive attention (Ch. 2)",
          "transformer": "Transformer (Ch. 5)"}
RECIPES = {  # name: (schedule, label smoothing)
    "constant": ("constant", 0.0),
    "constant, smoothing 0.1": ("constant", 0.1),
    "warm-up + linear decay": ("linear", 0.0),
    "warm-up + linear decay, smoothing 0.1": ("linear", 0.1),
}
PEAK_LR, WARMUP, BATCH, CLIP = 3e-3, 100, 128, 1.0
BUDGET_STEPS, CONVERGE_STEPS, CURVE_EVERY = 1200, 8000, 1000
SEEDS = (0, 1, 2)
PHASES = ("tune", "seeds", "equal_time", "converge", "lr", "matched")
ALT_LRS = (6e-3, 1.2e-2)  # the lr phase's rates (``--lr-rates`` picks which run)
ALT_LR = ALT_LRS[0]
MATCHED = "transformer_matched"
LABELS_EXTRA = {MATCHED: "Transformer, D=84 (parameter-matched)"}
ABLATIONS = {  # Chapter 5's Transformer (D=64, 4 heads, 2+2 layers, sinusoids) with one change each
    "transformer_1head": {"config": {"num_heads": 1}, "learned_positions": False,
                          "label": "1 head (Dh = 64) instead of 4"},
    "transformer_1layer": {"config": {"num_encoder_layers": 1, "num_decoder_layers": 1}, "learned_positions": False,
                           "label": "1 + 1 layers instead of 2 + 2"},
    "transformer_learned_pos": {"config": {}, "learned_positions": True,
                                "label": "learned positions (started at std 1/sqrt(2), the sinusoids' scale)"},
    "transformer_dropout": {"config": {"dropout": 0.1}, "learned_positions": False,
                            "label": "dropout 0.1 (the paper's) instead of 0"},
}


def build(kind: str, src_size: int, tgt_size: int, smoke: bool) -> torch.nn.Module:
    if kind == "gru":
        return RNNSeq2Seq(RNNSeq2SeqConfig(src_size, tgt_size, **_small_rnn(smoke)))
    if kind == "gru_attention":
        return RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, **_small_rnn(smoke)))
    if kind == "transformer":
        width = dict(d_model=16, num_heads=2, d_ff=32) if smoke else dict(d_model=64, num_heads=4, d_ff=256)
        return Transformer(TransformerConfig(src_size, tgt_size, **width, dropout=0.0, norm_first=True))
    if kind == MATCHED:
        width = dict(d_model=24, num_heads=2, d_ff=48) if smoke else dict(d_model=84, num_heads=4, d_ff=336)
        return Transformer(TransformerConfig(src_size, tgt_size, **width, dropout=0.0, norm_first=True))
    if kind in ABLATIONS:
        return ablated_transformer(kind, src_size, tgt_size, smoke)
    raise ValueError(f"unknown model {kind!r}; known: {MODELS + (MATCHED,) + tuple(ABLATIONS)}")


def ablated_transformer(kind: str, src_size: int, tgt_size: int, smoke: bool) -> Transformer:
    """Chapter 5's Transformer with one thing changed (``ABLATIONS``; ``g2p_ablation.py`` runs them)."""
    sizes = dict(d_model=16, num_heads=2, d_ff=32) if smoke else dict(d_model=64, num_heads=4, d_ff=256)
    change = ABLATIONS[kind]
    model = Transformer(TransformerConfig(src_size, tgt_size, **(sizes | {"dropout": 0.0} | change["config"]),
                                          norm_first=True))
    if change["learned_positions"]:  # a trained table instead of the sinusoids, started at their scale
        for embeddings in (model.src_embeddings, model.tgt_embeddings):
            embeddings.positions = LearnedPositionalEmbedding(model.config.d_model, model.config.max_len,
                                                              init_std=2 ** -0.5)
    return model


def _small_rnn(smoke: bool) -> dict:
    return dict(emb_dim=8, enc_hidden=8, dec_hidden=8) if smoke else {}


def run_one(kind: str, recipe: str, seed: int, steps: int, phase: str, smoke: bool,
            peak_lr: float = PEAK_LR) -> dict:
    """Train one model with one recipe and seed, then score it on dev and test (one thread)."""
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    schedule, smoothing = RECIPES[recipe]
    seed_everything(seed)
    model = build(kind, len(src_vocab), len(tgt_vocab), smoke)
    optimizer = torch.optim.Adam(model.parameters(), lr=peak_lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_linear_scheduler(optimizer, min(WARMUP, steps - 1), steps) if schedule == "linear" else None
    batches = iterate_batches(data.train, src_vocab, tgt_vocab, BATCH, torch.Generator().manual_seed(seed))
    batches = itertools.chain([next(batches)], batches)  # encodes every word now, outside the timed steps
    curve_words = data.dev[::5][: (40 if smoke else 1000)]
    every = max(1, steps // 3) if smoke else CURVE_EVERY
    curve, seconds, losses = [], 0.0, []
    while len(losses) < steps:
        chunk = min(every, steps - len(losses))
        history = fit(model, batches, lambda m, b: g2p_loss(m, b, tgt_vocab.pad_id, smoothing), optimizer, chunk,
                      clip_norm=CLIP, scheduler=scheduler, progress=False)
        seconds += history.seconds
        losses += history.losses
        if phase == "converge" or len(losses) == steps:
            sample = evaluate_g2p(model, curve_words, src_vocab, tgt_vocab)
            curve.append([len(losses), round(seconds, 1), round(sample.wer, 4)])
    dev_words, test_words = (data.dev[:200], data.test[:200]) if smoke else (data.dev, data.test)
    dev = evaluate_g2p(model, dev_words, src_vocab, tgt_vocab)
    test = evaluate_g2p(model, test_words, src_vocab, tgt_vocab)
    row = {"phase": phase, "model": kind, "recipe": recipe, "seed": seed, "steps": steps, "peak_lr": peak_lr,
           "parameters": count_parameters(model), "train_seconds": round(seconds, 1),
           "steps_per_second": round(steps / seconds, 2), "final_loss": round(statistics.mean(losses[-50:]), 4),
           "dev_wer": round(dev.wer, 4), "dev_per": round(dev.per, 4),
           "test_wer": round(test.wer, 4), "test_per": round(test.per, 4),
           "test_by_length": by_length(test), "dev_sample_curve": curve, "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def by_length(result) -> dict[str, dict]:
    """Test WER and PER per word-length bucket, with the bucket's size."""
    groups: dict[str, list[int]] = {}
    for i, word in enumerate(result.words):
        groups.setdefault(length_bucket(len(word)), []).append(i)
    order = sorted(groups, key=lambda k: min(len(result.words[i]) for i in groups[k]))
    out = {}
    for key in order:
        hyps = [result.predictions[i] for i in groups[key]]
        refs = [result.references[i] for i in groups[key]]
        out[key] = {"words": len(refs), "wer": round(word_error_rate(hyps, refs), 4),
                    "per": round(phoneme_error_rate(hyps, refs), 4)}
    return out


SPEED_HOW = ("one thread, one process; each model's median time per training step over 3 interleaved "
             "rounds of 10 steps on fixed batches (after a warm-up round of 2 steps), so a change in the machine's "
             "load hits all three models alike")


def measure_speeds(smoke: bool, rounds: int = 4, steps: int = 10) -> dict[str, float]:
    """Training steps per second of each model (see ``SPEED_HOW``)."""
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    batches = iterate_batches(data.train, src_vocab, tgt_vocab, BATCH, torch.Generator().manual_seed(0))
    fixed = [next(batches) for _ in range(steps)]
    models = {m: build(m, len(src_vocab), len(tgt_vocab), smoke) for m in MODELS}
    optimizers = {m: torch.optim.Adam(models[m].parameters(), lr=1e-4) for m in MODELS}
    times: dict[str, list[float]] = {m: [] for m in MODELS}
    for round_ in range(rounds):
        for m in MODELS:
            for i, batch in enumerate(fixed if round_ else fixed[:2]):
                start = time.perf_counter()
                loss = g2p_loss(models[m], batch, tgt_vocab.pad_id)
                optimizers[m].zero_grad()
                loss.backward()
                optimizers[m].step()
                if round_:  # round 0 warms up
                    times[m].append(time.perf_counter() - start)
    return {m: round(1 / statistics.median(times[m]), 2) for m in MODELS}


def read_rows(paths: list[Path]) -> tuple[dict[tuple, dict], dict[str, float] | None]:
    """Runs and the speed measurement printed by earlier invocations (JSON lines), to reuse."""
    rows, speed = {}, None
    for row in common.log_rows(paths):
        if "speed_steps_per_second" in row:
            speed = row["speed_steps_per_second"]
        else:
            rows[key_of(row)] = row
    return rows, speed


def key_of(row: dict) -> tuple:
    return row["phase"], row["model"], row["recipe"], row["seed"], row["steps"], row.get("peak_lr", PEAK_LR)


def run_all(specs: list[tuple], smoke: bool, jobs: int, done: dict[tuple, dict]) -> list[dict]:
    """Run every ``(phase, model, recipe, seed, steps[, peak_lr])`` not in ``done``; rows in the order asked."""
    specs = [s if len(s) == 6 else (*s, PEAK_LR) for s in specs]
    todo = [s for s in specs if s not in done]
    new = common.run_jobs(run_one, [(m, r, seed, steps, phase, smoke, lr)
                                    for phase, m, r, seed, steps, lr in todo], jobs)
    done.update({key_of(r): r for r in new})
    return [done[s] for s in specs]


def best_recipes(tune_rows: list[dict]) -> dict[str, str]:
    """Each model's recipe with the lowest dev WER among its tuning runs."""
    return {m: min((r for r in tune_rows if r["model"] == m), key=lambda r: r["dev_wer"])["recipe"] for m in MODELS}


def summarize(rows: list[dict], phase: str, models: tuple = MODELS) -> dict[str, dict]:
    """Mean, min and max over seeds of each model's scores in one phase."""
    out = {}
    for m in models:
        mine = [r for r in rows if r["phase"] == phase and r["model"] == m]
        if not mine:
            continue
        cell = {"recipe": mine[0]["recipe"], "steps": sorted({r["steps"] for r in mine}), "seeds": len(mine),
                "parameters": mine[0]["parameters"], "peak_lr": mine[0].get("peak_lr", PEAK_LR)}
        for key in ("test_wer", "test_per", "dev_wer", "dev_per", "train_seconds", "steps_per_second"):
            values = [r[key] for r in mine]
            cell[key] = {"mean": round(statistics.mean(values), 4), "min": min(values), "max": max(values)}
        cell["test_wer_by_length"] = {
            bucket: {"words": mine[0]["test_by_length"][bucket]["words"],
                     "mean": round(statistics.mean(r["test_by_length"][bucket]["wer"] for r in mine), 4)}
            for bucket in mine[0]["test_by_length"]}
        out[m] = cell
    return out


def lr_sweep(budget_rows: list[dict], lr_rows: list[dict], lr_seeds: tuple, models: tuple = MODELS) -> dict[str, dict]:
    """Each model at every peak rate run on the same seeds (``lr_seeds``); the rate with the lower mean
    dev WER is the one chosen (dev only: the test split is not looked at to choose)."""
    out = {}
    rates = sorted({r["peak_lr"] for r in lr_rows})
    for m in models:
        by_rate = {}
        for rate, rows in ((PEAK_LR, budget_rows), *((x, [r for r in lr_rows if r["peak_lr"] == x]) for x in rates)):
            mine = [r for r in rows if r["model"] == m and r["seed"] in lr_seeds]
            if not mine:
                continue
            by_rate[f"{rate:g}"] = {"seeds": sorted(r["seed"] for r in mine)} | {
                key: {"values": [r[key] for r in sorted(mine, key=lambda r: r["seed"])],
                      "mean": round(statistics.mean(r[key] for r in mine), 4)}
                for key in ("dev_wer", "test_wer", "test_per")}
        if by_rate:
            chosen = min(by_rate, key=lambda k: by_rate[k]["dev_wer"]["mean"])
            out[m] = {"by_peak_lr": by_rate, "chosen_on_dev": chosen}
    return out


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    parser.add_argument("--phase", nargs="+", choices=PHASES, default=list(PHASES), help="phases to run")
    parser.add_argument("--lr-seeds", type=int, nargs="+", default=None,
                        help="seeds of the lr phase (default: all seeds)")
    parser.add_argument("--matched-seeds", type=int, nargs="+", default=None,
                        help="seeds of the matched phase (default: all seeds)")
    parser.add_argument("--lr-rates", type=float, nargs="+", default=list(ALT_LRS),
                        help="peak rates of the lr phase (default: all of ALT_LRS)")
    parser.add_argument("--matched-rates", type=float, nargs="+", default=[],
                        help="extra peak rates for the matched model, on the lr seeds (phase matched_lr)")
    parser.add_argument("--converge-seeds", type=int, nargs="+", default=[0],
                        help="seeds of the converge phase (default: 0)")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    budget, converge = (6, 9) if args.smoke else (BUDGET_STEPS, CONVERGE_STEPS)
    seeds = SEEDS[:2] if args.smoke else SEEDS
    done, speed = read_rows(args.resume)
    tune = run_all([("tune", m, r, 0, budget) for m in MODELS for r in RECIPES], args.smoke, args.jobs, done)
    best = best_recipes(tune)
    rows = list(tune)
    if "seeds" in args.phase:
        rows += run_all([("seeds", m, best[m], s, budget) for m in MODELS for s in seeds[1:]], args.smoke, args.jobs, done)
    seeded = [dict(r, phase="budget") for r in rows if r["phase"] == "seeds" or
              (r["phase"] == "tune" and r["recipe"] == best[r["model"]])]
    if speed is None:
        speed = measure_speeds(args.smoke)
        print(json.dumps({"speed_steps_per_second": speed}), flush=True)
    equal_seconds = budget / max(speed.values())  # the fastest model's time for the step budget
    steps = {m: max(2, round(equal_seconds * speed[m])) for m in MODELS}
    if "equal_time" in args.phase:
        for r in seeded:  # the fastest model's equal-time run is its budget run: reuse, do not retrain
            done.setdefault(("equal_time", r["model"], r["recipe"], r["seed"], r["steps"]), dict(r, phase="equal_time"))
        rows += run_all([("equal_time", m, best[m], s, steps[m]) for m in MODELS for s in seeds],
                        args.smoke, args.jobs, done)
    if "converge" in args.phase:
        rows += run_all([("converge", m, best[m], 0, converge) for m in MODELS], args.smoke, args.jobs, done)
    default_seeds = seeds[:1] if args.smoke else seeds  # a smoke run checks the phases, not the seeds
    lr_seeds = default_seeds if args.lr_seeds is None else tuple(args.lr_seeds)
    lr_specs = ([("lr", m, best[m], s, budget, rate) for rate in args.lr_rates for s in lr_seeds for m in MODELS]
                if "lr" in args.phase else [])
    matched_seeds = default_seeds if args.matched_seeds is None else tuple(args.matched_seeds)
    matched_seeds = matched_seeds if "matched" in args.phase else ()
    matched = ([("matched", MATCHED, best["transformer"], s, budget) for s in matched_seeds]
               if "matched" in args.phase else [])
    # one pool for both phases: the first lr seed of every model, then the matched runs, then the rest
    rows += run_all(lr_specs[:len(MODELS)] + matched + lr_specs[len(MODELS):], args.smoke, args.jobs, done)
    matched_lr = [("matched_lr", MATCHED, best["transformer"], s, budget, rate)
                  for rate in args.matched_rates for s in lr_seeds]
    rows += run_all(matched_lr, args.smoke, args.jobs, done)
    converge_more = [("converge", m, best[m], s, converge) for s in args.converge_seeds if s != 0 for m in MODELS]
    if "converge" in args.phase:
        rows += run_all(converge_more, args.smoke, args.jobs, done)
    out = common.out_path(args, "g2p_compare.json")
    if out is None:
        return
    result = {
        "description": "G2P on the book's CMUdict split: Chapters 1, 2 and 5's models at an equal budget, "
                       "tuned alike; written by benchmarks/g2p_compare.py",
        "command": "python benchmarks/g2p_compare.py --jobs 2" + (
            f" --lr-seeds {' '.join(map(str, lr_seeds))}" if lr_seeds != seeds else "") + (
            f" --matched-seeds {' '.join(map(str, matched_seeds))}" if matched_seeds not in (seeds, ()) else "") + (
            f" --phase {' '.join(args.phase)}" if list(args.phase) != list(PHASES) else "") + (
            f" --lr-rates {' '.join(f'{x:g}' for x in args.lr_rates)}" if list(args.lr_rates) != list(ALT_LRS) else "") + (
            f" --matched-rates {' '.join(f'{x:g}' for x in args.matched_rates)}" if args.matched_rates else "") + (
            f" --converge-seeds {' '.join(map(str, args.converge_seeds))}" if list(args.converge_seeds) != [0] else ""),
        "setup": {"peak_lr": PEAK_LR, "warmup_steps": WARMUP, "batch_size": BATCH, "clip_norm": CLIP,
                  "optimizer": "Adam(betas=(0.9, 0.98), eps=1e-9)", "budget_steps": budget,
                  "converge_steps": converge, "recipes": {k: list(v) for k, v in RECIPES.items()},
                  "seeds": list(seeds), "labels": {**LABELS, **LABELS_EXTRA}, "alt_peak_lr": ALT_LR, "alt_peak_lrs": list(args.lr_rates),
                  "matched_rates": list(args.matched_rates), "converge_seeds": list(args.converge_seeds),
                  "lr_seeds": list(lr_seeds), "matched_seeds": list(matched_seeds)},
        "speed": {"steps_per_second": speed, "how": SPEED_HOW, "equal_time_seconds": round(equal_seconds, 1),
                  "equal_time_steps": steps},
        "machine": common.machine(args.jobs),
        "conditions": args.conditions,
        "best_recipe": best,
        "budget": summarize(seeded, "budget"),
        "equal_time": summarize(rows, "equal_time"),
        "converged": {r["model"]: r for r in rows if r["phase"] == "converge" and r["seed"] == 0},
        "converged_seeds": summarize(rows, "converge"),
        "lr_sweep": lr_sweep(seeded, [r for r in rows if r["phase"] == "lr"], lr_seeds),
        "lr_sweep_matched": lr_sweep([r for r in rows if r["phase"] == "matched"],
                                     [r for r in rows if r["phase"] == "matched_lr"], lr_seeds, (MATCHED,)),
        "matched": summarize(seeded, "budget", ("transformer",)) | summarize(rows, "matched", (MATCHED,)),
        "runs": rows,
    }
    common.write_result(out, result)


if __name__ == "__main__":
    main()
