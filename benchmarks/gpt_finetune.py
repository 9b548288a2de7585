"""Chapter 8, Section 8.7: a longer fine-tune, with a validation split and two learning rates.

Usage: ``python benchmarks/gpt_finetune.py`` (writes ``lib/attnbook/results/gpt_finetune.json``,
which the chapter reads), or ``python benchmarks/gpt_finetune.py --smoke`` (seconds; writes
nothing unless ``--out``).

The chapter fine-tunes its Bible GPT for 50 steps at one rate (about 1.3 passes over its 1,200
labelled verses), which cannot tell an under-trained model from a useless pre-training. This
script repeats the chapter's task with a longer, selected budget for both sides alike:

- data as in the chapter: the World English Bible, one chapter in 20 held out, the chapter's
  512-token BPE; per seed (0, 1, 2) 600 Old and 600 New Testament verses from the training
  chapters (the chapter's sample for that seed), plus a *validation* set of 200 more of each
  drawn from the training chapters, disjoint from them; the test set is the chapter's 300 + 300
  verses of the held-out chapters;
- the pre-trained side: the chapter's GPT (600 steps, seed 0, its recipe); the other side: the
  same architecture from random weights (seed as the run); each gets a linear head on the mean
  final state, AdamW (weight decay 0.01), batches of 32, gradients clipped to 1, the
  classification loss alone, for ``--steps`` steps at each of ``--lrs``;
- every 50 steps both sides are scored on the validation and the test verses; for each side and
  seed, the (rate, step) with the best validation accuracy (the earlier step, then the lower
  rate, on ties) is chosen, and its *test* accuracy is reported. The test set chooses nothing;
- every checkpoint also stores its per-verse test predictions (``test_predictions``: one
  character, 0 for the Old Testament and 1 for the New, per test verse, in the test set's order,
  with the labels as ``test_labels``), so that the chosen pre-trained and from-scratch models can
  be compared verse by verse: ``paired`` holds, per seed, the verses only the pre-trained model
  gets right (``b``) and only the one from scratch gets right (``c``), with McNemar's exact
  two-sided p-value, and a paired bootstrap (2,000 resamples of the test verses) of the mean
  over the seeds of the accuracy difference (the seeds share the test verses, so their
  discordant pairs are not pooled into one McNemar test).

One thread; no learning-rate schedule (constant rate), as in the chapter.
"""
from __future__ import annotations

import copy
import json
import math

import torch
import torch.nn.functional as F
from torch import nn

import common
from attnbook.data.bible import load_bible
from attnbook.data.bpe import train_bpe
from attnbook.layers import run_blocks
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.language_modeling import next_token_loss
from attnbook.tasks.token_stream import lm_batches
from attnbook.train import fit

WINDOW, VOCAB, TRAIN_VERSES, VALID_VERSES, EVERY = 64, 512, 600, 200, 50


def verse_batch(bpe, rows) -> tuple[torch.Tensor, torch.Tensor]:
    """Verse texts -> (B, T) ids right-padded with 0, and the (B, T) mask of real tokens."""
    ids = [bpe.encode(v.text)[:WINDOW] for v in rows]
    tokens = torch.zeros(len(ids), WINDOW, dtype=torch.long)
    for i, row in enumerate(ids):
        tokens[i, :len(row)] = torch.tensor(row)
    real = torch.arange(WINDOW) < torch.tensor([len(r) for r in ids])[:, None]
    return tokens, real


def bible_split() -> tuple[list, set, str]:
    """The chapter's verses, its held-out chapters (one in 20) and the training chapters' text."""
    verses = load_bible()
    chapters = list(dict.fromkeys((v.book, v.chapter) for v in verses))
    held_out = {c for i, c in enumerate(chapters) if i % 20 == 0}
    train_text = "\n".join(v.text for v in verses if (v.book, v.chapter) not in held_out)
    return verses, held_out, train_text


