"""Chapter 2's content-addressed task: move a word's vowels to its end, where no band f(i, S) works.

Usage: ``nice python benchmarks/bahdanau_content.py --jobs 2`` writes
``lib/attnbook/results/bahdanau_content.json`` (Chapter 2, section 2.7, prints it);
``python benchmarks/bahdanau_content.py --smoke [--out FILE]`` is a seconds-long run for the tests.

The task: CMUdict words of 3 to 8 letters; the target is the word's consonants in their order,
then its vowels (a, e, i, o, u) in their order: *phone* -> p h n o e. Which letter output step i
copies depends on which letters are vowels, i.e. on the word's content, not only on i and the
length S. The recipe is section 2.7's reversal recipe (``bahdanau_reversal.py``): every model 32
numbers wide, 200 steps of 64 words (Adam 3e-3, gradients clipped at 1), seeds 0, 1 and 2 (the same
initial weights and batches for every model within a seed, as far as their shapes allow), scored
by greedy decoding on every 5th test word. Three models:

- "none": Chapter 1's encoder-decoder, no attention;
- "best_band": the attention decoder with a parameter-free band (Gaussian, sigma 1 letter) centred
  at f(i, S), the letter that output step i of a word of S letters copies most often in the
  training words: the best any band that sees only (i, S) can point (its hit rate, the share of
  letter-emitting test steps whose centre is the letter copied, is in the results file);
- "additive": learned additive weights, the model the chapter trains on the page.

For the attention models each run also records, teacher-forced on the same test words, the share of
letter-emitting steps whose strongest weight is on the letter the step copies, and (seed 0) the
weights for the test word *diagonal* (d g n l i a o a), which the chapter draws.

About half a CPU-minute per run on one thread: nine runs.

``--bands`` (``nice python benchmarks/bahdanau_content.py --bands --jobs 2``, seven runs, a few
CPU-minutes) writes ``bahdanau_content_bands.json``: stronger position-only rules, chosen on dev. The
same recipe trains the band centred at f(i, S) with widths sigma 0.5, 1, 2 and 4 letters, and a
*spread* band whose weights are the training words' whole distribution P(j | i, S) of the letter
that step i of an S-letter word copies (scores log P, no parameters), each with seed 0, scored on
every 5th dev word; the rule with the lowest dev WER is then trained with seeds 1 and 2. Every run
is also scored on the test words, which play no part in the choice.
"""
from __future__ import annotations

import json
import os
import statistics
from collections import Counter

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs, load_g2p, make_batch
from attnbook.data.g2p import G2PSplit
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p
from bahdanau_length import BAND_SIGMA
from bahdanau_reversal import BATCH, SEEDS, STEPS, TEST_EVERY, WIDTH

KINDS = ("none", "best_band", "additive")
VOWELS = frozenset("aeiou")
SHOWCASE = "diagonal"  # a test word: d g n l i a o a


def source_positions(word: str) -> list[int]:
    """The letter (from 0) that each output step copies: consonants' positions, then vowels'."""
    consonants = [j for j, c in enumerate(word) if c not in VOWELS]
    return consonants + [j for j, c in enumerate(word) if c in VOWELS]


def vowels_last_pairs(pairs):
    """(word, its consonants then its vowels) for the words of 3 to 8 letters."""
    return [(word, tuple(word[j] for j in source_positions(word)))
            for word, _ in pairs if 3 <= len(word) <= 8]


def fit_band(words) -> dict[tuple[int, int], int]:
    """f(i, S): the letter that step i of an S-letter word copies most often in ``words``."""
    counts: dict[tuple[int, int], Counter] = {}
    for word in words:
        for i, j in enumerate(source_positions(word)):
            counts.setdefault((i, len(word)), Counter())[j] += 1
    return {key: c.most_common(1)[0][0] for key, c in counts.items()}


def band_hit_rate(band: dict[tuple[int, int], int], words) -> float:
    """Share of the words' letter-emitting steps at which f(i, S) is the letter copied."""
    hits = [band.get((i, len(w)), -1) == j for w in words for i, j in enumerate(source_positions(w))]
    return sum(hits) / len(hits)


