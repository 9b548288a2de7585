"""Bahdanau et al.'s length figure, reproduced on G2P: error against input length, with and without attention.

Usage: ``python benchmarks/bahdanau_length.py [--jobs 2] [--resume LOG ...]`` writes
``lib/attnbook/results/bahdanau_length.json`` (Chapter 2 draws it);
``python benchmarks/bahdanau_length.py --smoke [--out FILE]`` is a seconds-long run for the tests.

Inputs are CMUdict words written together ("phone" + "knight" -> "phoneknight" -> F OW N N AY T),
1 to 6 words long. Training inputs join *training* words and are balanced over six length
buckets (1-9, 10-19, ..., 50-59 letters), so both models see long inputs while they learn; test
inputs join *test* words (every piece unseen), 150 per bucket. The two models are the chapters'
own (Chapter 1's GRU encoder-decoder, Chapter 2's GRU + additive attention), trained with the
book's shared recipe (Adam 3e-3, gradients clipped at 1) on the same batches in the same order,
for the same number of steps, with three seeds. Scored by phoneme error rate (PER) per bucket
(whole-input WER is close to 100% for long inputs and says little). One thread per run.

The three seeds are tested on the same 150 inputs per bucket, so the 95% intervals resample
*inputs* (each input's errors summed over the seeds), not the 450 answers as if independent.

``--checkpoints 250,500,750`` adds one run of the model without attention (seed 0, the same
batches as the main seed-0 run) scored at those steps, to show how its length curve moves with
training: ``python benchmarks/bahdanau_length.py --resume lib/attnbook/results/bahdanau_length.log
--checkpoints 250,500,750`` retrains only that run (about 4 CPU-minutes).

``--long 6000`` adds one longer run of the model without attention (seed 0, the same batches
as the main seed-0 run, extended) scored every 1,500 steps; each checkpoint is printed as a log
row when it is reached, so an interrupted run keeps what it got and ``--resume`` reuses it:
``nice python benchmarks/bahdanau_length.py --checkpoints 250,500,750 --long 6000 --resume
lib/attnbook/results/bahdanau_length.log lib/attnbook/results/bahdanau_length_checkpoints.log``
(about 16 CPU-minutes on an idle core).

``--scores`` runs a different, smaller experiment for §2.8 instead and writes
``lib/attnbook/results/bahdanau_scores.json``: the bilinear score and the bilinear score divided by
sqrt(Ds) (Ds = 128, the decoder state's width), each trained on single words with the chapter's
360-step recipe, for seeds 0, 1 and 2 (the same initial weights and batches for both scores
within a seed), scored by test WER and PER, the mean largest weight ("sharpness") and the mean
spread of the scores over a word's letters on every 12th test word:
``nice python benchmarks/bahdanau_length.py --scores --jobs 2`` (about 4 CPU-minutes). Its additive
seeds are the --baselines run's (the same model, recipe and seeds): ``--scores --resume
lib/attnbook/results/bahdanau_scores.log`` reads them from the rows appended to that log.
Two controls split what the division does (with Adam, dividing the score by c = sqrt(Ds) is the
unscaled score with its W started c times smaller *and* stepped c times slower): the unscaled
bilinear score with only W's learning rate divided by sqrt(Ds) ("bilinear_slow_w", the same
initial W) and with only its initial W divided by sqrt(Ds) ("bilinear_small_init", W's rate
unchanged); the same seeds, batches and steps (about 4 more CPU-minutes with --resume).

``--baselines`` runs §2.7's test of the learned alignment instead and writes
``lib/attnbook/results/bahdanau_baselines.json``: with the chapter's 360-step recipe on single words,
seeds 0, 1 and 2, Chapter 1's model ("none"), the attention decoder with uniform weights 1/S trained
that way ("uniform"), with a parameter-free fixed diagonal band ("band": step i looks at letter
i * r, r the training words' phonemes per letter, Gaussian sigma 1 letter) trained that way, and with
learned additive weights ("additive"); test WER, PER and WER by word length:
``nice python benchmarks/bahdanau_length.py --baselines --jobs 3`` (twelve runs of one to two CPU-minutes each).

``--tuned-baselines`` runs the band and the uniform weights at the budget where attention beats the
count tables instead, and writes ``lib/attnbook/results/bahdanau_baselines_tuned.json``: the run of
``g2p_compare.py``'s attention model (1,200 steps, its dev-chosen recipe, its optimizer, batches,
initial weights and dev/test scoring, seeds 0, 1 and 2) with the score swapped for the band or the
uniform weights, so each row compares seed for seed with that file's "budget" runs:
``nice python benchmarks/bahdanau_length.py --tuned-baselines --jobs 3`` (six runs of a few
CPU-minutes each; ``--tuned-kinds band`` runs the band only).
"""
from __future__ import annotations

