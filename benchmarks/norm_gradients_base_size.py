"""Chapter 5: each decoder layer's gradient at initialisation, post- against pre-norm, base size.

Chapter 5 measures, on one batch, the gradient norm of each decoder layer's weights at
initialisation in a 6 + 6-layer Transformer of its own width (D = 64). This script repeats the
measurement at the paper's base size (D = 512, 8 heads, d_ff 2048, 6 + 6 layers, dropout 0),
seed 0, on the same batch (the first 128 training words), for post-norm and pre-norm, with
label smoothing 0 (the loss ``g2p_loss`` of the chapter's cell). Seconds of CPU.

It also records Xiong et al.'s own quantity: the gradient norm of each decoder layer's second
feed-forward weight matrix (W2, ``feed_forward.linear2.weight``), for seeds 0, 1 and 2 (the
whole-layer norms are seed 0's).

Reproduce with ``python benchmarks/norm_gradients_base_size.py`` (writes
``lib/attnbook/results/norm_gradients_base_size.json``); ``--smoke`` uses D = 32 and writes
only where ``--out`` points.
"""
from __future__ import annotations

import time

import torch

import common
from attnbook.data import build_vocabs, load_g2p, make_batch
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.tasks.g2p import g2p_loss

SEEDS = (0, 1, 2)  # W2's gradients; the whole-layer norms are seed 0's


def layer_norms(norm_first: bool, sizes: dict, batch, src_size: int, tgt_size: int,
                pad_id: int, seed: int) -> tuple[list[float], list[float]]:
    """Gradient norms of each decoder block's weights (all its parameters) and of its W2."""
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(src_size, tgt_size, **sizes, num_encoder_layers=6,
                                          num_decoder_layers=6, dropout=0.0,
                                          norm_first=norm_first))
    g2p_loss(model, batch, pad_id).backward()
    blocks = [round(torch.cat([p.grad.flatten() for p in block.parameters()]).norm().item(), 4)
              for block in model.decoder_blocks]
    w2 = [round(block.feed_forward.linear2.weight.grad.norm().item(), 4)
          for block in model.decoder_blocks]
    return blocks, w2


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    batch = make_batch(data.train[:128], src_vocab, tgt_vocab)
    sizes = (dict(d_model=32, num_heads=4, d_ff=64) if args.smoke
             else dict(d_model=512, num_heads=8, d_ff=2048))
    runs = {}
    start = time.process_time()
    seeds = (0,) if args.smoke else SEEDS
    for norm_first in (False, True):
        w2_by_seed = {}
        for seed in seeds:
            blocks, w2 = layer_norms(norm_first, sizes, batch, len(src_vocab), len(tgt_vocab),
                                     tgt_vocab.pad_id, seed=seed)
            if seed == 0:
                norms = blocks
            w2_by_seed[str(seed)] = w2
        w2_mean = [round(sum(v[i] for v in w2_by_seed.values()) / len(w2_by_seed), 4)
                   for i in range(len(w2))]
        runs["pre-norm" if norm_first else "post-norm"] = {
            "decoder_layer_grad_norms": norms, "layer6_over_layer1": round(norms[-1] / norms[0], 3),
            "ffn_w2_grad_norms_by_seed": w2_by_seed, "ffn_w2_grad_norms_mean": w2_mean}
        print(runs)
    out = common.out_path(args, "norm_gradients_base_size.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 5: gradient norm of each decoder layer's weights at "
                       "initialisation, 6 + 6 layers, one batch of 128 training words, seed 0",
        "command": "python benchmarks/norm_gradients_base_size.py" + (" --smoke" if args.smoke else ""),
        "machine": common.machine(),
        "setup": sizes | {"layers": 6, "batch_words": 128, "seed": 0, "w2_seeds": list(seeds),
                          "label_smoothing": 0.0},
        "cpu_seconds": round(time.process_time() - start, 1),
        "runs": runs,
    })


if __name__ == "__main__":
    main()
