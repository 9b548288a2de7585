"""Chapter 2's page models: the script runs end to end, and the committed weights are its runs."""
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from attnbook.checkpoints import read_safetensors, sha256_of
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_weights_whose_hash_the_json_records(tmp_path):
    out = tmp_path / "bilinear.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_page_models.py"), "--smoke",
                    "--model", "bilinear", "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    weights = out.with_suffix(".safetensors")
    assert result["sha256"] == sha256_of(weights)
    assert result["recipe"]["steps"] == 3 and len(result["losses"]) == 3
    assert any(name.endswith("score.W.weight") for name in read_safetensors(weights, result["sha256"]))


@pytest.mark.parametrize("model", ["gru", "additive", "bilinear"])
def test_committed_weights_are_the_recorded_run(model):
    result = load_result(f"bahdanau_page_{model}.json")
    assert result["model"] == model
    assert result["recipe"]["steps"] == 360 and result["recipe"]["seed"] == 0
    assert len(result["losses"]) == 360 and result["test_words"] > 5000
    path = resources.files("attnbook.results").joinpath(result["weights"])
    assert sha256_of(path) == result["sha256"]
