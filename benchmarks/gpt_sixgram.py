"""Chapter 8: does counting keep improving past the 5-gram? The Kneser-Ney 6-gram.

Usage: ``python benchmarks/gpt_sixgram.py`` (writes ``lib/attnbook/results/gpt_sixgram.json``,
which the chapter reads), or ``python benchmarks/gpt_sixgram.py --smoke`` (seconds; writes
nothing unless ``--out``).

Same data, tokenizer, held-out windows and counting as the chapter's 4-gram and the stored
5-gram (``benchmarks/gpt_vs_ngram.py --discounts``): interpolated Kneser-Ney with raw counts at
window starts and the discount stored in ``gpt_ngram_counts.json`` (chosen for the trigram on the
training text's last tenth; the held-out text chooses nothing), here with order 6. One thread.
"""
from __future__ import annotations

import json
import math
import time

import torch

import common
from attnbook.results import load_result
from attnbook.tasks.token_stream import KneserNey
from gpt_vs_ngram import VOCAB, WINDOW, streams


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    discount = load_result("gpt_ngram_counts.json")["discount"]
    tick = time.process_time()
    sixgram = KneserNey(train, VOCAB, order=6, discount=discount, raw_at_start=True)
    losses = sixgram.position_losses(test, WINDOW)  # (WINDOW,)
    cpu = time.process_time() - tick
    row = {"order": 6, "discount": discount, "perplexity": math.exp(losses.mean().item()),
           "cpu_seconds_count_and_score": round(cpu, 1)}
    print(json.dumps(row), flush=True)
    out = common.out_path(args, "gpt_sixgram.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: the Kneser-Ney 6-gram, counted on the whole training "
                           "text with the chapter's discount (raw counts at window starts) and "
                           "scored on the held-out windows; written by benchmarks/gpt_sixgram.py",
            "window": WINDOW, "held_out_targets": (len(test) - 1) // WINDOW * WINDOW, **row,
            "sixgram_position_losses": losses.tolist(), "machine": common.machine()})


if __name__ == "__main__":
    main()
