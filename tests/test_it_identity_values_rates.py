"""Chapter 3 section 3.8's learning-rate check (benchmarks/it_identity_values_rates.py): the script
runs (a few steps, seconds), and its committed runs hold what the chapter says: at 3e-3 and 1e-3,
as at 1e-2, the linear model of the mean embedding answers more held-out sentences on average
than the same model with two linear layers in its path or than the uniform layer, and no run of
the deeper models beats 83.3%, the lowest two-layer attention run that fits the training set."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("uniform", "no attention, linear", "no attention, two linear layers")


def test_the_script_runs_and_writes_its_results(tmp_path):
    out = tmp_path / "rates.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "it_identity_values_rates.py"),
                    "--seeds", "0", "--splits", "0", "--steps", "3", "--lrs", "0.003",
                    "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    result = json.loads(out.read_text())
    assert result["command"] == "python benchmarks/it_identity_values_rates.py"
    assert [r["arm"] for r in result["runs"]] == list(ARMS)
    assert all(r["steps"] == 3 and r["lr"] == 0.003 for r in result["runs"])


def mean_held(runs, arm, lr):
    held = [r["held_out_accuracy"] for r in runs if (r["arm"], r["lr"]) == (arm, lr)]
    assert len(held) == 10  # 5 seeds x 2 splits
    return sum(held) / len(held)


def test_the_committed_runs_show_what_the_chapter_says():
    runs = load_result("it_identity_values_rates.json")["runs"]
    assert {(r["arm"], r["lr"], r["split"], r["seed"]) for r in runs} == {
        (a, lr, k, s) for a in ARMS for lr in (0.003, 0.001) for k in (0, 3) for s in range(5)}
    assert all(r["steps"] == 600 for r in runs)
    for lr in (0.003, 0.001):
        shallow = mean_held(runs, "no attention, linear", lr)
        assert shallow >= 0.85
        assert mean_held(runs, "no attention, two linear layers", lr) <= shallow - 0.3
        assert mean_held(runs, "uniform", lr) <= shallow - 0.3
    at_3e3 = [r for r in runs if r["lr"] == 0.003 and r["arm"] == "no attention, linear"]
    assert all(r["held_out_accuracy"] == 1.0 for r in at_3e3)
    deeper = [r["held_out_accuracy"] for r in runs if r["arm"] != "no attention, linear"]
    assert max(deeper) <= 0.8334
