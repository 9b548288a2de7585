"""Chapter 7's untaught controls run (smoke mode), train without augmentation on the controls'
grids, and their committed results are the runs the chapter reads."""
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
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_untaught_controls.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert {r["model"] for r in result["runs"]} == {"cnn_stem_noaug", "vit_local_noaug"}
    assert result["recipe"]["shift"] == 0 and result["recipe"]["degrees"] == 0


def test_the_models_are_the_stem_cnn_and_the_local_vit():
    import vit_untaught_controls as bench
    stem = bench.build("cnn_stem_noaug", 0, smoke=False)
    assert (stem.features[0].kernel_size, stem.features[0].stride) == ((2, 2), (2, 2))
    local = bench.build("vit_local_noaug", 0, smoke=False)
    assert local.mask.shape == (17, 17) and not local.mask[1:, 0].any()
    assert tuple(local(torch.zeros(2, 1, 8, 8)).shape) == (2, 10)


def test_committed_results_hold_the_stem_cnn_on_all_training_digits():
    result = load_result("vit_untaught_controls.json")
    stem = [r for r in result["runs"] if r["model"] == "cnn_stem_noaug"]
    assert sorted(r["seed"] for r in stem) == [0, 1, 2]
    assert {r["train_images"] for r in result["runs"]} == {1251}
    assert result["recipe"]["steps"] == 2000 and result["recipe"]["shift"] == 0
    assert sorted(r["seed"] for r in result["runs"] if r["model"] == "vit_local_noaug") == [0]
    assert "vit_untaught_controls.py" in result["command"]
