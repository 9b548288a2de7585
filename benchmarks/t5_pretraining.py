"""Chapter 10's study: does span-corruption pretraining help a byte-level T5 on the book's G2P task?

Usage (from the repository root): ``python benchmarks/t5_pretraining.py [--seeds 0 1 2]
[--resume LOG ...]`` writes ``lib/attnbook/results/t5_pretraining.json`` (the chapter prints
it); ``python benchmarks/t5_pretraining.py --smoke`` runs in seconds and writes nothing unless
``--out`` is given.

1. **Pretraining** (once, seed 0): a byte-level T5 (as ByT5; D = 64, 4 heads, 2 + 2 layers,
   gated-GELU, 32 buckets) learns span corruption (15% of bytes, mean span 3) on random
   64-byte windows of the World English Bible, ``--pretrain-steps`` steps of 64 windows. Its
   relative-bias tables are stored in the results file (the chapter plots them).
2. **Fine-tuning** on the book's G2P split as text to text (``"hello"`` -> ``"hh ah l ow"``),
   for each training-set size (500, 2,000 and all words; the seed draws the subset) and each seed:
   the same T5 from the pretrained weights and from a fresh initialisation, and Chapter 5's
   Transformer (letters -> phoneme tokens, the same width and depth), all with the same steps,
   batch size, optimizer and learning rate, no dropout. Word and phoneme error rates on a fixed
   sample of the test split (every 5th word).
3. **Multi-task**: one pretrained T5 fine-tuned on ``g2p:`` and ``p2g:`` (phonemes back to
   spelling) at once, for twice the steps (the two single-task models' budget together), against
   the single-task g2p model above, a single-task p2g model, and a single-task g2p model with
   the multi-task model's number of steps, on all words; and, to see whether the ranking of
   the three arms depends on the budget, the scratch T5 and the Transformer with that many
   steps too.

One thread; every run prints one JSON line, so ``--resume`` can skip finished runs. ``--mean-span``
(the pretraining's mean span length) and ``--device`` exist for ``benchmarks/t5_pretraining_ablation.py``,
which reuses these functions; the committed study used their defaults (3, cpu).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data.bible import load_bible
from attnbook.data.byte_text import ByteVocab
from attnbook.data.g2p import build_vocabs, load_g2p
from attnbook.losses import sequence_cross_entropy
from attnbook.models.t5 import T5, T5Config
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p
from attnbook.tasks.span_corruption import span_corruption_batches
from attnbook.tasks.text_to_text import byte_batches, evaluate_text_g2p, generate_text, text_pairs
from attnbook.train import fit

SIZES = (500, 2000, 0)  # 0: every training word
VOCAB = ByteVocab(num_sentinels=16)


def t5_config(smoke: bool, dropout: float) -> T5Config:
    if smoke:
        return T5Config(len(VOCAB), d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1,
                        num_decoder_layers=1, dropout=dropout)
    return T5Config(len(VOCAB), d_model=64, num_heads=4, d_ff=128, dropout=dropout)


def loss_fn(model, batch) -> torch.Tensor:
    batch = batch.to(next(model.parameters()).device)
    return sequence_cross_entropy(model(batch.src, batch.src_lengths, batch.tgt_in), batch.tgt_out, VOCAB.pad_id)


def pretrain(args, text: str | None = None) -> tuple[dict, dict]:
    """Span-corruption pretraining on ``text`` (default: the World English Bible)."""
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = T5(t5_config(args.smoke, dropout=0.0)).to(device)
    text = " ".join(v.text for v in load_bible()) if text is None else text
    stream = VOCAB.encode(text[: 20000] if args.smoke else text)
    batches = span_corruption_batches(stream, 64, 64, VOCAB.sentinel, VOCAB.eos_id, VOCAB.pad_id,
                                      torch.Generator().manual_seed(0), mean_span_length=args.mean_span)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    seconds, history = common.timed(lambda: fit(model, batches, loss_fn, optimizer, args.pretrain_steps,
                                                progress=False), device)
    losses = history.smoothed_losses(50)
    row = {"kind": "pretrain", "steps": args.pretrain_steps, "seconds": round(seconds, 1),
           "parameters": count_parameters(model),
           "loss_curve": [[s, round(losses[s - 1], 4)] for s in range(50, args.pretrain_steps + 1, 50)]
           or [[args.pretrain_steps, round(losses[-1], 4)]],
           "encoder_bias": model.encoder_position_bias.relative_attention_bias.weight.tolist(),
           "decoder_bias": model.decoder_position_bias.relative_attention_bias.weight.tolist()}
    return row, {k: v.cpu() for k, v in model.state_dict().items()}


def train_subset(train, size: int, seed: int):
    if size == 0 or size >= len(train):
        return list(train)
    pick = torch.randperm(len(train), generator=torch.Generator().manual_seed(1000 + seed))[:size]
    return [train[i] for i in sorted(pick.tolist())]


def finetune_t5(arm: str, train, test, seed: int, args, pretrained: dict | None,
                directions: tuple[str, ...] = ("g2p",), steps: int | None = None, samples: int = 0,
                warmup: int = 0) -> dict:
    """One fine-tuning run and its scores; with ``samples``, the outputs for the first test words too;
    with ``warmup``, the rate rises linearly over that many steps to ``args.lr``, then falls linearly to
    about 0 at the last step (0: constant, the study's)."""
    torch.manual_seed(seed)
    device = torch.device(args.device)
    model = T5(t5_config(args.smoke, dropout=0.0))
    if arm != "scratch":
        model.load_state_dict(pretrained)
    model.to(device)
    prefix = len(directions) > 1
    pairs = [p for d in directions for p in text_pairs(train, d, prefix)]
    batches = byte_batches(pairs, VOCAB, args.batch_size, torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps = steps or args.steps
    scheduler = warmup_linear_scheduler(optimizer, warmup, steps) if warmup else None
    seconds, _ = common.timed(lambda: fit(model, batches, loss_fn, optimizer, steps, scheduler=scheduler,
                                          progress=False), device)
    row = {"model": "t5", "arm": arm, "tasks": "+".join(directions), "steps": steps, "seconds": round(seconds, 1)}
    if warmup:
        row["warmup"] = warmup
    for d in directions:
        scores = evaluate_text_g2p(model, test, VOCAB, d, prefix)
        row[f"{d}_wer"], row[f"{d}_per"] = round(scores["wer"], 4), round(scores["per"], 4)
    if samples:
        shown = text_pairs(test[:samples], directions[0], prefix)
        row["samples"] = [[source, target, output] for (source, target), output
                          in zip(shown, generate_text(model, [s for s, _ in shown], VOCAB))]
    return row


def finetune_transformer(train, test, seed: int, args, steps: int | None = None) -> dict:
    src_vocab, tgt_vocab = build_vocabs(load_g2p())
    torch.manual_seed(seed)
    width = dict(d_model=16, num_heads=2, d_ff=32, num_encoder_layers=1, num_decoder_layers=1) if args.smoke \
        else dict(d_model=64, num_heads=4, d_ff=128)
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), dropout=0.0, **width))
    data = type(load_g2p())(train=train, dev=[], test=[])
    steps = steps or args.steps
    recipe = G2PRecipe(steps=steps, batch_size=args.batch_size, lr=args.lr, seed=seed)
    seconds, _ = common.timed(lambda: train_g2p(model, data, src_vocab, tgt_vocab, recipe, progress=False),
                              torch.device("cpu"))
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    return {"model": "transformer", "arm": "scratch", "tasks": "g2p", "steps": steps,
            "seconds": round(seconds, 1), "g2p_wer": round(result.wer, 4), "g2p_per": round(result.per, 4)}


