"""Chapter 4's neighbours task over three seeds: H = 2, 4, 8 with head ablation, and the scale controls.

Usage (from the repository root):
``python benchmarks/heads_seeds.py [--heads 2 4 8] [--seeds 0 1 2] [--jobs 2]``
(``--steps 4 --out FILE``: a run of seconds, for the tests)

The set-up is the chapter's section 4.6 exactly (12 letters out of 16, width D = 64, sinusoidal
positions, one attention layer, two linear read-outs, Adam at 3e-3, batches of 64, 600 steps, the
test set of 2,000 sequences drawn with seed 123), one thread per run. For every H and seed it
records the share of interior positions with both answers right, the same share with each head
zeroed in turn at ``out_proj``'s input (the chapter's ``without_head``), the key offset each head
weights most (mean weight over 500 test sequences, offsets -3 .. 3), and the first step at which
the loss, averaged over 20 steps, falls below 0.1.

For H = 8 it also trains four variants of the scale of section 4.1, the same seeds:
``sqrt(Dh)`` (the paper's), ``sqrt(D)`` (every query divided by a further sqrt(H) at every step,
by a forward hook on ``q_proj``), and two controls that separate the start from the whole run:
``sqrt(D), W^Q started sqrt(H) larger`` (the sqrt(D) model whose initial W^Q and bias are
multiplied by sqrt(H): at step 0 its scores equal the sqrt(Dh) model's, afterwards every query is
still divided by sqrt(H)) and ``sqrt(Dh), W^Q started sqrt(H) smaller`` (the paper's scale whose
initial W^Q and bias are divided by sqrt(H): it starts at the sqrt(D) model's scores and trains
with the paper's scale from there). Two more test the remaining explanation, that under Adam the
sqrt(D) model trains W^Q at a sqrt(H) times smaller effective learning rate: ``sqrt(D), W^Q
learning rate x sqrt(H)`` (the sqrt(D) model from its own start, with W^Q and its bias in an Adam
group of learning rate sqrt(H) x 3e-3) and ``sqrt(D), W^Q started sqrt(H) larger, learning rate x
sqrt(H)`` (both undone: up to Adam's epsilon and rounding, the sqrt(Dh) model reparametrised).
Each run prints one JSON line; the results file collects them.
"""
from __future__ import annotations

import json
import math
import sys

import torch

import common
from attnbook.data.synthetic import neighbours_task, task_batches
from attnbook.env import seed_everything
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_loss
from attnbook.train import fit

SEQ_LEN, VOCAB, WIDTH, LR, STEPS = 12, 16, 64, 3e-3, 600
# name -> (divide every query by sqrt(H) at every step, factor on the initial W^Q and bias,
#          factor on the learning rate of W^Q and its bias)
SCALES = {
    "sqrt(Dh)": (False, 1.0, 1.0),
    "sqrt(D)": (True, 1.0, 1.0),
    "sqrt(D), W^Q started sqrt(H) larger": (True, "sqrt(H)", 1.0),
    "sqrt(Dh), W^Q started sqrt(H) smaller": (False, "1/sqrt(H)", 1.0),
    "sqrt(D), W^Q learning rate x sqrt(H)": (True, 1.0, "sqrt(H)"),
    "sqrt(D), W^Q started sqrt(H) larger, learning rate x sqrt(H)": (True, "sqrt(H)", "sqrt(H)"),
}


def loss_below(losses: list[float], level: float = 0.1, window: int = 20) -> int | None:
    """The first step at which the mean loss of the last ``window`` steps is below ``level``."""
    return next((s for s in range(window, len(losses) + 1)
                 if sum(losses[s - window:s]) / window < level), None)


def interior_both_right(model, tokens, targets) -> float:
    with torch.no_grad():
        named = model(tokens).argmax(-1)[:, 1:-1]  # (B, T-2, 2)
    return (named == targets[:, 1:-1]).all(-1).float().mean().item()


