"""Chapter 5: train the page's Transformer once (1,200 steps) and save its weights.

The chapter loads these weights instead of training live (the training alone would take most of
the page's CPU budget). The run is the chapter's own: ``seed_everything(0)``, the chapter's
``TransformerConfig`` (D = 64, 4 heads, d_ff 256, 2 + 2 layers, pre-norm, dropout 0), Adam
(betas 0.9, 0.98, eps 1e-9) at peak 6e-3 with 100 warm-up steps and linear decay, label
smoothing 0.1, ``G2PRecipe(steps=1200, batch_size=128)``, on one CPU thread: the recipe, seed
and batches of seed 0 of the Transformer at 6e-3 in ``g2p_compare.py``'s table. It writes

- ``lib/attnbook/results/transformer_page_model.safetensors``: the trained ``state_dict``;
- ``lib/attnbook/results/transformer_page_model.json``: the config, the recipe, the weights'
  SHA-256, the training loss at every step, the training seconds, and the test WER and PER
  (greedy decoding).

Reproduce with ``nice python benchmarks/transformer_page_model.py`` (about four minutes of CPU);
``--smoke`` trains 3 steps and writes only where ``--out`` points.
"""
from __future__ import annotations

import dataclasses

import torch

import common
from attnbook.data import build_vocabs, load_g2p
from attnbook.env import seed_everything
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p

STEPS, PEAK_LR, WARMUP = 1200, 6e-3, 100  # the chapter's PAGE_STEPS, PAGE_LR and WARMUP


def page_config(src_size: int, tgt_size: int) -> TransformerConfig:
    """The chapter's model."""
    return TransformerConfig(src_size, tgt_size, d_model=64, num_heads=4, d_ff=256,
                             num_encoder_layers=2, num_decoder_layers=2, dropout=0.0,
                             norm_first=True)


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 3 if args.smoke else STEPS
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(0)
    config = page_config(len(src_vocab), len(tgt_vocab))
    recipe = G2PRecipe(steps=steps, batch_size=128, lr=PEAK_LR, label_smoothing=0.1)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_linear_scheduler(optimizer, min(WARMUP, steps - 1), recipe.steps)
    history = train_g2p(model, data, src_vocab, tgt_vocab, recipe, optimizer=optimizer,
                        scheduler=scheduler, progress=False)
    test = data.test[:64] if args.smoke else data.test
    model.eval()
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    out = common.out_path(args, "transformer_page_model.json")
    if out is None:
        print(f"smoke: {steps} steps, test WER {result.wer:.1%} (nothing written)")
        return
    common.write_page_model(out, model, {
        "description": "Chapter 5: the page's Transformer, seed 0, 1,200 steps, warm-up 100 + "
                       "linear decay at peak 6e-3, label smoothing 0.1; written by "
                       "benchmarks/transformer_page_model.py",
        "command": "python benchmarks/transformer_page_model.py"
                   + (" --smoke" if args.smoke else ""),
        "machine": common.machine(),
        "config": dataclasses.asdict(config),
        "recipe": dataclasses.asdict(recipe),
        "warmup": WARMUP,
    }, history, test, result)


if __name__ == "__main__":
    main()
