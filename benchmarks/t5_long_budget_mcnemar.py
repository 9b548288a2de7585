"""Chapter 10's longer budget, word by word: an exact McNemar test of scratch against the pretrained start.

Usage (from the repository root): the two runs of ``t5_long_budget.py`` with ``--words`` (one thread
each, about 260 CPU-seconds each), then this script on their logs:

    python benchmarks/t5_long_budget.py --arm scratch --seed 0 --checkpoints 1200 3600 --words \
        > lib/attnbook/results/t5_long_budget_words_scratch_0.log
    python benchmarks/t5_long_budget.py --arm pretrained --seed 0 --checkpoints 1200 3600 --words \
        > lib/attnbook/results/t5_long_budget_words_pretrained_0.log
    python benchmarks/t5_long_budget_mcnemar.py lib/attnbook/results/t5_long_budget_words_scratch_0.log \
        lib/attnbook/results/t5_long_budget_words_pretrained_0.log [--machine="where the runs ran"]

writes ``lib/attnbook/results/t5_long_budget_mcnemar.json``: for each checkpoint, the words only one
arm gets right (b: scratch only, c: pretrained only), the exact two-sided McNemar p (binomial on
b + c discordant words at 1/2) and the paired standard error of the WER difference. Each row's WER
is stored too, so that the chapter checks that these runs reproduce the committed ones
(``t5_long_budget.json``).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import common

COMMAND = ("python benchmarks/t5_long_budget.py --arm {scratch,pretrained} --seed 0 --checkpoints 1200 3600 "
           "--words > lib/attnbook/results/t5_long_budget_words_{arm}_0.log; python "
           "benchmarks/t5_long_budget_mcnemar.py lib/attnbook/results/t5_long_budget_words_scratch_0.log "
           "lib/attnbook/results/t5_long_budget_words_pretrained_0.log")


def exact_mcnemar(b: int, c: int) -> float:
    """Two-sided exact McNemar p: twice the smaller binomial tail of b + c trials at 1/2 (at most 1)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def compare(scratch: str, pretrained: str) -> dict:
    """Per-word outcomes ("1" right, "0" wrong) of the two arms on the same test words."""
    if len(scratch) != len(pretrained):
        raise ValueError("the two runs were scored on different test words")
    n = len(scratch)
    b = sum(s == "1" and p == "0" for s, p in zip(scratch, pretrained))  # scratch only
    c = sum(s == "0" and p == "1" for s, p in zip(scratch, pretrained))  # pretrained only
    d = [(p == "0") - (s == "0") for s, p in zip(scratch, pretrained)]  # pretrained wrong - scratch
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    return {"words": n, "scratch_only_right": b, "pretrained_only_right": c,
            "wer_difference_points": round(100 * mean, 2), "paired_se_points": round(100 * se, 2),
            "mcnemar_p": round(exact_mcnemar(b, c), 4)}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    machine = next((a.split("=", 1)[1] for a in args if a.startswith("--machine=")), common.machine())
    logs = [Path(a) for a in args if not a.startswith("--machine=")]
    rows = common.log_rows(logs)
    by = {(r["arm"], r["steps"]): r for r in rows}
    out = []
    for steps in sorted({r["steps"] for r in rows}):
        s, p = by[("scratch", steps)], by[("pretrained", steps)]
        out.append({"steps": steps, "seed": s["seed"],
                    "scratch_wer": s["g2p_wer"], "pretrained_wer": p["g2p_wer"],
                    **compare(s["correct"], p["correct"])})
    common.write_result(common.RESULTS / "t5_long_budget_mcnemar.json",
                        {"description": __doc__.splitlines()[0], "command": COMMAND,
                         "machine": machine, "threads": 1, "rows": out})
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
