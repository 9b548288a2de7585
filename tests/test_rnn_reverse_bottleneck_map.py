"""The reversal benchmark's ``--map`` arm (Chapter 1): the encoder stays at 32 units per direction
and only C changes; its committed results cover both sizes of C, every seed and every length."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "rnn_reverse_bottleneck.py")


def test_smoke_map_keeps_the_encoder_and_changes_c(tmp_path):
    out = tmp_path / "map.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--map", "--seed", "0", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [(r["width"], r["enc_hidden"], r["dec_width"], r["mapped"]) for r in runs] == [
        (16, 32, 64, True), (64, 32, 64, True)]
    # only the linear map's output (C) and the decoder's input from it change
    assert runs[0]["parameters"] < runs[1]["parameters"]


def test_committed_map_results():
    result = load_result("rnn_reverse_bottleneck_map.json")
    plain = load_result("rnn_reverse_bottleneck.json")
    assert "/tmp" not in result["command"] and "--map" in result["command"]
    assert result["mapped"] and result["enc_hidden"] == 32 and result["dec_hidden"] == 64
    assert {(r["width"], r["seed"]) for r in result["runs"]} == {
        (w, s) for w in result["widths_C"] for s in result["seeds"]}
    for key in ("steps", "batch", "lr", "clip", "emb_dim", "test_per_length", "seeds"):
        assert result[key] == plain[key], key  # the same recipe as the unmapped arms
    for r in result["runs"]:
        assert r["enc_hidden"] == 32 and r["dec_width"] == 64 and r["mapped"]
        assert {int(L) for L in r["checkpoints"][str(result["steps"])]} == set(range(5, 31))
