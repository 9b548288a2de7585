"""Chapter 1's search comparison on about 1,000 test words: the script runs (smoke) and the
committed counts are consistent with each other."""
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke(tmp_path):
    out = tmp_path / "search.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rnn_search_sample.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    assert out.exists()


def test_committed_counts_are_consistent():
    r = load_result("rnn_search_sample.json")
    assert r["n"] >= 900 and "/tmp" not in r["command"]
    ex = r["exact_vs_greedy"]
    assert ex["right_only_first"] + ex["right_only_second"] <= r["exact_differs"]
    drop = (ex["right_only_first"] - ex["right_only_second"]) / r["n"]
    assert abs(drop - ex["wer_drop"]) < 1e-9
    assert abs(r["greedy_wer"] - r["exact_wer"] - drop) < 1e-9
    assert r["exact_shorter"] + r["exact_longer"] <= r["exact_differs"]
    assert r["beam_is_most_probable"] <= r["n"] and r["beam_differs"] <= r["n"]
