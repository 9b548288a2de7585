"""Chapter 6's tiny BERTs, trained and saved as safetensors for the chapter to load and score.

Usage (from the repository root):
``python benchmarks/bert_mlm_weights.py --model mask-only`` (400 steps, seed 0, every chosen token
replaced by ``[MASK]``: no random, no unchanged; the committed ``bert_mlm_mask-only.safetensors``),
``--model longer`` (4,000 steps, seed 0: the recipe of ``benchmarks/bert_mlm_longer.py``, seed 0;
about 400 CPU-seconds, not committed yet; ``--model longer --steps 1000 --out
lib/attnbook/results/bert_mlm_1000.safetensors``: the same recipe for 1,000 steps, committed, about
90 CPU-seconds), ``--model tiny`` (converted the old pickle
``bert_mlm_tiny.pt`` of ``benchmarks/bert_mlm_tiny.py`` to safetensors once; with ``--retrain`` it
trains the 400 steps again instead). ``--smoke`` trains 5 steps on 2,000 verses and writes nothing
unless ``--out`` is given (for the tests).

Each run writes ``lib/attnbook/results/bert_mlm_<model>.safetensors``: the trained weights
(``bert_mlm_tiny.save``: float32, the tied MLM readout stored under both names; string metadata
``command``, ``steps``, ``masking``, ``vocab_size`` and ``losses``, the training loss at every step).
The model, data, batches and schedule are the chapter's (``bert_mlm_tiny.config``,
``bert_mlm_longer.data``, batches of 64 verses, AdamW 3e-3, a tenth of the steps warm-up then linear
decay, gradients clipped at norm 1). One CPU thread. It also prints the held-out accuracy by position
type on the chapter's evaluation batches (``bert_mlm_longer.evaluate``), to compare with the stored
seed-0 run of ``bert_mlm_longer.json``.
"""
from __future__ import annotations

import shlex
import sys
import time
from functools import partial
from pathlib import Path

import torch

import common
from bert_mlm_longer import data, evaluate, evaluation_batches
from bert_mlm_tiny import MASKING, config, save, train
from attnbook.models.bert import BertForPreTraining
from attnbook.tasks import masked_lm as mlm


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--model", choices=["longer", "mask-only", "tiny"], required=True)
    parser.add_argument("--retrain", action="store_true", help="tiny: train instead of converting")
    parser.add_argument("--steps", type=int, default=None, help="longer: another budget (default 4000)")
    parser.add_argument("--smoke", action="store_true", help="5 steps on 2,000 verses (for the tests)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    argv_shown = sys.argv[1:] if argv is None else argv
    command = "python benchmarks/bert_mlm_weights.py" + "".join(f" {shlex.quote(a)}" for a in argv_shown)
    train_sentences, held, old_ids, *_ = data(args.smoke)
    vocab_size = len(old_ids)
    steps = args.steps or {"longer": 4000, "mask-only": 400, "tiny": 400}[args.model]
    if args.smoke:
        steps = 5
    masking = MASKING
    start = time.process_time()
    if args.model == "tiny" and not args.retrain and not args.smoke:
        saved = torch.load(common.RESULTS / "bert_mlm_tiny.pt")  # the old pickle, if present
        model = BertForPreTraining(config(vocab_size))
        model.load_state_dict(saved["state_dict"])
        losses, steps = saved["losses"], saved["steps"]
        command = saved["command"] + " (converted by: " + command + ")"
    else:
        bert_masking = mlm.mask_tokens
        if args.model == "mask-only":  # every chosen token becomes [MASK]; the same draws
            masking = "15% chosen; 100% [MASK]"
            mlm.mask_tokens = partial(bert_masking, mask_prob=1.0, random_prob=0.0)
        model, history = train(train_sentences, vocab_size, steps, max(1, steps // 10))
        mlm.mask_tokens = bert_masking  # the evaluation batches are the chapter's, 80/10/10
        losses = history.losses
    model.eval()
    print(f"{args.model}: {steps} steps, {time.process_time() - start:.0f} CPU-s; mean training loss "
          f"of the last 50 steps {sum(losses[-50:]) / len(losses[-50:]):.3f}")
    out = args.out or (None if args.smoke else common.RESULTS / f"bert_mlm_{args.model}.safetensors")
    if out is not None:
        save(model, out, command, steps, masking, losses)
    if not args.smoke:
        final = evaluate(model, evaluation_batches(held, vocab_size))
        print("held out: " + ", ".join(f"{k} {v:.4f}" for k, v in final.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
