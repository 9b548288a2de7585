"""Chapter 5's base-size gradient check (benchmarks/norm_gradients_base_size.py): the script runs
end to end, and the committed results are consistent with themselves."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_both_placements(tmp_path):
    out = tmp_path / "grads.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "norm_gradients_base_size.py"),
                    "--smoke", "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert set(result["runs"]) == {"post-norm", "pre-norm"}
    for run in result["runs"].values():
        assert len(run["decoder_layer_grad_norms"]) == 6


def test_committed_result_is_the_base_size_and_its_ratios_hold():
    result = load_result("norm_gradients_base_size.json")
    setup = result["setup"]
    assert (setup["d_model"], setup["num_heads"], setup["d_ff"], setup["layers"]) == (512, 8, 2048, 6)
    for run in result["runs"].values():
        norms = run["decoder_layer_grad_norms"]
        assert abs(run["layer6_over_layer1"] - norms[-1] / norms[0]) < 1e-3
