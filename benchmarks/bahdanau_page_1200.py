"""Chapter 2: the page's own attention recipe trained for 1,200 steps, three seeds.

The page trains its models with ``train_g2p`` and ``G2PRecipe(steps=360)`` (Adam at 3e-3 with
PyTorch's default betas (0.9, 0.999), no smoothing, no schedule). This script runs exactly that
recipe for 1,200 steps (Chapter 1's step count) for seeds 0, 1 and 2: ``seed_everything(seed)``,
the page's ``RNNAttentionSeq2Seq`` (additive score), ``G2PRecipe(steps=1200, seed=seed)``, one
CPU thread, then test WER and PER on the whole test split. It differs from the ``tune/constant``
runs of ``g2p_compare.py``, which use Adam with betas (0.9, 0.98).

Reproduce with ``nice python benchmarks/bahdanau_page_1200.py --jobs 3`` (about 2 CPU-minutes per
seed); ``--smoke`` trains 3 steps and writes only where ``--out`` points.
"""
from __future__ import annotations

import dataclasses
import time

import torch

import common
from attnbook.data import build_vocabs, load_g2p
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p

STEPS = 1200
SEEDS = (0, 1, 2)


def run_one(seed: int, smoke: bool) -> dict:
    """Train the page's attention model with the page's recipe for ``STEPS`` steps."""
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(len(src_vocab), len(tgt_vocab)))
    recipe = G2PRecipe(steps=3 if smoke else STEPS, seed=seed)
    cpu = time.process_time()
    history = train_g2p(model, data, src_vocab, tgt_vocab, recipe, progress=False)
    test = data.test[:64] if smoke else data.test
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    row = {"model": "additive", "seed": seed, "recipe": dataclasses.asdict(recipe),
           "test_words": len(test), "test_wer": result.wer, "test_per": result.per,
           "final_loss": history.losses[-1], "cpu_seconds": round(time.process_time() - cpu, 1)}
    print(row, flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    common.check_jobs(parser, args)
    out = common.out_path(args, "bahdanau_page_1200.json")
    jobs_args = [(seed, args.smoke) for seed in SEEDS]
    if out is None:
        for row in common.run_jobs(run_one, jobs_args, args.jobs):
            print(f"smoke: seed {row['seed']}, test WER {row['test_wer']:.1%} (nothing written)")
        return
    common.run_and_write(run_one, jobs_args, args.jobs, out,
                         "Chapter 2: the page's recipe (train_g2p, default Adam betas) for the "
                         "additive-attention model at 1,200 steps, seeds 0-2; written by "
                         "benchmarks/bahdanau_page_1200.py")


if __name__ == "__main__":
    main()
