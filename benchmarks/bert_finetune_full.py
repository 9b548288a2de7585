"""Chapter 6's transfer task with every MiniLM weight fine-tuned, rate and stopping epoch chosen on verses outside the test splits.

Usage (from the repository root):
``python benchmarks/bert_finetune_full.py [--smoke] [--lrs ...] [--epochs N] [--resume LOGS]``
(writes ``lib/attnbook/results/bert_finetune_full.json``; keep the printed log beside it)

The data and splits are the chapter's: 480 verses of at most 32 WordPiece tokens, 60 from each of
eight genres (``genre_sample(seed=0)``), ``--per-genre`` (10) of each genre to train on and the
other 50 to test, split seeds 0-4 (``stratified_split``: the chapter's five splits). 10 labels
per genre keeps a CPU run short, and is where the frozen probe's lead over counts is thinnest.

- ``select``: a **development set** of other verses (``genre_sample(seed=1)`` minus the 480, so
  never a test verse of any split): ``--per-genre`` per genre to train on, 20 per genre to score.
  Each rate of ``--lrs`` is fine-tuned there for ``--epochs`` passes, scored after every pass;
  the best (rate, pass) pair (ties: the earlier pass, then the smaller rate) is the recipe.
- ``probe``: the chapter's linear probe on frozen, mean-pooled, normalised MiniLM embeddings.
- ``test``: all-MiniLM-L6-v2 with a linear head on the mean of the real tokens, every weight
  trained with the chosen rate on the split's training verses, on the same ``--epochs``-pass
  schedule stopped after the chosen pass, tested once.

Recipe (``text_classification.fine_tune``'s): AdamW, weight decay 0.01, batch 16, 10% linear
warm-up then linear decay over ``--epochs`` passes, dropout 0.1 before the head, gradients
clipped to 1. Test rows store which test verses each classifier gets right, so the chapter can
pair them. One process, one CPU thread; every run prints one JSON line (``--resume``).
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import common
from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.bible import genre_names, load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import BertForSequenceClassification, load_pretrained_bert
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks import text_classification as tc


@torch.no_grad()
def predictions(model, tokenizer, texts, rows) -> torch.Tensor:
    """The model's predicted class for each of ``texts[rows]`` (eval mode)."""
    model.eval()
    out = []
    for start in range(0, len(rows), 64):
        inputs = tokenizer.encode_batch([texts[i] for i in rows[start:start + 64].tolist()])
        out.append(model(inputs.input_ids, inputs.segment_ids, inputs.token_mask).argmax(-1))
    return torch.cat(out)


