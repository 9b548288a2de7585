"""Chapter 5's long-input run: reversal of 20-40 symbols, the Transformer against GRU + attention.

The task is Chapter 5's sanity task made long: random strings of 20 to 40 symbols drawn with
replacement from 20, the target the string reversed, then ``<eos>`` (ids 0 ``<pad>``, 1 ``<bos>``,
2 ``<eos>``, 3-22 the symbols). Two models, each at its own chapter's size:

- "transformer": Chapter 5's page model (D = 64, 4 heads, d_ff 256, 2 + 2 layers, pre-norm,
  dropout 0);
- "gru_attention": Chapter 2's GRU + additive attention (``RNNAttentionSeq2SeqConfig`` defaults).

Both get the same recipe and the same **budget of CPU time**, not the same number of steps: Adam
(betas 0.9, 0.98, eps 1e-9), batches of 64 fresh strings (the same batches for both models within
a seed), gradients clipped at 1, and warm-up + linear decay to 0 with peak 3e-3 laid over the
*budget* rather than over a step count: the rate at a step is set from the fraction f of the
budget used so far (rising over the first sixth, then falling linearly), and training stops when
f reaches 1. The budget is counted in CPU seconds of the run's one thread (``time.process_time``),
so that a machine shared with other jobs slows both models alike; the wall seconds are recorded
too. Scored by greedy decoding of 500 test strings (seed 123): exact match, and the share of
target symbols (plus ``<eos>``) written correctly at their position.

A second part, ``--part mask``, reruns Chapter 5's causal-mask demonstration (cell "What the mask
buys": D = 32, one layer per stack, 100 steps of 32 G2P words, lr 1e-2, with and without the causal
mask, scored on the first 128 dev words) for seeds 0, 1 and 2 (each seed picks both the initial
weights and the batches).

Reproduce with ``nice python benchmarks/long_reversal.py --jobs 2`` (two runs at a time, about
150 CPU-seconds each, 2 seeds) and ``python benchmarks/long_reversal.py --part mask``; both write
``lib/attnbook/results/long_reversal.json`` (merging with what is there). ``--smoke`` is seconds.
"""
from __future__ import annotations

import json
import time
from unittest import mock

import torch
import torch.nn.functional as F

import common
from attnbook.checks import count_parameters
from attnbook.decoding import greedy_decode
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
from attnbook.models.transformer import Transformer, TransformerConfig

PAD, BOS, EOS, FIRST = (common.REVERSAL_PAD, common.REVERSAL_BOS, common.REVERSAL_EOS,
                       common.REVERSAL_FIRST)
SYMBOLS = 20
VOCAB = FIRST + SYMBOLS
MIN_LEN, MAX_LEN = 20, 40
BATCH, PEAK_LR, WARMUP_FRACTION, TEST_SEED, TEST_SIZE = 64, 3e-3, 1 / 6, 123, 500
BUDGET_S = 150.0
KINDS = ("transformer", "gru_attention")
SEEDS = (0, 1)
NAME = "long_reversal.json"


def make_model(kind: str) -> torch.nn.Module:
    """Chapter 5's page Transformer or Chapter 2's GRU + attention, with this task's vocabularies."""
    if kind == "transformer":
        return Transformer(TransformerConfig(VOCAB, VOCAB, d_model=64, num_heads=4, d_ff=256,
                                             num_encoder_layers=2, num_decoder_layers=2,
                                             dropout=0.0, norm_first=True))
    return RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(VOCAB, VOCAB))


