"""Chapter 6's tiny BERT trained longer, scored at ``[MASK]`` against count tables up to 5-grams.

Usage (from the repository root):
``python benchmarks/bert_mlm_longer.py [--steps 4000] [--eval-every 500] [--seeds 0 1 2] [--jobs 2]
[--json [PATH]]`` (``--json`` alone writes the committed ``lib/attnbook/results/bert_mlm_longer.json``;
``--smoke`` trains 20 steps, for the tests)

The chapter's own pretraining cell, with a longer budget: the same model (two layers,
D = 128, 4 heads, d_ff = 512, no dropout), the same 1,000 most frequent WordPiece tokens of the
World English Bible, the same split (every 20th verse held out), the same 15% / 80-10-10
masking, batches of 64 verses of at most 32 tokens, AdamW with linear warm-up (a tenth of the
steps) then linear decay. The held-out batches are the chapter's: 1,024 *distinct* held-out
verses (drawn without replacement, seed 123) in 4 batches of 256, masked with seed 123, so the
accuracies by position type are directly comparable with the table the chapter prints, and so
are the counted baselines this script recomputes beside them. Every baseline copies the visible
token where there is one; at ``[MASK]`` it guesses:

- copy-or-unigram: the most frequent training token;
- copy-or-bigram: the most frequent successor of the visible token on the left;
- copy-or-right-bigram: the most frequent predecessor of the visible token on the right;
- copy-or-both-neighbours, copy-or-4-gram, copy-or-5-gram: the token seen most often in the
  training verses in the same context, widest context first, backing off to narrower ones
  (``CONTEXTS``) where a context token is ``[MASK]`` or the context was never seen; the 5-gram
  reads two tokens on each side.

Every ``--eval-every`` steps the curve records the model's accuracy by position type
(``[MASK]``, random, unchanged, all chosen) and its mean MLM loss on the held-out batches. After
the last step each run also records, against each table: which ``[MASK]`` positions the model
and the table get right (both, model only, table only, neither) and a paired bootstrap over the
1,024 verses (1,000 resamples) of the model's accuracy minus the table's; and the chapter's genre
probe (30 labelled verses per genre, splits 0-4, mean-pooled features) on the trained model's
features, beside the same architecture untrained and token counts over the same ids.
"""
from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

import common
from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import genre_names, load_bible
from attnbook.data.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer
from attnbook.models.bert import BertConfig, BertForPreTraining
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks import masked_lm as mlm
from attnbook.tasks import text_classification as tc
from attnbook.train import fit

N_SPECIAL = len(SPECIAL_TOKENS)
PAD, UNK, CLS, SEP, MASK = range(N_SPECIAL)
EDGE = -1  # a context position outside [CLS] verse [SEP]
# offsets of the visible tokens each table reads around the hidden one, widest first
CONTEXTS = {
    "copy-or-both-neighbours": [(-1, 1), (1,), (-1,)],
    "copy-or-4-gram": [(-2, -1, 1), (-1, 1, 2), (-1, 1), (1,), (-1,)],
    "copy-or-5-gram": [(-2, -1, 1, 2), (-2, -1, 1), (-1, 1, 2), (-1, 1), (1,), (-1,)],
}
EVAL_VERSES, EVAL_BATCH, EVAL_SEED = 1024, 256, 123


def batching(vocab_size: int) -> dict:
    return dict(special_ids=list(range(N_SPECIAL)), cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK,
                vocab_size=vocab_size, max_len=32, random_low=N_SPECIAL)


def evaluation_batches(held, vocab_size: int) -> list[mlm.PretrainBatch]:
    """The chapter's held-out batches: distinct verses (no verse twice), masked with a fixed seed."""
    drawn = random.Random(EVAL_SEED).sample(range(len(held)), min(EVAL_VERSES, len(held)))
    generator = torch.Generator().manual_seed(EVAL_SEED)
    return [mlm.sentence_batch([held[i] for i in drawn[k:k + EVAL_BATCH]], generator=generator,
                               **batching(vocab_size))
            for k in range(0, len(drawn), EVAL_BATCH)]