import functools
import json
import os
import random
import statistics

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs, load_g2p
from attnbook.data.g2p import G2PSplit
from attnbook.data.joined_words import join_words
from attnbook.env import seed_everything
from attnbook.metrics import edit_distance
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.tasks.g2p import G2PRecipe, predict, train_g2p

BUCKETS = ((1, 9), (10, 19), (20, 29), (30, 39), (40, 49), (50, 59))
MODELS = ("gru", "gru_attention")
SEEDS = (0, 1, 2)
TRAIN_PER_BUCKET, TEST_PER_BUCKET = 10_000, 150
RECIPE = G2PRecipe(steps=1500, batch_size=64)  # the committed run's steps
BOOTSTRAP = 2000


def joined_split(pairs, per_bucket: int, seed: int) -> list[tuple[str, tuple[str, ...]]]:
    """``per_bucket`` joins of 1-6 words in each length bucket."""
    out = []
    for k, (low, high) in enumerate(BUCKETS):
        out += join_words(pairs, per_bucket, min_words=1, max_words=6, min_letters=low, max_letters=high,
                          seed=seed + k)
    return out


def datasets(smoke: bool):
    data = load_g2p()
    train_n, test_n = (50, 10) if smoke else (TRAIN_PER_BUCKET, TEST_PER_BUCKET)
    return data, joined_split(data.train, train_n, seed=100), joined_split(data.test, test_n, seed=200)


def build(kind: str, src_size: int, tgt_size: int, smoke: bool) -> torch.nn.Module:
    small = dict(emb_dim=8, enc_hidden=8, dec_hidden=8) if smoke else {}
    if kind == "gru":
        return RNNSeq2Seq(RNNSeq2SeqConfig(src_size, tgt_size, **small))
    if kind == "gru_attention":
        return RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, **small))
    raise ValueError(f"unknown model {kind!r}; known: {MODELS}")


