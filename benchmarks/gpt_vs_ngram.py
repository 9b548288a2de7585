"""Chapter 8's counting baselines: the chapter's GPT trained longer against Kneser-Ney n-grams.

Usage: ``python benchmarks/gpt_vs_ngram.py [--steps 3000]`` (writes
``lib/attnbook/results/gpt_vs_ngram.json``, which the chapter reads), or
``python benchmarks/gpt_vs_ngram.py --smoke`` (seconds; writes nothing unless ``--out``).

Same data as the chapter: the World English Bible with one chapter in 20 held out, the
chapter's 512-token byte-level BPE, the held-out targets of windows of 64. Baselines:
interpolated Kneser-Ney of orders 2 to 5, each discount chosen on the last tenth of the
training text (never on the held-out text). The GPT: the chapter's configuration and recipe
(AdamW at 1e-2, betas 0.9/0.95, weight decay 0.01, batch 64, 10% warm-up then linear decay,
seed 0), with the schedule stretched over ``--steps`` steps; its held-out perplexity is
measured every tenth of the run. One thread.

``python benchmarks/gpt_vs_ngram.py --seed-spread --steps 600 --seeds 1 2`` instead trains the
chapter's 600-step run again with other seeds (seed s draws the weights and the batches) and
writes ``gpt_seed_spread.json``: how far the chapter's one-seed perplexity can move by seed.

``python benchmarks/gpt_vs_ngram.py --lr-sweep --steps 600 --lrs 3e-3 1e-2 2e-2 --jobs 3``
chooses the GPT's peak learning rate as the n-gram discounts are chosen: each rate trains the
chapter's 600-step run (seed 0) on the first nine tenths of the training stream and is scored on
the windows of its last tenth (the *dev* perplexity, which picks the rate); the held-out text is
never used to choose. It writes ``gpt_lr_sweep.json`` (the held-out perplexity of each dev-trained
run is stored beside it for the record, not for the choice). Each ``--lrs`` value is an
independent run; a run with some values merges them into an existing file.

``python benchmarks/gpt_vs_ngram.py --window 16 --steps 600`` trains the chapter's 600-step run
(seed 0, peak rate 1e-2) on windows of 16 instead of 64, in batches of 256 windows (the same
4,096 training tokens per step), scores it on the held-out windows of 16, and writes
``gpt_window16.json``: the stored answer of the chapter's predict-then-measure exercise.

``python benchmarks/gpt_vs_ngram.py --discounts`` chooses the discount of the chapter's
Kneser-Ney trigram (``raw_at_start=True``, as the chapter counts) from ``--grid``: each discount
counts on the training stream's first nine tenths and is scored on the windows of its last tenth
(``fit_kneser_ney``'s rule; the held-out text chooses nothing). With that discount it then counts
the Kneser-Ney 5-gram on the whole training stream, exactly as the chapter's 4-gram, and stores its
loss at each of the 64 positions of the held-out windows. It writes ``gpt_ngram_counts.json``,
which the chapter reads instead of fitting the grid and the 5-gram itself (about two thirds of
its counting time; the chapter still counts the trigram and the 4-gram, which it samples from).
"""
from __future__ import annotations

import json
import math

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data.bible import load_bible
from attnbook.data.bpe import train_bpe
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.tasks.token_stream import (
    KneserNey, fit_kneser_ney, lm_batches, model_loss, position_losses,
)
from attnbook.train import fit

WINDOW, VOCAB = 64, 512