def labelled(bpe, rows) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Verses -> (tokens, real, labels): labels 0 for the Old Testament, 1 for the New."""
    return (*verse_batch(bpe, rows), torch.tensor([v.testament == "NT" for v in rows]).long())


def test_verses(verses, held_out) -> list:
    """The chapter's test verses: 300 Old and 300 New Testament verses of held-out chapters."""
    rows = []
    for testament in ("OT", "NT"):
        pool = [v for v in verses if v.testament == testament and (v.book, v.chapter) in held_out]
        rows += [pool[i] for i in torch.randperm(len(pool), generator=torch.Generator()
                                                 .manual_seed(0))[:300].tolist()]
    return rows


def seed_verses(verses, held_out, seed: int, smoke: bool) -> tuple[list, list]:
    """One seed's training verses (the chapter's draw) and the next ones, for validation."""
    gen = torch.Generator().manual_seed(seed)
    train_rows, valid_rows = [], []
    for testament in ("OT", "NT"):
        pool = [v for v in verses
                if v.testament == testament and (v.book, v.chapter) not in held_out]
        order = torch.randperm(len(pool), generator=gen).tolist()
        train_rows += [pool[i] for i in order[:TRAIN_VERSES]]
        valid_rows += [pool[i] for i in order[TRAIN_VERSES:TRAIN_VERSES + VALID_VERSES]]
    if smoke:
        train_rows, valid_rows = train_rows[::10], valid_rows[::10]
    return train_rows, valid_rows


