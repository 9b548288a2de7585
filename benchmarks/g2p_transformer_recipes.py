"""The recipe search behind Chapter 5's Transformer, and pre- vs post-norm at the same learning rate.

Usage: ``python benchmarks/g2p_transformer_recipes.py [--jobs 2] [--resume LOG ...]`` writes
``lib/attnbook/results/g2p_transformer_recipes.json`` (Chapter 5 reads it);
``python benchmarks/g2p_transformer_recipes.py --smoke [--out FILE]`` is a seconds-long run.

Every run trains a 2+2-layer Transformer (D=64, 4 heads, d_ff=256, no dropout) for 1,200 steps
of 128 words with ``train_g2p`` (``G2PRecipe``; the batches depend only on the seed) and
Adam(0.9, 0.98, eps 1e-9), then decodes the dev and test splits greedily.

The schedule and label smoothing were chosen by ``g2p_compare.py`` (its ``tune`` phase). The phases:

- ``norm``: pre-norm against post-norm at the SAME recipe (peak 3e-3, warm-up 100, linear decay,
  smoothing 0.1), seeds 0, 1 and 2: the norm placement is the only difference.
- ``size``: training-step time of D=64 (d_ff 256) against D=128 (d_ff 512), one thread, timed
  interleaved on the same batch (median of per-pair ratios); dropout 0.1 against none, likewise.

- ``count_table``: a simple baseline, no neural network: Chapter 10's letter-window count table
  at its default width (``attnbook.tasks.count_baselines``: letters aligned to phonemes by hard
  EM, then each letter's phonemes looked up by its five-letter window, backing off to three,
  two, one; the width tuned on dev, 9 letters, is in ``benchmarks/count_table_width.py``),
  fitted on the same training words and scored on the same dev and test words, with the test WER
  per word-length bucket; beside it the 26-line one-phoneme-per-letter rule.

``--pre-norm-from-compare`` takes the pre-norm rows from ``g2p_compare.json`` (its Transformer is
this model with this recipe, seeds and batches) and keeps any pre-norm runs made here as a check.

Every run is one thread; ``--jobs 2`` runs two at a time. A run prints one JSON line;
``--resume`` reads such lines back, so finished runs are not repeated.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable

import torch

import common
from attnbook.checks import count_parameters
from attnbook.metrics import length_bucket, phoneme_error_rate, wer_by_bucket, word_error_rate
from attnbook.data import build_vocabs, iterate_batches, load_g2p
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.schedules import warmup_linear_scheduler, warmup_scheduler
from attnbook.tasks.count_baselines import LetterAligner, LetterWindowG2P, letter_rule
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, g2p_loss, train_g2p

VARIANTS = {
    # name: (norm_first, peak lr, schedule, warm-up steps)
    "post-norm, linear decay, 3e-3": (False, 3e-3, "linear", 100),
    "pre-norm, linear decay, 3e-3": (True, 3e-3, "linear", 100),
    "post-norm, paper schedule, 3e-3": (False, 3e-3, "inverse_sqrt", 200),  # not run by default
}
NORM = ("post-norm, linear decay, 3e-3", "pre-norm, linear decay, 3e-3")
SEEDS = (0, 1, 2)
SMOOTHING, STEPS, BATCH = 0.1, 1200, 128


def config_for(src_size: int, tgt_size: int, norm_first: bool, d_model: int = 64) -> TransformerConfig:
    return TransformerConfig(src_size, tgt_size, d_model=d_model, num_heads=4, d_ff=4 * d_model,
                             dropout=0.0, norm_first=norm_first)


def run_one(name: str, seed: int, smoke: bool) -> dict:
    """Train one variant with one seed; dev and test WER/PER of greedy decoding."""
    torch.set_num_threads(1)
    norm_first, lr, schedule, warmup = VARIANTS[name]
    torch.manual_seed(seed)
    data = load_g2p()
    if smoke:
        data = type(data)(data.train[:2000], data.dev[:100], data.test[:100])
    src_vocab, tgt_vocab = build_vocabs(data)
    model = Transformer(config_for(len(src_vocab), len(tgt_vocab), norm_first))
    steps = 20 if smoke else STEPS
    warmup = 5 if smoke else warmup
    recipe = G2PRecipe(steps=steps, batch_size=BATCH, lr=lr, label_smoothing=SMOOTHING, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = {
        "inverse_sqrt": lambda: warmup_scheduler(optimizer, warmup),
        "linear": lambda: warmup_linear_scheduler(optimizer, warmup, steps),
    }[schedule]()
    seconds, history = common.timed(lambda: train_g2p(model, data, src_vocab, tgt_vocab, recipe, optimizer=optimizer,
                                                      scheduler=scheduler, progress=False), torch.device("cpu"))
    dev = evaluate_g2p(model, data.dev, src_vocab, tgt_vocab)
    test = evaluate_g2p(model, data.test, src_vocab, tgt_vocab)
    row = {"variant": name, "seed": seed, "parameters": count_parameters(model), "train_seconds": round(seconds, 1),
           "final_loss": round(statistics.mean(history.losses[-50:]), 3),
           "dev_wer": round(dev.wer, 4), "dev_per": round(dev.per, 4),
           "test_wer": round(test.wer, 4), "test_per": round(test.per, 4)}
    print(json.dumps(row), flush=True)
    return row


def measure_size(smoke: bool, repeats: int = 15) -> dict:
    """ms per training step (forward, backward, Adam), one thread, on one fixed batch: D=64 against
    D=128 (d_ff = 4D), and D=64 with dropout 0.1 against without, each pair timed interleaved."""
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    batch = next(iterate_batches(data.train, src_vocab, tgt_vocab, BATCH, torch.Generator().manual_seed(0)))

    def stepper(d_model: int, dropout: float) -> tuple[Callable[[], None], int]:
        torch.manual_seed(0)
        config = dataclasses.replace(config_for(len(src_vocab), len(tgt_vocab), True, d_model), dropout=dropout)
        model = Transformer(config).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step() -> None:
            loss = g2p_loss(model, batch, tgt_vocab.pad_id, SMOOTHING)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        step()  # warm-up
        return step, count_parameters(model)

    rounds = 3 if smoke else repeats
    (small, p64), (large, p128), (dropped, _) = stepper(64, 0.0), stepper(128, 0.0), stepper(64, 0.1)
    ms_large, ms_small, ratio = common.interleaved(large, small, rounds, torch.device("cpu"))
    ms_dropout, _, dropout_ratio = common.interleaved(dropped, small, rounds, torch.device("cpu"))
    return {"how": f"median of {rounds} interleaved pairs of training steps on one batch of {BATCH} words, one thread",
            "parameters": {"64": p64, "128": p128},
            "ms_per_step": {"64": round(ms_small, 1), "128": round(ms_large, 1), "64, dropout 0.1": round(ms_dropout, 1)},
            "ratio_128_over_64": round(ratio, 2), "ratio_dropout_over_none": round(dropout_ratio, 2)}


def count_table(smoke: bool) -> dict:
    """WER and PER of the letter-window count table and of the one-phoneme-per-letter rule."""
    data = load_g2p()
    train = list(data.train[:3000]) if smoke else list(data.train)
    dev, test = (data.dev[:200], data.test[:200]) if smoke else (data.dev, data.test)
    table = LetterWindowG2P(train, LetterAligner(train))
    out = {"how": "letter-window count table fitted on the training words (Chapter 10's "
                  "attnbook.tasks.count_baselines), greedy lookup, no neural network",
           "training_words": len(train)}
    for method, predict in (("letter window", table), ("letter rule", letter_rule)):
        row = {}
        for split, pairs in (("dev", dev), ("test", test)):
            hyps, refs = [tuple(predict(w)) for w, _ in pairs], [tuple(p) for _, p in pairs]
            row[f"{split}_wer"] = round(word_error_rate(hyps, refs), 4)
            row[f"{split}_per"] = round(phoneme_error_rate(hyps, refs), 4)
            if split == "test":
                words = [w for w, _ in pairs]
                sizes = {b: sum(length_bucket(len(w)) == b for w in words)
                         for b in wer_by_bucket(words, hyps, refs)}
                row["test_wer_by_length"] = {b: {"words": sizes[b], "wer": round(v, 4)}
                                             for b, v in wer_by_bucket(words, hyps, refs).items()}
        out[method] = row
    return out


def compare_rows() -> list[dict]:
    """The pre-norm rows of ``g2p_compare.json``: its Transformer with warm-up, linear decay, smoothing 0.1."""
    compare = json.loads((common.RESULTS / "g2p_compare.json").read_text())
    return [{"variant": NORM[1], "seed": r["seed"], **{k: r[k] for k in ("dev_wer", "dev_per", "test_wer", "test_per",
                                                                       "final_loss")}}
            for r in compare["runs"] if r["model"] == "transformer" and r["phase"] in ("tune", "seeds")
            and r["recipe"] == "warm-up + linear decay, smoothing 0.1" and r["steps"] == STEPS]


def summarize(rows: list[dict], name: str) -> dict:
    mine = sorted((r for r in rows if r["variant"] == name), key=lambda r: r["seed"])
    out = {"seeds": [r["seed"] for r in mine]}
    for key in ("dev_wer", "dev_per", "test_wer", "test_per", "final_loss"):
        values = [r[key] for r in mine]
        out[key] = {"values": values, "mean": round(statistics.mean(values), 4),
                    "min": min(values), "max": max(values)}
    return out


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), help="seeds of the norm phase")
    parser.add_argument("--no-write", action="store_true", help="print the runs' rows, write no JSON")
    parser.add_argument("--placements", nargs="+", choices=("post", "pre"), default=["post", "pre"],
                        help="which placements to train (default both)")
    parser.add_argument("--pre-norm-from-compare", action="store_true",
                        help="take the pre-norm rows from g2p_compare.json's Transformer runs (the same recipe, "
                             "seeds and batches) instead of training them again")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    done = {(r["variant"], r["seed"]): r for r in common.log_rows(args.resume) if "variant" in r}
    names = [name for name in NORM if name.split("-")[0] in args.placements]
    specs = [(name, seed) for seed in args.seeds for name in names]
    specs = list(dict.fromkeys(specs))
    todo = [spec for spec in specs if spec not in done]
    new = common.run_jobs(run_one, [(name, seed, args.smoke) for name, seed in todo], args.jobs)
    rows = list(done.values()) + new
    if args.no_write:
        return
    reruns = []
    if args.pre_norm_from_compare:
        reruns = [r for r in rows if r["variant"] == NORM[1]]
        rows = [r for r in rows if r["variant"] != NORM[1]] + compare_rows()
    sizes = [r["size"] for r in common.log_rows(args.resume) if "size" in r]
    size = sizes[-1] if sizes else measure_size(args.smoke)
    if not sizes:
        print(json.dumps({"size": size}), flush=True)
    tables = [r["count_table"] for r in common.log_rows(args.resume) if "count_table" in r]
    table = tables[-1] if tables else count_table(args.smoke)
    if not tables:
        print(json.dumps({"count_table": table}), flush=True)
    result = {
        "description": "Chapter 5's Transformer recipes on G2P: 1,200 steps of 128 words, greedy decoding",
        "machine": common.machine(args.jobs),
        "conditions": args.conditions,
        "setup": {"steps": STEPS, "batch_size": BATCH, "label_smoothing": SMOOTHING,
                  "model": "2+2 layers, D=64, 4 heads, d_ff=256, dropout 0",
                  "variants": {name: dict(zip(("norm_first", "peak_lr", "schedule", "warmup"), v))
                               for name, v in VARIANTS.items()}},
        "norm": {name: summarize(rows, name) for name in NORM},
        "pre_norm_source": ("g2p_compare.json (its Transformer: the same model, recipe, seeds and batches)"
                            if args.pre_norm_from_compare else "this script"),
        "pre_norm_reruns_here": reruns,
        "size": size,
        "count_table": table,
    }
    out = common.out_path(args, "g2p_transformer_recipes.json")
    if out is not None:
        common.write_result(out, result)


if __name__ == "__main__":
    main()
