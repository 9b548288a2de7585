"""Chapter 6's tiny BERT pretraining cell, run outside the notebook: 400 MLM steps, seed 0.

Usage (from the repository root):
``python benchmarks/bert_mlm_tiny.py [--steps 400] [--out PATH]`` (with no ``--out`` it writes the
committed ``lib/attnbook/results/bert_mlm_tiny.safetensors``; ``--smoke`` trains 5 steps on 2,000
verses and writes nothing unless ``--out`` is given, for the tests)

The model, data and schedule are the chapter's pretraining cell, unchanged: two layers, D = 128,
4 heads, d_ff = 512, no dropout, the 1,000 most frequent WordPiece tokens of the World English
Bible (``bert_mlm_longer.data``), every 20th verse held out, the 15% / 80-10-10 masking, batches of
64 verses of at most 32 tokens (``mlm.sentence_batches``, seed 0), ``torch.manual_seed(0)`` before
the model is built, and ``mlm.pretrain`` (AdamW, learning rate 3e-3, weight decay 0.01, 40 warm-up
steps then linear decay, gradients clipped at norm 1). One CPU thread. The safetensors file holds the
trained ``state_dict`` (float32; the MLM readout, tied to the token table, stored under both names)
and, as string metadata, the command, the steps, the masking and the training loss at every step
(JSON); the chapter loads it instead of spending about 40 CPU-seconds training. (The committed file
was first written as a pickle, ``.pt``, and converted by ``benchmarks/bert_mlm_weights.py --model
tiny``: the same weights.)
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

import common
from bert_mlm_longer import batching, data
from attnbook.models.bert import BertConfig, BertForPreTraining
from attnbook.tasks import masked_lm as mlm

WEIGHTS = common.RESULTS / "bert_mlm_tiny.safetensors"
MASKING = "15% chosen; 80% [MASK], 10% random, 10% unchanged"


def config(vocab_size: int) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, d_model=128, num_layers=2, num_heads=4, d_ff=512,
                      max_len=32, dropout=0.0)


def train(train_sentences, vocab_size: int, steps: int, warmup: int, seed: int = 0):
    batches = mlm.sentence_batches(train_sentences, 64, seed=seed, **batching(vocab_size))
    torch.manual_seed(seed)
    model = BertForPreTraining(config(vocab_size))
    history = mlm.pretrain(model, batches, steps=steps, lr=3e-3, warmup=warmup, progress=False)
    return model, history


def save(model, out: Path, command: str, steps: int, masking: str, losses) -> None:
    """The weights as safetensors, with the command, steps, masking and losses as metadata."""
    # a clone per name: safetensors refuses tensors that share storage (the tied readout)
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out), metadata={
        "command": command, "steps": str(steps), "masking": masking,
        "vocab_size": str(model.bert.embeddings.tokens.weight.shape[0]),
        "losses": json.dumps([round(x, 5) for x in losses])})
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--smoke", action="store_true", help="5 steps on 2,000 verses (for the tests)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.smoke:
        args.steps = 5
    train_sentences, _, old_ids, *_ = data(args.smoke)
    model, history = train(train_sentences, len(old_ids), args.steps, max(1, args.steps // 10))
    print(f"{args.steps} steps; mean training loss of the last 50 steps "
          f"{sum(history.losses[-50:]) / len(history.losses[-50:]):.3f}")
    out = args.out or (None if args.smoke else WEIGHTS)
    if out is not None:
        command = "python benchmarks/bert_mlm_tiny.py" + "".join(
            f" {shlex.quote(a)}" for a in (sys.argv[1:] if argv is None else argv))
        save(model, out, command, args.steps, MASKING, history.losses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
