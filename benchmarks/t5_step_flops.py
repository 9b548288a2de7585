"""Chapter 10's training compute, counted: FLOPs of the study's pretraining and fine-tuning steps.

Usage (from the repository root): ``python benchmarks/t5_step_flops.py`` writes
``lib/attnbook/results/t5_step_flops.json``; ``--smoke`` runs in seconds and writes nothing
unless ``--out`` is given.

Section 10.6 compares the two starts by training compute. Wall-clock or CPU seconds recorded by
separate runs on a shared machine do not compare (one pretraining took five times another's for
the same steps), so this script counts instead, with PyTorch's ``FlopCounterMode`` (matrix
products, attention, the read-out; forward and backward), on the study's model (D = 64, 4 heads,
2 + 2 layers) and on the batches the study draws:

- pretraining: the span-corruption batches of ``benchmarks/t5_low_label.py`` (64 windows of
  32 bytes of the shuffled spellings, seed 0), the first ``--pretrain-batches``;
- fine-tuning: the byte batches of ``benchmarks/t5_pretraining.py``'s ``finetune_t5`` (64 words,
  ``text_pairs(..., "g2p")``), every step of seeds 0, 1, 2 up to ``--steps``, with all the
  training words and with seed 0's 2,000 words.

A step's count depends only on the batch's shape (B, S, T), so each shape is counted once.
"""
from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import common
from attnbook.data.g2p import load_g2p
from attnbook.models.t5 import T5
from attnbook.tasks.span_corruption import span_corruption_batches
from attnbook.tasks.text_to_text import byte_batches, text_pairs
from t5_pretraining import VOCAB, t5_config, train_subset


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--steps", type=int, default=3600)
    p.add_argument("--pretrain-batches", type=int, default=50)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.process_time()
    out = common.out_path(args, "t5_step_flops.json")
    torch.manual_seed(0)
    model = T5(t5_config(args.smoke, dropout=0.0))
    cache: dict[tuple, int] = {}

    def count(batch) -> int:
        shape = (*batch.src.shape, batch.tgt_in.shape[1])
        if shape not in cache:
            with FlopCounterMode(display=False) as counter:
                logits = model(batch.src, batch.src_lengths, batch.tgt_in)  # (B, T, V)
                F.cross_entropy(logits.transpose(1, 2), batch.tgt_out,
                                ignore_index=VOCAB.pad_id).backward()
            model.zero_grad()
            cache[shape] = counter.get_total_flops()
        return cache[shape]

    data = load_g2p()
    train = data.train[:2000] if args.smoke else data.train
    spellings = [word for word, _ in train]
    order = torch.randperm(len(spellings), generator=torch.Generator().manual_seed(0)).tolist()
    stream = VOCAB.encode(" ".join(spellings[i] for i in order))
    stream = stream[: int(len(stream) * 0.95)]
    batches = span_corruption_batches(stream, 32, 64, VOCAB.sentinel, VOCAB.eos_id, VOCAB.pad_id,
                                      torch.Generator().manual_seed(0))
    n_pre = 5 if args.smoke else args.pretrain_batches
    pre = [count(next(batches)) for _ in range(n_pre)]
    steps = 20 if args.smoke else args.steps
    result = {"description": __doc__.splitlines()[0], "command": common.command_line(),
              "machine": common.machine(), "counter": "torch.utils.flop_counter.FlopCounterMode",
              "pretraining": {"batches_counted": n_pre, "mean_flops": statistics.mean(pre),
                              "min_flops": min(pre), "max_flops": max(pre)},
              "fine_tuning": []}
    for size in (2000, 0):
        for seed in (0, 1, 2):
            if size and seed:
                continue  # 2,000 words: seed 0's subset (the scratch recipe sweep's)
            words = train_subset(train, size, seed)
            stream_ft = byte_batches(text_pairs(words, "g2p"), VOCAB, 64,
                                     torch.Generator().manual_seed(seed))
            flops = [count(next(stream_ft)) for _ in range(steps)]
            row = {"size": len(words), "seed": seed, "steps": steps,
                   "mean_flops": {n: statistics.mean(flops[:n])
                                  for n in (600, 1200, 2400, 3600) if n <= steps}}
            if args.smoke:
                row["mean_flops"] = {steps: statistics.mean(flops)}
            print(row, flush=True)
            result["fine_tuning"].append(row)
    result["shapes_counted"] = len(cache)
    result["cpu_seconds"] = round(time.process_time() - start, 1)
    print(result["pretraining"], result["shapes_counted"], result["cpu_seconds"], flush=True)
    if out is not None:
        common.write_result(out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
