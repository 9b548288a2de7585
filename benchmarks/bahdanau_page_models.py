"""Chapter 2: train the page's three 360-step G2P models once and save their weights.

The chapter loads these weights instead of training live (the three trainings would take more
than the page's CPU budget). Each run is the chapter's own: ``seed_everything(0)``, the model
(``--model gru``: Chapter 1's ``RNNSeq2Seq``; ``additive`` or ``bilinear``:
``RNNAttentionSeq2Seq`` with that score, the page's widths), then ``train_g2p`` with
``G2PRecipe(steps=360)`` on one CPU thread. For each model it writes

- ``lib/attnbook/results/bahdanau_page_MODEL.safetensors``: the trained ``state_dict``;
- ``lib/attnbook/results/bahdanau_page_MODEL.json``: the recipe, the weights' SHA-256, the
  training loss at every step and the training seconds (the chapter plots and quotes them), and
  the test WER and PER.

Reproduce with ``nice python benchmarks/bahdanau_page_models.py --model MODEL`` for each of
gru, additive, bilinear (about 25 to 45 CPU-seconds each); ``--smoke`` trains 3 steps and
writes only where ``--out`` points.
"""
from __future__ import annotations

import dataclasses

import torch

import common
from attnbook.data import build_vocabs, load_g2p
from attnbook.env import seed_everything
from attnbook.models.rnn import (RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq,
                                 RNNSeq2SeqConfig)
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p

STEPS = 360  # the chapter's recipe: G2PRecipe(steps=360)
MODELS = ("gru", "additive", "bilinear")


def build(model: str, src_size: int, tgt_size: int) -> torch.nn.Module:
    """The chapter's model ``model``, built right after ``seed_everything(0)``."""
    seed_everything(0)
    if model == "gru":
        return RNNSeq2Seq(RNNSeq2SeqConfig(src_size, tgt_size))
    return RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(src_size, tgt_size, score=model))


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--model", choices=MODELS, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 3 if args.smoke else STEPS
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    recipe = G2PRecipe(steps=steps)
    model = build(args.model, len(src_vocab), len(tgt_vocab))
    history = train_g2p(model, data, src_vocab, tgt_vocab, recipe)
    test = data.test[:64] if args.smoke else data.test
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    out = common.out_path(args, f"bahdanau_page_{args.model}.json")
    if out is None:
        print(f"smoke: {steps} steps, test WER {result.wer:.1%} (nothing written)")
        return
    common.write_page_model(out, model, {
        "description": f"Chapter 2: the page's {args.model} model, seed 0, the page's 360-step "
                       "recipe; written by benchmarks/bahdanau_page_models.py",
        "command": f"python benchmarks/bahdanau_page_models.py --model {args.model}"
                   + (" --smoke" if args.smoke else ""),
        "machine": common.machine(),
        "model": args.model,
        "recipe": dataclasses.asdict(recipe),
    }, history, test, result)


if __name__ == "__main__":
    main()
