"""Chapter 3 section 3.8's bag-of-tokens baseline (benchmarks/it_bag_of_tokens.py): the script
runs (a few steps, seconds), and its committed runs hold what the chapter says: 30 of 30 runs
(5 seeds x 6 held-out splits, together every (animal, thing) pair) answer every held-out
sentence."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs_and_writes_its_results(tmp_path):
    out = tmp_path / "bag.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "it_bag_of_tokens.py"),
                    "--seeds", "0", "--splits", "0", "--steps", "3", "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)
    result = json.loads(out.read_text())
    assert result["command"].startswith("python benchmarks/it_bag_of_tokens.py")
    assert [(r["seed"], r["split"], r["steps"]) for r in result["runs"]] == [(0, 0, 3)]


def test_the_committed_runs_show_what_the_chapter_says():
    result = load_result("it_bag_of_tokens.json")
    assert result["command"] == "python benchmarks/it_bag_of_tokens.py"
    runs = result["runs"]
    assert {(r["seed"], r["split"]) for r in runs} == {(s, k) for s in range(5) for k in range(6)}
    assert all(r["steps"] == 300 and r["lr"] == 0.1 for r in runs)
    held_pairs = sorted(p for r in runs if r["seed"] == 0 for p in r["held_out"])
    assert held_pairs == list(range(36))  # the six splits hold out every pair once
    assert all(r["held_out_accuracy"] == 1.0 for r in runs)
