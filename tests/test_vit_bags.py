"""Chapter 7's bag-of-patches benchmark runs (smoke mode), counts windows correctly, really augments, and its
committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.data.digits import load_digits_splits
from attnbook.results import load_result
from attnbook.tasks.image_classification import ImageRecipe

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_writes_both_bags_plain_and_augmented(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_bags.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {(r["stride"], r["copies"]) for r in runs} == {(2, 0), (2, 2), (1, 0), (1, 2)}
    assert all(0.0 <= a <= 1.0 for r in runs for a in r["test_accuracy"])


def test_bag_counts_every_window_once_and_follows_the_stride():
    import vit_bags as bench
    images = torch.rand(3, 1, 8, 8)
    centres = torch.rand(5, 4)
    for stride, windows in ((2, 16), (1, 49)):
        bag = bench.bag_of_patches(images, centres, stride, chunk=2)
        assert bag.shape == (3, 5)
        assert torch.equal(bag.sum(1), torch.full((3,), float(windows)))
    # a window equal to a centre is counted in that centre's bin
    flat = torch.zeros(1, 1, 8, 8)
    assert bench.bag_of_patches(flat, torch.stack([torch.ones(4), torch.zeros(4)]), 2)[0].tolist() == [0.0, 16.0]


def test_augmented_copies_are_moved_copies_of_the_training_set():
    import vit_bags as bench
    digits = load_digits_splits()
    images, labels = bench.augmented_copies(digits.train, 2, ImageRecipe(), digits.background)
    assert images.shape == (2 * len(digits.train), *digits.train.images.shape[1:])
    assert torch.equal(torch.bincount(labels, minlength=10), 2 * torch.bincount(digits.train.labels, minlength=10))
    assert not torch.equal(images[: len(digits.train)].sort(0).values, digits.train.images.sort(0).values)
    plain, _ = bench.augmented_copies(digits.train, 0, ImageRecipe(), digits.background)
    assert plain is digits.train.images


def test_committed_results_hold_both_bags_with_three_seeds():
    result = load_result("vit_bags.json")
    assert "vit_bags.py" in result["command"]
    assert {(r["stride"], r["copies"]) for r in result["runs"]} == {(2, 0), (2, result["copies"]), (1, 0),
                                                                    (1, result["copies"])}
    assert result["copies"] > 0
    assert all(len(r["test_accuracy"]) == 3 for r in result["runs"])
