"""Chapter 7's learning-rate edge at seeds 1 and 2: the smoke run trains at lr 1e-2 in spawned
workers (the recipe must reach them), and the committed results hold both seeds at that rate."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_trains_at_the_edge_rate_in_spawned_workers(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_lr_edge_seeds.py"), "--smoke", "--jobs", "2",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert [r["seed"] for r in runs] == [1]
    assert all(r["lr"] == 1e-2 and r["model"] == "vit" and r["recipe"] == "lr 1e-2, warm-up 400" for r in runs)


def test_committed_results_hold_seeds_1_and_2_at_the_edge_rate():
    result = load_result("vit_lr_edge_seeds.json")
    runs = result["runs"]
    assert sorted(r["seed"] for r in runs) == [1, 2]
    for r in runs:
        assert (r["lr"], r["warmup_steps"], r["steps"], r["train_images"]) == (1e-2, 400, 2000, 125)
    edge = load_result("vit_lr_edge.json")["runs"][0]
    assert (edge["seed"], edge["lr"]) == (0, 1e-2)
    assert "vit_lr_edge_seeds.py" in result["command"] and "/tmp" not in result["command"]
