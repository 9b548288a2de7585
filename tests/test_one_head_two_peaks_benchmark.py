"""Chapter 4's two-peak test (benchmarks/one_head_two_peaks.py) runs end to end (a few steps,
seconds), and its committed results hold what section 4.6 prints: one head's own W^Q, W^K reach
a two-peaked profile, and training on the k = 4 task pulls it onto the letter before."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_the_script_runs(tmp_path):
    out = tmp_path / "two_peaks.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "one_head_two_peaks.py"),
                    "--smoke", "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["prefit_steps"], r["seed"], r["steps"]) for r in rows] == [(0, 0, 3), (5, 0, 3)]
    for r in rows:
        assert r["scored_positions"] == 2000 * 8  # k = 4: positions 4 .. 11
        assert list(r["weights_before_and_far"]) == ["0", "3"]
        assert all(0.0 <= w <= 1.0 for pair in r["weights_before_and_far"].values()
                   for w in pair)
    # the control and the pre-fit run start from the same model: only W^Q, W^K moved
    assert rows[0]["weights_before_and_far"]["0"] != rows[1]["weights_before_and_far"]["0"]


def test_the_target_pattern():
    from one_head_two_peaks import two_peak_target
    target = two_peak_target(12, 4)
    assert target.sum(-1).tolist() == [1.0] * 12
    assert target[0, 0] == 1 and target[3, 2] == 1
    assert target[4, 3] == target[4, 0] == 0.5 and target[11, 10] == target[11, 7] == 0.5


def test_committed_results_match_the_chapter():
    result = load_result("one_head_two_peaks.json")
    assert "one_head_two_peaks.py" in result["command"] and "/tmp" not in result["command"]
    runs = {(r["prefit_steps"], r["seed"]): r for r in result["runs"]}
    assert set(runs) == {(p, s) for p in (0, 1500) for s in (0, 1, 2)}
    for seed in (0, 1, 2):
        control, prefit = runs[0, seed], runs[1500, seed]
        start = prefit["weights_before_and_far"]["0"]
        assert min(start) > 0.4  # the head's own W^Q, W^K hold two peaks
        end = prefit["weights_before_and_far"]["600"]
        assert end[0] > 0.95 and end[1] < 0.01  # pulled onto the letter before
        assert prefit["weights_before_and_far"]["50"][1] < 0.01  # within 50 steps
        for r in (control, prefit):
            assert 0.055 <= r["both_right"] <= 0.07  # the far letter at chance
    assert runs[0, 0]["both_right"] == 0.05994  # the control is the page's own seed-0 run