def streams(smoke: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The chapter's training and held-out token streams (a slice of each with ``smoke``)."""
    verses = load_bible()
    chapters = list(dict.fromkeys((v.book, v.chapter) for v in verses))
    held_out = {c for i, c in enumerate(chapters) if i % 20 == 0}
    train_text = "\n".join(v.text for v in verses if (v.book, v.chapter) not in held_out)
    test_text = "\n".join(v.text for v in verses if (v.book, v.chapter) in held_out)
    bpe = train_bpe(train_text, VOCAB)
    train, test = torch.tensor(bpe.encode(train_text)), torch.tensor(bpe.encode(test_text))
    return (train[:20000], test[:3000]) if smoke else (train, test)


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=3000, help="GPT training steps")
    parser.add_argument("--seed-spread", action="store_true",
                        help="only train the GPT, once per --seeds, and write gpt_seed_spread.json")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lr-sweep", action="store_true",
                        help="only train the GPT (seed 0), once per --lrs, and write gpt_lr_sweep.json")
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-3, 2e-2])
    parser.add_argument("--window", type=int, default=None,
                        help="only train the GPT (seed 0) on windows of this length, batch "
                             "64 * 64 / window, and write gpt_window{N}.json")
    parser.add_argument("--discounts", action="store_true",
                        help="only choose the chapter's trigram discount from --grid on the "
                             "training text's last tenth, count the 5-gram with it, and write "
                             "gpt_ngram_counts.json")
    parser.add_argument("--grid", type=float, nargs="+", default=[0.75, 0.9, 0.95])
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    steps = 20 if args.smoke else args.steps
    if args.seed_spread:
        seed_spread(args, train, test, steps)
        return
    if args.lr_sweep:
        lr_sweep(args, train, test, steps)
        return
    if args.window is not None:
        short_window(args, train, test, steps)
        return
    if args.discounts:
        discounts(args, train, test)
        return
    ngrams = {}
    for order in (2, 3, 4, 5):
        kn, discount = fit_kneser_ney(train, VOCAB, order)
        ngrams[str(order)] = {"discount": discount,
                              "perplexity": round(math.exp(kn.held_out_loss(test, WINDOW)), 3)}
        print(json.dumps({"order": order, **ngrams[str(order)]}), flush=True)
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    torch.manual_seed(0)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.01)
    batches = lm_batches(train, WINDOW, 64, torch.Generator().manual_seed(0))

    def held_out(m: torch.nn.Module) -> dict[str, float]:
        row = {"perplexity": math.exp(model_loss(m, test, WINDOW))}
        print(json.dumps(row), flush=True)
        return row

    seconds, history = common.timed(lambda: fit(
        model, batches, next_token_loss, optimizer, steps,
        scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps),
        eval_fn=held_out, eval_every=max(1, steps // 10), progress=False), torch.device("cpu"))
    curve = [{"step": s, "perplexity": round(p, 3)} for s, p in history.metrics["perplexity"]]
    out = common.out_path(args, "gpt_vs_ngram.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: held-out perplexity of Kneser-Ney n-grams (orders 2-5) and "
                           "of the chapter's GPT trained for longer; written by "
                           "benchmarks/gpt_vs_ngram.py",
            "gpt": {**config.__dict__, "parameters": count_parameters(model), "steps": steps,
                    "train_seconds": round(seconds, 1), "curve": curve,
                    "position_losses": [round(x, 4) for x in position_losses(model, test, WINDOW).tolist()]},
            "kneser_ney": ngrams, "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
            "machine": common.machine()})


def discounts(args, train: torch.Tensor, test: torch.Tensor) -> None:
    """The chapter's trigram discount: each of ``--grid`` counted on the training stream's
    first nine tenths (raw counts at window starts) and scored on its last tenth; then the
    5-gram with that discount, on the whole training stream, scored on the held-out windows."""
    cut = len(train) * 9 // 10
    rows = []
    for discount in args.grid:
        model = KneserNey(train[:cut], VOCAB, order=3, discount=discount, raw_at_start=True)
        loss = model.held_out_loss(train[cut:], WINDOW)
        rows.append({"discount": discount, "dev_loss": round(loss, 5),
                     "dev_perplexity": round(math.exp(loss), 3)})
        print(json.dumps(rows[-1]), flush=True)
    chosen = min(rows, key=lambda r: r["dev_loss"])["discount"]
    # the same rule as fit_kneser_ney, which the chapter used to run itself
    assert chosen == fit_kneser_ney(train, VOCAB, 3, tuple(args.grid), WINDOW,
                                    raw_at_start=True)[1]
    fivegram = KneserNey(train, VOCAB, order=5, discount=chosen, raw_at_start=True)
    losses = fivegram.position_losses(test, WINDOW)  # (WINDOW,)
    print(json.dumps({"order": 5, "perplexity": math.exp(losses.mean().item())}), flush=True)
    out = common.out_path(args, "gpt_ngram_counts.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: the Kneser-Ney trigram's discount, chosen on the last "
                           "tenth of the training text (counts from its first nine tenths, raw "
                           "counts at window starts), and the 5-gram counted with it on the "
                           "whole training text, scored on the held-out windows; written by "
                           "benchmarks/gpt_vs_ngram.py",
            "window": WINDOW, "dev_targets": (len(train) - cut - 1) // WINDOW * WINDOW,
            "discount_runs": rows, "discount": chosen,
            "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
            "fivegram_position_losses": losses.tolist(), "machine": common.machine()})


def _dev_run(train: torch.Tensor, test: torch.Tensor, steps: int, lr: float) -> dict:
    """One rate of the sweep: trained on the training stream's first nine tenths, scored on
    its last tenth (dev) and, for the record only, on the held-out text."""
    torch.set_num_threads(1)
    cut = len(train) * 9 // 10
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    torch.manual_seed(0)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    batches = lm_batches(train[:cut], WINDOW, 64, torch.Generator().manual_seed(0))
    seconds, _ = common.timed(lambda: fit(
        model, batches, next_token_loss, optimizer, steps,
        scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps), progress=False),
        torch.device("cpu"))
    row = {"lr": lr, "seed": 0,
           "dev_perplexity": round(math.exp(model_loss(model, train[cut:], WINDOW)), 3),
           "held_out_perplexity": round(math.exp(model_loss(model, test, WINDOW)), 3),
           "train_seconds": round(seconds, 1)}
    print(json.dumps(row), flush=True)
    return row