def right_bigram_predictions(seen: torch.Tensor, bigrams: torch.Tensor, unigram_id: int) -> torch.Tensor:
    """copy-or-right-bigram, ``(B, S)`` ids: copy the visible token; at ``[MASK]`` the most frequent
    token just before the visible token on the right (the unigram guess where that is ``[MASK]``)."""
    table = bigrams.T.clone()  # (V, V): row = the right token, column = the one before it
    table[:, list(range(N_SPECIAL))] = -1
    before = table.argmax(-1)  # (V,)
    right = F.pad(seen[:, 1:], (0, 1), value=MASK)  # (B, S)
    copy = mlm.baseline_predictions(seen, MASK, unigram_id)
    return torch.where((seen == MASK) & (right != MASK), before[right], copy)


def context_tables(train, offsets: list[tuple[int, ...]]) -> dict[tuple[int, ...], dict[tuple, int]]:
    """For each context (offsets around a target), ``{visible tokens: the target seen most often
    there}``, counted on ``[CLS] verse [SEP]`` (the first 30 tokens); special tokens are never targets."""
    counts = {o: Counter() for o in offsets}
    for s in train:
        x = [CLS, *s[:30], SEP]
        for p in range(1, len(x) - 1):
            if x[p] < N_SPECIAL:
                continue
            for o in offsets:
                counts[o][(tuple(x[p + d] if 0 <= p + d < len(x) else EDGE for d in o), x[p])] += 1
    tables = {}
    for o, c in counts.items():
        best: dict[tuple, int] = {}
        for (key, target), _ in c.most_common():  # most frequent first: keep the first
            best.setdefault(key, target)
        tables[o] = best
    return tables


def backoff_predictions(seen: torch.Tensor, tables, contexts, unigram_id: int) -> torch.Tensor:
    """``(B, S)`` ids: copy the visible token; at ``[MASK]`` the widest context of ``contexts`` that
    holds no ``[MASK]`` and was seen in training gives its most frequent token (else the unigram)."""
    guess = mlm.baseline_predictions(seen, MASK, unigram_id)
    rows = seen.tolist()
    for r, p in (seen == MASK).nonzero().tolist():
        row = rows[r]
        for o in contexts:
            key = tuple(row[p + d] if 0 <= p + d < len(row) and row[p + d] != PAD else EDGE for d in o)
            if MASK not in key and key in tables[o]:
                guess[r, p] = tables[o][key]
                break
    return guess


def by_type(predict, batches) -> dict[str, list[int]]:
    """``{position type: [right, count]}`` summed over ``batches``."""
    totals: dict[str, list[int]] = {}
    for b in batches:
        for kind, (right, count) in mlm.accuracy_by_position_type(predict(b), b.masked, MASK).items():
            totals.setdefault(kind, [0, 0])
            totals[kind][0] += right
            totals[kind][1] += count
    return totals


def data(smoke: bool = False):
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(v.text)) for v in verses]
    special = [tokenizer.index[t] for t in SPECIAL_TOKENS]
    compact, old_ids = mlm.compact_vocabulary(ids, keep=1000, special_ids=special, unk_id=tokenizer.unk_id)
    if smoke:
        compact = compact[:2000]
    train = [s for n, s in enumerate(compact) if n % 20]
    held = [s for n, s in enumerate(compact) if n % 20 == 0]
    return train, held, old_ids, tokenizer, verses, [len(i) for i in ids]


def rival_predictors(train, vocab_size: int) -> dict:
    never = range(N_SPECIAL)
    unigram_id = mlm.most_frequent_token(train, exclude=never)
    bigrams = mlm.bigram_table(train, vocab_size, CLS, SEP)
    tables = context_tables(train, sorted({o for c in CONTEXTS.values() for o in c}))
    rivals = {
        "copy-or-unigram": lambda b: mlm.baseline_predictions(b.masked.input_ids, MASK, unigram_id),
        "copy-or-bigram": lambda b: mlm.baseline_predictions(b.masked.input_ids, MASK, unigram_id, bigrams, never),
        "copy-or-right-bigram": lambda b: right_bigram_predictions(b.masked.input_ids, bigrams, unigram_id),
    }
    for name, contexts in CONTEXTS.items():
        rivals[name] = lambda b, c=contexts: backoff_predictions(b.masked.input_ids, tables, c, unigram_id)
    return rivals


