"""Chapter 1: train the page's 1,200-step G2P model once and save its weights.

The chapter loads these weights instead of training all 1,200 steps live (the training alone
would take most of the page's CPU budget); it trains the first ``CHECK_STEPS`` steps on the page
and checks that their losses are the ones recorded here. The run is the chapter's own (§1.7):
``seed_everything(0)``, ``RNNSeq2Seq(RNNSeq2SeqConfig(...))`` at its default widths, then
``train_g2p`` with ``G2PRecipe(lr=6e-3, label_smoothing=0.1)``, Adam with betas (0.9, 0.98) and
eps 1e-9, and ``warmup_linear_scheduler(optimizer, 100, 1200)``, on one CPU thread. It writes

- ``lib/attnbook/results/rnn_page_model.safetensors``: the trained ``state_dict``;
- ``lib/attnbook/results/rnn_page_model.json``: the recipe, the weights' SHA-256, the training
  loss at every step, the training seconds and how many steps clipping shortened (the chapter
  plots and quotes them), and the test WER and PER. (The 1,200-step file predates the clipping
  count and has none.)

Reproduce with ``nice python benchmarks/rnn_page_model.py`` (about 11 CPU-minutes);
``--smoke`` trains 3 steps and writes only where ``--out`` points. ``--steps N`` trains the same
recipe for N steps with the schedule spanning N steps and writes ``rnn_page_model_N.json`` and
``rnn_page_model_N.safetensors`` (the chapter's longer run: ``--steps 2400``, about 22 CPU-minutes).
"""
from __future__ import annotations

import dataclasses

import torch

import common
from attnbook.data import build_vocabs, load_g2p
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p

CHECK_STEPS = 40  # steps the chapter retrains on the page to check the recorded losses


def page_run(data, src_vocab, tgt_vocab, steps: int | None = None, progress: bool = True,
             total: int = 1200):
    """§1.7's model and recipe over ``total`` steps; ``steps`` stops early (the schedule still
    spans ``total`` steps)."""
    seed_everything(0)
    model = RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab_size=len(src_vocab),
                                        tgt_vocab_size=len(tgt_vocab)))
    recipe = G2PRecipe(steps=total, lr=6e-3, label_smoothing=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_linear_scheduler(optimizer, 100, recipe.steps)
    run = recipe if steps is None else dataclasses.replace(recipe, steps=steps)
    history = train_g2p(model, data, src_vocab, tgt_vocab, run, optimizer, scheduler,
                        progress=progress)
    return model, recipe, history


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=1200,
                        help="training steps, the schedule spanning them (default 1200)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    model, recipe, history = page_run(data, src_vocab, tgt_vocab, 3 if args.smoke else None,
                                      total=args.steps)
    test = data.test[:64] if args.smoke else data.test
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    name = "rnn_page_model" + ("" if args.steps == 1200 else f"_{args.steps}")
    out = common.out_path(args, name + ".json")
    if out is None:
        print(f"smoke: 3 steps, test WER {result.wer:.1%} (nothing written)")
        return
    common.write_page_model(out, model, {
        "description": f"Chapter 1: the page's model (section 1.7), seed 0, {args.steps:,} steps; "
                       "written by benchmarks/rnn_page_model.py",
        "command": "python benchmarks/rnn_page_model.py" + (" --smoke" if args.smoke else "")
                   + ("" if args.steps == 1200 else f" --steps {args.steps}"),
        "machine": common.machine(),
        "recipe": dataclasses.asdict(recipe),
    }, history, test, result)


if __name__ == "__main__":
    main()
