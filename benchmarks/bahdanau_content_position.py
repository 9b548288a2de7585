"""Chapter 2's vowels-last task: a *learned* position-only score of the same size as the additive one.

``nice python benchmarks/bahdanau_content_position.py`` writes
``lib/attnbook/results/bahdanau_content_position.json``; ``--smoke`` runs in seconds.

``bahdanau_content.py``'s learned additive weights beat every parameter-free position-only rule, but
they also have 3,104 more parameters (W, U, v of the additive score). This control keeps those
3,104 parameters and takes the content away: the score is the same network, e = v^T tanh(W q + U k),
but its query q is a fixed one-hot code of (step i, word length S) (16 + 16 = 32 numbers, the
decoder state's width) instead of s_{i-1}, and its key k a fixed one-hot code of (letter j, S)
(32 + 32 = 64, the encoder state's width) instead of h_j. It can learn any smooth rule of
(i, j, S), but cannot see which letters are vowels. Same recipe, seeds, batches and initial weights
as the "additive" runs (W, U, v start from that model's values), scored on the same test words.
A few CPU-seconds per run: three runs.
"""
from __future__ import annotations

import json
import os
import statistics

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data import build_vocabs
from attnbook.env import seed_everything
from attnbook.layers.scores import AdditiveScore
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p
from bahdanau_content import build, on_target, task_split
from bahdanau_reversal import BATCH, SEEDS, STEPS, TEST_EVERY, WIDTH


class PositionAdditiveScore(AdditiveScore):
    """The additive score fed one-hot codes of (i, S) and (j, S) instead of s_{i-1} and h_j.

    S is read from the encoder outputs (exactly zero at padding), the step i from a counter that
    ``prepare`` resets and each ``score`` call advances, as in ``bahdanau_length.BandScore``."""

    def __init__(self, query_dim: int, key_dim: int, hidden: int) -> None:
        super().__init__(query_dim, key_dim, hidden)
        self.t, self.lengths = 0, torch.zeros(0, dtype=torch.long)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        self.t = 0
        B, S, _ = keys.shape
        self.lengths = (keys.abs().sum(-1) != 0).sum(-1)  # (B,): real letters per word
        half = self.key_dim // 2
        code = keys.new_zeros(B, S, self.key_dim)
        code[:, torch.arange(S), torch.arange(S).clamp(max=half - 1)] = 1.0  # letter j
        code[torch.arange(B), :, half + self.lengths.clamp(max=half - 1)] = 1.0  # length S
        return self.U(code)  # (B, S, A)

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        B = query.shape[0]
        half = self.query_dim // 2
        code = query.new_zeros(B, 1, self.query_dim)
        code[:, 0, min(self.t, half - 1)] = 1.0  # step i
        code[torch.arange(B), 0, half + self.lengths.clamp(max=half - 1)] = 1.0  # length S
        self.t += 1
        return super().score(code.expand(-1, query.shape[1], -1), prepared)  # (B, T, S)


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    """``bahdanau_content.run_one``'s additive run with the score fed positions only."""
    torch.set_num_threads(1)
    task = task_split()
    src_vocab, tgt_vocab = build_vocabs(task)
    seed_everything(seed)
    model = build("additive", task, len(src_vocab), len(tgt_vocab), 8 if smoke else WIDTH)
    old = model.decoder.score
    new = PositionAdditiveScore(old.query_dim, old.key_dim, old.W.out_features)
    new.load_state_dict(old.state_dict())  # the additive run's initial W, U, v
    model.decoder.score = new
    return train_and_score(kind, seed, smoke, model, task, src_vocab, tgt_vocab)


def train_and_score(kind: str, seed: int, smoke: bool, model, task, src_vocab, tgt_vocab) -> dict:
    """Train ``model`` with the vowels-last recipe and score it on every 5th test word (shared
    with ``bahdanau_content_oracle.py``)."""
    recipe = G2PRecipe(steps=4 if smoke else STEPS, batch_size=BATCH, seed=seed)
    seconds, history = common.timed(
        lambda: train_g2p(model, task, src_vocab, tgt_vocab, recipe, progress=False), torch.device("cpu"))
    test = task.test[::TEST_EVERY][:40 if smoke else None]
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    hit, _ = on_target(model, test, src_vocab, tgt_vocab)
    row = {"model": kind, "seed": seed, "steps": recipe.steps, "parameters": count_parameters(model),
           "test_words": len(test), "test_wer": round(result.wer, 4), "test_per": round(result.per, 4),
           "strongest_on_copied_letter": round(hit, 4),
           "final_loss": round(statistics.mean(history.losses[-20:]), 4), "train_seconds": round(seconds, 1),
           "load_average": os.getloadavg()[0]}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    args = parser.parse_args()
    common.check_jobs(parser, args)
    seeds = SEEDS[:2] if args.smoke else SEEDS
    rows = common.run_missing(run_one, ("position_additive",), seeds, args.smoke, args.jobs, args.resume)
    out = common.out_path(args, "bahdanau_content_position.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: vowels-last task, the additive score (same 3,104 parameters, "
                       "same initial values) fed one-hot codes of (i, S) and (j, S) instead of s_{i-1} and h_j: "
                       "a learned position-only rule of the learned weights' size; written by "
                       "benchmarks/bahdanau_content_position.py",
        "command": f"python benchmarks/bahdanau_content_position.py --jobs {args.jobs}",
        "machine": common.machine(args.jobs if args.jobs > 1 else None), "conditions": args.conditions,
        "setup": {"width": WIDTH, "steps": STEPS, "batch_size": BATCH, "seeds": list(seeds),
                  "test": f"every {TEST_EVERY}th test word"},
        "runs": rows,
    })


if __name__ == "__main__":
    main()
