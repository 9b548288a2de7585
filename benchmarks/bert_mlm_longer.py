"""Chapter 6's tiny BERT trained longer, scored at ``[MASK]`` against copy-or-bigram.

Usage (from the repository root):
``python benchmarks/bert_mlm_longer.py [--steps 6000] [--eval-every 1000] [--seeds 0] [--json [PATH]]``
(``--json`` alone writes the committed ``lib/attnbook/results/bert_mlm_longer.json``;
``--smoke`` trains 20 steps, for the tests)

The chapter's own pretraining cell, with a longer budget: the same model (two layers,
D = 128, 4 heads, d_ff = 512, no dropout), the same 1,000 most frequent WordPiece tokens of the
World English Bible, the same split (every 20th verse held out), the same 15% / 80-10-10
masking, batches of 64 verses of at most 32 tokens, AdamW with linear warm-up (a tenth of the
steps) then linear decay. The held-out batches are the chapter's (4 x 256 verses, masking
seed 123), so the accuracies by position type are directly comparable with the table the
chapter prints, and so are the counted baselines this script recomputes beside them:

- copy-or-unigram: copy the visible token, at ``[MASK]`` the most frequent training token;
- copy-or-bigram: at ``[MASK]`` the most frequent successor of the visible token on the left;
- copy-or-right-bigram: at ``[MASK]`` the most frequent predecessor of the visible token on
  the right.

Every ``--eval-every`` steps the curve records the model's accuracy by position type
(``[MASK]``, random, unchanged, all chosen) and its mean MLM loss on the held-out batches.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import common
from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer
from attnbook.models.bert import BertConfig, BertForPreTraining
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks import masked_lm as mlm
from attnbook.train import fit

N_SPECIAL = len(SPECIAL_TOKENS)
PAD, UNK, CLS, SEP, MASK = range(N_SPECIAL)


def right_bigram_predictions(seen: torch.Tensor, bigrams: torch.Tensor, unigram_id: int) -> torch.Tensor:
    """copy-or-right-bigram, ``(B, S)`` ids: copy the visible token; at ``[MASK]`` the most frequent
    token just before the visible token on the right (the unigram guess where that is ``[MASK]``)."""
    table = bigrams.T.clone()  # (V, V): row = the right token, column = the one before it
    table[:, list(range(N_SPECIAL))] = -1
    before = table.argmax(-1)  # (V,)
    right = F.pad(seen[:, 1:], (0, 1), value=MASK)  # (B, S)
    copy = mlm.baseline_predictions(seen, MASK, unigram_id)
    return torch.where((seen == MASK) & (right != MASK), before[right], copy)


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
    if smoke:
        verses = verses[:2000]
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(v.text)) for v in verses]
    special = [tokenizer.index[t] for t in SPECIAL_TOKENS]
    compact, old_ids = mlm.compact_vocabulary(ids, keep=1000, special_ids=special, unk_id=tokenizer.unk_id)
    train = [s for n, s in enumerate(compact) if n % 20]
    held = [s for n, s in enumerate(compact) if n % 20 == 0]
    return train, held, len(old_ids)


def baselines(train, eval_batches, vocab_size: int) -> dict[str, dict[str, list[int]]]:
    never = range(N_SPECIAL)
    unigram_id = mlm.most_frequent_token(train, exclude=never)
    bigrams = mlm.bigram_table(train, vocab_size, CLS, SEP)
    rivals = {
        "copy-or-unigram": lambda b: mlm.baseline_predictions(b.masked.input_ids, MASK, unigram_id),
        "copy-or-bigram": lambda b: mlm.baseline_predictions(b.masked.input_ids, MASK, unigram_id, bigrams, never),
        "copy-or-right-bigram": lambda b: right_bigram_predictions(b.masked.input_ids, bigrams, unigram_id),
    }
    return {name: by_type(predict, eval_batches) for name, predict in rivals.items()}


def evaluate(model: BertForPreTraining, eval_batches) -> dict[str, float]:
    def predict(b):
        logits, _ = model(b.masked.input_ids, b.inputs.segment_ids, b.inputs.token_mask)
        return logits.argmax(-1)  # (B, S)

    with torch.no_grad():
        counts = by_type(predict, eval_batches)
        losses = [float(mlm.pretraining_loss(model, b)) for b in eval_batches]
    return {**{f"{kind} accuracy": right / n for kind, (right, n) in counts.items()},
            "held-out loss": sum(losses) / len(losses)}


def run(seed: int, train, eval_batches, vocab_size: int, steps: int, eval_every: int, lr: float) -> dict:
    batching = dict(special_ids=list(range(N_SPECIAL)), cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK,
                    vocab_size=vocab_size, max_len=32, random_low=N_SPECIAL)
    stream = mlm.sentence_batches(train, 64, seed=seed, **batching)
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
    return {"seed": seed, "steps": steps, "lr": lr, "seconds": seconds,
            "parameters": sum(p.numel() for p in model.parameters()), "curve": curve, "final": curve[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--eval-every", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--smoke", action="store_true", help="20 steps on 2,000 verses (for the tests)")
    parser.add_argument("--json", type=Path, nargs="?", const=common.RESULTS / "bert_mlm_longer.json", default=None,
                        help="write the results to this JSON file (alone: the committed one in lib/attnbook/results/)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.eval_every = 20, 10
    train, held, vocab_size = data(args.smoke)
    batching = dict(special_ids=list(range(N_SPECIAL)), cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK,
                    vocab_size=vocab_size, max_len=32, random_low=N_SPECIAL)
    evaluation = mlm.sentence_batches(held, 256, seed=123, **batching)  # the chapter's held-out batches
    eval_batches = [next(evaluation) for _ in range(4)]
    rivals = baselines(train, eval_batches, vocab_size)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; {len(train):,} training verses, "
          f"{len(held):,} held out; vocabulary {vocab_size}")
    for name, counts in rivals.items():
        print(f"{name:22s} " + "  ".join(f"{k} {100 * r / n:.1f}% of {n:,}" for k, (r, n) in counts.items()))
    runs = []
    for seed in args.seeds:
        r = run(seed, train, eval_batches, vocab_size, args.steps, args.eval_every, args.lr)
        runs.append(r)
        for point in r["curve"]:
            print(f"seed {seed} step {point['step']:6d}: " + ", ".join(
                f"{k} {v:.3f}" if k == "held-out loss" else f"{k} {100 * v:.1f}%"
                for k, v in point.items() if k != "step"), flush=True)
        print(f"seed {seed}: {args.steps} steps in {r['seconds']:.0f} s", flush=True)
    if args.json:
        common.write_result(args.json, {
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "positions": {k: n for k, (_, n) in rivals["copy-or-unigram"].items()},
            "baselines": {name: {k: r / n for k, (r, n) in counts.items()} for name, counts in rivals.items()},
            "runs": runs}, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
