"""Chapter 7's tuned support-vector baselines: an RBF SVM on the pixels, and a set-kernel SVM on a bag of patches.

Usage: ``python benchmarks/vit_svms.py`` (writes ``lib/attnbook/results/vit_svms.json``, which the
chapter reads; a few minutes on one thread), or ``python benchmarks/vit_svms.py --smoke`` (seconds;
writes nothing unless ``--out`` is given; the test suite runs it).

Two baselines, each with both of its settings chosen on the dev split (``C_GRID`` times
``GAMMA_GRID``; the set kernel's C from ``SET_C_GRID``, since its values differ little between
digits, and its gamma from ``SET_GAMMA_GRID``; gamma as multiples of scikit-learn's ``gamma="scale"``, ``1 / (features *
variance)``; ties go to the smaller C, then the gamma nearest "scale"), as the ViT had a recipe
sweep:

- ``svm_pixels``: an RBF SVM on the 64 pixels of the training images only (no shifted copies), for
  every training fraction and seed of ``vit_data_efficiency.py``'s grid (the same subsets).
- ``set_kernel``: an SVM on the *set* of a digit's 16 non-overlapping 2 x 2 patches (the ViT's
  patches) with no positions: the kernel between two digits is the mean RBF similarity over all
  16 x 16 pairs of their patches, ``k(X, Y) = mean_ij exp(-gamma |x_i - y_j|^2)``, so it cannot
  see where a patch sits. Fitted on all the training digits (plain, no augmentation), as the ViT
  without positions ``vit_nopos_noaug``; tested unshifted and shifted by 1 and 2 pixels (the
  mean over the four directions, as the chapter's shift table). It is deterministic: one run.
"""
from __future__ import annotations

import json

import numpy as np
import torch
import torch.nn.functional as F

import common
import vit_data_efficiency as grid
from attnbook.data.digits import load_digits_splits, shift_images, subset

C_GRID = (1.0, 3.0, 10.0, 30.0, 100.0)
GAMMA_GRID = (0.5, 1.0, 2.0, 4.0)  # times gamma="scale"
SET_C_GRID = (1.0, 10.0, 100.0, 1000.0, 10000.0)  # the set kernel's values differ little
SET_GAMMA_GRID = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # times "scale": 4 was best, so wider
P = 2
SHIFTS = (1, 2)


def choose(dev: dict[tuple[float, float], float]) -> tuple[float, float]:
    """The (C, gamma) with the best dev accuracy; ties: the smaller C, then gamma nearest 1."""
    return max(dev, key=lambda k: (dev[k], -k[0], -abs(k[1] - 1.0)))


def patches(images: torch.Tensor) -> np.ndarray:
    """(B, 1, 8, 8) -> (B, 16, 4): each digit's non-overlapping 2 x 2 patches, in float64."""
    return F.unfold(images, P, stride=P).transpose(1, 2).double().numpy()


def set_kernel(a: np.ndarray, b: np.ndarray, gammas: tuple[float, ...], chunk: int = 64) -> list[np.ndarray]:
    """Mean-over-pairs RBF kernels between the patch sets ``a`` (A, N, d) and ``b`` (B, M, d).

    Returns one (A, B) matrix per gamma. Position-free: permuting a digit's patches changes nothing.
    """
    flat_b = b.reshape(-1, b.shape[-1])  # (B*M, d)
    sq_b = (flat_b ** 2).sum(1)
    out = [np.empty((len(a), len(b))) for _ in gammas]
    for start in range(0, len(a), chunk):
        part = a[start:start + chunk]
        flat_a = part.reshape(-1, a.shape[-1])
        d2 = (flat_a ** 2).sum(1)[:, None] + sq_b[None] - 2 * flat_a @ flat_b.T
        np.maximum(d2, 0, out=d2)
        for k, g in zip(out, gammas):
            k[start:start + len(part)] = np.exp(-g * d2).reshape(
                len(part), a.shape[1], len(b), b.shape[1]).mean(axis=(1, 3))
    return out


def shifted_tests(digits, s: int) -> list[torch.Tensor]:
    """The test images moved ``s`` pixels right, left, down and up (``s = 0``: unmoved)."""
    moves = ((s, 0), (-s, 0), (0, s), (0, -s)) if s else ((0, 0),)
    return [shift_images(digits.test.images, dx, dy, digits.background) for dx, dy in moves]


