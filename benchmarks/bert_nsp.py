"""Chapter 6's tiny BERT pretrained on verse pairs with MLM + NSP: does its NSP head learn?

Usage (from the repository root):
``python benchmarks/bert_nsp.py [--steps 500] [--width 64] [--seeds 0 1 2] [--objectives mlm+nsp nsp] [--lr 3e-3]
[--task nsp|copy] [--jobs 3] [--smoke] [--out PATH]``
(without ``--out`` or ``--smoke`` it writes the committed ``lib/attnbook/results/bert_nsp.json``)

Controls (``lib/attnbook/results/bert_nsp_controls.json``)::

    python benchmarks/bert_nsp.py --task copy --objectives nsp --seeds 0 --steps 300 --out lib/attnbook/results/bert_nsp_controls.json
    python benchmarks/bert_nsp.py --objectives nsp --seeds 0 --steps 300 --lr 3e-4 (and 1e-3, 1e-2), same --out, --resume

``--task copy`` is the positive control: the same model, loss, optimizer and loop, but the
positive B is a copy of A (against a verse of another chapter), a pair task that attention can
solve by matching tokens. If the NSP head cannot learn this, the loop or head is broken.

A tiny BERT like the chapter's (two layers, but D = 64 and 2 heads by default, to fit a shared
CPU; the 1,000 most frequent WordPiece tokens of the World English Bible, masked 15% / 80-10-10),
reading verse pairs
``[CLS] A [SEP] B [SEP]`` with segment ids 0 for A and 1 for B (at most 64 tokens), B the next
verse of the same chapter half of the time and a verse of another chapter otherwise
(``masked_lm.make_nsp_pairs``). Two objectives: ``mlm+nsp``, BERT's (``masked_lm.pretraining_loss``),
and ``nsp``, the NSP loss alone on the unmasked pairs (does the NSP head learn when MLM does not
share the budget?). AdamW, linear warm-up then decay, batches of 64 freshly drawn pairs, one seed
per run.

Held out: every 20th chapter (by position in the canon), never seen in training; 1,000 fixed
pairs of them are scored, unmasked, by the NSP head (accuracy, and the AUC of P(IsNext)) and,
on the same pairs, by the chapter's baseline that knows nothing of order or training: the share
of WordPiece tokens A and B have in common (Jaccard, on the full vocabulary). Each run prints
one JSON line.
"""
from __future__ import annotations

import random
import sys

import torch

import common
from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer
from attnbook.models.bert import BertConfig, BertForPreTraining
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks import masked_lm as mlm
from attnbook.train import fit

EVAL_PAIRS = 1000
DEFAULT_LR = 3e-3  # rows logged before --lr was recorded used it


def auc(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """The chance that a random positive scores above a random negative (ties count half)."""
    pos, neg = scores[positive][:, None], scores[~positive][None, :]
    return float(((pos > neg).float() + 0.5 * (pos == neg).float()).mean())


def data():
    """Training and held-out chapters (compact ids), and the held-out pairs in both vocabularies."""
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    full = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(v.text)) for v in verses]
    special = [tokenizer.index[t] for t in SPECIAL_TOKENS]
    compact, old_ids = mlm.compact_vocabulary(full, keep=1000, special_ids=special, unk_id=tokenizer.unk_id)
    docs: dict[tuple[int, int], list[int]] = {}
    for n, verse in enumerate(verses):
        docs.setdefault((verse.book, verse.chapter), []).append(n)
    docs_n = list(docs.values())  # chapters as lists of verse numbers
    train_docs = [[compact[i] for i in d] for n, d in enumerate(docs_n) if n % 20]
    held_n = [d for n, d in enumerate(docs_n) if n % 20 == 0]
    # the held-out pairs as verse numbers, so both vocabularies describe the same pairs
    pairs_n = mlm.make_nsp_pairs(held_n, EVAL_PAIRS, random.Random(123))
    return train_docs, held_n, pairs_n, compact, full, len(old_ids)


def nsp_only_loss(model: BertForPreTraining, batch: mlm.PretrainBatch) -> torch.Tensor:
    """The NSP loss alone, on the clean (unmasked) pair."""
    _, logits = model(batch.inputs.input_ids, batch.inputs.segment_ids, batch.inputs.token_mask,
                      predict_at=torch.zeros_like(batch.inputs.token_mask))
    return mlm.nsp_loss(logits, batch.nsp_labels)


LOSSES = {"mlm+nsp": mlm.pretraining_loss, "nsp": nsp_only_loss}


def copy_pairs(pairs: list) -> list:
    """The positive control: every IsNext pair's B replaced by a copy of its A."""
    return [(a, a if label == mlm.IS_NEXT else b, label) for a, b, label in pairs]


def copy_batches(docs, batch_size: int, seed: int, max_len: int, **ids):
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    while True:
        pairs = copy_pairs(mlm.make_nsp_pairs(docs, batch_size, rng))
        yield mlm.pretrain_batch(pairs, max_len=max_len, generator=generator, **ids)


