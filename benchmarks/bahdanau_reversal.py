"""Chapter 2's reversal task: spell a word backwards, with learned attention and without it.

Usage: ``nice python benchmarks/bahdanau_reversal.py --jobs 2`` writes
``lib/attnbook/results/bahdanau_reversal.json`` (Chapter 2, section 2.7, prints it);
``python benchmarks/bahdanau_reversal.py --smoke [--out FILE]`` is a seconds-long run for the tests.

The task and recipe are the chapter's own: CMUdict words of 3 to 8 letters, the target their
letters in reverse order; every model 32 numbers wide (embeddings, encoder and decoder states,
the additive score), trained for 200 steps of 64 words (Adam 3e-3, gradients clipped at 1), seeds
0, 1 and 2 (the same initial weights and batches for every model within a seed, as far as their
shapes allow); scored by greedy decoding on every 5th test word (858 words). Four models:

- "none": Chapter 1's encoder-decoder, no attention;
- "band": the attention decoder with section 2.7's parameter-free band down the main diagonal
  (step i looks at letter i, Gaussian sigma 1 letter), the alignment of a monotone task;
- "mirror_band": the same band told this task's alignment in advance (step i looks at letter
  S - 1 - i of its own word);
- "additive": learned additive weights, the model the chapter trains on the page.

About a CPU-minute per run on one thread: twelve runs.
"""
from __future__ import annotations

import json
import os
import statistics

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs, load_g2p
from attnbook.data.g2p import G2PSplit
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p
from bahdanau_length import BAND_SIGMA, BandScore

KINDS = ("none", "band", "mirror_band", "additive")
SEEDS = (0, 1, 2)
WIDTH, STEPS, BATCH, TEST_EVERY = 32, 200, 64, 5


def reversed_pairs(pairs):
    """(word, its letters in reverse order) for the words of 3 to 8 letters."""
    return [(word, tuple(reversed(word))) for word, _ in pairs if 3 <= len(word) <= 8]


class MirrorBandScore(torch.nn.Module):
    """A parameter-free band told the reversal alignment: step i (from 0) looks at letter S - 1 - i.

    Scores -(j - (S - 1 - i))^2 / (2 sigma^2), S each word's own length. The encoder's outputs
    are exactly zero at padding (packed sequences), which is how ``prepare`` reads S. Like
    ``BandScore``, the step counter is reset by ``prepare`` and advanced by every ``score`` call.
    """

    def __init__(self, sigma: float) -> None:
        super().__init__()
        self.sigma, self.t = sigma, 0
        self.lengths = torch.zeros(0)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        self.t = 0
        self.lengths = (keys.abs().sum(-1) != 0).sum(-1)  # (B,): real letters per word
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        j = torch.arange(prepared.shape[1], dtype=query.dtype, device=query.device)  # (S,)
        centre = (self.lengths - 1 - self.t).to(query.dtype)[:, None]  # (B, 1)
        e = -((j[None, :] - centre) ** 2) / (2 * self.sigma**2)  # (B, S)
        self.t += 1
        return e[:, None, :].expand(-1, query.shape[1], -1).clone()  # (B, T, S)


def build(kind: str, src_size: int, tgt_size: int, width: int) -> torch.nn.Module:
    sizes = dict(emb_dim=width, enc_hidden=width, dec_hidden=width)
    if kind == "none":
        return RNNSeq2Seq(RNNSeq2SeqConfig(src_size, tgt_size, **sizes))
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, attn_hidden=width, **sizes))
    if kind == "band":
        model.decoder.score = BandScore(1.0, BAND_SIGMA)
    elif kind == "mirror_band":
        model.decoder.score = MirrorBandScore(BAND_SIGMA)
    elif kind != "additive":
        raise ValueError(f"unknown model {kind!r}; known: {KINDS}")
    return model


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    """Train one model on reversal and score it on every 5th test word."""
    torch.set_num_threads(1)
    data = load_g2p()
    task = G2PSplit(reversed_pairs(data.train), [], reversed_pairs(data.test))
    src_vocab, tgt_vocab = build_vocabs(task)
    seed_everything(seed)
    model = build(kind, len(src_vocab), len(tgt_vocab), 8 if smoke else WIDTH)
    recipe = G2PRecipe(steps=4 if smoke else STEPS, batch_size=BATCH, seed=seed)
    seconds, history = common.timed(
        lambda: train_g2p(model, task, src_vocab, tgt_vocab, recipe, progress=False), torch.device("cpu"))
    test = task.test[::TEST_EVERY][:40 if smoke else None]
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    row = {"model": kind, "seed": seed, "steps": recipe.steps, "parameters": count_parameters(model),
           "test_words": len(test), "test_wer": round(result.wer, 4), "test_per": round(result.per, 4),
           "final_loss": round(statistics.mean(history.losses[-20:]), 4), "train_seconds": round(seconds, 1),
           "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    args = parser.parse_args()
    common.check_jobs(parser, args)
    seeds = SEEDS[:2] if args.smoke else SEEDS
    rows = common.run_missing(run_one, KINDS, seeds, args.smoke, args.jobs, args.resume)
    out = common.out_path(args, "bahdanau_reversal.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: spelling words of 3-8 letters backwards, 32 wide, 200 steps of "
                       "64 words, seeds 0-2: no attention, a band down the main diagonal, a band told the "
                       "mirror alignment, learned additive weights; written by benchmarks/bahdanau_reversal.py",
        "command": f"python benchmarks/bahdanau_reversal.py --jobs {args.jobs}",
        "machine": common.machine(args.jobs), "conditions": args.conditions,
        "setup": {"width": WIDTH, "steps": STEPS, "batch_size": BATCH, "lr": G2PRecipe().lr,
                  "seeds": list(seeds), "band_sigma": BAND_SIGMA, "test": f"every {TEST_EVERY}th test word"},
        "runs": rows,
    })


if __name__ == "__main__":
    main()
