"""Chapter 3's sinusoidal reversal model with its token embeddings started smaller: does the blur change?

Usage (from the repository root): ``python benchmarks/reversal_blur_scale.py [--stds 1.0 0.3 0.1]
[--seeds 0 1 2] [--steps 400] [--sqrt-d]``

The set-up is section 3.7's exactly (sequences of 10 distinct letters out of 20, the sinusoidal
table added to the embeddings, one attention layer with a single head, width 32, a linear
read-out, Adam at 3e-3, batches of 64, 400 steps, the test set of 2,000 sequences drawn with seed
123), except that the embedding table is re-initialised from N(0, std²) (the chapter's model
keeps PyTorch's default, N(0, 1)). The table's entries lie in [-1, 1], so a smaller std makes
the position part of each vector larger relative to the letter part. Each run records the test
accuracy, the mean weight of each query on its mirror key (T - 1 - i) over the test set, and the
mean norm of an embedding row after training, and prints one JSON line; the results file
collects them. About 1.5 s a run on one busy CPU thread.

``--sqrt-d`` (results in ``reversal_blur_sqrt_d.json``) runs the Annotated Transformer's
embedding instead: a table initialised with ``xavier_uniform_`` (entries of standard deviation
sqrt(2 / (20 + 32)) = 0.20) whose output is multiplied by sqrt(D) = 5.66, so that a letter's
vector starts at about the default's size (standard deviation 1.11) but the table's trained
entries move sqrt(D) times more in the model's input for the same change. Its rows' norm is
reported as the model sees it, times sqrt(D).
"""
from __future__ import annotations

import json
import math
import sys

import torch
from torch import nn

import common
import ch03_reversal
from attnbook.tasks.tagging import tagging_accuracy

SEQ_LEN, WIDTH, LR = ch03_reversal.SEQ_LEN, 32, 3e-3


class ScaledEmbedding(nn.Embedding):
    """The Annotated Transformer's embedding: ids ``(B, T)`` -> ``E[ids] * sqrt(D)`` ``(B, T, D)``."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__(vocab_size, d_model)
        nn.init.xavier_uniform_(self.weight)
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return super().forward(tokens) * self.scale  # (B, T, D)


def sqrt_d_embedding(model: nn.Module) -> None:
    model.embedding = ScaledEmbedding(ch03_reversal.VOCAB, WIDTH)


def run(std: float | None, seed: int, steps: int) -> dict:
    """One run; ``std`` None: the Annotated Transformer's embedding (``--sqrt-d``)."""
    tokens, targets = ch03_reversal.test_set()
    adjust = (sqrt_d_embedding if std is None
              else lambda m: nn.init.normal_(m.embedding.weight, std=std))
    model, _ = ch03_reversal.train(WIDTH, "sinusoidal", seed, steps, LR, adjust=adjust)
    mirror = torch.arange(SEQ_LEN - 1, -1, -1).expand(len(tokens), SEQ_LEN)[..., None]  # (B, T, 1)
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)  # (B, 1, T, T)
    scale = getattr(model.embedding, "scale", 1.0)  # sqrt(D) for the --sqrt-d embedding
    row = {"embedding_std": std, "seed": seed, "steps": steps,
           "test_accuracy": round(tagging_accuracy(model, tokens, targets)["answer"], 4),
           "weight_on_mirror": round(weights[:, 0].gather(-1, mirror).mean().item(), 4),
           "embedding_norm_after": round(scale * model.embedding.weight.norm(dim=1).mean().item(), 3)}
    if std is None:
        row = {"embedding": "xavier_uniform, times sqrt(D)"} | row
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--stds", type=float, nargs="+", default=[1.0, 0.3, 0.1])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--sqrt-d", action="store_true",
                   help="the Annotated Transformer's embedding (xavier, times sqrt(D)) instead of --stds")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    name = "reversal_blur_sqrt_d.json" if args.sqrt_d else "reversal_blur_scale.json"
    out = common.Path(args.out) if args.out else common.RESULTS / name
    stds = [None] if args.sqrt_d else args.stds
    jobs = [(std, s, args.steps) for std in stds for s in args.seeds]
    common.run_and_write(run, jobs, args.jobs, out, __doc__.splitlines()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