def mask_right(predict, batches) -> torch.Tensor:
    """``(verses, S)``: 1 where a ``[MASK]`` position is predicted right, 0 elsewhere."""
    return torch.cat([((predict(b) == b.masked.targets) & (b.masked.input_ids == MASK)).long() for b in batches])


def probe_inputs(tokenizer, verses, token_counts, old_ids):
    """The chapter's genre sample (60 verses per genre, at most 32 tokens, seed 0) as compact ids."""
    labelled = tc.genre_sample(verses, token_counts, per_genre=60, max_tokens=32, seed=0, genres=genre_names())
    lookup = torch.full((len(tokenizer.index),), UNK)  # full WordPiece id -> compact id
    lookup[torch.tensor(old_ids)] = torch.arange(len(old_ids))
    encoded = tokenizer.encode_batch(labelled.texts)
    real = encoded.token_mask[:, :32]
    ids = lookup[encoded.input_ids][:, :32].masked_fill(~real, PAD)
    return ids, real, labelled.labels


def mean_features(encoder, ids, real) -> torch.Tensor:
    with torch.no_grad():
        hidden = encoder.eval()(ids, None, real)  # (N, 32, D)
    weights = real.unsqueeze(-1).float()
    return F.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)  # (N, D)


def genre_probe(features: dict, labels) -> dict[str, list[float]]:
    return tc.probe_accuracies(features, labels, train_per_class=30, seeds=range(5))