def run_one(kind: str, seed: int, steps: int, smoke: bool) -> dict:
    """Train one model on joined words and record, per test input, its edit distance and length."""
    torch.set_num_threads(1)
    data, train, test = datasets(smoke)
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = build(kind, len(src_vocab), len(tgt_vocab), smoke)
    recipe = G2PRecipe(steps=steps, batch_size=RECIPE.batch_size, lr=RECIPE.lr, clip_norm=RECIPE.clip_norm, seed=seed)
    seconds, history = common.timed(
        lambda: train_g2p(model, G2PSplit(train, [], []), src_vocab, tgt_vocab, recipe, progress=False),
        torch.device("cpu"))
    predictions = predict(model, [w for w, _ in test], src_vocab, tgt_vocab)
    row = {"model": kind, "seed": seed, "steps": steps, "parameters": count_parameters(model),
           "train_seconds": round(seconds, 1), "final_loss": round(statistics.mean(history.losses[-50:]), 4),
           "errors": [edit_distance(p, ref) for p, (_, ref) in zip(predictions, test)],
           "output_phonemes": [len(p) for p in predictions], "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def run_checkpoints(kind: str, seed: int, checkpoints: tuple[int, ...], smoke: bool) -> dict:
    """One run scored on the test inputs at each of ``checkpoints`` steps (per-input edit distances)."""
    torch.set_num_threads(1)
    data, train, test = datasets(smoke)
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = build(kind, len(src_vocab), len(tgt_vocab), smoke)
    steps = max(checkpoints)
    recipe = G2PRecipe(steps=steps, batch_size=RECIPE.batch_size, lr=RECIPE.lr, clip_norm=RECIPE.clip_norm, seed=seed)
    by_step = {}

    def score(m) -> dict:
        predictions = predict(m, [w for w, _ in test], src_vocab, tgt_vocab)
        done = len(by_step)
        at = sorted(checkpoints)[done] if done < len(checkpoints) else steps
        by_step[str(at)] = [edit_distance(p, ref) for p, (_, ref) in zip(predictions, test)]
        return {}

    every = min(checkpoints)
    if any(c % every for c in checkpoints):
        raise ValueError(f"checkpoints must be multiples of the first, got {checkpoints}")
    seconds, history = common.timed(
        lambda: train_g2p_with_eval(model, train, src_vocab, tgt_vocab, recipe, score, every),
        torch.device("cpu"))
    losses = {str(c): round(statistics.mean(history.losses[max(0, c - 50):c]), 4) for c in sorted(checkpoints)}
    row = {"model": kind, "seed": seed, "checkpoints": sorted(checkpoints), "losses": losses,
           "train_seconds": round(seconds, 1), "errors_by_step": {k: by_step[k] for k in map(str, sorted(checkpoints))},
           "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


LONG_EVERY = 1500


def run_long(kind: str, seed: int, steps: int, smoke: bool) -> list[dict]:
    """One run scored on the test inputs every ``LONG_EVERY`` steps; one log row per checkpoint."""
    torch.set_num_threads(1)
    data, train, test = datasets(smoke)
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = build(kind, len(src_vocab), len(tgt_vocab), smoke)
    recipe = G2PRecipe(steps=steps, batch_size=RECIPE.batch_size, lr=RECIPE.lr, clip_norm=RECIPE.clip_norm, seed=seed)
    every = 2 if smoke else LONG_EVERY
    rows, losses = [], []

    def score(m) -> dict:
        at = every * (len(rows) + 1)
        predictions = predict(m, [w for w, _ in test], src_vocab, tgt_vocab)
        row = {"model": kind, "seed": seed, "long_run": steps, "at_step": at,
               "errors": [edit_distance(p, ref) for p, (_, ref) in zip(predictions, test)],
               "load_average": os.getloadavg()[0]}
        print(json.dumps(row), flush=True)
        rows.append(row)
        return {}

    _, history = common.timed(
        lambda: train_g2p_with_eval(model, train, src_vocab, tgt_vocab, recipe, score, every), torch.device("cpu"))
    for row in rows:
        row["loss"] = round(statistics.mean(history.losses[row["at_step"] - 50:row["at_step"]]), 4)
    print(json.dumps({"model": kind, "seed": seed, "long_run": steps,
                      "losses": {str(r["at_step"]): r["loss"] for r in rows}}), flush=True)
    return rows


def long_summary(rows: list[dict], test) -> dict:
    """PER by bucket of the long no-attention run at each checkpoint it reached."""
    buckets = [bucket_of(len(w)) for w, _ in test]
    ref_lengths = [len(p) for _, p in test]
    out = {"model": rows[0]["model"], "seed": rows[0]["seed"], "steps": [r["at_step"] for r in rows],
           "loss": [r.get("loss") for r in rows], "per_by_length": {}}
    for low, high in BUCKETS:
        name = f"{low}-{high}"
        index = [i for i, b in enumerate(buckets) if b == name]
        total = sum(ref_lengths[i] for i in index)
        out["per_by_length"][name] = [round(sum(r["errors"][i] for i in index) / total, 4) for r in rows]
    return out


def train_g2p_with_eval(model, train, src_vocab, tgt_vocab, recipe, eval_fn, every):
    """``train_g2p``'s loop (same batches, same optimizer) with ``eval_fn`` every ``every`` steps."""
    from attnbook.data import iterate_batches
    from attnbook.tasks.g2p import g2p_loss
    from attnbook.train import fit
    generator = torch.Generator().manual_seed(recipe.seed)
    batches = iterate_batches(train, src_vocab, tgt_vocab, recipe.batch_size, generator)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr)
    return fit(model, batches, lambda m, b: g2p_loss(m, b, tgt_vocab.pad_id, recipe.label_smoothing),
               optimizer, recipe.steps, clip_norm=recipe.clip_norm, eval_fn=eval_fn, eval_every=every,
               progress=False)


SCORE_KINDS = ("additive", "bilinear", "scaled_bilinear", "bilinear_slow_w", "bilinear_small_init")
SCALE_CONTROLS = ("bilinear_slow_w", "bilinear_small_init")  # one half of the division each
BASELINE_KINDS = ("none", "uniform", "band", "additive")  # --baselines: what learned alignment must beat
BAND_SIGMA = 1.0  # the fixed band's width, in letters
SCORE_STEPS = 360  # Chapter 2's in-page recipe (batch 128)


def scaled_bilinear_model(src_size: int, tgt_size: int, smoke: bool):
    """The chapter's ScaledBilinearScore model: the bilinear model's initial W, scores / sqrt(Ds)."""
    import math

    from attnbook.layers.scores import BilinearScore

    class ScaledBilinearScore(BilinearScore):
        def score(self, query, prepared):
            return super().score(query, prepared) / math.sqrt(self.query_dim)  # (B, T, S)

    small = dict(emb_dim=8, enc_hidden=8, dec_hidden=8) if smoke else {}
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, score="bilinear", **small))
    old = model.decoder.score
    new = ScaledBilinearScore(query_dim=old.query_dim, key_dim=old.key_dim)
    new.load_state_dict(old.state_dict())
    model.decoder.score = new
    return model