def lr_sweep(args, train: torch.Tensor, test: torch.Tensor, steps: int) -> None:
    """The chapter's 600-step run (seed 0) at several peak rates, chosen on the dev tenth."""
    out = common.out_path(args, "gpt_lr_sweep.json")
    old = json.loads(out.read_text()) if out is not None and out.exists() else None
    keep = old is not None and "dev_targets" in old  # an older file scored on the held-out text
    runs = [r for r in (old["runs"] if keep else []) if r["lr"] not in args.lrs]
    commands = old["command"].split(" && ") if keep else []
    runs += common.run_jobs(_dev_run, [(train, test, steps, lr) for lr in args.lrs], args.jobs)
    cut = len(train) * 9 // 10
    if out is not None:
        best = min(runs, key=lambda r: r["dev_perplexity"])["lr"]
        common.write_result(out, {
            "description": "Chapter 8: the chapter's GPT and 600-step recipe (seed 0) at several "
                           "peak learning rates, trained on the training stream's first nine "
                           "tenths and scored on its last tenth (dev perplexity, which chooses "
                           "the rate; the held-out perplexity is stored for the record only); "
                           "written by benchmarks/gpt_vs_ngram.py --lr-sweep",
            "command": " && ".join(commands + [common.command_line()]), "steps": steps,
            "runs": sorted(runs, key=lambda r: r["lr"]), "chosen_lr": best,
            "dev_targets": (len(train) - cut - 1) // WINDOW * WINDOW,
            "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
            "machine": common.machine(args.jobs if args.jobs > 1 else None)})


def short_window(args, train: torch.Tensor, test: torch.Tensor, steps: int) -> None:
    """The chapter's 600-step run (seed 0) on windows of ``args.window``, the same tokens per step."""
    window = args.window
    batch = 64 * WINDOW // window  # the same 4,096 training tokens per step
    config = GPTConfig(vocab_size=VOCAB, max_len=window, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    torch.manual_seed(0)
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.01)
    batches = lm_batches(train, window, batch, torch.Generator().manual_seed(0))
    seconds, _ = common.timed(lambda: fit(
        model, batches, next_token_loss, optimizer, steps,
        scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps), progress=False),
        torch.device("cpu"))
    row = {"window": window, "batch": batch, "seed": 0, "lr": 1e-2, "steps": steps,
           "perplexity": round(math.exp(model_loss(model, test, window)), 3),
           "train_seconds": round(seconds, 1)}
    print(json.dumps(row), flush=True)
    out = common.out_path(args, f"gpt_window{window}.json")
    if out is not None:
        common.write_result(out, {
            "description": f"Chapter 8: the chapter's GPT and 600-step recipe (seed 0) trained on "
                           f"windows of {window} (batch {batch}: the same tokens per step) and "
                           f"scored on the held-out windows of {window}; written by "
                           "benchmarks/gpt_vs_ngram.py --window",
            "command": common.command_line(), **row,
            "held_out_targets": (len(test) - 1) // window * window, "machine": common.machine()})


def seed_spread(args, train: torch.Tensor, test: torch.Tensor, steps: int) -> None:
    """The chapter's GPT and recipe over ``steps`` steps, once per seed: held-out perplexity."""
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    runs = []
    for seed in args.seeds:
        torch.manual_seed(seed)
        model = GPT(config)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95),
                                      weight_decay=0.01)
        batches = lm_batches(train, WINDOW, 64, torch.Generator().manual_seed(seed))
        seconds, _ = common.timed(lambda: fit(
            model, batches, next_token_loss, optimizer, steps,
            scheduler=warmup_linear_scheduler(optimizer, steps // 10, steps), progress=False),
            torch.device("cpu"))
        runs.append({"seed": seed, "perplexity": round(math.exp(model_loss(model, test, WINDOW)), 3),
                     "train_seconds": round(seconds, 1)})
        print(json.dumps(runs[-1]), flush=True)
    out = common.out_path(args, "gpt_seed_spread.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: the chapter's GPT and 600-step recipe trained with other "
                           "seeds (the seed draws the weights and the batches); held-out "
                           "perplexity; written by benchmarks/gpt_vs_ngram.py --seed-spread",
            "command": common.command_line(), "steps": steps, "runs": runs, "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
            "machine": common.machine()})


if __name__ == "__main__":
    main()
