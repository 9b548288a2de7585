"""Chapter 6's pair tasks with segment ids: the last block of MiniLM fine-tuned with segment ids on or all 0.

Usage (from the repository root):
``python benchmarks/bert_pair_segments.py --task order`` (writes
``lib/attnbook/results/bert_pair_order.json``) and ``--task chapter`` (``bert_pair_chapter.json``);
``--smoke``: 24 pairs, 2 epochs, writes nothing unless ``--out`` is given; ``--seeds`` (default 0 1).

Two tasks on pairs read as ``[CLS] A [SEP] B [SEP]``, each verse of at most 24 WordPiece tokens:

- ``order``: two consecutive verses of one chapter, in their order (label 0, "A first") or
  swapped (label 1), each with probability 1/2. Both orders hold the same tokens, so any
  bag-of-tokens feature scores exactly 50%: only where a token sits can answer it.
- ``chapter``: A and B from the same chapter (two different verses of it, label 0) or B from
  another chapter (label 1), each with probability 1/2. The simple rival: the share of WordPiece
  tokens A and B have in common (Jaccard), with the threshold that is best on the training pairs.

Chapters are split before pairs are drawn (every fifth chapter of a seeded shuffle is held out;
a test pair's verses all come from held-out chapters): 640 training pairs, 400 test pairs.

The model: all-MiniLM-L6-v2 with its last block (every weight) and a linear head on the mean of the
real tokens fine-tuned (``text_classification.fine_tune_top``: AdamW, learning rate 3e-4, 10%
warm-up then linear decay, batch 16, 4 epochs, dropout 0.1); the five blocks below stay frozen and
their output is cached once per arm. The two arms differ only in the segment ids given to the
embeddings: ``on`` (0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``, as BERT reads pairs) or ``all 0``
(the pair's boundary then shows only in ``[SEP]`` and the positions). Same pairs, learning rate,
epochs and seeds for both arms; nothing is tuned. One process, one CPU thread.
"""
from __future__ import annotations

import json
import random
import sys
import time

import torch

import common
from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.layers import key_mask
from attnbook.models.bert import load_pretrained_bert
from attnbook.tasks import text_classification as tc

LR, EPOCHS, MAX_TOKENS = 3e-4, 4, 24


def order_pairs(verses, counts, n_train: int, n_test: int, seed: int = 0):
    """``(a_texts, b_texts, labels, train_rows, test_rows)``: consecutive verses of one chapter
    (both of at most ``MAX_TOKENS`` tokens), swapped with probability 1/2 (label 1); test pairs
    come from held-out chapters only."""
    rng = random.Random(seed)
    chapters = sorted({(v.book, v.chapter) for v in verses})
    rng.shuffle(chapters)
    held_out = set(chapters[::5])
    candidates = {True: [], False: []}
    for i in range(len(verses) - 1):
        v, w = verses[i], verses[i + 1]
        if (v.book, v.chapter) == (w.book, w.chapter) and max(counts[i], counts[i + 1]) <= MAX_TOKENS:
            candidates[(v.book, v.chapter) in held_out].append(i)
    chosen = rng.sample(candidates[False], n_train) + rng.sample(candidates[True], n_test)
    a_texts, b_texts, labels = [], [], []
    for i in chosen:
        first, second = verses[i].text, verses[i + 1].text
        swapped = rng.random() < 0.5
        a_texts.append(second if swapped else first)
        b_texts.append(first if swapped else second)
        labels.append(int(swapped))
    rows = torch.arange(n_train + n_test)
    return a_texts, b_texts, torch.tensor(labels), rows[:n_train], rows[n_train:]


def chapter_pairs(verses, counts, n_train: int, n_test: int, seed: int = 0):
    """Like ``order_pairs``: two different verses of one chapter (label 0) or A's chapter and
    another chapter of the same side of the split (label 1), each with probability 1/2."""
    rng = random.Random(seed)
    chapters = sorted({(v.book, v.chapter) for v in verses})
    rng.shuffle(chapters)
    held_out = set(chapters[::5])
    by_chapter = {}
    for i, v in enumerate(verses):
        if counts[i] <= MAX_TOKENS:
            by_chapter.setdefault((v.book, v.chapter), []).append(i)
    sides = {side: [c for c in by_chapter if (c in held_out) == side and len(by_chapter[c]) > 1]
             for side in (False, True)}
    a_texts, b_texts, labels = [], [], []
    for side, n in ((False, n_train), (True, n_test)):
        for _ in range(n):
            here = rng.choice(sides[side])
            a, b = rng.sample(by_chapter[here], 2)
            label = int(rng.random() < 0.5)
            if label:
                other = rng.choice([c for c in sides[side] if c != here])
                b = rng.choice(by_chapter[other])
            a_texts.append(verses[a].text)
            b_texts.append(verses[b].text)
            labels.append(label)
    rows = torch.arange(n_train + n_test)
    return a_texts, b_texts, torch.tensor(labels), rows[:n_train], rows[n_train:]