def paired(model_right: torch.Tensor, table_right: torch.Tensor, positions: torch.Tensor, seed: int) -> dict:
    """Which ``[MASK]`` positions each gets right (``(verses, S)`` 0/1 each), the accuracy gap, and a
    bootstrap over verses (``positions``: ``[MASK]`` positions per verse) of that gap."""
    m, t = model_right.bool(), table_right.bool()  # (verses, S)
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randint(0, len(positions), (1000, len(positions)), generator=gen)  # resampled verses
    per_verse = model_right.sum(1) - table_right.sum(1)  # (verses,)
    gaps = per_verse[pick].sum(1) / positions[pick].sum(1)  # (1000,)
    low, high = gaps.double().quantile(torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return {"both right": int((m & t).sum()), "model only": int((m & ~t).sum()),
            "table only": int((~m & t).sum()), "gap": float((m.sum() - t.sum()) / positions.sum()),
            "bootstrap 95%": [low, high], "resamples at or below zero": int((gaps <= 0).sum())}


def evaluate(model: BertForPreTraining, eval_batches) -> dict[str, float]:
    def predict(b):
        logits, _ = model(b.masked.input_ids, b.inputs.segment_ids, b.inputs.token_mask)
        return logits.argmax(-1)  # (B, S)

    with torch.no_grad():
        counts = by_type(predict, eval_batches)
        losses = [float(mlm.pretraining_loss(model, b)) for b in eval_batches]
    return {**{f"{kind} accuracy": right / n for kind, (right, n) in counts.items()},
            "held-out loss": sum(losses) / len(losses)}


def run(seed: int, train, eval_batches, vocab_size: int, steps: int, eval_every: int, lr: float,
        table_right: dict, probe) -> dict:
    torch.set_num_threads(1)
    stream = mlm.sentence_batches(train, 64, seed=seed, **batching(vocab_size))
    torch.manual_seed(seed)
    model = BertForPreTraining(BertConfig(vocab_size=vocab_size, d_model=128, num_layers=2, num_heads=4,
                                          d_ff=512, max_len=32, dropout=0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, max(1, steps // 10), steps)
    seconds, history = common.timed(
        lambda: fit(model, stream, mlm.pretraining_loss, optimizer, steps, clip_norm=1.0, scheduler=scheduler,
                    eval_fn=lambda m: evaluate(m, eval_batches), eval_every=eval_every, progress=False),
        torch.device("cpu"))
    steps_seen = sorted({step for points in history.metrics.values() for step, _ in points})
    curve = [{"step": s, **{name: v for name, points in history.metrics.items() for t, v in points if t == s}}
             for s in steps_seen]
    model.eval()

    def predict(b):
        with torch.no_grad():
            return model(b.masked.input_ids, b.inputs.segment_ids, b.inputs.token_mask)[0].argmax(-1)

    right = mask_right(predict, eval_batches)  # (verses, S)
    positions = torch.cat([(b.masked.input_ids == MASK).long() for b in eval_batches]).sum(1)  # (verses,)
    against = {name: paired(right, r, positions, seed) for name, r in table_right.items()}
    ids, real, labels = probe
    probed = genre_probe({"trained": mean_features(model.bert, ids, real)}, labels)["trained"]
    return {"seed": seed, "steps": steps, "lr": lr, "seconds": seconds,
            "parameters": sum(p.numel() for p in model.parameters()), "curve": curve, "final": curve[-1],
            "against tables at [MASK]": against, "genre probe": probed}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=1, help="seeds in parallel, one thread each")
    parser.add_argument("--smoke", action="store_true", help="20 steps on 2,000 verses (for the tests)")
    parser.add_argument("--json", type=Path, nargs="?", const=common.RESULTS / "bert_mlm_longer.json", default=None,
                        help="write the results to this JSON file (alone: the committed one in lib/attnbook/results/)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.smoke:
        args.steps, args.eval_every, args.seeds = 20, 10, [0]
    train, held, old_ids, tokenizer, verses, token_counts = data(args.smoke)
    vocab_size = len(old_ids)
    eval_batches = evaluation_batches(held, vocab_size)
    rivals = rival_predictors(train, vocab_size)
    scores = {name: by_type(predict, eval_batches) for name, predict in rivals.items()}
    table_right = {name: mask_right(predict, eval_batches) for name, predict in rivals.items()}
    probe = probe_inputs(tokenizer, verses, token_counts, old_ids)
    ids, real, labels = probe
    torch.manual_seed(1)
    untrained = BertForPreTraining(BertConfig(vocab_size=vocab_size, d_model=128, num_layers=2, num_heads=4,
                                              d_ff=512, max_len=32, dropout=0.0)).bert
    counts = torch.zeros(len(ids), vocab_size).scatter_add_(1, ids, real.float())
    probe_rivals = genre_probe({"same model, untrained": mean_features(untrained, ids, real),
                                "token counts, same ids": counts}, labels)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; {len(train):,} training verses, "
          f"{len(held):,} held out, {sum(len(b.masked.targets) for b in eval_batches):,} of them scored "
          f"(distinct); vocabulary {vocab_size}")
    for name, c in scores.items():
        print(f"{name:24s} " + "  ".join(f"{k} {100 * r / n:.1f}% of {n:,}" for k, (r, n) in c.items()))
    for name, accs in probe_rivals.items():
        print(f"genre probe, {name}: " + " ".join(f"{100 * a:.1f}" for a in accs))
    jobs = [(seed, train, eval_batches, vocab_size, args.steps, args.eval_every, args.lr, table_right, probe)
            for seed in args.seeds]
    runs = common.run_jobs(run, jobs, max(1, min(args.jobs, len(jobs))))
    for r in runs:
        for point in r["curve"]:
            print(f"seed {r['seed']} step {point['step']:6d}: " + ", ".join(
                f"{k} {v:.3f}" if k == "held-out loss" else f"{k} {100 * v:.1f}%"
                for k, v in point.items() if k != "step"))
        for name, p in r["against tables at [MASK]"].items():
            print(f"seed {r['seed']} minus {name} at [MASK]: {100 * p['gap']:+.1f} points, bootstrap over verses "
                  f"{100 * p['bootstrap 95%'][0]:+.1f} to {100 * p['bootstrap 95%'][1]:+.1f}; both right "
                  f"{p['both right']}, model only {p['model only']}, table only {p['table only']}")
        print(f"seed {r['seed']} genre probe: " + " ".join(f"{100 * a:.1f}" for a in r["genre probe"]))
        print(f"seed {r['seed']}: {args.steps} steps in {r['seconds']:.0f} s", flush=True)
    if args.json:
        common.write_result(args.json, {
            "torch": torch.__version__, "threads": 1,
            "evaluation": {"verses": sum(len(b.masked.targets) for b in eval_batches), "distinct": True,
                           "seed": EVAL_SEED},
            "positions": {k: n for k, (_, n) in scores["copy-or-unigram"].items()},
            "baselines": {name: {k: r / n for k, (r, n) in c.items()} for name, c in scores.items()},
            "genre probe rivals": probe_rivals,
            "runs": runs}, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
