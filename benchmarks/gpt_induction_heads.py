"""Chapter 8's induction heads, head by head, over three seeds: which single head the copying
needs.

Usage: ``python benchmarks/gpt_induction_heads.py`` (writes
``lib/attnbook/results/gpt_induction_heads.json``, which the chapter reads), or
``python benchmarks/gpt_induction_heads.py --smoke`` (seconds; writes nothing unless ``--out``).
``python benchmarks/gpt_induction_heads.py --layers 1`` trains the control: the same model,
task, seeds, rate and steps with one layer instead of two (writes
``lib/attnbook/results/gpt_induction_one_layer.json``); its curve's prefix-matching score is
then that of its only layer.

The chapter's induction run (Section 8.6): random segments of 6 to 16 tokens over a vocabulary
of 64, repeated, then random filler, windows of 32; the attention-only model of two layers of
two heads (D = 64), AdamW at 3e-3 without weight decay, batch 32, 500 steps. Seed s draws the
weights (``torch.manual_seed(s)``) and the batches (generator seed ``1 + s``: seed 0 is the
chapter's run). After training, on the chapter's 512 held-out sequences (generator seed 99):
the loss on the first and on the repeated copy, each head's previous-token score, and the
repeat loss with one head removed: its columns of its block's ``out_proj`` set to zero, so
that head writes nothing into the residual stream while every other head is unchanged.
During training, every 20 steps, the curve the chapter plots for its own run: the repeat loss
and the best layer-2 prefix-matching score on the first 128 of those sequences (measuring
changes no weight and draws no random number, so the trained models are the same).
One thread.
"""
from __future__ import annotations

import copy
import json

import torch

import common
from attnbook.models.attention_only import AttentionOnly
from attnbook.tasks.induction import (
    half_losses, induction_scores, previous_token_scores, repeated_batches, repeated_segments,
)
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.train import fit

V_IND, LENGTH, MIN_SEG, MAX_SEG, D_MODEL, HEADS, LAYERS = 64, 32, 6, 16, 64, 2, 2
SEEDS = (0, 1, 2)
EVAL_EVERY = 20  # steps between the curve's measurements, as in the chapter


def without_head(model: AttentionOnly, layer: int, head: int) -> AttentionOnly:
    """A copy of ``model`` whose ``head`` of block ``layer`` writes nothing (0-based)."""
    ablated = copy.deepcopy(model)
    width = D_MODEL // HEADS
    with torch.no_grad():
        ablated.blocks[layer].self_attn.out_proj.weight[:, head * width:(head + 1) * width] = 0
    return ablated


def run_one(seed: int, steps: int, tokens: torch.Tensor, lengths: torch.Tensor,
            layers: int = LAYERS) -> dict:
    """Train one model of ``layers`` layers and ablate each head in turn."""
    torch.manual_seed(seed)
    model = AttentionOnly(V_IND, LENGTH, d_model=D_MODEL, num_heads=HEADS, num_layers=layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    batches = repeated_batches(32, LENGTH, V_IND, MIN_SEG, MAX_SEG,
                               torch.Generator().manual_seed(1 + seed))

    def track(m: AttentionOnly) -> dict[str, float]:  # the chapter's curve: 128 sequences
        few, few_lengths = tokens[:128], lengths[:128]
        with torch.no_grad():
            _, few_maps = m(few, need_weights=True)
        return {"repeat loss": half_losses(m, few, few_lengths)[1],
                "prefix matching": induction_scores(few_maps[-1], few, few_lengths).max().item()}

    history = fit(model, batches, next_token_loss, optimizer, steps, progress=False,
                  eval_fn=track, eval_every=EVAL_EVERY)
    curve = [{"step": step, "repeat_loss": round(loss, 4), "prefix_matching": round(score, 4)}
             for (step, loss), (_, score) in zip(history.metrics["repeat loss"],
                                                 history.metrics["prefix matching"])]
    first, repeat = half_losses(model, tokens, lengths)
    with torch.no_grad():
        _, maps = model(tokens, need_weights=True)
    previous = [previous_token_scores(m).mean(-1).tolist() for m in maps]  # (layers, heads)
    ablated = {f"layer {layer + 1}, head {head + 1}":
               round(half_losses(without_head(model, layer, head), tokens, lengths)[1], 4)
               for layer in range(layers) for head in range(HEADS)}
    return {"seed": seed, "layers": layers, "first_copy_loss": round(first, 4), "repeat_loss": round(repeat, 4),
            "previous_token_scores": [[round(x, 4) for x in row] for row in previous],
            "repeat_loss_without": ablated, "curve": curve}


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--layers", type=int, default=LAYERS,
                        help="1: the one-layer control (its own results file)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS),
                        help="a subset of the seeds (each seed's run does not depend on others)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 20 if args.smoke else args.steps
    tokens, lengths = repeated_segments(512, LENGTH, V_IND, MIN_SEG, MAX_SEG,
                                        torch.Generator().manual_seed(99))
    runs = []
    for seed in args.seeds:
        runs.append(run_one(seed, steps, tokens, lengths, args.layers))
        print(json.dumps(runs[-1]), flush=True)
    if args.layers != LAYERS:
        out = common.out_path(args, f"gpt_induction_{'one' if args.layers == 1 else args.layers}"
                                    "_layer.json")
        if out is not None:
            common.write_result(out, {
                "description": f"Chapter 8: the control of Section 8.6, the induction model "
                               f"with {args.layers} layer(s) instead of two, same task, seeds, "
                               "rate and steps; first- and repeat-copy losses on the 512 "
                               "held-out sequences and the training curve (repeat loss and "
                               "best last-layer prefix-matching score every 20 steps on 128); "
                               "written by benchmarks/gpt_induction_heads.py",
                "command": common.command_line(), "steps": steps, "layers": args.layers,
                "runs": runs, "machine": common.machine()})
        return
    out = common.out_path(args, "gpt_induction_heads.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: the induction model of Section 8.6 over three seeds, its "
                           "repeat loss with one head's output removed (out_proj columns set to "
                           "zero), and its training curve (repeat loss and best layer-2 "
                           "prefix-matching score every 20 steps on 128 of the sequences); "
                           "written by benchmarks/gpt_induction_heads.py",
            "command": common.command_line(), "steps": steps, "runs": runs,
            "machine": common.machine()})


if __name__ == "__main__":
    main()