def bilinear_control_model(kind: str, src_size: int, tgt_size: int, smoke: bool):
    """The bilinear model (initial weights from the caller's seed); "bilinear_small_init" divides W by sqrt(Ds)."""
    import math
    small = dict(emb_dim=8, enc_hidden=8, dec_hidden=8) if smoke else {}
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, score="bilinear", **small))
    if kind == "bilinear_small_init":
        with torch.no_grad():
            model.decoder.score.W.weight.div_(math.sqrt(model.decoder.score.query_dim))
    return model


def score_optimizer(kind: str, model: torch.nn.Module, lr: float) -> torch.optim.Optimizer | None:
    """Adam at ``lr`` for every parameter, but W of the bilinear score at lr / sqrt(Ds) for
    "bilinear_slow_w"; None (train_g2p's own Adam at ``lr``) for every other kind."""
    import math
    if kind != "bilinear_slow_w":
        return None
    w = model.decoder.score.W.weight
    rest = [p for p in model.parameters() if p is not w]
    return torch.optim.Adam([{"params": rest}, {"params": [w], "lr": lr / math.sqrt(model.decoder.score.query_dim)}],
                            lr=lr)


class UniformScore(torch.nn.Module):
    """A parameter-free stand-in score: zeros, so every real letter gets weight 1/S at every step."""

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        return query.new_zeros(query.shape[0], query.shape[1], prepared.shape[1])  # (B, T, S)


class BandScore(torch.nn.Module):
    """A parameter-free fixed diagonal band: output step i (from 0) looks at letter i / ratio.

    Scores -(j - i / ratio)^2 / (2 sigma^2): after the softmax, a Gaussian of width sigma letters
    around the centre (renormalised over the word's real letters). ``ratio`` is the training
    words' phonemes per letter, so output step i (a phoneme) sits i / ratio letters in: the band
    runs down the average diagonal. (Runs before 2026-11-26 afternoon centred it at i * ratio, a
    slope of 0.85 letters per step instead of 1.18, which drifts off the diagonal on long words.) The step counter is
    reset by ``prepare`` (called once per batch by the decoder's ``start``) and advanced by every
    ``score`` call: a benchmark-only stand-in, valid because the decoder scores once per step.
    """

    def __init__(self, ratio: float, sigma: float) -> None:
        super().__init__()
        self.ratio, self.sigma, self.t = ratio, sigma, 0

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        self.t = 0
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        j = torch.arange(prepared.shape[1], dtype=query.dtype, device=query.device)  # (S,)
        e = -((j - self.t / self.ratio) ** 2) / (2 * self.sigma**2)
        self.t += 1
        return e.expand(query.shape[0], query.shape[1], -1).clone()  # (B, T, S)


def baseline_model(kind: str, data, src_size: int, tgt_size: int, smoke: bool) -> torch.nn.Module:
    """One of --baselines' models; all but "additive" have Chapter 1's 364,971 parameters."""
    small = dict(emb_dim=8, enc_hidden=8, dec_hidden=8) if smoke else {}
    if kind == "none":
        return RNNSeq2Seq(RNNSeq2SeqConfig(src_size, tgt_size, **small))
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, **small))
    if kind == "uniform":
        model.decoder.score = UniformScore()
    elif kind == "band":
        ratio = sum(len(p) for _, p in data.train) / sum(len(w) for w, _ in data.train)
        model.decoder.score = BandScore(ratio, BAND_SIGMA)
    elif kind != "additive":
        raise ValueError(f"unknown baseline {kind!r}; known: {BASELINE_KINDS}")
    return model


