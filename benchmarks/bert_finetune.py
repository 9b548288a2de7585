"""Chapter 6's transfer task fine-tuned end to end: MiniLM with a head vs the frozen probe vs a random init.

Usage (from the repository root):
``python benchmarks/bert_finetune.py [--smoke] [--jobs N] [--conditions ...] [--resume LOGS]``
(writes ``lib/attnbook/results/bert_finetune.json``; keep the printed log beside it)

The data and splits are the chapter's: 480 verses of at most 32 WordPiece tokens, 60 from each of
eight genres (``genre_sample(seed=0)``), ``--per-genre`` (30) of each genre to train on and the
other 30 to test, split seeds 0, 1, 2 (``stratified_split``: the chapter's first three splits).
Conditions, each on every split:

- ``probe``: the chapter's linear probe on frozen, mean-pooled MiniLM sentence embeddings;
- ``pretrained-cls`` / ``pretrained-pooler`` / ``pretrained-mean``: all-MiniLM-L6-v2 with a
  linear head on the [CLS] vector, on BERT's pooler (tanh layer on [CLS]) or on the mean of the
  real tokens, every weight fine-tuned;
- ``random-mean``: the same architecture from BERT's random initialisation (seeded by the split
  seed), mean pooling, fine-tuned with the same recipe.

Recipe, the same for every fine-tuned condition: AdamW (weight decay 0.01), batch 16,
``--epochs`` passes, 10% linear warm-up then linear decay, dropout 0.1 before the head,
gradients clipped to 1, learning rate ``--lrs`` (1e-4; one rate for every condition, so none gets
more tuning than another). One CPU thread per run.
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
from attnbook.models.bert import Bert, BertConfig, BertForSequenceClassification, load_pretrained_bert
from attnbook.tasks import text_classification as tc

CONDITIONS = ("probe", "pretrained-cls", "pretrained-pooler", "pretrained-mean", "random-mean")


def data(smoke: bool):
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    counts = [len(tokenizer.tokenize(v.text)) for v in verses]
    per_genre = 12 if smoke else 60
    labelled = tc.genre_sample(verses, counts, per_genre=per_genre, max_tokens=32, seed=0, genres=genre_names())
    return tokenizer, labelled


def one_run(condition: str, lr: float, seed: int, per_genre: int, epochs: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    tokenizer, labelled = data(smoke)
    train, test = tc.stratified_split(labelled.labels, per_genre, seed)
    start = time.perf_counter()
    if condition == "probe":
        features = tc.encode_texts(load_pretrained_bert(minilm_dir(), MINILM_SHA256), tokenizer, labelled.texts)
        probe = tc.train_linear_probe(features[train], labelled.labels[train], len(labelled.label_names),
                                      seed=seed)
        accuracy, losses = tc.accuracy(probe, features[test], labelled.labels[test]), ()
    else:
        init, pooling = condition.split("-")
        if init == "pretrained":
            encoder = load_pretrained_bert(minilm_dir(), MINILM_SHA256)
        else:
            torch.manual_seed(seed)
            encoder = Bert(BertConfig.minilm_l6())
        torch.manual_seed(seed)
        model = BertForSequenceClassification(encoder, len(labelled.label_names), pooling)
        result = tc.fine_tune(model, tokenizer, labelled.texts, labelled.labels, train, test, epochs=epochs,
                              lr=lr, seed=seed)
        accuracy, losses = result.accuracy, result.epoch_losses
    row = {"condition": condition, "lr": None if condition == "probe" else lr, "seed": seed,
           "per_genre": per_genre, "epochs": None if condition == "probe" else epochs,
           "test_examples": len(test), "accuracy": accuracy, "epoch_losses": list(losses),
           "seconds": time.perf_counter() - start}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    p.add_argument("--lrs", nargs="+", type=float, default=[1e-4])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--per-genre", type=int, default=30)
    p.add_argument("--epochs", type=int, default=5)
    args = p.parse_args(argv)
    common.check_jobs(p, args)
    epochs, per_genre = (1, 4) if args.smoke else (args.epochs, args.per_genre)
    done = {(r["condition"], r["lr"], r["seed"]): r for r in common.log_rows(args.resume)
            if r.get("per_genre") == per_genre}
    jobs = []
    for seed in args.seeds:  # seed-major: a run cut short still has every condition on its first splits
        for condition in args.conditions:
            for lr in ([None] if condition == "probe" else args.lrs):
                if (condition, lr, seed) not in done:
                    jobs.append((condition, lr if lr is not None else 0.0, seed, per_genre, epochs, args.smoke))
    print(f"{len(jobs)} runs to do, {len(done)} read from earlier logs", flush=True)
    rows = list(done.values()) + common.run_jobs(one_run, jobs, args.jobs)
    table = {}
    for r in rows:
        table.setdefault(f"{r['condition']} lr={r['lr']}", []).append(r["accuracy"])
    for name, accs in sorted(table.items()):
        print(f"{name:34s} mean {100 * statistics.mean(accs):5.1f}%  "
              f"splits {', '.join(f'{100 * a:.1f}' for a in accs)}")
    path = common.out_path(args, "bert_finetune.json")
    if path is not None:
        common.write_result(path, {
            "description": __doc__.splitlines()[0], "machine": common.machine(args.jobs),
            "per_genre": per_genre, "epochs": epochs, "batch_size": 16,
            "runs": sorted(rows, key=lambda r: (CONDITIONS.index(r["condition"]), r["lr"] or 0, r["seed"]))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
