"""Chapter 1's intervention on C: the encoder's width changed, everything else fixed, and each
model's PER gap to the letter-window count table measured by word length.

Usage: ``python benchmarks/rnn_width.py [--seeds 0 1 2] [--jobs 1]`` (writes
``lib/attnbook/results/rnn_width.json``, which the chapter reads; ``--resume LOG ...`` skips the
runs already printed in earlier logs, so the seeds can run as separate commands), or
``python benchmarks/rnn_width.py --smoke`` (seconds; writes nothing unless ``--out``).

The model is the chapter's ``RNNSeq2Seq`` (bidirectional GRU encoder, ``ContextDecoder`` of 128
units, 64-wide embeddings) with ``enc_hidden`` = 64, 128 or 256 units per direction, so that C
holds 128, 256 or 512 numbers. Each width is trained with the chapter's recipe, the one the dev
split picks in ``benchmarks/g2p_compare.py``: 1,200 steps of Adam (betas 0.9/0.98, eps 1e-9) at
a peak rate of 6e-3, warmed up over 100 steps then decayed linearly, label smoothing 0.1, batches
of 128 words, gradients clipped to norm 1, the batches fixed by the seed (the same batches for
every width). Width 128, seed 0 is the chapter's own model.

For each run: dev WER, test WER and PER, PER by word-length bucket (with the bucket's word
count) and each test word's edit distance (for bootstrap intervals). The count table's PER by
bucket is read from ``rnn_bottleneck.json`` (fitted on the same training words, scored on the
same test words); the gap is the model's PER minus the table's, and its *rise* is the gap on
words of 13+ letters minus the gap on words of 1-4 letters. If a narrower C made long words
harder, the rise would grow as the width shrinks. The seeds of width 128 also give this recipe's
seed-to-seed spread. CPU, one thread per run; each run takes about a minute (width 256 longer).

``--bottleneck 64 128 256`` isolates C: the encoder stays at 128 units per direction (its final
states give 256 numbers, as in the chapter's model) and a learned linear map (with bias, no
nonlinearity) squeezes them to K numbers; that K-number C is all the decoder sees (it sets the
initial state through ``init_state`` and is fed at every step, exactly as in ``ContextDecoder``).
Same recipe, same batches, same scoring; writes ``rnn_width_bottleneck.json``. K = 256 keeps C's
size and adds only the linear map: the control for the other two.
"""
from __future__ import annotations

import json

import torch
from torch import nn

import common
from attnbook.data import build_vocabs, load_g2p
from attnbook.env import seed_everything
from attnbook.models.rnn import ContextDecoder, RNNDecoderState, RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.results import load_result
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p
from rnn_bottleneck import by_length

WIDTHS = (64, 128, 256)
PEAK_LR, WARMUP, SMOOTHING = 6e-3, 100, 0.1  # g2p_compare.py's dev-picked recipe at 1,200 steps


def chapter_recipe(steps: int = 1200, seed: int = 0) -> G2PRecipe:
    """The chapter's recipe: the shared G2PRecipe with the dev-picked rate and smoothing."""
    return G2PRecipe(steps=steps, lr=PEAK_LR, label_smoothing=SMOOTHING, seed=seed)


def optimizer_and_schedule(model: torch.nn.Module, steps: int):
    optimizer = torch.optim.Adam(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
    return optimizer, warmup_linear_scheduler(optimizer, min(WARMUP, steps - 1), steps)


class BottleneckSeq2Seq(RNNSeq2Seq):
    """``RNNSeq2Seq`` whose C is a linear map of the encoder's 2He final states to K numbers."""

    def __init__(self, config: RNNSeq2SeqConfig, context: int) -> None:
        super().__init__(config)
        self.bottleneck = nn.Linear(2 * config.enc_hidden, context)
        self.decoder = ContextDecoder(config.tgt_vocab_size, config.emb_dim, context,
                                      config.dec_hidden, config.pad_id)

    def context(self, src: torch.Tensor, src_lengths: torch.Tensor) -> torch.Tensor:
        _, final = self.encoder(src, src_lengths)  # (B, 2He)
        return self.bottleneck(final)  # (B, K)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor,
                tgt_in: torch.Tensor) -> torch.Tensor:
        context = self.context(src, src_lengths)  # (B, K)
        logits, _ = self.decoder(tgt_in, context, self.decoder.initial_hidden(context))
        return logits  # (B, T, V)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> RNNDecoderState:
        context = self.context(src, src_lengths)  # (B, K)
        return RNNDecoderState(self.decoder.initial_hidden(context), context)


def run_width(width: int, seed: int, steps: int, smoke: bool, bottleneck: int = 0) -> dict:
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    if smoke:
        data = type(data)(data.train[:2000], data.dev[:200], data.test[:300])
    config = RNNSeq2SeqConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab),
                              enc_hidden=width)
    seed_everything(seed)
    model = BottleneckSeq2Seq(config, bottleneck) if bottleneck else RNNSeq2Seq(config)
    optimizer, scheduler = optimizer_and_schedule(model, steps)
    history = train_g2p(model, data, src_vocab, tgt_vocab, chapter_recipe(steps, seed), optimizer,
                        scheduler, progress=False)
    model.eval()
    dev = evaluate_g2p(model, data.dev, src_vocab, tgt_vocab)
    test = evaluate_g2p(model, data.test, src_vocab, tgt_vocab)
    row = {"width": width, "context": bottleneck or 2 * width, "bottleneck": bottleneck,
           "seed": seed, "steps": steps,
           "parameters": sum(p.numel() for p in model.parameters()),
           "final_loss": round(history.losses[-1], 4), "dev_wer": round(dev.wer, 4),
           **by_length(test)}
    print(json.dumps(row), flush=True)
    return row


