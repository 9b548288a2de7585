"""Chapter 4's gap sweep (benchmarks/mha_block_gaps.py) runs end to end (a few steps, seconds),
and the committed results hold what section 4.6 and its appendix say."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs(tmp_path):
    out = tmp_path / "gaps.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_block_gaps.py"), "--smoke",
                    "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["near"], r["far"], r["gap"]) for r in rows] == [(1, 3, 2), (4, 6, 2)]
    assert rows[0]["scored_positions"] == 2000 * 9  # 3 back: positions 3 .. 11
    assert [len(r["mean_weight_back"]) for r in rows] == [4, 7]


def test_committed_results_match_the_chapter():
    result = load_result("mha_block_gaps.json")
    assert "mha_block_gaps.py" in result["command"] and "/tmp" not in result["command"]
    runs = {}
    for r in result["runs"]:
        runs.setdefault((r["near"], r["far"]), []).append(r["both_right"])
    assert len(runs) == 10 and all(len(v) == 3 for v in runs.values())
    for (near, far), shares in runs.items():
        if far - near == 1:  # one head gets both letters 1 apart
            assert min(shares) >= 0.97
        if far - near == 3:  # and stays near a guess on one of two letters 3 apart
            assert max(shares) <= 0.08
    # 2 apart: lower when the pair sits farther back, in every seed
    assert all(a > b for a, b in zip(runs[1, 3], runs[4, 6]))