def run(objective: str, seed: int, steps: int, lr: float, eval_every: int, width: int, smoke: bool,
        task: str = "nsp") -> dict:
    torch.set_num_threads(1)
    train_docs, held_n, pairs_n, compact, full, vocab_size = data()
    n_special = len(SPECIAL_TOKENS)
    PAD, UNK, CLS, SEP, MASK = range(n_special)
    ids = dict(special_ids=list(range(n_special)), cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK,
               vocab_size=vocab_size, random_low=n_special)
    if task == "copy":
        pairs_n = copy_pairs(pairs_n)
    eval_pairs = [(compact[a], compact[b], label) for a, b, label in pairs_n]
    batch = mlm.pretrain_batch(eval_pairs, max_len=64, generator=torch.Generator().manual_seed(0), **ids)
    inputs, labels = batch.inputs, batch.nsp_labels  # clean (unmasked) ids, segment ids
    is_next = labels == mlm.IS_NEXT
    jaccard = torch.tensor([len(set(full[a]) & set(full[b])) / len(set(full[a]) | set(full[b]))
                            for a, b, _ in pairs_n])
    torch.manual_seed(seed)
    width = 32 if smoke else width
    config = BertConfig(vocab_size=vocab_size, d_model=width, num_layers=2, num_heads=2, d_ff=4 * width,
                        max_len=64, dropout=0.0)
    model = BertForPreTraining(config)

    curve = []

    @torch.no_grad()
    def evaluate(m) -> dict[str, float]:
        _, logits = m(inputs.input_ids, inputs.segment_ids, inputs.token_mask, predict_at=torch.zeros_like(
            inputs.token_mask))
        p_next = logits.softmax(-1)[:, mlm.IS_NEXT]
        row = {"nsp accuracy": float((logits.argmax(-1) == labels).float().mean()),
               "nsp auc": auc(p_next, is_next)}
        return row

    def eval_fn(m):
        row = evaluate(m)
        curve.append(row)
        print(f"{task} {objective} lr {lr}, seed {seed}, step {len(curve) * eval_every}: {row}", file=sys.stderr, flush=True)
        return row

    if task == "copy":
        stream = copy_batches(train_docs, 64, seed=seed, max_len=64, **ids)
    else:
        stream = mlm.pair_batches(train_docs, 64, seed=seed, max_len=64, **ids)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, max(1, steps // 10), steps)
    seconds, history = common.timed(
        lambda: fit(model, stream, LOSSES[objective], optimizer, steps, clip_norm=1.0, scheduler=scheduler,
                    eval_fn=eval_fn, eval_every=eval_every, progress=False), torch.device("cpu"))
    steps_seen = [s for s, _ in history.metrics["nsp accuracy"]]
    final = evaluate(model.eval())
    row = {"task": task, "objective": objective, "seed": seed, "steps": steps, "lr": lr, "d_model": config.d_model, "num_layers": config.num_layers, "seconds": round(seconds, 1),
           "parameters": sum(p.numel() for p in model.parameters()),
           "eval_pairs": len(pairs_n), "is_next": int(is_next.sum()),
           "nsp_accuracy": final["nsp accuracy"], "nsp_auc": final["nsp auc"],
           "jaccard_auc": auc(jaccard, is_next),
           "curve": [{"step": s, **r} for s, r in zip(steps_seen, curve)],
           "final_loss_mean_last_50": sum(history.losses[-50:]) / len(history.losses[-50:])}
    print(common.json.dumps(row), flush=True)
    return row


def key(r: dict) -> tuple:
    """A run's identity; rows logged before --task existed were NSP runs, before --objectives MLM + NSP."""
    return r.get("task", "nsp"), r.get("objective", "mlm+nsp"), r["seed"], r["steps"], r.get("lr", DEFAULT_LR)


def main(argv: list[str] | None = None) -> int:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--lr", type=float, default=DEFAULT_LR)
    parser.add_argument("--task", choices=["nsp", "copy"], default="nsp",
                        help="nsp: BERT's task; copy: the positive control (B = A for IsNext)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--objectives", nargs="+", default=list(LOSSES), choices=list(LOSSES))
    args = parser.parse_args(argv)
    common.check_jobs(parser, args)
    steps = 20 if args.smoke else args.steps
    eval_every = 10 if args.smoke else args.eval_every
    # rows logged before the NSP-only objective existed were MLM + NSP runs
    done = {key(r): {"objective": "mlm+nsp", "task": "nsp", "lr": DEFAULT_LR, **r} for r in common.log_rows(args.resume)}
    todo = [(o, s, steps, args.lr, eval_every, args.width, args.smoke, args.task) for o in args.objectives
            for s in args.seeds if (args.task, o, s, steps, args.lr) not in done]
    runs = list(done.values()) + common.run_jobs(run, todo, args.jobs)
    runs.sort(key=lambda r: (r["task"], list(LOSSES).index(r["objective"]), r["lr"], r["seed"]))
    for r in runs:
        print(f"{r['task']:4s} {r['objective']:8s} lr {r['lr']:g} seed {r['seed']}: {r['steps']} steps in {r['seconds']:.0f} s; held-out NSP accuracy "
              f"{100 * r['nsp_accuracy']:.1f}%, AUC {r['nsp_auc']:.3f}; Jaccard AUC {r['jaccard_auc']:.3f}")
    out = common.out_path(args, "bert_nsp.json")
    if out:
        common.write_result(out, {"description": __doc__.splitlines()[0],
                                  "machine": common.machine(args.jobs), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
