"""Chapter 7's per-image test errors: which test digits each run of the data-efficiency grid gets wrong.

Usage: ``python benchmarks/vit_test_errors.py [--jobs 2] [--resume LOG ...]`` (writes
``lib/attnbook/results/vit_test_errors.json``, which the chapter reads), or
``python benchmarks/vit_test_errors.py --smoke`` (a seconds-long run that writes nothing unless
``--out`` is given; the test suite runs it).

``vit_data_efficiency.json`` stores each run's accuracy only, so a confidence interval over the
test images (a bootstrap that resamples the 372 test digits, the same resample for every run) cannot
be computed from it. This script trains the main grid of ``benchmarks/vit_data_efficiency.py``
again, the ViT and the CNN at 10%, 25% and 100% of the training split, seeds 0, 1, 2, with the same
code (``vit_data_efficiency.build`` and the same ``train_classifier`` call, one thread), and stores
for each run the indices of the test digits it gets wrong, with its accuracy beside the results
file's (``same_as_results_file``: one thread on x86-64 reproduces a run bit for bit).

It also fits the strongest pixel baseline the chapter shows at low data: an RBF support-vector
machine on the 64 pixels of the training images and their copies moved one pixel right, left, down
and up (the shift of the models' augmentation), ``C`` and ``gamma`` chosen together on the dev
split (``C_GRID`` times ``GAMMA_GRID``, the latter as multiples of scikit-learn's ``gamma="scale"``,
``1 / (64 * pixel variance)``), for every fraction and seed of the grid, with its test errors. The
ViT gets a recipe sweep, so the baseline gets a grid over both of its settings.

For the ViTs trained on all the training digits (2,000 steps) it stores the statistics that the
chapter's Section 7.6 measures on its 1,000-step page model, so that the section can say whether
they hold for the results file's models: the position table's cosine similarities by grid relation,
the principal-component shares of the patch filters, the class token's last-layer attention and
its rollout against each digit's ink (own map, the mean map, the next digit's map), and each
head's mean attention distance and entropy.

``--partial`` writes the file with the runs done so far and lists the others under ``missing``. The
committed file is such a one: on a machine shared by several jobs the ViTs' reruns did not finish in
the time this revision had (the log says where they stopped), so it holds the SVM for every subset
and the CNN at 125 and 1,251 images, and no ViT (so no Section 7.6 statistics either).
"""
from __future__ import annotations

import dataclasses
import json
import statistics

import torch
import torch.nn.functional as F

import common
import vit_data_efficiency as grid
from attnbook.attention_maps import attention_rollout, mean_attention_distance
from attnbook.data.digits import load_digits_splits, shift_images, subset
from attnbook.layers.patches import patchify
from attnbook.tasks.image_classification import ImageRecipe, predict, train_classifier

FRACTIONS = grid.FRACTIONS
SEEDS = grid.SEEDS
MODELS = grid.MODELS
C_GRID = (1.0, 3.0, 10.0, 30.0, 100.0)
GAMMA_GRID = (0.5, 1.0, 2.0, 4.0)  # times gamma="scale"
MOVES = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))  # the image and its four 1-pixel copies


def wrong_indices(predicted: torch.Tensor, labels: torch.Tensor) -> list[int]:
    """Indices of the test images whose prediction differs from the label."""
    return torch.nonzero(predicted != labels).flatten().tolist()


