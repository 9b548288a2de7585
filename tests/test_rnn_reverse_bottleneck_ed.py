"""Chapter 1's reversal task scored by edit distance (``rnn_reverse_bottleneck.py --ed``): the
distance is Levenshtein's, the smoke run writes every field, and the committed results hold both
widths' seed-0 runs with both scorings and a random-string null at every length."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "rnn_reverse_bottleneck.py")
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_edit_distance_charges_a_dropped_symbol_once():
    from rnn_reverse_bottleneck import edit_distance
    assert edit_distance("abcdef", "abcdef") == 0
    assert edit_distance("abcdef", "bcdef") == 1  # dropped first symbol: 1, not 5 by position
    assert edit_distance("abcdef", "abcxdef") == 1
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "") == 3
    assert edit_distance("kitten", "sitting") == 3


def test_smoke_ed_run_writes_both_scorings(tmp_path):
    out = tmp_path / "ed.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--ed", "--width", "16", "--seed", "0",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    assert result["edit_distance"] and set(result["ed_null"]) == {str(L) for L in range(5, 31)}
    for scores in result["runs"][0]["checkpoints"].values():
        for s in scores.values():
            assert {"symbol_acc", "exact", "ed_score", "wrong_length"} <= set(s)
            assert s["ed_score"] <= 1 and 0 <= s["wrong_length"] <= 1


def test_committed_ed_results():
    result = load_result("rnn_reverse_bottleneck_ed.json")
    assert "--ed" in result["command"] and "/tmp" not in result["command"]
    assert [(r["width"], r["dec_width"], r["seed"]) for r in result["runs"]] == [
        (16, 16, 0), (64, 64, 0)]
    assert all(0.05 < v < 0.35 for v in result["ed_null"].values())  # random strings, 8 letters
    for r in result["runs"]:
        final = r["checkpoints"][str(result["steps"])]
        assert {int(L) for L in final} == set(range(5, 31))
        assert all(s["n"] == result["test_per_length"] and "ed_score" in s for s in final.values())
    # the seed-0 runs repeat the committed position-scored runs exactly
    committed = {(r["width"], r["seed"]): r for r in load_result("rnn_reverse_bottleneck.json")["runs"]
                 if r.get("dec_width", r["width"]) == r["width"]}
    for r in result["runs"]:
        old = committed[(r["width"], 0)]["checkpoints"][str(result["steps"])]
        new = r["checkpoints"][str(result["steps"])]
        assert all(abs(old[L]["symbol_acc"] - new[L]["symbol_acc"]) < 1e-9 for L in old)
