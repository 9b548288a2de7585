"""benchmarks/g2p_equal_time.py runs end to end (smoke mode), and its committed results are GRU +
attention at the rate dev chose, for the Transformer's one-thread time for 1,200 steps (Chapter 5)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def _check(result: dict, seeds: list[int]) -> None:
    compare = load_result("g2p_compare.json")
    setup = result["setup"]
    assert setup["recipe"] == compare["best_recipe"]["gru_attention"]
    assert f"{setup['peak_lr']:g}" == compare["lr_sweep"]["gru_attention"]["chosen_on_dev"]
    assert setup["seeds"] == seeds == [r["seed"] for r in result["runs"]]
    assert all(r["model"] == "gru_attention" and r["steps"] == setup["steps"]
               and r["peak_lr"] == setup["peak_lr"] for r in result["runs"])
    assert result["gru_attention"]["test_wer"]["values"] == [r["test_wer"] for r in result["runs"]]


def test_smoke_run(tmp_path):
    out = tmp_path / "eq.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "g2p_equal_time.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), seeds=[0])


def test_committed_results_give_the_transformers_time():
    if not (ROOT / "lib" / "attnbook" / "results" / "g2p_equal_time.json").exists():
        pytest.skip("no committed results yet: run benchmarks/g2p_equal_time.py")
    result = load_result("g2p_equal_time.json")
    _check(result, seeds=[0, 1, 2])
    speed = load_result("g2p_compare.json")["speed"]["steps_per_second"]
    assert result["setup"]["steps"] == round(1200 * speed["gru_attention"] / speed["transformer"]) == 858