def add_study_arguments(parser, checkpoint_help: str) -> None:
    """The options the follow-up studies share: seeds, learning rates, checkpoint, device."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 1e-2])
    parser.add_argument("--checkpoint", type=Path, default=Path("/tmp/t5_pretrained.pt"),
                        help=checkpoint_help)
    parser.add_argument("--device", default="cpu")


def study_setup(args):
    """The follow-up studies' recipe and data: the study's settings, all training words, every 5th test word."""
    settings = argparse.Namespace(smoke=args.smoke, pretrain_steps=20 if args.smoke else 1500,
                                  steps=10 if args.smoke else 600, batch_size=64, lr=3e-3,
                                  device=args.device, mean_span=3.0)
    data = load_g2p()
    train = list(data.train[:500]) if args.smoke else list(data.train)
    test = data.test[:: 50 if args.smoke else 5]
    return settings, train, test


def key(row: dict) -> tuple:
    return (row.get("kind"), row.get("model"), row.get("arm"), row.get("tasks"), row.get("size"), row.get("seed"),
            row.get("steps") if "kind" not in row else None)


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="training words (0: all)")
    p.add_argument("--pretrain-steps", type=int, default=1500)
    p.add_argument("--steps", type=int, default=600, help="fine-tuning steps (every arm)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--mean-span", type=float, default=3.0, help="pretraining's mean span length")
    p.add_argument("--device", default="cpu", help="where the T5 runs train (the study: cpu)")
    p.add_argument("--test-every", type=int, default=5, help="evaluate on every k-th test word")
    p.add_argument("--no-multitask", action="store_true")
    p.add_argument("--checkpoint", type=Path, default=Path("/tmp/t5_pretrained.pt"),
                   help="where the pretrained weights are kept between resumed runs")
    args = p.parse_args(argv)
    common.check_jobs(p, args)
    if args.smoke:
        args.pretrain_steps, args.steps, args.seeds, args.sizes, args.test_every = 20, 10, [0], [100], 50
    torch.set_num_threads(1)
    start = time.perf_counter()
    done = {key(r): r for r in common.log_rows(args.resume)}
    rows = list(done.values())
    data = load_g2p()
    test = data.test[:: args.test_every]

    def record(row: dict) -> None:
        print(json.dumps(row), flush=True)
        rows.append(row)

    if ("pretrain", None, None, None, None, None, None) in done and args.checkpoint.is_file():
        pretrained = torch.load(args.checkpoint)
    else:
        row, pretrained = pretrain(args)
        torch.save(pretrained, args.checkpoint)
        record(row)
    for size in args.sizes:
        for seed in args.seeds:
            train = train_subset(data.train, size, seed)
            for arm in ("pretrained", "scratch", "transformer"):
                k = (None, "transformer" if arm == "transformer" else "t5", "scratch" if arm == "transformer" else arm,
                     "g2p", len(train), seed, args.steps)
                if k in done:
                    continue
                row = finetune_transformer(train, test, seed, args) if arm == "transformer" \
                    else finetune_t5(arm, train, test, seed, args, pretrained)
                record({**row, "size": len(train), "seed": seed})
    if not args.no_multitask:
        train = list(data.train)
        for seed in args.seeds:
            # the multi-task model takes twice the steps; a single-task g2p model with as many
            # steps separates "two tasks" from "more updates"
            for directions, steps in ((("p2g",), args.steps), (("g2p", "p2g"), 2 * args.steps),
                                      (("g2p",), 2 * args.steps)):
                k = (None, "t5", "pretrained", "+".join(directions), len(train), seed, steps)
                if k not in done:
                    row = finetune_t5("pretrained", train, test, seed, args, pretrained, directions, steps)
                    record({**row, "size": len(train), "seed": seed})
            # and the other two arms with twice the steps too: does the ranking depend on the budget?
            for model_name, arm in (("t5", "scratch"), ("transformer", "scratch")):
                if (None, model_name, arm, "g2p", len(train), seed, 2 * args.steps) not in done:
                    row = finetune_transformer(train, test, seed, args, 2 * args.steps) \
                        if model_name == "transformer" else \
                        finetune_t5(arm, train, test, seed, args, pretrained, steps=2 * args.steps)
                    record({**row, "size": len(train), "seed": seed})
    out = common.out_path(args, "t5_pretraining.json")
    if out is not None:
        common.write_result(out, {
            "description": __doc__.splitlines()[0], "machine": common.machine(),
            "threads": torch.get_num_threads(), "wall_seconds": round(time.perf_counter() - start, 1),
            "test_words": len(test), "settings": {k: v for k, v in vars(args).items()
                                                  if k in ("pretrain_steps", "steps", "batch_size", "lr")},
            "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
