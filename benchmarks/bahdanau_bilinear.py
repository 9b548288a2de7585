"""Chapter 2, section 2.8: train the bilinear-score attention model once and save its weights.

The chapter loads these weights instead of training the model live (it would cost about a third
of the page's CPU budget). The run is the chapter's own: ``seed_everything(0)``, then
``RNNAttentionSeq2Seq`` with ``score="bilinear"`` (the page's widths), then ``train_g2p`` with
``G2PRecipe(steps=360)`` on one CPU thread. It writes

- ``lib/attnbook/results/bahdanau_bilinear.safetensors``: the trained ``state_dict``;
- ``lib/attnbook/results/bahdanau_bilinear.json``: the recipe, the weights' SHA-256, the
  training loss at every step (the chapter plots it), and the test WER and PER.

Reproduce with ``nice python benchmarks/bahdanau_bilinear.py`` (about 45 CPU-seconds);
``--smoke`` trains 3 steps and writes only where ``--out`` points.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

import common
from attnbook.checkpoints import sha256_of
from attnbook.data import build_vocabs, load_g2p
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p

STEPS = 360  # the chapter's recipe: G2PRecipe(steps=360)
NAME = "bahdanau_bilinear"


def train(steps: int) -> tuple[torch.nn.Module, object, list, tuple]:
    """Seed 0's bilinear model trained for ``steps`` steps, as the chapter's cell would."""
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    recipe = G2PRecipe(steps=steps)
    seed_everything(0)
    model = RNNAttentionSeq2Seq(
        RNNAttentionSeq2SeqConfig(len(src_vocab), len(tgt_vocab), score="bilinear"))
    history = train_g2p(model, data, src_vocab, tgt_vocab, recipe)
    return model, history, recipe, (data, src_vocab, tgt_vocab)


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    steps = 3 if args.smoke else STEPS
    model, history, recipe, (data, src_vocab, tgt_vocab) = train(steps)
    test = data.test[:64] if args.smoke else data.test
    result = evaluate_g2p(model.eval(), test, src_vocab, tgt_vocab)
    out = common.out_path(args, f"{NAME}.json")
    if out is None:
        print(f"smoke: {steps} steps, test WER {result.wer:.1%} (nothing written)")
        return
    from safetensors.torch import save_file

    weights = Path(out).with_suffix(".safetensors")
    weights.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(weights))
    common.write_result(out, {
        "description": "Chapter 2, section 2.8: the bilinear-score model, seed 0, the page's "
                       "recipe; written by benchmarks/bahdanau_bilinear.py",
        "command": "python benchmarks/bahdanau_bilinear.py" + (" --smoke" if args.smoke else ""),
        "machine": common.machine(),
        "recipe": dataclasses.asdict(recipe),
        "weights": weights.name,
        "sha256": sha256_of(weights),
        "train_seconds": round(history.seconds, 1),
        "test_words": len(test),
        "test_wer": result.wer,
        "test_per": result.per,
        "steps": history.steps,
        "losses": history.losses,
    })


if __name__ == "__main__":
    main()