@torch.no_grad()
def score_stats(model, pairs, src_vocab, tgt_vocab) -> dict:
    """Sharpness (mean largest weight) and mean score spread over letters, over real steps."""
    from attnbook.data import make_batch
    batch = make_batch(pairs, src_vocab, tgt_vocab)
    state = model.start(batch.src, batch.src_lengths)
    scores, weights = [], []
    for t in range(batch.tgt_in.shape[1]):
        scores.append(model.decoder.score.score(state.hidden[:, None, :], state.keys)[:, 0])  # (B, S)
        _, state = model.step(batch.tgt_in[:, t], state)
        weights.append(state.weights)
    scores, weights = torch.stack(scores, 1), torch.stack(weights, 1)  # (B, T, S)
    spreads, sharp = [], []
    for k in range(len(pairs)):
        n, steps = int(batch.src_lengths[k]), int(batch.tgt_lengths[k])
        spreads.append(scores[k, :steps, :n].std(dim=-1))
        sharp.append(weights[k, :steps, :n].max(dim=-1).values)
    return {"sharpness": round(torch.cat(sharp).mean().item(), 4),
            "score_spread": round(torch.cat(spreads).mean().item(), 3)}


def run_score(kind: str, seed: int, smoke: bool) -> dict:
    """One §2.8 model trained on single words for the chapter's 360 steps, then scored."""
    from attnbook.tasks.g2p import evaluate_g2p
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    if kind == "bilinear":
        small = dict(emb_dim=8, enc_hidden=8, dec_hidden=8) if smoke else {}
        model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(len(src_vocab), len(tgt_vocab), score="bilinear",
                                                              **small))
    elif kind == "scaled_bilinear":
        model = scaled_bilinear_model(len(src_vocab), len(tgt_vocab), smoke)
    elif kind in SCALE_CONTROLS:
        model = bilinear_control_model(kind, len(src_vocab), len(tgt_vocab), smoke)
    else:
        model = baseline_model(kind, data, len(src_vocab), len(tgt_vocab), smoke)
    steps = 4 if smoke else SCORE_STEPS
    recipe = G2PRecipe(steps=steps, seed=seed)
    optimizer = score_optimizer(kind, model, recipe.lr)
    seconds, history = common.timed(lambda: train_g2p(model, data, src_vocab, tgt_vocab, recipe, optimizer,
                                                      progress=False), torch.device("cpu"))
    test = data.test[:40] if smoke else data.test
    r = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    learned = kind in ("additive", "bilinear", "scaled_bilinear", *SCALE_CONTROLS)
    stats = score_stats(model, data.test[::12][:20 if smoke else None], src_vocab, tgt_vocab) if learned else {}
    row = {"score": kind, "seed": seed, "steps": steps, "parameters": count_parameters(model),
           "test_wer": round(r.wer, 4), "test_per": round(r.per, 4),
           "test_wer_by_length": {k: round(v, 4) for k, v in r.wer_by_length.items()}, **stats,
           "final_loss": round(statistics.mean(history.losses[-50:]), 4), "train_seconds": round(seconds, 1),
           "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def scores_main(args) -> None:
    done = {(r["score"], r["seed"]): r for r in common.log_rows(args.resume) if "score" in r}
    seeds = SEEDS[:2] if args.smoke else SEEDS
    todo = [(k, s) for s in seeds for k in SCORE_KINDS if (k, s) not in done]
    for r in common.run_jobs(run_score, [(k, s, args.smoke) for k, s in todo], args.jobs):
        done[(r["score"], r["seed"])] = r
    rows = [done[(k, s)] for k in SCORE_KINDS for s in seeds]
    out = args.out if args.out is not None else (None if args.smoke else common.RESULTS / "bahdanau_scores.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.8: bilinear score vs bilinear / sqrt(Ds), and the two halves of the "
                       "division (W's rate only, W's initial size only), 360 steps on single words, three seeds; "
                       "written by benchmarks/bahdanau_length.py --scores",
        "command": f"python benchmarks/bahdanau_length.py --scores --jobs {args.jobs}",
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"steps": rows[0]["steps"], "batch_size": G2PRecipe().batch_size, "lr": G2PRecipe().lr,
                  "seeds": list(seeds), "stats_words": "every 12th test word"},
        "runs": rows,
    })