def without_head(model, num_heads: int, head: int, tokens, targets) -> float:
    """Both right with head ``head``'s Dh columns zeroed at out_proj's input."""
    head_dim = WIDTH // num_heads
    cols = torch.arange(head * head_dim, (head + 1) * head_dim)
    hook = model.attention.out_proj.register_forward_pre_hook(
        lambda module, args: (args[0].index_fill(-1, cols, 0.0),))
    try:
        return interior_both_right(model, tokens, targets)
    finally:
        hook.remove()


def peaks(model, tokens, offsets=(-3, -2, -1, 0, 1, 2, 3)) -> list[list]:
    """For each head, [the offset j - i it weights most, its mean weight there]."""
    with torch.no_grad():
        _, w = model(tokens, need_weights=True)  # (B, H, T, T)
    T = tokens.shape[1]
    profile = {}
    for d in offsets:
        i = torch.arange(max(0, -d), T - max(0, d))
        profile[d] = w[:, :, i, i + d].mean(dim=(0, 2))  # (H,)
    heads = w.shape[1]
    best = [max(offsets, key=lambda d: profile[d][h].item()) for h in range(heads)]
    return [[d, round(profile[d][h].item(), 3)] for h, d in enumerate(best)]


def run(num_heads: int, seed: int, scale: str, steps: int) -> dict:
    torch.set_num_threads(1)
    tokens, targets = neighbours_task(2000, SEQ_LEN, VOCAB, torch.Generator().manual_seed(123))
    gen = seed_everything(seed)
    model = SelfAttentionTagger(VOCAB, WIDTH, num_heads, SEQ_LEN, positional="sinusoidal",
                                num_outputs=2)
    divide, start, lr_factor = SCALES[scale]
    extra = math.sqrt(num_heads)
    if divide:  # scores / sqrt(D): every query divided by a further sqrt(H)
        model.attention.q_proj.register_forward_hook(lambda m, i, out: out / extra)
    if start != 1.0:  # the initial W^Q and its bias, times sqrt(H) or 1/sqrt(H)
        factor = extra if start == "sqrt(H)" else 1 / extra
        with torch.no_grad():
            model.attention.q_proj.weight.mul_(factor)
            model.attention.q_proj.bias.mul_(factor)
    if lr_factor == 1.0:
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    else:  # W^Q and its bias at sqrt(H) x the learning rate, the rest at LR
        q_params = list(model.attention.q_proj.parameters())
        ids = {id(t) for t in q_params}
        rest = [t for t in model.parameters() if id(t) not in ids]
        optimizer = torch.optim.Adam([{"params": rest},
                                      {"params": q_params, "lr": LR * extra}], lr=LR)
    batches = task_batches(neighbours_task, 64, SEQ_LEN, VOCAB, gen, "cpu")
    history = fit(model, batches, tagging_loss, optimizer, steps, progress=False)
    row = {"heads": num_heads, "seed": seed, "scale": scale, "steps": steps,
           "both_right": round(interior_both_right(model, tokens, targets), 4),
           "loss_below_0.1_from_step": loss_below(history.losses)}
    if scale == "sqrt(Dh)":
        row["one_head_zeroed"] = [round(without_head(model, num_heads, h, tokens, targets), 4)
                                  for h in range(num_heads)]
        row["peaks"] = peaks(model, tokens[:500])
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = common.parser(__doc__)
    p.add_argument("--heads", type=int, nargs="+", default=[2, 4, 8])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--scale-heads", type=int, default=8, help="H of the scale controls")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--steps", type=int, default=STEPS, help=f"training steps (the chapter's: {STEPS})")
    p.add_argument("--out", default=str(common.RESULTS / "heads_seeds.json"))
    args = p.parse_args(argv)
    jobs = [(h, s, "sqrt(Dh)", args.steps) for h in args.heads for s in args.seeds]
    jobs += [(args.scale_heads, s, name, args.steps) for name in list(SCALES)[1:] for s in args.seeds]
    rows = common.run_jobs(run, jobs, args.jobs)
    common.write_result(common.Path(args.out), {
        "description": __doc__.splitlines()[0],
        "machine": common.machine(args.jobs if args.jobs > 1 else None), "runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
