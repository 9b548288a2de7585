"""Chapter 3's benchmarks run end to end (a few steps, seconds), and their committed results hold
what the chapter says: with the sqrt(d_k) every seed's loss drops below 0.1 early at every learning
rate; without it the same seeds are slower at every rate, stall at 3e-3 and need a smaller rate to
train at all, and even at their best rate start several times later than the scaled model at its
best; smaller embeddings put more weight on the mirror key."""
import statistics
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def first_step_below(losses, threshold=0.1, window=10):
    return next((t for t in range(window, len(losses) + 1)
                 if sum(losses[t - window:t]) / window < threshold), None)


def test_the_script_runs_and_writes_its_results(tmp_path):
    out = tmp_path / "sqrt.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sqrt_dk_training.py"), "--seeds", "0",
                    "--steps", "3", "--width", "16", "--lrs", "0.001", "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["scaled"], r["seed"], r["d_k"], r["lr"]) for r in rows] == [(True, 0, 16, 0.001),
                                                                          (False, 0, 16, 0.001)]
    assert all(len(r["losses"]) == 3 and 0.0 <= r["test_accuracy"] <= 1.0 for r in rows)


def test_the_committed_runs_show_what_the_chapter_says():
    runs = load_result("sqrt_dk_training.json")["runs"]
    assert {r["d_k"] for r in runs} == {256} and {r["lr"] for r in runs} == {3e-4, 1e-3, 3e-3}
    steps, accuracy = {}, {}
    for lr in (3e-4, 1e-3, 3e-3):
        for scaled in (True, False):
            arm = [r for r in runs if r["lr"] == lr and r["scaled"] == scaled]
            assert sorted(r["seed"] for r in arm) == [0, 1, 2]
            steps[lr, scaled] = [first_step_below(r["losses"]) for r in arm]
            accuracy[lr, scaled] = [r["test_accuracy"] for r in arm]
    for lr in (3e-4, 1e-3, 3e-3):  # the scaled model trains at every rate
        assert all(s is not None for s in steps[lr, True]) and min(accuracy[lr, True]) > 0.999
        # without the scale every seed is slower than every scaled seed at the same rate
        assert all(s is None or s > max(steps[lr, True]) for s in steps[lr, False])
    assert max(steps[3e-3, True]) <= 20
    assert steps[3e-3, False].count(None) >= 2  # at the scaled model's rate, runs stall
    for lr in (3e-4, 1e-3):  # at a smaller rate every unscaled seed trains
        assert all(s is not None for s in steps[lr, False]) and min(accuracy[lr, False]) > 0.999
    median = {key: statistics.median(s if None not in s else [float("inf")]) for key, s in steps.items()}
    best_scaled = min(median[lr, True] for lr in (3e-4, 1e-3, 3e-3))
    best_unscaled = min(median[lr, False] for lr in (3e-4, 1e-3, 3e-3))
    assert best_unscaled >= 2.5 * best_scaled  # "about three times slower", at each arm's best rate


def test_the_blur_benchmark_runs_and_its_committed_runs_show_what_the_chapter_says(tmp_path):
    out = tmp_path / "blur.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reversal_blur_scale.py"), "--stds", "0.5",
                    "--seeds", "0", "--steps", "3", "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)
    (row,) = json.loads(out.read_text())["runs"]
    assert (row["embedding_std"], row["seed"], row["steps"]) == (0.5, 0, 3)
    assert 0.0 <= row["weight_on_mirror"] <= 1.0
    runs = load_result("reversal_blur_scale.json")["runs"]
    by_std = {s: [r["weight_on_mirror"] for r in runs if r["embedding_std"] == s] for s in (1.0, 0.3, 0.1)}
    assert all(len(w) >= 3 for w in by_std.values())
    assert max(by_std[1.0]) < min(by_std[0.3]) and max(by_std[0.3]) < min(by_std[0.1]) < 0.8