def baselines_main(args) -> None:
    """--baselines: no attention, uniform weights, a fixed band and learned additive weights, 3 seeds."""
    done = {(r["score"], r["seed"]): r for r in common.log_rows(args.resume) if "score" in r}
    seeds = SEEDS[:2] if args.smoke else SEEDS
    # the baselines first, seed 0's additive and no-attention models (the chapter's own) last
    order = [(k, s) for s in seeds[1:] for k in ("band", "uniform", "additive")]
    order = [("band", seeds[0]), ("uniform", seeds[0])] + order + [("none", s) for s in seeds[1:]]
    order += [("none", seeds[0]), ("additive", seeds[0])]
    todo = [(k, s) for k, s in order if (k, s) not in done]
    for r in common.run_jobs(run_score, [(k, s, args.smoke) for k, s in todo], args.jobs):
        done[(r["score"], r["seed"])] = r
    rows = [done[(k, s)] for k in BASELINE_KINDS for s in seeds]
    out = args.out if args.out is not None else (None if args.smoke else common.RESULTS / "bahdanau_baselines.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: what learning the alignment adds. Chapter 2's 360-step recipe on "
                       "single words, seeds 0-2, the same initial weights and batches within a seed: no attention "
                       "(Chapter 1's model); the attention decoder with uniform weights 1/S, trained that way; "
                       "with a fixed diagonal band (step i looks at letter i / phonemes-per-letter, Gaussian "
                       f"sigma {BAND_SIGMA} letter, no parameters), trained that way; with learned additive weights. "
                       "Written by benchmarks/bahdanau_length.py --baselines",
        "command": f"python benchmarks/bahdanau_length.py --baselines --jobs {args.jobs}",
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"steps": rows[0]["steps"], "batch_size": G2PRecipe().batch_size, "lr": G2PRecipe().lr,
                  "seeds": list(seeds), "band_sigma": BAND_SIGMA},
        "runs": rows,
    })


TUNED_KINDS = ("band", "uniform")  # --tuned-baselines: section 2.7's baselines at the tuned 1,200-step budget


def run_tuned(kind: str, seed: int, smoke: bool, peak_lr: float | None = None) -> dict:
    """One --tuned-baselines run: ``g2p_compare.run_one``'s attention model and recipe, its score swapped.

    The recipe is the one ``g2p_compare.py`` chose on dev for both of its RNN models (tuned for them,
    not for the band or uniform weights), with its optimizer, schedule, batches and evaluation:
    within a seed the model starts from the attention model's initial weights apart from the score
    and sees the same batches, so its row compares directly with ``g2p_compare.json``'s seeds."""
    import g2p_compare
    from attnbook.results import load_result

    recipe = load_result("g2p_compare.json")["budget"]["gru_attention"]["recipe"]

    def build(_: str, src_size: int, tgt_size: int, smoke_: bool) -> torch.nn.Module:
        return baseline_model(kind, load_g2p(), src_size, tgt_size, smoke_)

    g2p_compare.build = build  # this worker process only: the compare script's run, our model
    steps = 4 if smoke else g2p_compare.BUDGET_STEPS
    rate = g2p_compare.PEAK_LR if peak_lr is None else peak_lr
    row = dict(g2p_compare.run_one("gru_attention", recipe, seed, steps, "tuned_baseline", smoke, rate), model=kind)
    print(json.dumps(row), flush=True)  # the line --resume reads (the line above names the compare model)
    return row


def tuned_baselines_main(args) -> None:
    """--tuned-baselines: the fixed band and uniform weights at g2p_compare.py's tuned budget, 3 seeds."""
    seeds = SEEDS[:2] if args.smoke else SEEDS
    kinds = tuple(k for k in TUNED_KINDS if k in args.tuned_kinds.split(","))
    rows = [row for kind in kinds  # the band's seeds first: the chapter's question
            for row in common.run_missing(functools.partial(run_tuned, peak_lr=args.tuned_rate), (kind,), seeds,
                                          args.smoke, args.jobs, args.resume)]
    default_rate = args.tuned_rate is None
    out = common.out_path(args, "bahdanau_baselines_tuned.json" if default_rate
                          else f"bahdanau_baselines_tuned_{args.tuned_rate:g}.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: the fixed diagonal band (sigma 1 letter) and uniform weights "
                       "at the tuned budget of benchmarks/g2p_compare.py (1,200 steps, its dev-chosen recipe "
                       "for the RNN models, its batches and initial weights, seeds 0-2); written by "
                       "benchmarks/bahdanau_length.py --tuned-baselines",
        "command": f"python benchmarks/bahdanau_length.py --tuned-baselines --tuned-kinds {','.join(kinds)} "
                   f"--jobs {args.jobs}" + ("" if default_rate else f" --tuned-rate {args.tuned_rate:g}"),
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"seeds": list(seeds), "band_sigma": BAND_SIGMA, "recipe": rows[0]["recipe"],
                  "steps": rows[0]["steps"], "peak_lr": rows[0]["peak_lr"]},
        "runs": [{k: v for k, v in r.items() if k != "dev_sample_curve"} for r in rows],
    })


