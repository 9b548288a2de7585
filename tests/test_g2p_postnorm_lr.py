"""benchmarks/g2p_postnorm_lr.py runs end to end (smoke mode), and its committed results are the
post-norm Transformer trained exactly like the comparison's pre-norm runs at 6e-3 (Chapter 5)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run(tmp_path):
    out = tmp_path / "post.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "g2p_postnorm_lr.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert run["model"] == "transformer_postnorm" and run["peak_lr"] == 0.006 and run["seed"] == 0
    assert result["per_seed"][0]["post_test_wer"] == run["test_wer"]


def test_committed_results_pair_post_with_the_comparisons_pre_norm_runs():
    if not (ROOT / "lib" / "attnbook" / "results" / "g2p_postnorm_lr.json").exists():
        pytest.skip("no committed results yet: run benchmarks/g2p_postnorm_lr.py")
    result = load_result("g2p_postnorm_lr.json")
    compare = load_result("g2p_compare.json")
    pre = {r["seed"]: r for r in compare["runs"] if r["phase"] == "lr" and r["model"] == "transformer"
           and r["peak_lr"] == 0.006}
    assert result["setup"]["recipe"] == compare["best_recipe"]["transformer"]
    assert [e["seed"] for e in result["per_seed"]] == [0, 1, 2]
    for entry, run in zip(result["per_seed"], result["runs"]):
        other = pre[entry["seed"]]
        assert run["steps"] == other["steps"] == 1200 and run["recipe"] == other["recipe"]
        assert entry["pre_test_wer"] == other["test_wer"] and entry["pre_dev_wer"] == other["dev_wer"]
        # post-norm has no final LayerNorm after either stack: 2 x (weight + bias) of D = 64 fewer
        assert run["parameters"] == other["parameters"] - 2 * 2 * 64