def summarise(rows: list[dict], table: dict, key: str = "width") -> dict:
    """Per width (or per C size, ``key="context"``): mean test WER/PER over seeds, the gap to
    the table by bucket, and its rise."""
    out = {}
    for width in sorted({r[key] for r in rows}):
        mine = sorted((r for r in rows if r[key] == width), key=lambda r: r["seed"])
        buckets = list(mine[0]["by_length"])
        gaps = [[100 * (r["by_length"][b]["per"] - table["by_length"][b]["per"]) for b in buckets]
                for r in mine]
        rises = [g[-1] - g[0] for g in gaps]
        out[str(width)] = {
            "context": mine[0]["context"], "seeds": [r["seed"] for r in mine],
            "parameters": mine[0]["parameters"],
            "test_wer": [r["test_wer"] for r in mine], "test_per": [r["test_per"] for r in mine],
            "dev_wer": [r["dev_wer"] for r in mine],
            "words": {b: mine[0]["by_length"][b]["words"] for b in buckets},
            "gap_mean": {b: round(sum(g[i] for g in gaps) / len(gaps), 2)
                         for i, b in enumerate(buckets)},
            "rise": [round(x, 2) for x in rises],
        }
    return out


def main() -> None:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--widths", type=int, nargs="+", default=list(WIDTHS))
    p.add_argument("--bottleneck", type=int, nargs="+", default=[],
                   help="C sizes K for the bottleneck mode (encoder fixed at 128 per direction)")
    args = p.parse_args()
    common.check_jobs(p, args)
    steps = 30 if args.smoke else 1200
    if args.bottleneck:
        bottleneck_main(args, steps)
        return
    done = [r for r in common.log_rows(args.resume)
            if r.get("steps") == steps and not r.get("bottleneck")]
    have = {(r["width"], r["seed"]) for r in done}
    todo = [(w, s) for s in args.seeds for w in args.widths if (w, s) not in have]
    rows = done + common.run_jobs(run_width, [(w, s, steps, args.smoke) for w, s in todo], args.jobs)
    rows = [r for r in rows if r["width"] in args.widths and r["seed"] in args.seeds]
    path = common.out_path(args, "rnn_width.json")
    if path is None:
        return
    table = load_result("rnn_bottleneck.json")["count_table"]
    common.write_result(path, {
        "description": __doc__.split("\n\n")[0],
        "recipe": {"steps": steps, "peak_lr": PEAK_LR, "warmup_steps": WARMUP,
                   "label_smoothing": SMOOTHING, "schedule": "warm-up, then linear decay",
                   "optimizer": "Adam(betas=(0.9, 0.98), eps=1e-9)", "batch_size": 128,
                   "clip_norm": 1.0},
        "widths": args.widths, "seeds": args.seeds, "machine": common.machine(args.jobs),
        "count_table": {"test_per": table["test_per"],
                        "by_length": {b: r["per"] for b, r in table["by_length"].items()}},
        "summary": summarise(rows, table),
        "runs": sorted(rows, key=lambda r: (r["width"], r["seed"])),
    })


def bottleneck_main(args, steps: int) -> None:
    """The bottleneck mode: encoder at 128 per direction, C squeezed to each K."""
    width = 128
    done = [r for r in common.log_rows(args.resume)
            if r.get("steps") == steps and r.get("bottleneck")]
    have = {(r["bottleneck"], r["seed"]) for r in done}
    todo = [(k, s) for s in args.seeds for k in args.bottleneck if (k, s) not in have]
    rows = done + common.run_jobs(run_width, [(width, s, steps, args.smoke, k) for k, s in todo],
                                  args.jobs)
    rows = [r for r in rows if r["bottleneck"] in args.bottleneck and r["seed"] in args.seeds]
    path = common.out_path(args, "rnn_width_bottleneck.json")
    if path is None:
        return
    table = load_result("rnn_bottleneck.json")["count_table"]
    common.write_result(path, {
        "description": "Chapter 1's intervention on C alone: the encoder fixed at 128 units per "
                       "direction, C squeezed by a linear map to K numbers, and each model's PER "
                       "gap to the letter-window count table measured by word length.",
        "recipe": {"steps": steps, "peak_lr": PEAK_LR, "warmup_steps": WARMUP,
                   "label_smoothing": SMOOTHING, "schedule": "warm-up, then linear decay",
                   "optimizer": "Adam(betas=(0.9, 0.98), eps=1e-9)", "batch_size": 128,
                   "clip_norm": 1.0},
        "enc_hidden": width, "bottleneck": args.bottleneck, "seeds": args.seeds,
        "machine": common.machine(args.jobs),
        "count_table": {"test_per": table["test_per"],
                        "by_length": {b: r["per"] for b, r in table["by_length"].items()}},
        "summary": summarise(rows, table, key="context"),
        "runs": sorted(rows, key=lambda r: (r["context"], r["seed"])),
    })


if __name__ == "__main__":
    main()
