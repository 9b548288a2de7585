"""Chapter 2, section 2.10: where a training step with attention spends its extra time.

Usage: ``nice python benchmarks/bahdanau_step_cost.py`` writes
``lib/attnbook/results/bahdanau_step_cost.json`` (about 15 CPU-seconds, one thread);
``python benchmarks/bahdanau_step_cost.py --smoke [--out FILE]`` is a seconds-long run for the tests.

One training step (forward, loss, backward) on the same 128 training words, for three models with
section 2.6's sizes and seed 0's initial weights:

- "gru": Chapter 1's model, its teacher-forced decoder one ``nn.GRU`` call;
- "zero_score": the attention model with its score replaced by zeros (uniform weights): the same
  step-by-step ``GRUCell`` loop and weighted sum, no (B, T, S, A) tensor;
- "additive": the attention model as trained, v . tanh(W s + U h), a (B, T, S, A) tensor.

The three are timed in turn, ``repeats`` rounds after two warm-up rounds; the file keeps every
time and the medians (ms per step). A shared machine's clocks are noisy: read ratios, not sizes.
"""
from __future__ import annotations

import statistics
import time

import torch

import common
from attnbook.data.batching import make_batch
from attnbook.data.g2p import build_vocabs, load_g2p
from attnbook.exercises.ch02 import _UniformScore
from attnbook.models.rnn import (RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig, RNNSeq2Seq,
                                 RNNSeq2SeqConfig)
from attnbook.tasks.g2p import g2p_loss


def models(n_src: int, n_tgt: int) -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    gru = RNNSeq2Seq(RNNSeq2SeqConfig(n_src, n_tgt))
    torch.manual_seed(0)
    additive = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(n_src, n_tgt))
    torch.manual_seed(0)
    zero = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(n_src, n_tgt))
    zero.decoder.score = _UniformScore()
    return {"gru": gru, "zero_score": zero, "additive": additive}


def main() -> None:
    p = common.parser(__doc__)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--out", type=common.Path)
    args = p.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    words = 16 if args.smoke else 128
    repeats = 2 if args.smoke else 7
    batch = make_batch(data.train[:words], src_vocab, tgt_vocab)
    nets = models(len(src_vocab), len(tgt_vocab))
    times: dict[str, list[float]] = {k: [] for k in nets}
    for r in range(2 + repeats):
        for name, net in nets.items():
            net.zero_grad()
            start = time.process_time()
            g2p_loss(net, batch, tgt_vocab.pad_id).backward()
            if r >= 2:
                times[name].append(1e3 * (time.process_time() - start))
    median = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "description": __doc__.splitlines()[0],
        "command": "python benchmarks/bahdanau_step_cost.py" + (" --smoke" if args.smoke else ""),
        "machine": common.machine(),
        "setup": {"words": words, "repeats": repeats, "clock": "process CPU time, one thread",
                  "mean_T": float(batch.tgt_lengths.float().mean()),
                  "mean_S": float(batch.src_lengths.float().mean())},
        "ms_per_step": times,
        "median_ms": median,
    }
    out = common.out_path(args, "bahdanau_step_cost.json")
    if out is None:
        print(result)
    else:
        common.write_result(out, result)


if __name__ == "__main__":
    main()