def fit_spread(words) -> dict[tuple[int, int], dict[int, float]]:
    """P(j | i, S): how often step i of an S-letter word copies letter j, in ``words``."""
    counts: dict[tuple[int, int], Counter] = {}
    for word in words:
        for i, j in enumerate(source_positions(word)):
            counts.setdefault((i, len(word)), Counter())[j] += 1
    return {key: {j: n / sum(c.values()) for j, n in c.items()} for key, c in counts.items()}


class SpreadBandScore(torch.nn.Module):
    """A parameter-free band whose weights are P(j | i, S) from the training words: scores log P.

    Letters a step never copies in training get log(1e-4) (finite, so no row is empty); steps past
    the table (the end-of-word step) look at the last letter. S is read as in ``TableBandScore``."""

    FLOOR = 1e-4

    def __init__(self, spread: dict[tuple[int, int], dict[int, float]]) -> None:
        super().__init__()
        longest = max(s for _, s in spread)
        table = torch.full((longest + 1, longest + 1, longest + 1), self.FLOOR)  # (S, i, j)
        for s in range(1, longest + 1):
            table[s, :, s - 1] = 1.0  # default: the last letter
        for (i, s), probs in spread.items():
            table[s, i] = self.FLOOR
            for j, p in probs.items():
                table[s, i, j] = max(p, self.FLOOR)
        self.table, self.t = table.log(), 0
        self.lengths = torch.zeros(0, dtype=torch.long)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        self.t = 0
        self.lengths = (keys.abs().sum(-1) != 0).sum(-1).cpu()  # (B,): real letters per word
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        step = min(self.t, self.table.shape[1] - 1)
        e = self.table[self.lengths, step, : prepared.shape[1]].to(query.device, query.dtype)  # (B, S)
        self.t += 1
        return e[:, None, :].expand(-1, query.shape[1], -1).clone()  # (B, T, S)


class TableBandScore(torch.nn.Module):
    """A parameter-free band centred at f(i, S), read from a table (S_max + 1, T_max) of centres.

    Each word's S is read from its encoder outputs, exactly zero at padding (packed sequences);
    steps past the table (the end-of-word step) look at the last letter. Like ``BandScore``, the
    step counter is reset by ``prepare`` and advanced by every ``score`` call.
    """

    def __init__(self, band: dict[tuple[int, int], int], sigma: float) -> None:
        super().__init__()
        longest = max(s for _, s in band)
        table = torch.arange(longest + 1).float()[:, None].repeat(1, longest + 1) - 1  # last letter
        for (i, s), j in band.items():
            table[s, i] = j
        self.table, self.sigma, self.t = table, sigma, 0
        self.lengths = torch.zeros(0, dtype=torch.long)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        self.t = 0
        self.lengths = (keys.abs().sum(-1) != 0).sum(-1).cpu()  # (B,): real letters per word
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        step = min(self.t, self.table.shape[1] - 1)
        centre = self.table[self.lengths, step].to(query.device, query.dtype)[:, None]  # (B, 1)
        j = torch.arange(prepared.shape[1], dtype=query.dtype, device=query.device)  # (S,)
        e = -((j[None, :] - centre) ** 2) / (2 * self.sigma**2)  # (B, S)
        self.t += 1
        return e[:, None, :].expand(-1, query.shape[1], -1).clone()  # (B, T, S)


@torch.no_grad()
def on_target(model, pairs, src_vocab, tgt_vocab) -> tuple[float, list[list[float]]]:
    """Teacher-forced: the share of letter-emitting steps whose strongest weight is on the letter
    the step copies, and the weights (T, S) for SHOWCASE (its letters, then <eos>)."""
    model.eval()
    batch = make_batch(pairs, src_vocab, tgt_vocab)
    _, w = model(batch.src, batch.src_lengths, batch.tgt_in, need_weights=True)  # (B, T, S)
    hits = [int(w[b, i].argmax()) == j for b, (word, _) in enumerate(pairs)
            for i, j in enumerate(source_positions(word))]
    show = make_batch([(SHOWCASE, tuple(SHOWCASE[j] for j in source_positions(SHOWCASE)))],
                      src_vocab, tgt_vocab)
    _, w_show = model(show.src, show.src_lengths, show.tgt_in, need_weights=True)
    return sum(hits) / len(hits), [[round(float(x), 4) for x in row] for row in w_show[0]]


