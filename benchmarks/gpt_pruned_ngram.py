"""Chapter 8: is the 4-gram's win over the GPT its storage? Kneser-Ney pruned to the GPT's size.

Usage: ``python benchmarks/gpt_pruned_ngram.py`` (writes
``lib/attnbook/results/gpt_pruned_ngram.json``, which the chapter reads; under a CPU-minute, one
thread), or ``--smoke`` (seconds; writes nothing unless ``--out``).

The chapter's 4-gram (and trigram) with the chapter's discount and raw counts at window starts,
then *pruned by a count cut-off*: every stored count of order 2 and up (the top order's raw
counts, the lower orders' continuation counts, and the raw tables used at window starts) below
``c`` is dropped, and each context's total and number of types are recomputed from what is kept,
so that every distribution still sums to one (a dropped n-gram's mass goes to the back-off). For
each budget, the smallest ``c`` whose model stores no more numbers than the budget is used: the
budgets are the parameters of the width-64 GPT (136,960) and of the width-128 one (470,528). The
cut-off is chosen by storage alone; the held-out text chooses nothing. Storage counts every
stored n-gram count (the continuation tables and the raw tables); context totals, which are sums
of them, are not counted.
"""
from __future__ import annotations

import copy
import json
import math
import time

import torch

import common
from attnbook.results import load_result
from attnbook.tasks.token_stream import KneserNey
from gpt_vs_ngram import VOCAB, WINDOW, streams

BUDGETS = {"width 64": 136_960, "width 128": 470_528}  # the GPTs' parameters
CUTOFFS = tuple(range(1, 41))


def totals_and_types(table: dict) -> tuple[dict, dict]:
    totals: dict[tuple, int] = {}
    types: dict[tuple, int] = {}
    for g, c in table.items():
        totals[g[:-1]] = totals.get(g[:-1], 0) + c
        types[g[:-1]] = types.get(g[:-1], 0) + 1
    return totals, types


def stored(model: KneserNey) -> int:
    """How many n-gram counts ``model`` keeps: its Kneser-Ney tables and its raw tables."""
    return (sum(len(t) for t in model.grams.values())
            + sum(len(t) for t, _, _ in model.raw.values()))


def pruned(full: KneserNey, cutoff: int) -> KneserNey:
    """``full`` with every count of order >= 2 below ``cutoff`` dropped (renormalised)."""
    model = copy.copy(full)
    model.grams, model.context_total, model.context_types, model.raw = {}, {}, {}, {}
    for n, table in full.grams.items():
        kept = table if n == 1 else {g: c for g, c in table.items() if c >= cutoff}
        model.grams[n] = kept
        model.context_total[n], model.context_types[n] = totals_and_types(kept)
    for n, (table, _, _) in full.raw.items():
        kept = table if n == 1 else {g: c for g, c in table.items() if c >= cutoff}
        model.raw[n] = (kept, *totals_and_types(kept))
    return model


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    discount = load_result("gpt_ngram_counts.json")["discount"]
    rows = []
    for order in (3, 4):
        tick = time.process_time()
        full = KneserNey(train, VOCAB, order=order, discount=discount, raw_at_start=True)
        sizes = {c: stored(pruned(full, c)) if c > 1 else stored(full) for c in CUTOFFS}
        for budget_name, budget in BUDGETS.items():
            cutoff = min((c for c, size in sizes.items() if size <= budget), default=None)
            if cutoff is None:
                continue
            model = pruned(full, cutoff)
            losses = model.position_losses(test, WINDOW)  # (WINDOW,)
            row = {"order": order, "budget": budget_name, "budget_parameters": budget,
                   "cutoff": cutoff, "stored": sizes[cutoff],
                   "full_stored": stored(full),
                   "full_kneser_ney_tables": sum(len(t) for t in full.grams.values()),
                   "loss": losses.mean().item(),
                   "perplexity": math.exp(losses.mean().item()),
                   "position_losses": losses.tolist()}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "position_losses"}),
                  flush=True)
        print(f"order {order}: {time.process_time() - tick:.1f} CPU-seconds", flush=True)
    out = common.out_path(args, "gpt_pruned_ngram.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: Kneser-Ney trigram and 4-gram pruned by a count cut-off "
                           "to store no more counts than the GPTs have parameters, scored on "
                           "the chapter's held-out windows; written by "
                           "benchmarks/gpt_pruned_ngram.py",
            "command": common.command_line(), "discount": discount, "window": WINDOW,
            "held_out_targets": (len(test) - 1) // WINDOW * WINDOW, "runs": rows,
            "machine": common.machine()})


if __name__ == "__main__":
    main()
