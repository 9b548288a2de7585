"""Chapter 3's second width for the sqrt(d_k) training benchmark (``sqrt_dk_training_64.json``,
``python benchmarks/sqrt_dk_training.py --width 64 --out lib/attnbook/results/sqrt_dk_training_64.json``):
the committed runs hold what section 3.2 says about d_k = 64. Every run reaches 99.99% or more;
without the scale the median seed is later at every rate; each arm at its best rate, the unscaled
one is about twice as late (2.1 times), and the scaled arm's best rate is the grid's top."""
import statistics

from attnbook.results import load_result

LRS = (3e-4, 1e-3, 3e-3, 1e-2)


def first_step_below(losses, threshold=0.1, window=10):
    return next((t for t in range(window, len(losses) + 1)
                 if sum(losses[t - window:t]) / window < threshold), None)


def test_the_committed_d_k_64_runs_show_what_the_chapter_says():
    result = load_result("sqrt_dk_training_64.json")
    assert "--width 64" in result["command"] and "/tmp" not in result["command"]
    runs = result["runs"]
    assert {r["d_k"] for r in runs} == {64} and {r["lr"] for r in runs} == set(LRS)
    assert {len(r["losses"]) for r in runs} == {200}
    assert min(r["test_accuracy"] for r in runs) >= 0.9999
    median = {}
    for lr in LRS:
        for scaled in (True, False):
            arm = [r for r in runs if r["lr"] == lr and r["scaled"] == scaled]
            assert sorted(r["seed"] for r in arm) == [0, 1, 2]
            steps = [first_step_below(r["losses"]) for r in arm]
            assert None not in steps  # every run gets below 0.1 within 200 steps
            median[lr, scaled] = statistics.median(steps)
    for lr in LRS:  # without the scale the median seed is later at every rate
        assert median[lr, False] > median[lr, True]
    best_scaled = min(LRS, key=lambda lr: median[lr, True])
    best_unscaled = min(LRS, key=lambda lr: median[lr, False])
    assert best_scaled == 1e-2 and best_unscaled == 3e-3
    ratio = median[best_unscaled, False] / median[best_scaled, True]
    assert round(ratio, 1) == 2.1
