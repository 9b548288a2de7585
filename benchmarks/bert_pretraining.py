"""Chapter 6's tiny BERT, pretrained longer than the notebook can afford: MLM alone vs MLM + NSP.

Usage (from the repository root):
``python benchmarks/bert_pretraining.py [--steps 3000] [--eval-every 500] [--json [PATH]]``
(``--json`` alone writes the committed ``lib/attnbook/results/bert_pretraining.json``)

A smaller model than the chapter's (one layer, D = 64, 2 heads; the chapter's own model, trained
longer, is ``bert_mlm_longer.py``), the 1,000 most frequent WordPiece
tokens of the World English Bible, masked 15% / 80-10-10, trained with AdamW, linear warm-up
then linear decay, for a fixed number of steps of 64 sequences, twice:

- ``mlm``: single verses (at most 32 tokens), masked-LM loss only, as in the chapter;
- ``mlm+nsp``: verse pairs ``[CLS] A [SEP] B [SEP]`` (at most 64 tokens), B the next verse of the
  same chapter half of the time and a verse of another chapter otherwise; MLM + NSP loss.

Held out: every 20th chapter (by position in the canon), never seen in training. The script
reports held-out masked-token accuracy (over the chosen positions only) against the unigram
baseline, and NSP accuracy for the pair model, at every ``--eval-every`` steps.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

import common
from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer
from attnbook.models.bert import BertConfig, BertForPreTraining
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks import masked_lm as mlm
from attnbook.train import fit


def chapters_of(verses, ids) -> list[list[list[int]]]:
    chapters: dict[tuple[int, int], list[list[int]]] = {}
    for verse, row in zip(verses, ids):
        chapters.setdefault((verse.book, verse.chapter), []).append(row)
    return list(chapters.values())


def run(kind: str, train_docs, held_docs, vocab_size: int, steps: int, eval_every: int, lr: float,
        seed: int) -> dict:
    n_special = len(SPECIAL_TOKENS)
    PAD, UNK, CLS, SEP, MASK = range(n_special)
    ids = dict(special_ids=list(range(n_special)), cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK,
               vocab_size=vocab_size, random_low=n_special)  # the token ids every batch stream needs
    train_sentences = [s for doc in train_docs for s in doc]
    if kind == "mlm":
        held = [s for doc in held_docs for s in doc]
        stream = mlm.sentence_batches(train_sentences, 64, seed=seed, max_len=32, **ids)
        evaluation = mlm.sentence_batches(held, 256, seed=123, max_len=32, **ids)
        max_positions = 32
    else:
        stream = mlm.pair_batches(train_docs, 64, seed=seed, max_len=64, **ids)
        evaluation = mlm.pair_batches(held_docs, 256, seed=123, max_len=64, **ids)
        max_positions = 64
    eval_batches = [next(evaluation) for _ in range(4)]
    chosen = sum(int(b.masked.chosen.sum()) for b in eval_batches)
    unigram = sum(mlm.unigram_accuracy(train_sentences, b.masked, exclude=range(n_special)) * int(b.masked.chosen.sum())
                  for b in eval_batches) / chosen
    torch.manual_seed(seed)
    model = BertForPreTraining(BertConfig(vocab_size=vocab_size, d_model=64, num_layers=1, num_heads=2,
                                          d_ff=256, max_len=max_positions, dropout=0.0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, max(1, steps // 10), steps)
    seconds, history = common.timed(
        lambda: fit(model, stream, mlm.pretraining_loss, optimizer, steps, clip_norm=1.0, scheduler=scheduler,
                    eval_fn=lambda m: mlm.evaluate_pretraining(m, eval_batches), eval_every=eval_every,
                    progress=False), torch.device("cpu"))
    curve = []
    for name, points in history.metrics.items():
        for step, value in points:
            curve.append({"step": step, "metric": name, "value": value})
    return {"kind": kind, "steps": steps, "lr": lr, "seed": seed, "seconds": seconds,
            "held_out_masked_positions": chosen, "unigram_accuracy": unigram, "curve": curve,
            "final": {name: points[-1][1] for name, points in history.metrics.items()},
            "parameters": sum(p.numel() for p in model.parameters())}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", nargs="+", default=["mlm", "mlm+nsp"], choices=["mlm", "mlm+nsp"])
    parser.add_argument("--json", type=Path, nargs="?", const=common.RESULTS / "bert_pretraining.json", default=None,
                        help="write the results to this JSON file (alone: the committed one in lib/attnbook/results/)")
    args = parser.parse_args(argv)
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(v.text)) for v in verses]
    special = [tokenizer.index[t] for t in SPECIAL_TOKENS]
    compact, old_ids = mlm.compact_vocabulary(ids, keep=1000, special_ids=special, unk_id=tokenizer.unk_id)
    docs = chapters_of(verses, compact)
    train_docs = [d for n, d in enumerate(docs) if n % 20]
    held_docs = [d for n, d in enumerate(docs) if n % 20 == 0]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; {len(train_docs)} training chapters, "
          f"{len(held_docs)} held out; vocabulary {len(old_ids)}")
    results = []
    for kind in args.kinds:
        r = run(kind, train_docs, held_docs, len(old_ids), args.steps, args.eval_every, args.lr, args.seed)
        results.append(r)
        print(f"{kind:8s} {r['steps']} steps in {r['seconds']:.0f} s: unigram {100 * r['unigram_accuracy']:.1f}%; "
              + ", ".join(f"{p['metric']} {100 * p['value']:.1f}% @ {p['step']}" for p in r["curve"]))
    if args.json:
        common.write_result(args.json, {"torch": torch.__version__, "threads": torch.get_num_threads(),
                                        "runs": results}, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
