"""Chapter 4's one-head side benchmark runs end to end (a few steps, seconds), and its committed
results hold what section 4.6's Going deeper says: the side one head favours is set by the seed."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs_and_writes_its_results(tmp_path):
    out = tmp_path / "side.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "one_head_side.py"), "--seeds", "0",
                    "--steps", "4", "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    (row,) = json.loads(out.read_text())["runs"]
    assert (row["heads"], row["seed"], row["steps"]) == (1, 0, 4)
    for key in ("letter_before_right", "letter_after_right", "both_right", "before_weighted_more"):
        assert 0.0 <= row[key] <= 1.0


def test_the_committed_runs_favour_either_side():
    runs = {r["seed"]: r for r in load_result("one_head_side.json")["runs"]}
    assert runs[0]["letter_before_right"] > 0.85 > runs[0]["letter_after_right"]  # the page's
    assert runs[7]["letter_after_right"] > 0.9 > runs[7]["letter_before_right"]  # the other side
    assert all(r["both_right"] < 0.2 for r in runs.values())  # every seed stalls
