"""Chapter 1's page model: the script runs end to end, and the committed weights are its run."""
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
    out = tmp_path / "page.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "rnn_page_model.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    weights = out.with_suffix(".safetensors")
    assert result["sha256"] == sha256_of(weights)
    assert result["recipe"]["steps"] == 1200 and len(result["losses"]) == 3
    assert "encoder.gru.weight_hh_l0" in read_safetensors(weights, result["sha256"])


@pytest.mark.parametrize("name, steps", [("rnn_page_model.json", 1200),
                                         ("rnn_page_model_2400.json", 2400)])
def test_committed_weights_are_the_recorded_run(name, steps):
    result = load_result(name)
    assert result["recipe"]["steps"] == steps and result["recipe"]["seed"] == 0
    assert result["recipe"]["lr"] == 6e-3 and result["recipe"]["label_smoothing"] == 0.1
    assert len(result["losses"]) == steps and result["test_words"] > 5000
    path = resources.files("attnbook.results").joinpath(result["weights"])
    assert sha256_of(path) == result["sha256"]
