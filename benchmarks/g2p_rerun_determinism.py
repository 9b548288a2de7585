"""Are same-seed reruns of Chapter 5's G2P Transformer bit-identical? The first training losses compared.

Usage: ``python benchmarks/g2p_rerun_determinism.py [--old-commit SHA]`` writes
``lib/attnbook/results/g2p_rerun_determinism.json`` (Chapter 5's appendix reads it); ``--smoke``
runs 3 steps and writes nothing unless ``--out`` is given.

Chapter 5's ``g2p_transformer_recipes.py`` repeated two of ``g2p_compare.py``'s pre-norm runs
(same model, recipe, seed and batches, one thread) and got test WERs 0.51 and 0.15 points apart.
Each run here trains that Transformer (D=64, 2+2 layers, pre-norm, peak 3e-3, warm-up 100 then
linear decay over 1,200 steps, smoothing 0.1, batches of 128) for the first ``--steps`` steps, in a
fresh one-thread process, and records every loss, hashes of the initial and trained weights, a
hash of all 1,200 batches of the full run (it crosses an epoch boundary) and a hash of the greedy
outputs on the first 1,000 test words after the short run:

- ``recipes path`` twice: ``torch.manual_seed`` then ``train_g2p`` (as the rerun script did);
- ``compare path``: ``seed_everything`` then ``fit`` on ``iterate_batches`` (as g2p_compare.py did);
- with ``--old-commit``, the compare path again with the library as committed with the original
  runs' log, and with ``--rerun-commit`` the recipes path with the library as committed with the
  reruns (``git archive`` of ``lib/`` at that commit, put first on ``PYTHONPATH``).

The runs are compared bit for bit (``float.hex``). About two CPU-minutes at 50 steps.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PEAK_LR, WARMUP, TOTAL, BATCH, SMOOTHING, CLIP = 3e-3, 100, 1200, 128, 0.1, 1.0
EVAL_WORDS = 1000  # test words decoded greedily after the short run


def child(path: str, seed: int, steps: int) -> dict:
    """One run in this process: the first ``steps`` losses and a hash of the initial weights."""
    import torch

    import attnbook
    from attnbook.data import build_vocabs, iterate_batches, load_g2p
    from attnbook.models.transformer import Transformer, TransformerConfig
    from attnbook.schedules import warmup_linear_scheduler
    from attnbook.tasks.g2p import g2p_loss

    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    if path == "recipes":
        torch.manual_seed(seed)
    else:
        from attnbook.env import seed_everything
        seed_everything(seed)
    config = TransformerConfig(len(src_vocab), len(tgt_vocab), d_model=64, num_heads=4, d_ff=256,
                               dropout=0.0, norm_first=True)
    model = Transformer(config)
    digest = hashlib.sha256()  # of the weights' values only (module names changed between versions)
    for blob in sorted(p.detach().numpy().tobytes() for p in model.parameters()):
        digest.update(blob)
    optimizer = torch.optim.Adam(model.parameters(), lr=PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
    scheduler = warmup_linear_scheduler(optimizer, WARMUP, TOTAL)
    if path == "recipes":
        from attnbook.tasks.g2p import G2PRecipe, train_g2p
        recipe = G2PRecipe(steps=steps, batch_size=BATCH, lr=PEAK_LR, label_smoothing=SMOOTHING, seed=seed)
        losses = train_g2p(model, data, src_vocab, tgt_vocab, recipe, optimizer=optimizer,
                           scheduler=scheduler, progress=False).losses
    else:
        from attnbook.train import fit
        batches = iterate_batches(data.train, src_vocab, tgt_vocab, BATCH, torch.Generator().manual_seed(seed))
        losses = fit(model, batches, lambda m, b: g2p_loss(m, b, tgt_vocab.pad_id, SMOOTHING), optimizer,
                     steps, clip_norm=CLIP, scheduler=scheduler, progress=False).losses
    trained = hashlib.sha256()
    for blob in sorted(p.detach().numpy().tobytes() for p in model.parameters()):
        trained.update(blob)
    # every batch of the full 1,200-step run, hashed (the original runs crossed an epoch boundary)
    order = hashlib.sha256()
    all_batches = iterate_batches(data.train, src_vocab, tgt_vocab, BATCH, torch.Generator().manual_seed(seed))
    for _ in range(TOTAL):
        b = next(all_batches)
        for t in (b.src, b.src_lengths, b.tgt_in, b.tgt_out):
            order.update(t.numpy().tobytes())
    from attnbook.tasks.g2p import evaluate_g2p
    decoded = evaluate_g2p(model, data.test[:EVAL_WORDS], src_vocab, tgt_vocab)
    return {"library": str(Path(attnbook.__file__).parent), "torch": torch.__version__,
            "initial_weights_sha256": digest.hexdigest()[:16], "trained_weights_sha256": trained.hexdigest()[:16],
            "batches_sha256": order.hexdigest()[:16],
            "greedy_test_sha256": hashlib.sha256(repr(decoded.predictions).encode()).hexdigest()[:16],
            "losses": [float(x).hex() for x in losses]}


def run(path: str, seed: int, steps: int, lib: Path | None = None) -> dict:
    """``child`` in a fresh process (``lib`` first on the path when given)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if lib is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(lib), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, __file__, "--child", path, "--seed", str(seed), "--steps", str(steps)],
                         env=env, check=True, capture_output=True, text=True, cwd=Path(__file__).parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(a: dict, b: dict) -> dict:
    """Bit-for-bit comparison of two runs' losses."""
    la, lb = ([float.fromhex(x) for x in r["losses"]] for r in (a, b))
    differ = [i for i, (x, y) in enumerate(zip(la, lb)) if x != y]
    return {"same_initial_weights": a["initial_weights_sha256"] == b["initial_weights_sha256"],
            "same_trained_weights": a["trained_weights_sha256"] == b["trained_weights_sha256"],
            "same_1200_batches": a["batches_sha256"] == b["batches_sha256"],
            "same_greedy_test_outputs": a["greedy_test_sha256"] == b["greedy_test_sha256"],
            "identical_losses": not differ and len(la) == len(lb),
            "first_differing_step": differ[0] + 1 if differ else None,
            "max_abs_difference": max((abs(x - y) for x, y in zip(la, lb)), default=0.0),
            f"difference_at_step_{len(la)}": abs(la[-1] - lb[-1])}


