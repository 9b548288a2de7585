"""Chapter 4's start-order test (one head, k = 4: the letter 4 back first, then both; and a
6,000-step run from scratch) runs end to end (a few steps, seconds), and its committed results
hold what section 4.6 says."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs(tmp_path):
    out = tmp_path / "order.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_block_order.py"), "--smoke",
                    "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [r["schedule"] for r in rows] == ["far first", "long"]
    assert rows[0]["far_only_steps"] == 3 and rows[1]["far_only_steps"] == 0
    assert all(r["scored_positions"] == 2000 * 8 for r in rows)  # k = 4: positions 4 .. 11
    assert all(0.0 <= r["both_right"] <= 1.0 for r in rows)


def test_committed_results_match_the_chapter():
    result = load_result("mha_block_order.json")
    assert "mha_block_order.py" in result["command"] and "/tmp" not in result["command"]
    runs = result["runs"]
    far_first = sorted((r for r in runs if r["schedule"] == "far first"),
                       key=lambda r: r["seed"])
    assert [r["seed"] for r in far_first] == [0, 1]
    assert all((r["far_only_steps"], r["both_steps"]) == (300, 600) for r in far_first)
    # the head keeps the letter 4 back and leaves the letter before near chance (1/16)
    assert all(r["far_right"] >= 0.97 and r["before_right"] <= 0.1 for r in far_first)
    (long,) = [r for r in runs if r["schedule"] == "long"]
    assert (long["seed"], long["both_steps"]) == (0, 6000)
    assert 0.055 <= long["both_right"] <= 0.07  # still at chance after 10x the steps
    assert long["before_right"] >= 0.999