def correlation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of each row pair of two ``(B, N)`` tensors: ``(B,)``."""
    a, b = a - a.mean(-1, keepdim=True), b - b.mean(-1, keepdim=True)
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1) + 1e-12)


def position_groups(positions: torch.Tensor, g: int) -> dict[str, float]:
    """Mean cosine similarity of the ``(N, D)`` patch positions by their relation on the grid."""
    sim = F.cosine_similarity(positions[:, None], positions[None], dim=-1)
    groups: dict[str, list[float]] = {"neighbours": [], "further_apart": [], "row_neighbours": [],
                                      "column_neighbours": [], "same_row_not_neighbour": [],
                                      "same_column_not_neighbour": [], "other_row_and_column": []}
    for a in range(g * g):
        for b in range(g * g):
            if a == b:
                continue
            (ra, ca), (rb, cb) = divmod(a, g), divmod(b, g)
            adjacent = abs(ra - rb) + abs(ca - cb) == 1
            groups["neighbours" if adjacent else "further_apart"].append(sim[a, b].item())
            key = ("row_neighbours" if adjacent and ra == rb else "column_neighbours" if adjacent
                   else "same_row_not_neighbour" if ra == rb
                   else "same_column_not_neighbour" if ca == cb else "other_row_and_column")
            groups[key].append(sim[a, b].item())
    return {k: round(statistics.mean(v), 4) for k, v in groups.items()}


@torch.no_grad()
def analyse_vit(model: torch.nn.Module, images: torch.Tensor, pixels: torch.Tensor) -> dict:
    """Section 7.6's statistics for one trained ViT on the test ``images`` (``pixels`` in [0, 1])."""
    cfg = model.config
    g, p = cfg.grid_size, cfg.patch_size
    model.eval()
    filters = model.embeddings.tokens.patch_embedding.projection.weight.double()  # (D, C*P*P)
    singular = torch.linalg.svdvals(filters - filters.mean(0))
    shares = singular ** 2 / (singular ** 2).sum()
    _, maps = model(images, need_weights=True)  # L x (B, H, 1 + N, 1 + N)
    ink = patchify(pixels, p).sum(-1)  # (B, N)
    blank = ink < 0.01
    final = maps[-1].mean(1)[:, 0, 1:]
    final = final / final.sum(-1, keepdim=True)  # (B, N): the patches' shares
    roll = attention_rollout(list(maps))[:, 0, 1:]
    roll = roll / roll.sum(-1, keepdim=True)
    last = {}
    for name, m in (("own", final), ("mean", final.mean(0).expand_as(final)),
                    ("next", final.roll(1, dims=0))):
        last[name] = {"ink_correlation": round(correlation(m, ink).mean().item(), 4),
                      "blank_share": round((m * blank).sum(-1).mean().item(), 4),
                      "top3_share": round(m.sort(-1, descending=True).values[:, :3].sum(-1).mean().item(), 4)}
    mean_roll = roll.mean(0).expand_as(roll)
    distances = torch.stack([mean_attention_distance(m, grid_size=g, patch_size=p) for m in maps])
    entropy = torch.stack([-(m * m.clamp_min(1e-12).log()).sum(-1).mean(dim=(0, 2)) for m in maps])
    return {
        "positions": position_groups(model.position_embeddings[1:], g),
        "filter_variance_shares": [round(v, 4) for v in shares.tolist()],
        "last_layer": last,
        "rollout": {"own_ink_correlation": round(correlation(roll, ink).mean().item(), 4),
                    "mean_map_ink_correlation": round(correlation(mean_roll, ink).mean().item(), 4),
                    "own_vs_mean_map": round(correlation(roll, mean_roll).mean().item(), 4)},
        "head_distance_pixels": [round(v, 3) for v in distances.flatten().tolist()],
        "head_entropy_nats": [round(v, 3) for v in entropy.flatten().tolist()],
    }


def run_model(fraction: float, seed: int, kind: str, recipe: ImageRecipe, smoke: bool) -> dict:
    """One run of ``vit_data_efficiency``'s main grid, again, with its wrong test digits."""
    torch.set_num_threads(1)
    digits = load_digits_splits()
    train = subset(digits.train, fraction, seed) if fraction < 1.0 else digits.train
    model = grid.build(kind, seed, smoke)
    train_classifier(model, train, dataclasses.replace(recipe, seed=seed), fill=digits.background,
                     progress=False)
    wrong = wrong_indices(predict(model, digits.test.images), digits.test.labels)
    row = {"model": kind, "fraction": fraction, "train_images": len(train), "seed": seed,
           "test_accuracy": round(1 - len(wrong) / len(digits.test), 4), "wrong": wrong}
    if kind == "vit" and fraction == 1.0:
        row["analysis"] = analyse_vit(model, digits.test.images, digits.to_pixels(digits.test.images))
    print(json.dumps(row), flush=True)
    return row


