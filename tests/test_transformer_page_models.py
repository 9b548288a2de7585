"""Chapter 5's loaded models (the page's G2P Transformer and the reversal sanity task): the
scripts run end to end, and the committed weights are the recorded runs."""
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from attnbook.checkpoints import read_safetensors, sha256_of
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["transformer_page_model", "transformer_reversal"])
def test_smoke_run_writes_weights_whose_hash_the_json_records(tmp_path, script):
    out = tmp_path / f"{script}.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    weights = out.with_suffix(".safetensors")
    assert result["sha256"] == sha256_of(weights)
    assert len(result["losses"]) == 3
    names = read_safetensors(weights, result["sha256"])
    assert "readout.weight" in names and "tgt_embeddings.tokens.weight" in names  # tied, saved twice


def test_committed_page_model_is_the_recorded_run():
    result = load_result("transformer_page_model.json")
    assert result["recipe"]["steps"] == 1200 and result["recipe"]["seed"] == 0
    assert result["recipe"]["lr"] == 6e-3 and result["warmup"] == 100
    assert result["config"]["d_model"] == 64 and result["config"]["norm_first"] is True
    assert len(result["losses"]) == 1200 and result["test_words"] == 5825
    path = resources.files("attnbook.results").joinpath(result["weights"])
    assert sha256_of(path) == result["sha256"]


def test_committed_reversal_model_is_the_recorded_run():
    result = load_result("transformer_reversal.json")
    assert result["steps_trained"] == 800 and len(result["losses"]) == 800
    assert result["test_size"] == 2000 and 0.0 <= result["test_exact_match"] <= 1.0
    path = resources.files("attnbook.results").joinpath(result["weights"])
    assert sha256_of(path) == result["sha256"]


def test_page_model_is_the_comparisons_seed_0():
    """The page's model is seed 0 of the Transformer at 6e-3 in g2p_compare.json's table."""
    page = load_result("transformer_page_model.json")
    at = load_result("g2p_compare.json")["lr_sweep"]["transformer"]["by_peak_lr"]["0.006"]
    seed_0 = at["seeds"].index(0)
    assert round(page["test_wer"], 4) == at["test_wer"]["values"][seed_0]
    assert round(page["test_per"], 4) == at["test_per"]["values"][seed_0]
