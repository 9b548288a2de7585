"""Chapter 4's neighbours task with narrow heads, trained longer than the chapter's 600 steps.

Usage (from the repository root):
``python benchmarks/narrow_heads.py [--heads 64 32] [--seeds 0 1] [--steps 2400] [--jobs 2]``
``python benchmarks/narrow_heads.py --heads 64 --seeds 2 3 4 5 --steps 2400 --jobs 2 --add``
(more seeds into the same results file: its six H = 64 seeds are exercise ex-ch04-heads's range)
``python benchmarks/narrow_heads.py --hidden 64 --heads 1 2 --seeds 0 1 --steps 3600 \
--eval-every 600 --out lib/attnbook/results/mlp_readout.json`` (section 4.6's MLP read-outs)

The set-up is the chapter's section 4.6 exactly (12 letters out of 16, width D = 64, sinusoidal
positions, one attention layer, two linear read-outs, Adam at 3e-3, batches of 64, the test set of
2,000 sequences drawn with seed 123), one thread per run. Every ``--eval-every`` steps it scores
the share of interior positions (1 .. T-2, two answers each) with both answers right, so a run
shows whether the 600-step figure of exercise ex-ch04-heads is where training ends or where it
was stopped. ``--hidden n`` replaces the linear read-outs by the chapter's MLP read-out,
``Linear(D, n)``, ReLU, ``Linear(n, 2V)`` (section 4.6's "head or read-out?" test), so the
600-step figure there can be compared with longer training. Each run prints one JSON line; the
results file collects them.
"""
from __future__ import annotations

import json
import sys

import torch
from torch import nn

import common
from attnbook.data.synthetic import neighbours_task, task_batches
from attnbook.env import seed_everything
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_loss
from attnbook.train import fit

SEQ_LEN, VOCAB, WIDTH, LR = 12, 16, 64, 3e-3


def interior_both_right(model, tokens, targets) -> float:
    with torch.no_grad():
        named = model(tokens).argmax(-1)[:, 1:-1]  # (B, T-2, 2)
    return (named == targets[:, 1:-1]).all(-1).float().mean().item()


def train_on_neighbours(build, seed: int, steps: int, eval_every: int) -> tuple[nn.Module, dict, float]:
    """``build()`` (called after seeding) trained on the neighbours task with the page's recipe:
    the model, its interior both-right curve ``{step: share}`` and the mean loss of the last 50 steps."""
    torch.set_num_threads(1)
    tokens, targets = neighbours_task(2000, SEQ_LEN, VOCAB, torch.Generator().manual_seed(123))
    gen = seed_everything(seed)
    model = build()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    batches = task_batches(neighbours_task, 64, SEQ_LEN, VOCAB, gen, "cpu")
    history = fit(model, batches, tagging_loss, optimizer, steps, progress=False,
                  eval_fn=lambda m: {"both_right": interior_both_right(m, tokens, targets)},
                  eval_every=eval_every)
    curve = {str(step): round(value, 4) for step, value in history.metrics["both_right"]}
    last = history.losses[-50:]  # the mean loss of the last 50 steps
    return model, curve, round(sum(last) / len(last), 4)


def run(num_heads: int, seed: int, steps: int, eval_every: int, hidden: int | None = None) -> dict:
    def build() -> nn.Module:
        model = SelfAttentionTagger(VOCAB, WIDTH, num_heads, SEQ_LEN, positional="sinusoidal",
                                    num_outputs=2)
        if hidden:  # as the chapter's train_neighbours(hidden=n)
            model.readout = nn.Sequential(nn.Linear(WIDTH, hidden), nn.ReLU(),
                                          nn.Linear(hidden, 2 * VOCAB))
        return model

    _, curve, loss = train_on_neighbours(build, seed, steps, eval_every)
    row = {"heads": num_heads, "head_dim": WIDTH // num_heads, "seed": seed,
           "readout": f"MLP, hidden {hidden}" if hidden else "linear", "both_right": curve,
           "loss_last_50_steps": loss}
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--heads", type=int, nargs="+", default=[64, 32])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--steps", type=int, default=2400)
    p.add_argument("--eval-every", type=int, default=600)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--hidden", type=int, default=None, help="MLP read-outs of this width")
    p.add_argument("--out", default=str(common.RESULTS / "narrow_heads.json"))
    p.add_argument("--add", action="store_true",
                   help="keep the runs already in --out (a run of the same heads, seed and read-out "
                        "is replaced) and add these; the file's command then names both")
    args = p.parse_args(argv)
    jobs = [(h, s, args.steps, args.eval_every, args.hidden) for h in args.heads for s in args.seeds]
    rows = common.run_jobs(run, jobs, args.jobs)
    out = common.Path(args.out)
    result = {"description": __doc__.splitlines()[0],
              "machine": common.machine(args.jobs if args.jobs > 1 else None), "runs": rows}
    if args.add and out.is_file():
        result = merged(json.loads(out.read_text()), result, common.command_line())
    common.write_result(out, result)
    return 0


def merged(old: dict, new: dict, command: str) -> dict:
    """``old``'s runs with ``new``'s added (the same heads, seed and read-out: ``new`` wins), sorted
    by heads (most first), read-out and seed; the command names both runs."""
    key = lambda r: (r["heads"], r["seed"], r.get("readout", "linear"))
    runs = {key(r): {**r, "readout": r.get("readout", "linear")} for r in old["runs"]}
    runs.update({key(r): r for r in new["runs"]})
    order = sorted(runs, key=lambda k: (-k[0], k[2], k[1]))
    machines = dict.fromkeys([old.get("machine"), new["machine"]])
    return {"description": new["description"], "command": f"{old['command']}; then {command}",
            "machine": "; ".join(m for m in machines if m), "runs": [runs[k] for k in order]}


if __name__ == "__main__":
    sys.exit(main())
