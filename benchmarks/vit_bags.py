"""Chapter 7's bag-of-patches baseline fitted on the same augmentation as the ViT without positions.

Usage: ``python benchmarks/vit_bags.py [--copies 20]`` (writes ``lib/attnbook/results/vit_bags.json``,
which the chapter prints), or ``python benchmarks/vit_bags.py --smoke`` (seconds; writes nothing
unless ``--out`` is given; the test suite runs it).

The chapter compares the ViT with no position table, trained on the plain digits
(``vit_nopos_noaug`` in ``vit_data_efficiency.py``) and with the recipe's augmentation
(``vit_nopos``: rotation up to 15 degrees, scaling up to 10%, shift up to 1 pixel), with two bags of
patches fitted on the same two kinds of data. Here each bag is
fitted twice, on the plain training digits and on ``copies`` augmented copies of them drawn with the
recipe's augmentation (``random_affine`` through ``image_batches``, seeded), everything else equal:
k-means on the 2 x 2 windows (stride 2: the ViT's 16 patches; stride 1: all 49 windows), the number
of clusters K chosen on the dev split from (16, 64, 256), a standardised logistic regression on the
counts (weight decay 1e-3, L-BFGS), three k-means seeds, and the test split unshifted and shifted
by 1 and 2 pixels (the mean over the four directions). The plain rows repeat the chapter's own bag
cell (a check that the two agree). k-means runs on at most ``MAX_KMEANS_POINTS`` windows drawn at
random (seeded), since the augmented set has ``copies`` times more. One thread.
"""
from __future__ import annotations

import json
import statistics

import torch
import torch.nn.functional as F

import common
from attnbook.data.digits import image_batches, load_digits_splits, shift_images
from attnbook.tasks.image_classification import ImageRecipe

P = 2
KS = (16, 64, 256)
SEEDS = (0, 1, 2)
SHIFTS = (0, 1, 2)
MAX_KMEANS_POINTS = 100_000


def kmeans(points: torch.Tensor, k: int, seed: int = 0, iterations: int = 30) -> torch.Tensor:
    """(points, 4) -> (K, 4) centres, started at K points drawn with ``seed`` (the chapter's)."""
    start = torch.randperm(len(points), generator=torch.Generator().manual_seed(seed))[:k]
    centres = points[start].clone()
    for _ in range(iterations):
        nearest = torch.cdist(points, centres).argmin(1)  # (points,)
        sums = torch.zeros_like(centres).index_add_(0, nearest, points)
        counts = torch.bincount(nearest, minlength=k)[:, None]  # (K, 1)
        centres = torch.where(counts > 0, sums / counts.clamp_min(1), centres)
    return centres


def windows(images: torch.Tensor, stride: int) -> torch.Tensor:
    """(B, 1, 8, 8) -> (B, windows, 4): the 2 x 2 windows at ``stride`` (2: the ViT's patches)."""
    return F.unfold(images, P, stride=stride).transpose(1, 2)


def bag_of_patches(images: torch.Tensor, centres: torch.Tensor, stride: int, chunk: int = 4096) -> torch.Tensor:
    """(B, 1, 8, 8) -> (B, K): how many of each image's windows fall into each cluster."""
    out = []
    for part in images.split(chunk):
        nearest = torch.cdist(windows(part, stride), centres.expand(len(part), -1, -1)).argmin(-1)
        out.append(F.one_hot(nearest, len(centres)).sum(1).float())
    return torch.cat(out)


def fit_logistic(features: torch.Tensor, labels: torch.Tensor, decay: float = 1e-3):
    """The chapter's logistic regression: standardised features, L-BFGS; returns features -> labels."""
    mean, sd = features.mean(0), features.std(0) + 1e-6
    w = torch.zeros(features.shape[1], 10, requires_grad=True)
    b = torch.zeros(10, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=300, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = F.cross_entropy(((features - mean) / sd) @ w + b, labels) + decay * (w ** 2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return lambda f: (((f - mean) / sd) @ w + b).argmax(1).detach()


def augmented_copies(train, copies: int, recipe: ImageRecipe, fill: float, seed: int = 0):
    """``copies`` augmented copies of every training image (the recipe's rotation, scaling and shift)."""
    if copies == 0:
        return train.images, train.labels
    batches = image_batches(train, len(train), torch.Generator().manual_seed(seed), degrees=recipe.degrees,
                            scale=recipe.scale, shift=recipe.shift, fill=fill)
    pairs = [next(batches) for _ in range(copies)]
    return torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])


def fit_bag(images, labels, k: int, seed: int, stride: int):
    points = windows(images, stride).reshape(-1, P * P)
    if len(points) > MAX_KMEANS_POINTS:
        points = points[torch.randperm(len(points), generator=torch.Generator().manual_seed(seed))[:MAX_KMEANS_POINTS]]
    centres = kmeans(points, k, seed)
    return centres, fit_logistic(bag_of_patches(images, centres, stride), labels)


def bag_accuracy(bag, stride, images, labels, s: int, fill: float) -> float:
    centres, predict = bag
    moves = ((s, 0), (-s, 0), (0, s), (0, -s)) if s else ((0, 0),)
    return statistics.mean(
        (predict(bag_of_patches(shift_images(images, dx, dy, fill), centres, stride)) == labels).float().mean().item()
        for dx, dy in moves)


def run_one(stride: int, copies: int, smoke: bool) -> dict:
    """One bag (stride) fitted on the plain digits (copies 0) or on augmented copies: K on dev, 3 seeds."""
    torch.set_num_threads(1)
    digits = load_digits_splits()
    images, labels = augmented_copies(digits.train, copies, ImageRecipe(), digits.background)
    ks, seeds = ((4, 8), (0,)) if smoke else (KS, SEEDS)
    dev = {k: bag_accuracy(fit_bag(images, labels, k, 0, stride), stride, digits.dev.images, digits.dev.labels,
                           0, digits.background) for k in ks}
    best = max(dev, key=dev.get)
    scores = {s: [] for s in SHIFTS}
    for seed in seeds:
        bag = fit_bag(images, labels, best, seed, stride)
        for s in SHIFTS:
            scores[s].append(bag_accuracy(bag, stride, digits.test.images, digits.test.labels, s, digits.background))
    row = {"stride": stride, "copies": copies, "train_images": len(images), "dev_by_k": dev, "k": best,
           **{("test_accuracy" if s == 0 else f"test_accuracy_shift_{s}"): [round(v, 4) for v in scores[s]]
              for s in SHIFTS}}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = common.experiment_parser(__doc__)
    p.add_argument("--copies", type=int, default=20, help="augmented copies of each training digit")
    args = p.parse_args()
    common.check_jobs(p, args)
    copies = 2 if args.smoke else args.copies
    done = {(r["stride"], r["copies"]): r for r in common.log_rows(args.resume)}
    todo = [(stride, c, args.smoke) for stride in (2, 1) for c in (0, copies) if (stride, c) not in done]
    for row in common.run_jobs(run_one, todo, args.jobs):
        done[(row["stride"], row["copies"])] = row
    out = common.out_path(args, "vit_bags.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: bags of 2x2 patches (stride 2) and windows (stride 1), k-means + "
                           "logistic regression, fitted on the plain training digits and on augmented copies "
                           "(the ViT recipe's augmentation); test accuracy by k-means seed; written by "
                           "benchmarks/vit_bags.py",
            "copies": copies, "recipe": ImageRecipe().__dict__, "machine": common.machine(args.jobs),
            "runs": [done[(stride, c)] for stride in (2, 1) for c in (0, copies)],
        })


if __name__ == "__main__":
    main()
