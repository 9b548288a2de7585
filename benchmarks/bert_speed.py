"""Time the book's BERT forward against transformers' BertModel, same weights, same batch.

Usage (from the repository root):
``python benchmarks/bert_speed.py [--device cpu] [--batch 32] [--repeats 15] [--json [PATH]]``
(``--json`` alone writes the committed ``lib/attnbook/results/bert_speed.json``)

Both models hold all-MiniLM-L6-v2's weights (the book's loaded through its rename table, the
reference through ``from_pretrained``) and encode the same padded batch of real verses from the
World English Bible (a fixed sample); their last hidden states are checked equal on real tokens
before timing. Neither returns attention weights (the book's model runs PyTorch's fused attention;
``BertModel`` uses its default, ``sdpa``). Repetitions are interleaved (ours, theirs, theirs,
ours, ...) so that a change in machine load hits both alike; the script reports each median and
the median of the per-pair ratios, and exits 1 if that ratio is above ``--target``.
Timings on a shared machine are noisy: run it on a quiet one for numbers you quote.
"""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import torch

import common
from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import load_pretrained_bert


@torch.no_grad()
def benchmark(batch: int, repeats: int, warmup: int, device: torch.device, seed: int = 0) -> dict:
    import transformers

    transformers.utils.logging.disable_progress_bar()
    folder = minilm_dir()
    ours = load_pretrained_bert(folder, MINILM_SHA256).to(device)
    theirs = transformers.BertModel.from_pretrained(str(folder)).to(device).eval()
    tokenizer = WordPieceTokenizer.from_file(folder / "vocab.txt")
    verses = random.Random(seed).sample([v.text for v in load_bible()], batch)
    inputs = tokenizer.encode_batch(verses).to(device)
    mask_long = inputs.token_mask.long()

    def run_ours():
        return ours(inputs.input_ids, inputs.segment_ids, inputs.token_mask)

    def run_theirs():
        return theirs(input_ids=inputs.input_ids, token_type_ids=inputs.segment_ids,
                      attention_mask=mask_long).last_hidden_state

    real = inputs.token_mask[..., None]
    diff = float(((run_ours() - run_theirs()) * real).abs().max())
    if diff > 1e-4:
        raise AssertionError(f"the two models disagree before timing: max abs diff {diff:.3g} on real tokens")
    for _ in range(warmup):
        run_ours()
        run_theirs()
    ours_ms, reference_ms, ratio = common.interleaved(run_ours, run_theirs, repeats, device)
    return {"batch": batch, "seq_len": int(inputs.input_ids.shape[1]), "real_tokens": int(inputs.token_mask.sum()),
            "repeats": repeats, "max_abs_diff_real_tokens": diff,
            "ours_ms": ours_ms, "reference_ms": reference_ms, "median_ratio": ratio}


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--target", type=float, default=1.1, help="exit 1 if the median ratio is above this")
    parser.add_argument("--json", type=Path, nargs="?", const=common.RESULTS / "bert_speed.json", default=None,
                        help="also write the figures to this JSON file (alone: the committed one in "
                             "lib/attnbook/results/)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    import transformers

    load_before = os.getloadavg()[0]
    r = benchmark(args.batch, args.repeats, args.warmup, device)
    r |= {"load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)], "cpu_count": os.cpu_count(),
          "device": device.type, "torch": torch.__version__, "transformers": transformers.__version__,
          "threads": torch.get_num_threads(), "target": args.target}
    print(f"torch {r['torch']}, transformers {r['transformers']}, device {device}, {r['threads']} CPU threads; "
          f"{r['batch']} verses padded to {r['seq_len']} tokens ({r['real_tokens']} real), "
          f"{r['repeats']} interleaved repetitions; 1-minute load average {r['load_average_1min'][0]} before, "
          f"{r['load_average_1min'][1]} after, on {r['cpu_count']} CPUs")
    print(f"attnbook Bert {r['ours_ms']:8.1f} ms   transformers BertModel {r['reference_ms']:8.1f} ms   "
          f"median ratio {r['median_ratio']:.2f}x (max abs diff on real tokens {r['max_abs_diff_real_tokens']:.1e})")
    ok = r["median_ratio"] <= args.target
    print(common.verdict(r["median_ratio"], args.target))
    if args.json:
        common.write_result(args.json, r, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