def bucket_of(letters: int) -> str:
    for low, high in BUCKETS:
        if low <= letters <= high:
            return f"{low}-{high}"
    raise ValueError(f"{letters} letters is outside every bucket {BUCKETS}")


def per_with_interval(errors: list[int], lengths: list[int], rng: random.Random) -> dict:
    """PER (total edits / total reference phonemes) and a 95% bootstrap interval over inputs.

    One entry per *input*: with several seeds, ``errors[i]`` sums the seeds' edits on input i and
    ``lengths[i]`` its reference length times the number of seeds.
    """
    n = len(errors)
    samples = []
    for _ in range(BOOTSTRAP):
        pick = [rng.randrange(n) for _ in range(n)]
        samples.append(sum(errors[i] for i in pick) / sum(lengths[i] for i in pick))
    samples.sort()
    return {"per": round(sum(errors) / sum(lengths), 4), "low": round(samples[int(0.025 * BOOTSTRAP)], 4),
            "high": round(samples[int(0.975 * BOOTSTRAP) - 1], 4)}


def summarize(rows: list[dict], test) -> dict:
    """Per model and bucket: PER of each seed, their mean, and a bootstrap interval of the pooled PER."""
    rng = random.Random(0)
    buckets = [bucket_of(len(w)) for w, _ in test]
    ref_lengths = [len(p) for _, p in test]
    out = {}
    for kind in MODELS:
        mine = [r for r in rows if r["model"] == kind]
        out[kind] = {}
        for low, high in BUCKETS:
            name = f"{low}-{high}"
            index = [i for i, b in enumerate(buckets) if b == name]
            per_seed = [sum(r["errors"][i] for i in index) / sum(ref_lengths[i] for i in index) for r in mine]
            pooled = per_with_interval([sum(r["errors"][i] for r in mine) for i in index],
                                       [ref_lengths[i] * len(mine) for i in index], rng)
            out[kind][name] = {"inputs": len(index), "per_by_seed": [round(p, 4) for p in per_seed],
                               "mean_per": round(statistics.mean(per_seed), 4),
                               "pooled_interval_95": [pooled["low"], pooled["high"]]}
    return out


