"""Chapter 5's sanity task: the page's Transformer learns to reverse random strings.

Sources are random strings of 3 to 10 symbols drawn with replacement from 20; the target is the
source reversed, then ``<eos>``. Ids: 0 ``<pad>``, 1 ``<bos>``, 2 ``<eos>``, 3-22 the symbols.
The model is the chapter's Transformer config (D = 64, 4 heads, d_ff 256, 2 + 2 layers,
pre-norm, dropout 0, vocabularies of 23); Adam (betas 0.9, 0.98, eps 1e-9), 100 warm-up steps
then linear decay from peak 3e-3, batches of 64 fresh strings, 800 steps, gradients clipped at
1, seed 0, one CPU thread. It writes

- ``lib/attnbook/results/transformer_reversal.safetensors``: the trained ``state_dict``;
- ``lib/attnbook/results/transformer_reversal.json``: the settings, the weights' SHA-256, the
  training loss at every step, the training seconds and the exact-match rate of greedy decoding
  on 2,000 test strings (seed 123; the chapter recomputes it from the weights).

Reproduce with ``nice python benchmarks/transformer_reversal.py`` (well under a minute of CPU);
``--smoke`` trains 3 steps and writes only where ``--out`` points.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F

import common
from attnbook.checkpoints import sha256_of
from attnbook.decoding import greedy_decode
from attnbook.env import seed_everything
from attnbook.models.transformer import Transformer, TransformerConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.train import fit

PAD, BOS, EOS, FIRST = (common.REVERSAL_PAD, common.REVERSAL_BOS, common.REVERSAL_EOS,
                       common.REVERSAL_FIRST)
SYMBOLS = 20
VOCAB = FIRST + SYMBOLS
MIN_LEN, MAX_LEN = 3, 10
STEPS, BATCH, PEAK_LR, WARMUP, TEST_SEED, TEST_SIZE = 800, 64, 3e-3, 100, 123, 2000


def config() -> TransformerConfig:
    """The chapter's Transformer, with this task's vocabularies."""
    return TransformerConfig(VOCAB, VOCAB, d_model=64, num_heads=4, d_ff=256,
                             num_encoder_layers=2, num_decoder_layers=2, dropout=0.0,
                             norm_first=True)


def strings(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random strings: padded ids ``(n, MAX_LEN)`` and their lengths ``(n,)``."""
    return common.reversal_strings(n, MIN_LEN, MAX_LEN, VOCAB, generator)


def targets(src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder input ``<bos> y`` and output ``y <eos>``, both ``(n, MAX_LEN + 1)``, padded."""
    return common.reversal_targets(src, lengths)


def exact_match(model: Transformer, src: torch.Tensor, lengths: torch.Tensor) -> list[bool]:
    """Greedy decoding; True where the output is the source reversed, exactly."""
    model.eval()
    out = greedy_decode(model, src, lengths, BOS, EOS, MAX_LEN + 1)
    return [o == s[:n].flip(0).tolist() for o, s, n in zip(out, src, lengths.tolist())]


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    steps = 3 if args.smoke else STEPS
    seed_everything(0)
    model = Transformer(config())
    optimizer = torch.optim.Adam(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_linear_scheduler(optimizer, min(WARMUP, steps - 1), steps)
    generator = torch.Generator().manual_seed(0)

    def batches():
        while True:
            src, lengths = strings(BATCH, generator)
            yield src, lengths, *targets(src, lengths)

    def loss_fn(m, batch):
        src, lengths, tgt_in, tgt_out = batch
        logits = m(src, lengths, tgt_in)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)

    history = fit(model, batches(), loss_fn, optimizer, steps, clip_norm=1.0,
                  scheduler=scheduler, progress=False)
    test_src, test_lengths = strings(TEST_SIZE, torch.Generator().manual_seed(TEST_SEED))
    right = exact_match(model, test_src, test_lengths)
    rate = sum(right) / len(right)
    out = common.out_path(args, "transformer_reversal.json")
    if out is None:
        print(f"smoke: {steps} steps, exact match {rate:.1%} (nothing written)")
        return
    from safetensors.torch import save_file

    weights = Path(out).with_suffix(".safetensors")
    weights.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}, str(weights))
    common.write_result(out, {
        "description": "Chapter 5's sanity task: reverse random strings of 3-10 symbols out of "
                       "20; written by benchmarks/transformer_reversal.py",
        "command": "python benchmarks/transformer_reversal.py" + (" --smoke" if args.smoke else ""),
        "machine": common.machine(),
        "config": dataclasses.asdict(config()),
        "steps_trained": steps, "batch": BATCH, "peak_lr": PEAK_LR, "warmup": WARMUP,
        "lengths": [MIN_LEN, MAX_LEN], "symbols": SYMBOLS,
        "test_seed": TEST_SEED, "test_size": TEST_SIZE,
        "weights": weights.name,
        "sha256": sha256_of(weights),
        "train_seconds": round(history.seconds, 1),
        "test_exact_match": rate,
        "losses": history.losses,
    })
    print(f"{steps} steps: exact match {rate:.1%} on {TEST_SIZE} test strings")


if __name__ == "__main__":
    main()
