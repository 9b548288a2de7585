"""Chapter 4's k = 5 probe and single-head weight profiles (benchmarks/mha_block_far.py) run end
to end (a few steps, seconds), and the committed results hold what section 4.6 says."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs(tmp_path):
    out = tmp_path / "far.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_block_far.py"), "--smoke",
                    "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["k"], r["heads"]) for r in rows] == [(5, 1), (5, 2)]
    assert rows[0]["scored_positions"] == 2000 * 7  # k = 5: positions 5 .. 11
    assert all(len(r["mean_weight_on_offset"][str(-d)]) == r["heads"]
               for r in rows for d in range(1, 6))


def test_committed_results_match_the_chapter():
    result = load_result("mha_block_far.json")
    assert "mha_block_far.py" in result["command"] and "/tmp" not in result["command"]
    runs = {(r["k"], r["heads"]): r for r in result["runs"]}
    assert set(runs) == {(5, 1), (5, 2), (3, 1), (4, 1)}
    assert 0.055 <= runs[5, 1]["both_right"] <= 0.07  # one head: the far letter at chance
    assert runs[5, 2]["both_right"] >= 0.999
    weight = lambda k, d: runs[k, 1]["mean_weight_on_offset"][str(-d)][0]
    # "at k = 3: 0.45, 0.30, 0.08 on 1, 2, 3 back"; "4 back gets 0.001"
    assert [round(weight(3, d), 2) for d in (1, 2, 3)] == [0.45, 0.30, 0.08]
    assert round(weight(4, 4), 3) == 0.001
    for k in (3, 4, 5):  # the single head's weight falls off from the letter before
        profile = [weight(k, d) for d in range(1, 6)]
        assert profile == sorted(profile, reverse=True)