def checkpoint_summary(curve: dict, rows: list[dict], test) -> dict:
    """PER by bucket of the no-attention seed-0 run at each checkpoint, and at the main run's end."""
    buckets = [bucket_of(len(w)) for w, _ in test]
    ref_lengths = [len(p) for _, p in test]
    final = next(r for r in rows if r["model"] == "gru" and r["seed"] == curve["seed"])
    series = dict(curve["errors_by_step"])
    series[str(final["steps"])] = final["errors"]
    losses = dict(curve["losses"], **{str(final["steps"]): final["final_loss"]})
    out = {"model": "gru", "seed": curve["seed"], "steps": [int(k) for k in series], "final_loss": losses,
           "per_by_length": {}}
    for low, high in BUCKETS:
        name = f"{low}-{high}"
        index = [i for i, b in enumerate(buckets) if b == name]
        total = sum(ref_lengths[i] for i in index)
        out["per_by_length"][name] = [round(sum(errs[i] for i in index) / total, 4) for errs in series.values()]
    return out


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    parser.add_argument("--steps", type=int, default=RECIPE.steps, help="training steps per run")
    parser.add_argument("--long", type=int, default=0,
                        help="also train one no-attention run (seed 0) this many steps, scored every 1,500")
    parser.add_argument("--checkpoints", default="",
                        help="comma-separated steps: also score one no-attention run (seed 0) at each")
    parser.add_argument("--scores", action="store_true",
                        help="instead: section 2.8's bilinear vs scaled bilinear and its two controls, three seeds "
                             "(bahdanau_scores.json)")
    parser.add_argument("--baselines", action="store_true",
                        help="instead: section 2.7's no-attention, uniform, band and additive models, three seeds "
                             "(bahdanau_baselines.json)")
    parser.add_argument("--tuned-baselines", action="store_true",
                        help="instead: the band and uniform weights at g2p_compare.py's tuned 1,200-step budget, "
                             "three seeds (bahdanau_baselines_tuned.json)")
    parser.add_argument("--tuned-kinds", default=",".join(TUNED_KINDS),
                        help=f"with --tuned-baselines: which of {','.join(TUNED_KINDS)} to run (comma-separated)")
    parser.add_argument("--tuned-rate", type=float, default=None,
                        help="with --tuned-baselines: the peak rate (default g2p_compare.py's 3e-3); another rate "
                             "writes bahdanau_baselines_tuned_RATE.json")
    args = parser.parse_args()
    if args.jobs < 1 or args.steps < 1:
        parser.error("--jobs and --steps must be >= 1")
    if args.scores:
        scores_main(args)
        return
    if args.baselines:
        baselines_main(args)
        return
    if args.tuned_baselines:
        tuned_baselines_main(args)
        return
    steps, seeds = (4, SEEDS[:2]) if args.smoke else (args.steps, SEEDS)
    done = {(row["model"], row["seed"], row["steps"]): row for row in common.log_rows(args.resume) if "steps" in row}
    todo = [(m, s) for s in seeds for m in MODELS if (m, s, steps) not in done]
    new = common.run_jobs(run_one, [(m, s, steps, args.smoke) for m, s in todo], args.jobs)
    done.update({(r["model"], r["seed"], r["steps"]): r for r in new})
    rows = [done[(m, s, steps)] for m in MODELS for s in seeds]
    checkpoints = tuple(int(c) for c in args.checkpoints.split(",") if c)
    if args.smoke and checkpoints:
        checkpoints = (2, 4)
    curve = None
    if checkpoints:
        logged = [r for r in common.log_rows(args.resume) if r.get("checkpoints") == sorted(checkpoints)]
        curve = logged[0] if logged else run_checkpoints("gru", 0, checkpoints, args.smoke)
    long_rows = []
    if args.long:
        logged = common.log_rows(args.resume)
        long_rows = sorted((r for r in logged if r.get("long_run") == args.long and "errors" in r),
                           key=lambda r: r["at_step"])
        losses = [r["losses"] for r in logged if r.get("long_run") == args.long and "losses" in r]
        for r in long_rows:  # an interrupted run logged its checkpoints but not their losses
            r["loss"] = losses[0].get(str(r["at_step"])) if losses else None
        if not long_rows:
            long_rows = run_long("gru", 0, 4 if args.smoke else args.long, args.smoke)
    out = common.out_path(args, "bahdanau_length.json")
    if out is None:
        return
    _, train, test = datasets(args.smoke)
    result = {
        "description": "Chapter 2: phoneme error rate by input length (joined words), GRU encoder-decoder vs "
                       "GRU + additive attention; written by benchmarks/bahdanau_length.py",
        "command": f"python benchmarks/bahdanau_length.py --jobs 2 --steps {steps}"
                   + (f" --checkpoints {args.checkpoints}" if checkpoints else "")
                   + (f" --long {args.long}" if args.long else ""),
        "setup": {"buckets": [f"{a}-{b}" for a, b in BUCKETS], "words_per_input": [1, 6],
                  "train_inputs": len(train), "test_inputs": len(test), "steps": steps,
                  "batch_size": RECIPE.batch_size, "lr": RECIPE.lr, "clip_norm": RECIPE.clip_norm,
                  "seeds": list(seeds), "bootstrap_resamples": BOOTSTRAP},
        "machine": common.machine(args.jobs),
        "conditions": args.conditions,
        "by_length": summarize(rows, test),
        "checkpoints": None if curve is None else checkpoint_summary(curve, rows, test),
        "long_run": long_summary(long_rows, test) if long_rows else None,
        "runs": [{k: v for k, v in r.items() if k not in ("errors", "output_phonemes")} for r in rows],
    }
    common.write_result(out, result)


if __name__ == "__main__":
    main()