def task_split():
    data = load_g2p()
    return G2PSplit(vowels_last_pairs(data.train), [], vowels_last_pairs(data.test))


def build(kind: str, task, src_size: int, tgt_size: int, width: int) -> torch.nn.Module:
    sizes = dict(emb_dim=width, enc_hidden=width, dec_hidden=width)
    if kind == "none":
        return RNNSeq2Seq(RNNSeq2SeqConfig(src_size, tgt_size, **sizes))
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, attn_hidden=width, **sizes))
    if kind == "best_band":
        model.decoder.score = TableBandScore(fit_band([w for w, _ in task.train]), BAND_SIGMA)
    elif kind != "additive":
        raise ValueError(f"unknown model {kind!r}; known: {KINDS}")
    return model


BAND_RULES = ("band_0.5", "band_1", "band_2", "band_4", "spread")  # --bands: position-only rules


def band_rule_model(rule: str, task, src_size: int, tgt_size: int, width: int) -> torch.nn.Module:
    """The attention decoder with a position-only rule: ``band_SIGMA`` (centred at f(i, S)) or ``spread``."""
    model = build("additive", task, src_size, tgt_size, width)  # the same initial weights as best_band's
    words = [w for w, _ in task.train]
    if rule == "spread":
        model.decoder.score = SpreadBandScore(fit_spread(words))
    elif rule.startswith("band_"):
        model.decoder.score = TableBandScore(fit_band(words), float(rule.removeprefix("band_")))
    else:
        raise ValueError(f"unknown rule {rule!r}; known: {BAND_RULES}")
    return model