def run_svm(fraction: float, seed: int) -> dict:
    """The RBF SVM on the training images and their 1-pixel copies, ``C`` and ``gamma`` chosen on dev."""
    from sklearn.svm import SVC
    digits = load_digits_splits()
    train = subset(digits.train, fraction, seed) if fraction < 1.0 else digits.train
    x = torch.cat([shift_images(train.images, dx, dy, digits.background) for dx, dy in MOVES])
    y = train.labels.repeat(len(MOVES))
    x_fit = x.flatten(1).numpy()
    scale = 1.0 / (x_fit.shape[1] * x_fit.var())  # scikit-learn's gamma="scale"
    fits, dev = {}, {}
    for c in C_GRID:
        for g in GAMMA_GRID:
            fits[c, g] = SVC(C=c, gamma=g * scale).fit(x_fit, y.numpy())
            predicted = torch.from_numpy(fits[c, g].predict(digits.dev.images.flatten(1).numpy()))
            dev[c, g] = (predicted == digits.dev.labels).float().mean().item()
    # ties: the smaller C, then the gamma nearest "scale"
    best = max(dev, key=lambda k: (dev[k], -k[0], -abs(k[1] - 1.0)))
    predicted = torch.from_numpy(fits[best].predict(digits.test.images.flatten(1).numpy()))
    wrong = wrong_indices(predicted, digits.test.labels)
    row = {"model": "svm_copies", "fraction": fraction, "train_images": len(train), "seed": seed,
           "fit_images": len(x),
           "dev_accuracy": {f"C={c},gamma={g}": round(a, 4) for (c, g), a in dev.items()},
           "C": best[0], "gamma_times_scale": best[1],
           "test_accuracy": round(1 - len(wrong) / len(digits.test), 4), "wrong": wrong}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=[*MODELS, "svm_copies"],
                        choices=[*MODELS, "svm_copies"], help="run only these kinds")
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS),
                        help="training fractions (the file holds these only)")
    parser.add_argument("--partial", action="store_true",
                        help="write the file with the runs done so far (the rest listed as missing)")
    args = parser.parse_args()
    common.check_jobs(parser, args)
    if args.smoke:
        recipe = ImageRecipe(steps=6, batch_size=32, warmup_steps=2)
        fractions, seeds = (0.1, 1.0), (0,)
    else:
        recipe, fractions, seeds = ImageRecipe(), tuple(args.fractions), SEEDS
    done = {(r["model"], r["fraction"], r["seed"]): r for r in common.log_rows(args.resume)}
    keys = [(kind, f, s) for f in fractions for s in seeds for kind in (*MODELS, "svm_copies")]
    todo = [k for k in keys if k[0] in args.models and k not in done]
    for row in common.run_jobs(run_svm, [(f, s) for kind, f, s in todo if kind == "svm_copies"], 1):
        done[(row["model"], row["fraction"], row["seed"])] = row
    # the full training set first (Section 7.6 reads its ViTs), then the smallest, ...
    order = sorted((k for k in todo if k[0] != "svm_copies"), key=lambda k: (k[1] != 1.0, k[1]))
    jobs = [(f, s, kind, recipe, args.smoke) for kind, f, s in order]
    for row in common.run_jobs(run_model, jobs, args.jobs):
        done[(row["model"], row["fraction"], row["seed"])] = row
    missing = [k for k in keys if k not in done]
    if missing and not args.partial:
        print("some runs are still missing: no results file written (--resume the logs)")
        return
    out = common.out_path(args, "vit_test_errors.json")
    if out is None:
        return
    committed = {(r["model"], r["fraction"], r["seed"]): r["test_accuracy"]
                 for r in ([] if args.smoke else grid_runs())}
    rows = [done[k] for k in keys if k in done]
    for row in rows:
        if row["model"] in MODELS:
            row["same_as_results_file"] = committed.get((row["model"], row["fraction"], row["seed"])) \
                == row["test_accuracy"]
    digits = load_digits_splits()
    common.write_result(out, {
        "description": "Chapter 7: the test digits each run of the data-efficiency grid gets wrong "
                       "(ViT and CNN retrained as in vit_data_efficiency.py), and an RBF SVM on the "
                       "pixels with 1-pixel shifted copies, C and gamma chosen on dev; written by "
                       "benchmarks/vit_test_errors.py",
        "recipe": recipe.__dict__, "fractions": list(fractions), "seeds": list(seeds),
        "test_images": len(digits.test), "svm_C_grid": list(C_GRID),
        "svm_gamma_grid_times_scale": list(GAMMA_GRID),
        "machine": common.machine(),
        "missing": [{"model": kind, "train_images": grid_images(f), "seed": s} for kind, f, s in missing],
        "runs": rows})


def grid_images(fraction: float) -> int:
    """The number of training images at ``fraction`` (the subset's size)."""
    digits = load_digits_splits()
    return len(subset(digits.train, fraction, 0) if fraction < 1.0 else digits.train)


def grid_runs() -> list[dict]:
    """The main grid's rows of the committed ``vit_data_efficiency.json``."""
    return json.loads((common.RESULTS / "vit_data_efficiency.json").read_text())["runs"]


if __name__ == "__main__":
    main()
