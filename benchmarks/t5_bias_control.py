"""Chapter 10, Section 10.6: the control for reading the pretrained encoder's position biases.

Usage (from the repository root): ``python benchmarks/t5_bias_control.py`` writes
``lib/attnbook/results/t5_bias_control.json`` (the chapter prints it beside the pretrained
biases); ``--smoke`` runs in seconds and writes nothing unless ``--out`` is given.

The chapter's live fine-tuning (its T5 from scratch, seed 0: D = 64, 4 heads, 2 + 2 layers, 32
buckets; seed 0's 2,000 labelled words; batches of 64 from a generator seeded 0; Adam at a
constant 3e-3), continued to as many steps as the span-corruption pretraining took (3,000). At
steps 200, 1,000, 2,000 and 3,000 it records the encoder's bias table: the largest change from
the initial values, and per head the largest bias over offsets -25..+25 (and where), and the mean
bias 8 to 25 bytes before and after the query. This separates what any training on letters to
phonemes gives the biases from what span corruption gives them.
"""
from __future__ import annotations

import time

import torch

import common
from attnbook.data.byte_text import ByteVocab
from attnbook.data.g2p import load_g2p
from attnbook.env import seed_everything
from attnbook.layers.relative_position import relative_position_bucket
from attnbook.losses import sequence_cross_entropy
from attnbook.models.t5 import T5, T5Config
from attnbook.tasks.text_to_text import byte_batches, text_pairs
from attnbook.train import fit

VOCAB = ByteVocab(num_sentinels=16)
OFFSETS, BACK, AHEAD = torch.arange(-25, 26), torch.arange(-25, -7), torch.arange(8, 26)
TABLE = "encoder_position_bias.relative_attention_bias.weight"


def bias_summary(table: torch.Tensor, initial: torch.Tensor) -> dict:
    """The encoder table (32, H): its change from ``initial`` and each head's shape by offset."""
    heads = []
    for head in range(table.shape[1]):
        beta = table[relative_position_bucket(OFFSETS, True), head]
        heads.append({"largest": round(float(beta.max()), 3),
                      "at_offset": int(OFFSETS[beta.argmax()]),
                      "mean_back": round(float(table[relative_position_bucket(BACK, True), head].mean()), 3),
                      "mean_ahead": round(float(table[relative_position_bucket(AHEAD, True), head].mean()), 3)})
    return {"max_change": round(float((table - initial).abs().max()), 3), "heads": heads}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--checkpoints", type=int, nargs="+", default=[200, 1000, 2000, 3000])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    checkpoints = [2, 4] if args.smoke else args.checkpoints
    train_words = load_g2p().train
    labelled = [train_words[i] for i in sorted(torch.randperm(  # 2,000 words, as seed 0 draws
        len(train_words), generator=torch.Generator().manual_seed(1000))[:2000].tolist())]
    seed_everything(0)
    model = T5(T5Config(len(VOCAB), d_model=64, num_heads=4, d_ff=128))
    initial = model.state_dict()[TABLE].clone()
    batches = byte_batches(text_pairs(labelled, "g2p"), VOCAB, 64, torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def loss(m, batch):
        return sequence_cross_entropy(m(batch.src, batch.src_lengths, batch.tgt_in), batch.tgt_out,
                                      VOCAB.pad_id)

    start, done, rows = time.process_time(), 0, []
    for step in checkpoints:
        history = fit(model, batches, loss, optimizer, step - done, progress=False)
        done = step
        rows.append({"step": step, "loss_last_50": round(sum(history.losses[-50:]) / len(history.losses[-50:]), 3),
                     **bias_summary(model.state_dict()[TABLE], initial)})
        print(rows[-1], flush=True)
    out = common.out_path(args, "t5_bias_control.json")
    if out is not None:
        common.write_result(out, {
            "description": __doc__.splitlines()[0], "machine": common.machine(),
            "cpu_seconds": round(time.process_time() - start, 1), "initial_max_abs": round(float(initial.abs().max()), 3),
            "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