def run_rule(rule: str, seed: int, smoke: bool) -> dict:
    """--bands: train one position-only rule with the recipe, score it on dev and test words."""
    torch.set_num_threads(1)
    task = task_split()
    src_vocab, tgt_vocab = build_vocabs(task)
    seed_everything(seed)
    model = band_rule_model(rule, task, len(src_vocab), len(tgt_vocab), 8 if smoke else WIDTH)
    recipe = G2PRecipe(steps=4 if smoke else STEPS, batch_size=BATCH, seed=seed)
    seconds, _ = common.timed(
        lambda: train_g2p(model, task, src_vocab, tgt_vocab, recipe, progress=False), torch.device("cpu"))
    dev = vowels_last_pairs(load_g2p().dev)[::TEST_EVERY][:40 if smoke else None]
    test = task.test[::TEST_EVERY][:40 if smoke else None]
    dev_result, test_result = (evaluate_g2p(model, pairs, src_vocab, tgt_vocab) for pairs in (dev, test))
    row = {"rule": rule, "seed": seed, "steps": recipe.steps, "parameters": count_parameters(model),
           "dev_words": len(dev), "dev_wer": round(dev_result.wer, 4), "test_words": len(test),
           "test_wer": round(test_result.wer, 4), "test_per": round(test_result.per, 4),
           "train_seconds": round(seconds, 1), "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def bands_main(args) -> None:
    """--bands: every rule with the first seed, on dev; the best on dev with the other seeds."""
    seeds = SEEDS[:2] if args.smoke else SEEDS
    done = {(r["rule"], r["seed"]): r for r in common.log_rows(args.resume) if "rule" in r}
    todo = [(rule, seeds[0], args.smoke) for rule in BAND_RULES if (rule, seeds[0]) not in done]
    for row in common.run_jobs(run_rule, todo, args.jobs):
        done[(row["rule"], row["seed"])] = row
    chosen = min(BAND_RULES, key=lambda rule: done[(rule, seeds[0])]["dev_wer"])
    todo = [(chosen, s, args.smoke) for s in seeds[1:] if (chosen, s) not in done]
    for row in common.run_jobs(run_rule, todo, args.jobs):
        done[(row["rule"], row["seed"])] = row
    out = common.out_path(args, "bahdanau_content_bands.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: position-only rules on the vowels-last task, chosen on dev: "
                       "the band centred at f(i, S) with sigma 0.5, 1, 2, 4 letters and the spread band "
                       "P(j | i, S), seed 0; the rule with the lowest dev WER with seeds 1 and 2 too; "
                       "written by benchmarks/bahdanau_content.py --bands",
        "command": f"python benchmarks/bahdanau_content.py --bands --jobs {args.jobs}",
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"width": WIDTH, "steps": STEPS, "batch_size": BATCH, "rules": list(BAND_RULES),
                  "seeds": list(seeds), "dev": f"every {TEST_EVERY}th dev word",
                  "test": f"every {TEST_EVERY}th test word"},
        "chosen_on_dev": chosen,
        "runs": [done[(rule, seeds[0])] for rule in BAND_RULES] + [done[(chosen, s)] for s in seeds[1:]],
    })


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    """Train one model on the vowels-last task and score it on every 5th test word."""
    torch.set_num_threads(1)
    task = task_split()
    src_vocab, tgt_vocab = build_vocabs(task)
    seed_everything(seed)
    model = build(kind, task, len(src_vocab), len(tgt_vocab), 8 if smoke else WIDTH)
    recipe = G2PRecipe(steps=4 if smoke else STEPS, batch_size=BATCH, seed=seed)
    seconds, history = common.timed(
        lambda: train_g2p(model, task, src_vocab, tgt_vocab, recipe, progress=False), torch.device("cpu"))
    test = task.test[::TEST_EVERY][:40 if smoke else None]
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    row = {"model": kind, "seed": seed, "steps": recipe.steps, "parameters": count_parameters(model),
           "test_words": len(test), "test_wer": round(result.wer, 4), "test_per": round(result.per, 4),
           "final_loss": round(statistics.mean(history.losses[-20:]), 4), "train_seconds": round(seconds, 1),
           "load_average": os.getloadavg()[0]}
    if kind != "none":
        row["strongest_on_copied_letter"], weights = on_target(model, test, src_vocab, tgt_vocab)
        row["strongest_on_copied_letter"] = round(row["strongest_on_copied_letter"], 4)
        if seed == SEEDS[0]:
            row["showcase_weights"] = weights
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    parser.add_argument("--bands", action="store_true",
                        help="instead: position-only rules chosen on dev (bahdanau_content_bands.json)")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    if args.bands:
        bands_main(args)
        return
    seeds = SEEDS[:2] if args.smoke else SEEDS
    rows = common.run_missing(run_one, KINDS, seeds, args.smoke, args.jobs, args.resume)
    out = common.out_path(args, "bahdanau_content.json")
    if out is None:
        return
    task = task_split()
    band = fit_band([w for w, _ in task.train])
    test_words = [w for w, _ in task.test[::TEST_EVERY]]
    assert SHOWCASE in test_words, "the showcase word must be a scored test word"
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: moving the vowels of words of 3-8 letters to the end, 32 wide, "
                       "200 steps of 64 words, seeds 0-2: no attention, the best band f(i, S) fitted on the "
                       "training words, learned additive weights; written by benchmarks/bahdanau_content.py",
        "command": f"python benchmarks/bahdanau_content.py --jobs {args.jobs}",
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"width": WIDTH, "steps": STEPS, "batch_size": BATCH, "lr": G2PRecipe().lr,
                  "seeds": list(seeds), "band_sigma": BAND_SIGMA, "test": f"every {TEST_EVERY}th test word",
                  "showcase": SHOWCASE},
        "best_band_hit_rate": {"train": round(band_hit_rate(band, [w for w, _ in task.train]), 4),
                               "test": round(band_hit_rate(band, test_words), 4)},
        "runs": rows,
    })


if __name__ == "__main__":
    main()
