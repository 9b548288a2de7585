"""benchmarks/g2p_rerun_determinism.py: its bit-for-bit comparison, and the committed result that
Chapter 5 reads (every pair of same-seed runs identical)."""
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import g2p_rerun_determinism  # noqa: E402


def _run(losses, weights="a", batches="b", greedy="c"):
    return {"initial_weights_sha256": weights, "trained_weights_sha256": weights, "batches_sha256": batches,
            "greedy_test_sha256": greedy, "losses": [float(x).hex() for x in losses]}


def test_compare_is_bit_for_bit():
    same = g2p_rerun_determinism.compare(_run([1.0, 0.5]), _run([1.0, 0.5]))
    assert same["identical_losses"] and same["first_differing_step"] is None
    differ = g2p_rerun_determinism.compare(_run([1.0, 0.5]), _run([1.0, 0.5 + 2**-40], batches="x"))
    assert not differ["identical_losses"] and differ["first_differing_step"] == 2
    assert not differ["same_1200_batches"] and differ["max_abs_difference"] > 0


def test_committed_results():
    result = load_result("g2p_rerun_determinism.json")
    assert result["setup"]["steps"] == 50 and result["setup"]["old_commit"]
    assert len(result["comparisons"]) >= 3
    for comparison in result["comparisons"].values():
        assert comparison["identical_losses"] and comparison["same_initial_weights"]
        assert comparison["same_1200_batches"] and comparison["same_greedy_test_outputs"]
    assert all(len(run["losses"]) == 50 for run in result["runs"].values())
