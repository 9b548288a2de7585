"""Chapter 6's transfer task, fine-tuned where a CPU can afford it: MiniLM's last block and a head, LR chosen on training labels.

Usage (from the repository root):
``python benchmarks/bert_finetune_top.py [--smoke] [--seeds ...] [--resume LOGS]``
(writes ``lib/attnbook/results/bert_finetune_top.json``; keep the printed log beside it)

The data and splits are the chapter's: 480 verses of at most 32 WordPiece tokens, 60 from each of
eight genres (``genre_sample(seed=0)``), 30 of each genre to train on and the other 30 to test,
split seeds 0, 1, 2 (``stratified_split``: the chapter's first three splits). On each split:

- ``probe``: the chapter's linear probe on the frozen, mean-pooled, normalised sentence embeddings;
- ``top``: ``text_classification.fine_tune_top``: all-MiniLM-L6-v2's last ``--blocks`` block(s)
  (every weight) and a linear head on the mean of the real tokens, trained on the states cached
  below them (the blocks underneath stay frozen), ``--epochs`` passes of batch 16, AdamW, 10%
  warm-up then linear decay, dropout 0.1. The learning rate is chosen **per split on its training
  verses only**: each of ``--lrs`` is trained on 20 of the 30 training verses per genre and scored
  on the other 10; the best is then trained on all 30 and tested once.

One process, one CPU thread; every run prints one JSON line (``--resume`` reads them back).
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import torch

import common
from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.bible import genre_names, load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import load_pretrained_bert
from attnbook.tasks import text_classification as tc


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--lrs", nargs="+", type=float, default=[3e-5, 1e-4, 3e-4, 1e-3])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--blocks", type=int, default=1)
    p.add_argument("--epochs", type=int, default=10)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    per_genre, fit_per_genre = (4, 2) if args.smoke else (30, 20)
    epochs = 2 if args.smoke else args.epochs
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    counts = [len(tokenizer.tokenize(v.text)) for v in verses]
    labelled = tc.genre_sample(verses, counts, per_genre=12 if args.smoke else 60, max_tokens=32, seed=0,
                               genres=genre_names())
    model = load_pretrained_bert(minilm_dir(), MINILM_SHA256).eval()
    start = time.perf_counter()
    states, token_mask = tc.cached_states(model, tokenizer, labelled.texts, len(model.blocks) - args.blocks)
    embeddings = tc.encode_texts(model, tokenizer, labelled.texts)
    print(f"cached states {tuple(states.shape)} and embeddings in {time.perf_counter() - start:.1f} s", flush=True)
    labels = labelled.labels
    done = {(r["phase"], r["seed"], r["lr"]): r for r in common.log_rows(args.resume)
            if r.get("blocks") == args.blocks and r.get("epochs") == epochs and r.get("per_genre") == per_genre}
    rows = list(done.values())

    def record(row):
        row.update(blocks=args.blocks, epochs=epochs, per_genre=per_genre)
        print(json.dumps(row), flush=True)
        rows.append(row)

    for seed in args.seeds:
        train, test = tc.stratified_split(labels, per_genre, seed)
        if ("probe", seed, None) not in done:
            probe = tc.train_linear_probe(embeddings[train], labels[train], len(labelled.label_names), seed=seed)
            record({"phase": "probe", "seed": seed, "lr": None, "accuracy": tc.accuracy(probe, embeddings[test],
                                                                                       labels[test])})
        fit_rows, val_rows = tc.stratified_split(labels[train], fit_per_genre, seed)
        fit, val = train[fit_rows], train[val_rows]
        for lr in args.lrs:
            if ("select", seed, lr) in done:
                continue
            t = time.perf_counter()
            r = tc.fine_tune_top(model, states, token_mask, labels, fit, val, args.blocks, lr, epochs, seed=seed)
            record({"phase": "select", "seed": seed, "lr": lr, "accuracy": r.accuracy,
                    "final_train_loss": r.final_train_loss, "epoch_losses": list(r.epoch_losses),
                    "evaluated": len(val), "seconds": time.perf_counter() - t})
        chosen = max((r for r in rows if r["phase"] == "select" and r["seed"] == seed and r["lr"] in args.lrs),
                     key=lambda r: (r["accuracy"], -r["lr"]))["lr"]
        if ("test", seed, chosen) not in done:
            t = time.perf_counter()
            r = tc.fine_tune_top(model, states, token_mask, labels, train, test, args.blocks, chosen, epochs,
                                 seed=seed)
            record({"phase": "test", "seed": seed, "lr": chosen, "accuracy": r.accuracy,
                    "final_train_loss": r.final_train_loss, "epoch_losses": list(r.epoch_losses),
                    "evaluated": len(test), "seconds": time.perf_counter() - t})
    probe = {r["seed"]: r["accuracy"] for r in rows if r["phase"] == "probe"}
    tuned = {r["seed"]: r for r in rows if r["phase"] == "test"}
    for seed in sorted(tuned):
        print(f"split {seed}: lr {tuned[seed]['lr']:g}, fine-tuned {100 * tuned[seed]['accuracy']:.1f}%, "
              f"probe {100 * probe[seed]:.1f}%, difference {100 * (tuned[seed]['accuracy'] - probe[seed]):+.1f}")
    if tuned:
        print(f"mean difference {100 * statistics.mean(tuned[s]['accuracy'] - probe[s] for s in tuned):+.1f} points")
    path = common.out_path(args, "bert_finetune_top.json")
    if path is not None:
        common.write_result(path, {
            "description": __doc__.splitlines()[0], "machine": common.machine(1),
            "per_genre": per_genre, "fit_per_genre": fit_per_genre, "blocks": args.blocks, "epochs": epochs,
            "batch_size": 16, "lrs": args.lrs, "ln_classes": float(torch.tensor(8.0).log()),
            "runs": sorted(rows, key=lambda r: (r["seed"], ["probe", "select", "test"].index(r["phase"]),
                                                 r["lr"] or 0))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
