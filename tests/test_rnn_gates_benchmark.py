"""Chapter 1's tuned gates benchmark runs (smoke mode), resumes, and its committed results cover
the grid with a summary that follows from the runs."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "rnn_gates.py")


def test_smoke_run_then_resume(tmp_path):
    first = subprocess.run([sys.executable, SCRIPT, "--smoke"], check=True, capture_output=True,
                           text=True, timeout=300)
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert {r["network"] for r in rows} == {"plain RNN", "GRU"}
    for r in rows:
        assert 0 <= r["accuracy"] <= 1 and r["reach_before"] > 0 and r["reach_after"] >= 0
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "merged.json"
    again = subprocess.run([sys.executable, SCRIPT, "--smoke", "--resume", str(log), "--out", str(out)],
                           check=True, capture_output=True, text=True, timeout=300)
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing re-run
    assert json.loads(out.read_text())["runs"] == rows


def test_committed_results_cover_the_grid():
    result = load_result("rnn_gates.json")
    runs = result["runs"]
    grid = {(r["network"], r["lr"], r["length"], r["seed"]) for r in runs}
    assert len(grid) == len(runs) == (len(result["networks"]) * len(result["lrs"])
                                      * len(result["lengths"]) * len(result["seeds"]))
    assert result["steps"] == 300 and len(result["seeds"]) == 5
    for name, by_length in result["summary"].items():
        for length, row in by_length.items():
            for lr in result["lrs"]:
                solved = sum(r["accuracy"] >= result["solved_at"] for r in runs
                             if (r["network"], r["length"], r["lr"]) == (name, int(length), lr))
                assert row["solved"][str(lr)] == solved
            assert row["best_solved"] == max(row["solved"].values())