def run_pixels(fraction: float, seed: int, digits=None) -> dict:
    """The RBF SVM on the 64 pixels of one subset of the grid, C and gamma chosen on dev."""
    from sklearn.svm import SVC
    digits = digits or load_digits_splits()
    train = subset(digits.train, fraction, seed) if fraction < 1.0 else digits.train
    x = train.images.flatten(1).double().numpy()
    y = train.labels.numpy()
    scale = 1.0 / (x.shape[1] * x.var())
    fits, dev = {}, {}
    for c in C_GRID:
        for g in GAMMA_GRID:
            fits[c, g] = SVC(C=c, gamma=g * scale).fit(x, y)
            dev[c, g] = float((fits[c, g].predict(digits.dev.images.flatten(1).double().numpy())
                               == digits.dev.labels.numpy()).mean())
    best = choose(dev)
    test = float((fits[best].predict(digits.test.images.flatten(1).double().numpy())
                  == digits.test.labels.numpy()).mean())
    row = {"model": "svm_pixels", "fraction": fraction, "train_images": len(train), "seed": seed,
           "dev_accuracy": {f"C={c},gamma={g}": round(a, 4) for (c, g), a in dev.items()},
           "C": best[0], "gamma_times_scale": best[1], "test_accuracy": round(test, 4)}
    print(json.dumps(row), flush=True)
    return row


def run_set_kernel(train_count: int | None = None, digits=None) -> dict:
    """The set-kernel SVM on all the training digits' patch sets, C and gamma chosen on dev."""
    from sklearn.svm import SVC
    digits = digits or load_digits_splits()
    train_images, y = digits.train.images, digits.train.labels.numpy()
    if train_count is not None:
        train_images, y = train_images[:train_count], y[:train_count]
    train = patches(train_images)
    scale = 1.0 / (train.shape[-1] * train.var())
    gammas = tuple(g * scale for g in SET_GAMMA_GRID)
    k_train = set_kernel(train, train, gammas)
    k_dev = set_kernel(patches(digits.dev.images), train, gammas)
    fits, dev = {}, {}
    for c in SET_C_GRID:
        for g, kt, kd in zip(SET_GAMMA_GRID, k_train, k_dev):
            fits[c, g] = SVC(C=c, kernel="precomputed").fit(kt, y)
            dev[c, g] = float((fits[c, g].predict(kd) == digits.dev.labels.numpy()).mean())
    best = choose(dev)
    gamma = gammas[SET_GAMMA_GRID.index(best[1])]
    labels = digits.test.labels.numpy()
    scores = {}
    for s in (0, *SHIFTS):
        accs = [float((fits[best].predict(set_kernel(patches(t), train, (gamma,))[0]) == labels).mean())
                for t in shifted_tests(digits, s)]
        scores["test_accuracy" if s == 0 else f"test_accuracy_shift_{s}"] = round(float(np.mean(accs)), 4)
    # the check that it is position-free: the patches of every test digit in reverse order
    reversed_k = set_kernel(patches(digits.test.images)[:, ::-1], train, (gamma,))[0]
    same = bool((fits[best].predict(reversed_k) == fits[best].predict(
        set_kernel(patches(digits.test.images), train, (gamma,))[0])).all())
    row = {"model": "set_kernel", "fraction": 1.0, "train_images": len(train),
           "dev_accuracy": {f"C={c},gamma={g}": round(a, 4) for (c, g), a in dev.items()},
           "C": best[0], "gamma_times_scale": best[1], **scores,
           "same_predictions_with_patches_reversed": same}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    digits = load_digits_splits()
    if args.smoke:
        rows = [run_pixels(0.1, 0, digits), run_set_kernel(200, digits)]
        fractions, seeds = (0.1,), (0,)
    else:
        fractions, seeds = grid.FRACTIONS, grid.SEEDS
        rows = [run_pixels(f, s, digits) for f in fractions for s in seeds]
        rows.append(run_set_kernel(None, digits))
    out = common.out_path(args, "vit_svms.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 7: an RBF SVM on the pixels (no copies) for every subset of the "
                       "data-efficiency grid, and a position-free set-kernel SVM on the 16 "
                       "2x2 patches (all training digits, plain), C and gamma chosen on dev; "
                       "written by benchmarks/vit_svms.py",
        "fractions": list(fractions), "seeds": list(seeds), "C_grid": list(C_GRID),
        "gamma_grid_times_scale": list(GAMMA_GRID), "set_kernel_C_grid": list(SET_C_GRID),
        "set_kernel_gamma_grid_times_scale": list(SET_GAMMA_GRID),
        "test_images": len(digits.test),
        "machine": common.machine(), "runs": rows})


if __name__ == "__main__":
    main()