def strings(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random strings: padded ids ``(n, MAX_LEN)`` and their lengths ``(n,)``."""
    return common.reversal_strings(n, MIN_LEN, MAX_LEN, VOCAB, generator)


def targets(src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder input ``<bos> y`` and output ``y <eos>``, both ``(n, MAX_LEN + 1)``, padded."""
    return common.reversal_targets(src, lengths)


def rate_at(fraction: float) -> float:
    """Warm-up over the first sixth of the budget, then linear decay to 0 at its end."""
    if fraction < WARMUP_FRACTION:
        return PEAK_LR * fraction / WARMUP_FRACTION
    return PEAK_LR * max(0.0, 1.0 - fraction) / (1.0 - WARMUP_FRACTION)


def score(model: torch.nn.Module, test_size: int) -> dict:
    """Greedy decoding of the test strings: exact match and per-symbol accuracy."""
    src, lengths = strings(test_size, torch.Generator().manual_seed(TEST_SEED))
    model.eval()
    out = greedy_decode(model, src, lengths, BOS, EOS, MAX_LEN + 1)
    exact, right, total = 0, 0, 0
    for o, s, n in zip(out, src, lengths.tolist()):
        want = s[:n].flip(0).tolist() + [EOS]
        got = o + [EOS]  # greedy_decode strips the <eos>; a row cut by the cap has none
        exact += got[:n + 1] == want and len(o) == n
        right += sum(a == b for a, b in zip(got, want))
        total += n + 1
    unchanged = sum(s[:n].tolist() == s[:n].flip(0).tolist() for s, n in zip(src, lengths.tolist()))
    return {"exact_match": exact / test_size, "symbol_accuracy": right / total,
            "unchanged_baseline": unchanged / test_size}


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    """Train ``kind`` from seed ``seed`` for the CPU budget and score it."""
    torch.set_num_threads(1)
    budget = 2.0 if smoke else BUDGET_S
    seed_everything(seed)
    model = make_model(kind)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    generator = torch.Generator().manual_seed(seed)
    losses, steps = [], 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    model.train()
    while True:
        fraction = (time.process_time() - cpu0) / budget
        if fraction >= 1.0:
            break
        for group in optimizer.param_groups:
            group["lr"] = rate_at(fraction)
        src, lengths = strings(BATCH, generator)
        tgt_in, tgt_out = targets(src, lengths)
        logits = model(src, lengths, tgt_in)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        steps += 1
    cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
    row = {"model": kind, "seed": seed, "parameters": count_parameters(model), "steps": steps,
           "train_cpu_seconds": round(cpu_s, 1), "train_wall_seconds": round(wall_s, 1),
           "final_loss": round(sum(losses[-20:]) / max(1, len(losses[-20:])), 4),
           **score(model, 20 if smoke else TEST_SIZE),
           "losses_every_10": [round(x, 4) for x in losses[::10]]}
    print(json.dumps(row), flush=True)
    return row


def see_everything(T, P, device=None):
    """A stand-in for the causal mask that hides nothing: every position sees all."""
    return torch.ones(T, P, dtype=torch.bool, device=device)


def mask_demo(seed: int, smoke: bool) -> list[dict]:
    """Chapter 5's causal-mask demonstration for one seed: one row per mask."""
    from attnbook.data import build_vocabs, load_g2p, make_batch
    from attnbook.layers import blocks
    from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, g2p_loss, train_g2p

    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    words = data.dev[:16 if smoke else 128]
    batch = make_batch(words, src_vocab, tgt_vocab)
    rows = []
    for name, mask_fn in (("causal mask", blocks.causal_mask), ("no mask", see_everything)):
        seed_everything(seed)
        config = TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=32, num_heads=2,
                                   d_ff=64, num_encoder_layers=1, num_decoder_layers=1,
                                   dropout=0.0, norm_first=True)
        tiny = Transformer(config)
        recipe = G2PRecipe(steps=3 if smoke else 100, batch_size=32, lr=1e-2, label_smoothing=0.0,
                           seed=seed)  # the seed picks the initial weights and the batches
        with mock.patch.object(blocks, "causal_mask", mask_fn):
            train_g2p(tiny, data, src_vocab, tgt_vocab, recipe, progress=False)
            tiny.eval()
            with torch.no_grad():
                loss = g2p_loss(tiny, batch, tgt_vocab.pad_id).item()
                first = tiny(batch.src, batch.src_lengths, batch.tgt_in[:, :1])
                p_eos = first.softmax(-1)[:, 0, tgt_vocab.eos_id].mean().item()
            result = evaluate_g2p(tiny, words, src_vocab, tgt_vocab)
        row = {"mask": name, "seed": seed, "dev_loss": round(loss, 4), "per": result.per,
               "empty": sum(not p for p in result.predictions), "words": len(words),
               "p_eos_first": round(p_eos, 4)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("reversal", "mask"), default="reversal")
    args = p.parse_args()
    common.check_jobs(p, args)
    out = common.out_path(args, NAME)
    result = {}
    if args.part == "reversal":
        rows = common.run_missing(run_one, KINDS, (0,) if args.smoke else SEEDS, args.smoke,
                                  args.jobs, args.resume)
        result["reversal"] = {"machine": common.machine(args.jobs if args.jobs > 1 else None),
                              "budget_cpu_seconds": 2.0 if args.smoke else BUDGET_S,
                              "lengths": [MIN_LEN, MAX_LEN], "symbols": SYMBOLS,
                              "batch": BATCH, "peak_lr": PEAK_LR, "test_size": TEST_SIZE,
                              "runs": rows}
    else:
        seeds = (0,) if args.smoke else (0, 1, 2)
        result["mask"] = {"machine": common.machine(),
                          "runs": [r for s in seeds for r in mask_demo(s, args.smoke)]}
    if out is None:
        print("smoke: nothing written")
        return
    old = json.loads(out.read_text()) if out.exists() else {}  # read now: the other part may have run
    result = {"description": __doc__.splitlines()[0],
              **{k: v for k, v in old.items() if k not in ("description", "command")}, **result}
    result["command"] = ("python benchmarks/long_reversal.py --jobs 2 ; "
                         "python benchmarks/long_reversal.py --part mask")
    common.write_result(out, result)


if __name__ == "__main__":
    main()