def features(gpt: GPT, tokens: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """(B, D): the final states after the final norm, averaged over the real tokens."""
    hidden = gpt.final_norm(run_blocks(gpt.blocks, gpt.embeddings(tokens)).hidden)
    return (hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True)


def fine_tune(gpt, head, train, scored, lr, steps, seed) -> list[dict]:
    """Train ``gpt`` and ``head`` together; every EVERY steps, accuracy on each ``scored`` set."""
    tokens, real, y = train
    params = list(gpt.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    curve = []
    for step in range(1, steps + 1):
        gpt.train()
        i = torch.randint(len(y), (32,), generator=gen)
        opt.zero_grad()
        F.cross_entropy(head(features(gpt, tokens[i], real[i])), y[i]).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % EVERY == 0:
            gpt.eval()
            with torch.no_grad():
                row = {"step": step}
                for name, (t, r, labels) in scored.items():
                    predicted = head(features(gpt, t, r)).argmax(-1)
                    row[name] = round((predicted == labels).float().mean().item(), 4)
                    if name == "test":
                        row["test_predictions"] = "".join(map(str, predicted.tolist()))
            curve.append(row)
    return curve


def mcnemar_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value: b and c discordant pairs, binomial(b + c, 1/2)."""
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_tests(chosen: list[dict], labels: torch.Tensor, resamples: int = 2000) -> dict:
    """Pre-trained against from scratch, verse by verse, for each seed's chosen checkpoints."""
    right = {}  # (side, seed) -> (test,) bool: the chosen checkpoint's right answers
    for c in chosen:
        predicted = torch.tensor([int(ch) for ch in c["test_predictions"]])
        right[c["side"], c["seed"]] = predicted == labels
    seeds = sorted({c["seed"] for c in chosen})
    per_seed, diffs = [], []
    for seed in seeds:
        pre, scratch = right["pre-trained", seed], right["from scratch", seed]
        b, c = int((pre & ~scratch).sum()), int((~pre & scratch).sum())
        per_seed.append({"seed": seed, "b": b, "c": c, "p": round(mcnemar_p(b, c), 4)})
        diffs.append(pre.double() - scratch.double())  # (test,)
    diff = torch.stack(diffs).mean(0)  # (test,): the mean over seeds, per verse
    draws = torch.randint(len(diff), (resamples, len(diff)),
                          generator=torch.Generator().manual_seed(0))
    low, high = diff[draws].mean(1).quantile(torch.tensor([0.025, 0.975],
                                                          dtype=torch.float64)).tolist()
    return {"per_seed": per_seed, "mean_difference": round(diff.mean().item(), 4),
            "bootstrap_95": [round(low, 4), round(high, 4)], "resamples": resamples}


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--steps", type=int, default=300, help="fine-tuning steps per run")
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    torch.set_num_threads(1)
    verses, held_out, train_text = bible_split()
    bpe = train_bpe(train_text, VOCAB)
    stream = torch.tensor(bpe.encode(train_text))
    pre_steps = 20 if args.smoke else 600
    steps = 2 * EVERY if args.smoke else args.steps
    config = GPTConfig(vocab_size=VOCAB, max_len=WINDOW, d_model=64, num_heads=4, d_ff=256,
                       num_layers=2)
    torch.manual_seed(0)  # the chapter's pre-trained GPT: its recipe, seed 0
    pretrained = GPT(config)
    optimizer = torch.optim.AdamW(pretrained.parameters(), lr=1e-2, betas=(0.9, 0.95),
                                  weight_decay=0.01)
    fit(pretrained, lm_batches(stream, WINDOW, 64, torch.Generator().manual_seed(0)),
        next_token_loss, optimizer, pre_steps,
        scheduler=warmup_linear_scheduler(optimizer, pre_steps // 10, pre_steps), progress=False)

    test_rows = test_verses(verses, held_out)  # the chapter's test verses
    test = labelled(bpe, test_rows)
    runs = []
    for seed in args.seeds:  # the chapter's draw, then the next verses: validation
        train_rows, valid_rows = seed_verses(verses, held_out, seed, args.smoke)
        sets = {"train": labelled(bpe, train_rows), "valid": labelled(bpe, valid_rows)}
        for side in ("pre-trained", "from scratch"):
            for lr in args.lrs:
                if side == "pre-trained":
                    gpt = copy.deepcopy(pretrained)
                else:
                    torch.manual_seed(seed)
                    gpt = GPT(config)
                torch.manual_seed(seed)
                head = nn.Linear(config.d_model, 2)
                curve = fine_tune(gpt, head, sets["train"],
                                  {"valid": sets["valid"], "test": test}, lr, steps, seed)
                runs.append({"side": side, "seed": seed, "lr": lr, "curve": curve})
                print(json.dumps({**runs[-1], "curve": [  # the log leaves out predictions
                    {k: v for k, v in point.items() if k != "test_predictions"}
                    for point in curve]}), flush=True)
    chosen = []
    for side in ("pre-trained", "from scratch"):
        for seed in args.seeds:
            points = [(-p["valid"], p["step"], r["lr"], p["test"], p["test_predictions"])
                      for r in runs if r["side"] == side and r["seed"] == seed
                      for p in r["curve"]]
            valid, step, lr, test_acc, predictions = min(points)
            chosen.append({"side": side, "seed": seed, "lr": lr, "step": step,
                           "valid": -valid, "test": test_acc,
                           "test_predictions": predictions})
            print(json.dumps({k: v for k, v in chosen[-1].items()
                              if k != "test_predictions"}), flush=True)
    paired = paired_tests(chosen, test[2])
    print(json.dumps(paired), flush=True)
    out = common.out_path(args, "gpt_finetune.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8, Section 8.7: the Bible GPT fine-tuned and the same "
                           "architecture from scratch, on which testament a verse is from, "
                           "each with its rate and step chosen on a validation split; written "
                           "by benchmarks/gpt_finetune.py",
            "train_verses": len(train_rows), "valid_verses": len(valid_rows),
            "test_verses": len(test_rows), "steps": steps, "lrs": args.lrs,
            "eval_every": EVERY, "batch": 32, "pretraining_steps": pre_steps,
            "test_labels": "".join(map(str, test[2].tolist())),
            "runs": runs, "chosen": chosen, "paired": paired, "machine": common.machine()})


if __name__ == "__main__":
    main()
