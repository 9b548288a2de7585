"""benchmarks/g2p_learned_positions.py runs end to end (smoke mode), and its committed results are
Chapter 5's three-seed learned-position Transformer, trained like the comparison's Transformer."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def _check(result: dict, seeds: list[int]) -> None:
    compare = load_result("g2p_compare.json")
    assert result["setup"]["recipe"] == compare["best_recipe"]["transformer"]
    assert f"{result['setup']['peak_lr']:g}" == compare["lr_sweep"]["transformer"]["chosen_on_dev"]
    assert result["base"]["seeds"] == [0, 1, 2]  # the comparison's own three seeds
    cell = result["learned_positions"]
    assert cell["seeds"] == seeds == [r["seed"] for r in result["runs"]]
    assert cell["test_wer"]["min"] <= cell["test_wer"]["mean"] <= cell["test_wer"]["max"]
    assert all(r["model"] == "transformer_learned_pos" and r["steps"] == result["setup"]["steps"]
               and r["peak_lr"] == result["setup"]["peak_lr"] for r in result["runs"])


def test_smoke_run(tmp_path):
    out = tmp_path / "lp.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "g2p_learned_positions.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), seeds=[0])


def test_committed_results_have_three_seeds_and_reuse_the_ablation_runs():
    result = load_result("g2p_learned_positions.json")
    _check(result, seeds=[0, 1, 2])
    assert result["setup"]["steps"] == 1200
    ablation = load_result("g2p_ablation.json")
    reused = {r["seed"]: r["test_wer"] for r in ablation["runs"] if r["model"] == "transformer_learned_pos"}
    assert {r["seed"]: r["test_wer"] for r in result["runs"] if r["seed"] in reused} == reused
