"""Chapter 7's CNN at the learning-rate edge: the smoke run trains the CNN at lr 1e-2 in spawned
workers, and the committed results hold seeds 0, 1 and 2 at that rate on 125 images."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_trains_the_cnn_at_the_edge_rate(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_lr_edge_cnn.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert [r["seed"] for r in runs] == [0]
    assert all(r["lr"] == 1e-2 and r["model"] == "cnn" for r in runs)


def test_committed_results_hold_three_seeds_at_the_edge_rate():
    result = load_result("vit_lr_edge_cnn.json")
    runs = result["runs"]
    assert sorted(r["seed"] for r in runs) == [0, 1, 2]
    for r in runs:
        assert r["model"] == "cnn"
        assert (r["lr"], r["warmup_steps"], r["steps"], r["train_images"]) == (1e-2, 400, 2000, 125)
    assert "vit_lr_edge_cnn.py" in result["command"] and "/tmp" not in result["command"]