def tune(tokenizer, texts, labels, train, scored, lr, epochs, seed, stop=None):
    """Fine-tune a fresh MiniLM + mean-pool head on ``texts[train]`` over an ``epochs``-pass
    schedule, stopping after pass ``stop`` (default: all); the ``scored`` rows' correctness after
    each pass (a list of bool tensors) and each pass's mean training loss."""
    torch.manual_seed(seed)
    model = BertForSequenceClassification(load_pretrained_bert(minilm_dir(), MINILM_SHA256),
                                          int(labels.max()) + 1, "mean")
    g = torch.Generator().manual_seed(seed)
    per_epoch = -(-len(train) // 16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, max(1, epochs * per_epoch // 10), epochs * per_epoch)
    right, losses = [], []
    for _ in range(stop or epochs):
        model.train()
        order, total = train[torch.randperm(len(train), generator=g)], 0.0
        for start in range(0, len(order), 16):
            rows = order[start:start + 16].tolist()
            inputs = tokenizer.encode_batch([texts[i] for i in rows])
            loss = F.cross_entropy(model(inputs.input_ids, inputs.segment_ids, inputs.token_mask),
                                   labels[rows])
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            total += loss.item()
        losses.append(total / per_epoch)
        if stop is None or len(losses) == stop:
            right.append(predictions(model, tokenizer, texts, scored) == labels[scored])
    return right, losses


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--lrs", nargs="+", type=float, default=[3e-5, 1e-4, 3e-4])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--per-genre", type=int, default=10)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    per_genre, dev_scored, epochs = (2, 2, 2) if args.smoke else (args.per_genre, 20, args.epochs)
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    counts = [len(tokenizer.tokenize(v.text)) for v in verses]
    n = 8 if args.smoke else 60
    labelled = tc.genre_sample(verses, counts, per_genre=n, max_tokens=32, seed=0, genres=genre_names())
    other = tc.genre_sample(verses, counts, per_genre=n, max_tokens=32, seed=1, genres=genre_names())
    taken = set(labelled.texts)
    dev_texts, dev_labels = [], []
    for label in range(len(genre_names())):
        keep = [t for t, y in zip(other.texts, other.labels.tolist()) if y == label and t not in taken]
        dev_texts += keep[:per_genre + dev_scored]
        dev_labels += [label] * (per_genre + dev_scored)
    dev_labels = torch.tensor(dev_labels)
    dev_fit, dev_val = tc.stratified_split(dev_labels, per_genre, 0)
    labels = labelled.labels
    done = {(r["phase"], r["seed"], r["lr"]): r for r in common.log_rows(args.resume)
            if r.get("per_genre") == per_genre and r.get("schedule_epochs") == epochs}
    rows = list(done.values())

    def record(row):
        row.update(per_genre=per_genre, schedule_epochs=epochs)
        print(json.dumps(row), flush=True)
        rows.append(row)

    for lr in args.lrs:
        if ("select", None, lr) not in done:
            t = time.perf_counter()
            right, losses = tune(tokenizer, dev_texts, dev_labels, dev_fit, dev_val, lr, epochs, 0)
            record({"phase": "select", "seed": None, "lr": lr,
                    "accuracy_by_epoch": [float(r.float().mean()) for r in right],
                    "epoch_losses": losses, "evaluated": len(dev_val), "seconds": time.perf_counter() - t})
    best = max(((r["accuracy_by_epoch"][e], -e, -r["lr"], r["lr"], e + 1) for r in rows
                if r["phase"] == "select" and r["lr"] in args.lrs for e in range(epochs)))
    lr, stop = best[3], best[4]
    print(f"chosen on the development set: lr {lr:g}, stop after pass {stop} ({100 * best[0]:.1f}%)", flush=True)
    embeddings = tc.encode_texts(load_pretrained_bert(minilm_dir(), MINILM_SHA256), tokenizer, labelled.texts)
    for seed in args.seeds:
        train, test = tc.stratified_split(labels, per_genre, seed)
        if ("probe", seed, None) not in done:
            probe = tc.train_linear_probe(embeddings[train], labels[train], len(labelled.label_names), seed=seed)
            with torch.no_grad():
                right = probe(embeddings[test]).argmax(-1) == labels[test]
            record({"phase": "probe", "seed": seed, "lr": None, "accuracy": float(right.float().mean()),
                    "right": right.int().tolist()})
        if ("test", seed, lr) not in done:
            t = time.perf_counter()
            right, losses = tune(tokenizer, labelled.texts, labels, train, test, lr, epochs, seed, stop)
            record({"phase": "test", "seed": seed, "lr": lr, "stop": stop,
                    "accuracy": float(right[-1].float().mean()), "epoch_losses": losses,
                    "right": right[-1].int().tolist(), "seconds": time.perf_counter() - t})
    probe = {r["seed"]: r["accuracy"] for r in rows if r["phase"] == "probe"}
    tuned = {r["seed"]: r for r in rows if r["phase"] == "test" and r["lr"] == lr and r["stop"] == stop}
    for seed in sorted(tuned):
        print(f"split {seed}: fine-tuned {100 * tuned[seed]['accuracy']:.1f}% (last training loss "
              f"{tuned[seed]['epoch_losses'][-1]:.2f}), probe {100 * probe[seed]:.1f}%")
    if tuned:
        print(f"mean difference {100 * statistics.mean(tuned[s]['accuracy'] - probe[s] for s in tuned):+.1f} points")
    path = common.out_path(args, "bert_finetune_full.json")
    if path is not None:
        common.write_result(path, {
            "description": __doc__.splitlines()[0], "machine": common.machine(1),
            "per_genre": per_genre, "dev_scored_per_genre": dev_scored, "lrs": args.lrs,
            "schedule_epochs": epochs, "chosen": {"lr": lr, "stop": stop}, "batch_size": 16,
            "runs": sorted(rows, key=lambda r: (["select", "probe", "test"].index(r["phase"]),
                                                 r["seed"] or 0, r["lr"] or 0))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
