"""Chapter 7's finished-model script runs (smoke mode) and writes loadable weights, and the
committed weights are the results file's runs: every seed of every kind, the SHA-256 recorded,
the rerun's scores equal to vit_data_efficiency.json's."""
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

from attnbook.checkpoints import read_safetensors
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.models.vit import ViT, ViTConfig
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_the_weights_it_names(tmp_path):
    out = tmp_path / "finished.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_finished_models.py"),
                    "--smoke", "--kinds", "vit", "cnn", "--out", str(out)],
                   check=True, capture_output=True, timeout=600, cwd=ROOT)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["model"], r["seed"]) for r in rows] == [("vit", 0), ("cnn", 0)]
    for row in rows:
        state = read_safetensors(tmp_path / row["weights"], row["sha256"])
        assert state and all(t.dtype.is_floating_point for t in state.values())


def test_committed_weights_are_the_results_files_runs():
    result = load_result("vit_finished_models.json")
    assert "vit_finished_models.py" in result["command"]
    rows = {(r["model"], r["seed"]): r for r in result["runs"]}
    assert set(rows) == {(k, s) for k in ("vit", "cnn") for s in (0, 1, 2)}
    for (kind, _), row in rows.items():
        assert row["same_as_results_file"] is True
        model = SmallCNN(CNNConfig()) if kind == "cnn" else ViT(ViTConfig())
        weights = resources.files("attnbook.results").joinpath(row["weights"])
        model.load_state_dict(read_safetensors(weights, row["sha256"]))
