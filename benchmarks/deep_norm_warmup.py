"""Post-norm against pre-norm at depth, with and without a learning-rate warm-up (Chapter 5, cell 5).

Usage: ``python benchmarks/deep_norm_warmup.py --jobs 2`` writes
``lib/attnbook/results/deep_norm_warmup.json``; ``--smoke --out FILE`` runs 2 layers, 10 steps (seconds).
``--seeds 0 1 2 --resume lib/attnbook/results/deep_norm_warmup.log`` adds seed 2, reusing the runs
that the log already holds (the committed file was made so: seeds 0 and 1, then seed 2).

A deep Transformer (L = 6 encoder and 6 decoder layers, D = 32, 4 heads, d_ff = 128, no dropout) is
trained on G2P for 200 steps of 32 words with the chapter's recipe otherwise (Adam with betas
(0.9, 0.98), clipping at 1.0, label smoothing 0.1, peak rate 3e-3, linear decay to zero), once with
a 50-step linear warm-up and once with none (a 1-step "warm-up": the first step is at the peak), for both norm placements
and seeds 0 and 1: eight runs, each seed seeing the same batches in every variant. Each run reports
its training loss (mean of the last 20 steps) and its teacher-forced loss on the first 500 dev words
(no smoothing). Every run is one thread; about 1.3 CPU-minutes in all (measured with --jobs 2 on a shared 2-core CPU).
"""
from __future__ import annotations

import json
import statistics

import torch

import common
from attnbook.data import build_vocabs, load_g2p, make_batch
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.g2p import G2PRecipe, g2p_loss, train_g2p

LAYERS, D_MODEL, STEPS, BATCH, PEAK_LR, WARMUP, DEV_WORDS = 6, 32, 200, 32, 3e-3, 50, 500
SEEDS = (0, 1)
VARIANTS = {"post-norm, warm-up": (False, True), "post-norm, no warm-up": (False, False),
            "pre-norm, warm-up": (True, True), "pre-norm, no warm-up": (True, False)}


def run_one(name: str, seed: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    norm_first, warm = VARIANTS[name]
    layers, steps = (2, 10) if smoke else (LAYERS, STEPS)
    warmup = max(1, steps // 4) if warm else 1  # 1: the first step already at the peak rate
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=D_MODEL, num_heads=4,
                                          d_ff=4 * D_MODEL, num_encoder_layers=layers,
                                          num_decoder_layers=layers, dropout=0.0, norm_first=norm_first))
    recipe = G2PRecipe(steps=steps, batch_size=BATCH, lr=PEAK_LR, label_smoothing=0.1, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_linear_scheduler(optimizer, warmup, steps)
    history = train_g2p(model, data, src_vocab, tgt_vocab, recipe, optimizer=optimizer, scheduler=scheduler,
                        progress=False)
    model.eval()
    dev = make_batch(data.dev[: 50 if smoke else DEV_WORDS], src_vocab, tgt_vocab)
    with torch.no_grad():
        dev_loss = g2p_loss(model, dev, tgt_vocab.pad_id).item()
    row = {"variant": name, "seed": seed, "layers": layers, "warmup_steps": warmup,
           "train_loss_last20": round(statistics.mean(history.losses[-20:]), 3),
           "dev_loss": round(dev_loss, 3), "max_loss": round(max(history.losses), 3)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS),
                        help=f"seeds (default {' '.join(map(str, SEEDS))})")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    seeds = tuple(args.seeds)
    # runs already in the --resume logs are reused, not repeated (smoke runs never are)
    done = {(r["variant"], r["seed"]): r for r in common.log_rows(args.resume)
            if "variant" in r and r.get("layers") == LAYERS and not args.smoke}
    todo = [(name, seed, args.smoke) for name in VARIANTS for seed in seeds if (name, seed) not in done]
    for row in common.run_jobs(run_one, todo, args.jobs):
        done[(row["variant"], row["seed"])] = row
    rows = [done[(name, seed)] for name in VARIANTS for seed in seeds]
    out = common.out_path(args, "deep_norm_warmup.json")
    if out is None:
        return
    summary = {name: {"seeds": list(seeds),
                      "dev_loss": [r["dev_loss"] for r in rows if r["variant"] == name],
                      "train_loss_last20": [r["train_loss_last20"] for r in rows if r["variant"] == name]}
               for name in VARIANTS}
    common.write_result(out, {
        "description": "Chapter 5: post-norm against pre-norm at depth (L=6+6, D=32), with and without a "
                       f"learning-rate warm-up, 200 steps of 32 words, seeds {', '.join(map(str, seeds))}; written by "
                       "benchmarks/deep_norm_warmup.py",
        "machine": common.machine(args.jobs),
        "setup": {"layers": LAYERS, "d_model": D_MODEL, "steps": STEPS, "batch_size": BATCH, "peak_lr": PEAK_LR,
                  "warmup_steps": WARMUP, "schedule": "linear decay to zero after the warm-up (if any)",
                  "dev_words": DEV_WORDS, "label_smoothing": 0.1, "clip_norm": 1.0},
        "summary": summary, "runs": rows,
    })


if __name__ == "__main__":
    main()
