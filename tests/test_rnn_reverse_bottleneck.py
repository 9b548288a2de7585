"""Chapter 1's reversal bottleneck benchmark runs (smoke mode) and its committed results cover
every width, seed, checkpoint and test length."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "rnn_reverse_bottleneck.py")


def test_smoke_run_then_merge(tmp_path):
    parts = []
    for seed in (0, 1):
        out = tmp_path / f"part{seed}.json"
        subprocess.run([sys.executable, SCRIPT, "--smoke", "--width", "16", "--seed", str(seed),
                        "--out", str(out)], check=True, capture_output=True, timeout=300)
        parts.append(out)
    merged = tmp_path / "merged.json"
    subprocess.run([sys.executable, SCRIPT, "--merge", *map(str, parts), "--out", str(merged)],
                   check=True, capture_output=True, timeout=300)
    result = json.loads(merged.read_text())
    assert [(r["width"], r["seed"]) for r in result["runs"]] == [(16, 0), (16, 1)]
    for r in result["runs"]:
        for scores in r["checkpoints"].values():
            assert set(scores) == {str(L) for L in range(5, 31)}
            assert all(0 <= s["symbol_acc"] <= 1 and 0 <= s["exact"] <= 1 for s in scores.values())


def test_committed_results_cover_widths_seeds_and_lengths():
    result = load_result("rnn_reverse_bottleneck.json")
    assert "--merge" in result["command"] and "/tmp" not in result["command"]
    runs = {(r["width"], r.get("dec_width", r["width"]), r["seed"]) for r in result["runs"]}
    assert len(runs) == len(result["runs"])
    assert runs == {(w, d, s) for w in result["widths_C"] for d in result["dec_widths"]
                    for s in result["seeds"]}  # the 2x2 of C and decoder widths, every seed
    assert len(result["seeds"]) >= 3 and len(result["widths_C"]) == 2 == len(result["dec_widths"])
    for r in result["runs"]:
        assert r["steps"] == result["steps"] and str(result["steps"]) in r["checkpoints"]
        for scores in r["checkpoints"].values():
            assert {int(L) for L in scores} == set(range(5, 31))
            assert all(s["n"] == result["test_per_length"] for s in scores.values())


def test_smoke_cross_decouples_decoder_width(tmp_path):
    out = tmp_path / "cross.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--cross", "--seed", "0", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [(r["width"], r["dec_width"]) for r in runs] == [(16, 64), (64, 16)]
    assert runs[0]["parameters"] != runs[1]["parameters"]