def main() -> None:
    import common  # not in the child processes: an older library may lack what common imports

    parser = common.parser(__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--old-commit", default=None, help="also run the compare path with lib/ at this commit")
    parser.add_argument("--rerun-commit", default=None, help="also run the recipes path with lib/ at this commit")
    parser.add_argument("--smoke", action="store_true", help="3 steps; writes only with --out")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    steps = 3 if args.smoke else args.steps
    runs = {"recipes path, run 1": run("recipes", args.seed, steps),
            "recipes path, run 2": run("recipes", args.seed, steps),
            "compare path": run("compare", args.seed, steps)}
    pairs = {"recipes run 1 vs run 2": ("recipes path, run 1", "recipes path, run 2"),
             "recipes path vs compare path": ("recipes path, run 1", "compare path")}
    for commit, path, against, label in (
            (args.old_commit, "compare", "compare path", "the original runs' lib (compare path)"),
            (args.rerun_commit, "recipes", "recipes path, run 1", "the reruns' lib (recipes path)")):
        if not commit:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(["git", "archive", commit, "lib"], cwd=common.ROOT, check=True,
                                     capture_output=True).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            name = f"{path} path, lib at {commit[:8]}"
            runs[name] = run(path, args.seed, steps, Path(tmp) / "lib")
        pairs[f"current lib vs {label}"] = (against, name)
    result = {name: compare(runs[a], runs[b]) for name, (a, b) in pairs.items()}
    print(json.dumps(result, indent=1), flush=True)
    out = args.out if args.out is not None else (None if args.smoke else common.RESULTS / "g2p_rerun_determinism.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Same-seed reruns of Chapter 5's G2P Transformer, first training losses compared bit "
                       "for bit; written by benchmarks/g2p_rerun_determinism.py",
        "machine": common.machine(),
        "setup": {"seed": args.seed, "steps": steps, "peak_lr": PEAK_LR, "warmup": WARMUP, "total_steps": TOTAL,
                  "batch_size": BATCH, "label_smoothing": SMOOTHING, "old_commit": args.old_commit,
                  "rerun_commit": args.rerun_commit},
        "comparisons": result,
        "runs": {name: {**{k: v for k, v in r.items() if k != "library"},
                        "library": str(Path(r["library"]).relative_to(r["library"].split("/lib/")[0]))
                        if "/lib/" in r["library"] else r["library"]} for name, r in runs.items()},
    })


if __name__ == "__main__":
    if "--child" in sys.argv:  # one run, printed as a JSON line (see ``run``)
        import argparse
        child_args = argparse.ArgumentParser()
        child_args.add_argument("--child", choices=("recipes", "compare"))
        child_args.add_argument("--seed", type=int)
        child_args.add_argument("--steps", type=int)
        a = child_args.parse_args()
        print(json.dumps(child(a.child, a.seed, a.steps)), flush=True)
    else:
        main()
