"""Chapter 7's global-average-pool control runs (smoke mode), its head averages the map over
positions, and its committed results are the runs the chapter reads."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_writes_both_models(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_gap_cnn.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert {r["model"] for r in result["runs"]} == {"cnn", "cnn_gap"}
    assert {"moved_2_up", "cropped_2_up"} <= set(result["runs"][0])


def test_the_gap_head_ignores_where_the_features_sit():
    import vit_gap_cnn as bench
    model = bench.build("cnn_gap", 0, smoke=False).eval()
    features = torch.randn(3, 64, 2, 2)
    with torch.no_grad():
        assert torch.allclose(model.head(features.mean(dim=(2, 3))),
                              model.head(features.flip(-1, -2).mean(dim=(2, 3))))
        assert tuple(model(torch.zeros(2, 1, 8, 8)).shape) == (2, 10)
    assert model.head.in_features == 64


def test_committed_results_hold_both_models_with_three_seeds():
    result = load_result("vit_gap_cnn.json")
    for model in ("cnn", "cnn_gap"):
        assert sorted(r["seed"] for r in result["runs"] if r["model"] == model) == [0, 1, 2]
    assert result["recipe"]["steps"] == 1000 and result["recipe"]["warmup_steps"] == 50
    assert result["command"].startswith("python benchmarks/vit_gap_cnn.py")
    page = next(r for r in result["runs"] if (r["model"], r["seed"]) == ("cnn", 0))
    assert page["moved_2_up"] == 0.3468  # the page's CNN (seed 0), Section 7.5
