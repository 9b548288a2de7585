"""Chapter 4's capacity control (benchmarks/mha_block_bias.py) runs end to end (a few steps,
seconds), and the committed result holds what section 4.6 says."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_the_bias_sits_on_offsets_minus_1_and_minus_k():
    from mha_block_bias import score_bias
    bias = score_bias(4, 8)
    assert bias[5, 4] == 6.0 and bias[5, 1] == 5.6 and bias[5, 5] == 0 and bias[5, 6] == 0
    assert int((bias != 0).sum()) == 7 + 4  # 7 queries with a key 1 back, 4 with a key 4 back
    assert torch.equal(bias.diagonal(), torch.zeros(8))


def test_the_script_runs(tmp_path):
    out = tmp_path / "bias.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_block_bias.py"), "--smoke",
                    "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    (row,) = json.loads(out.read_text())["runs"]
    assert (row["k"], row["heads"], row["steps"]) == (4, 1, 5)
    assert row["scored_positions"] == 2000 * 8  # k = 4: positions 4 .. 11
    assert set(row["mean_weight_on_offset"]) == {"-1", "-4"}


def test_committed_result_matches_the_chapter():
    result = load_result("mha_block_bias.json")
    assert result["command"] == "python benchmarks/mha_block_bias.py"
    (row,) = result["runs"]
    assert (row["k"], row["heads"], row["seed"], row["steps"]) == (4, 1, 0, 600)
    assert row["both_right"] >= 0.99  # "gets both right", "100%"
    weights = row["mean_weight_on_offset"]
    assert round(weights["-1"], 2) == 0.74 and round(weights["-4"], 2) == 0.24