def jaccard_accuracy(tokenizer, a_texts, b_texts, labels, train, test) -> tuple[float, float]:
    """The test accuracy of "same chapter iff Jaccard >= t", t best on the training pairs; and t."""
    shared = torch.tensor([len(set(tokenizer.tokenize(a)) & set(tokenizer.tokenize(b)))
                           / len(set(tokenizer.tokenize(a)) | set(tokenizer.tokenize(b)))
                           for a, b in zip(a_texts, b_texts)])
    same = labels == 0

    def accuracy(rows, t):
        return float(((shared[rows] >= t) == same[rows]).float().mean())

    best = max(sorted(set(shared[train].tolist())), key=lambda t: accuracy(train, t))
    return accuracy(test, best), best


def pair_states(model, tokenizer, a_texts, b_texts, segments: bool, depth: int, batch_size: int = 64):
    """The states after the first ``depth`` blocks of every pair, ``(N, S, D)``, and the token mask."""
    inputs = tokenizer.encode_batch(list(a_texts), list(b_texts))
    segment_ids = inputs.segment_ids if segments else torch.zeros_like(inputs.segment_ids)
    states = []
    with torch.no_grad():
        for start in range(0, len(a_texts), batch_size):
            part = slice(start, start + batch_size)
            x = model.embeddings(inputs.input_ids[part], segment_ids[part])
            for block in model.blocks[:depth]:
                x = block(x, key_mask(inputs.token_mask[part])).hidden
            states.append(x)
    return torch.cat(states), inputs.token_mask


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--task", choices=["order", "chapter"], default="order")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    n_train, n_test = (16, 8) if args.smoke else (640, 400)
    epochs = 2 if args.smoke else EPOCHS
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    counts = [len(tokenizer.tokenize(v.text)) for v in verses]
    make_pairs = order_pairs if args.task == "order" else chapter_pairs
    a_texts, b_texts, labels, train, test = make_pairs(verses, counts, n_train, n_test)
    baseline = {"name": "any bag of tokens (both orders hold the same tokens)", "accuracy": 0.5}
    if args.task == "chapter":
        accuracy, threshold = jaccard_accuracy(tokenizer, a_texts, b_texts, labels, train, test)
        baseline = {"name": "tokens shared by A and B (Jaccard), threshold fitted on the training pairs",
                    "accuracy": accuracy, "threshold": threshold}
    print(json.dumps({"baseline": baseline}), flush=True)
    model = load_pretrained_bert(minilm_dir(), MINILM_SHA256).eval()
    depth = len(model.blocks) - 1
    rows = []
    for arm, segments in (("on", True), ("all 0", False)):
        start = time.perf_counter()
        states, token_mask = pair_states(model, tokenizer, a_texts, b_texts, segments, depth)
        print(f"segment ids {arm}: cached {tuple(states.shape)} in {time.perf_counter() - start:.1f} s",
              flush=True)
        for seed in args.seeds:
            start = time.perf_counter()
            r = tc.fine_tune_top(model, states, token_mask, labels, train, test, 1, LR, epochs, seed=seed)
            row = {"segment ids": arm, "seed": seed, "accuracy": r.accuracy,
                   "final_train_loss": r.final_train_loss, "epoch_losses": list(r.epoch_losses),
                   "seconds": round(time.perf_counter() - start, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    path = common.out_path(args, f"bert_pair_{args.task}.json")
    if path is not None:
        common.write_result(path, {
            "description": __doc__.splitlines()[0], "task": args.task, "machine": common.machine(),
            "train_pairs": n_train, "test_pairs": n_test,
            "max_tokens_per_verse": MAX_TOKENS, "lr": LR, "epochs": epochs, "batch_size": 16,
            "test_label_0": int((labels[test] == 0).sum()), "baseline": baseline,
            "examples": [{"a": a_texts[i], "b": b_texts[i], "label": int(labels[i])} for i in range(3)],
            "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
